//go:build cgo && linux

package ofi

import (
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// The CM guard bounds how long libfabric's tcp provider can hold the
// thread that reads a passive endpoint's event queue on one connection
// request, where the request watch (requests.go) has not made the socket
// non-blocking yet: a connection that completed between its look and the
// provider's accept. The provider accepts a request's socket
// with accept(), which leaves it blocking, waits for it to be readable,
// and then reads the 32-byte request header and the private data the
// header announces with one blocking recv() each (tcpx_conn_mgr.c,
// rx_cm_data, inside fi_eq_read). A client that sends the header and
// then nothing held that second recv until it closed its socket.
//
// Sockets inherit SO_RCVTIMEO from the listening socket they are
// accepted from, so the guard sets it there: the second recv gives up
// after cmReadTimeout, the provider takes that as "try again later"
// (EAGAIN) and goes on, and the request is dropped when its client
// sends anything more or leaves. A real request's header and private
// data go out in one send (tx_cm_data), so they arrive together and
// never wait. The provider makes the accepted socket non-blocking once
// it becomes an endpoint, so the timeout touches nothing else.
//
// The provider does not expose the listening socket: the guard finds
// it among the process's descriptors, the one listening on the passive
// endpoint's address.

// cmReadTimeout bounds one blocking read of a connection request: the
// longest a client that stops after a header can hold the thread that
// reads the queue, when the request watch missed its socket (the kernel
// rounds it up to its clock tick).
const cmReadTimeout = 20 * time.Millisecond

// guardCM sets the receive timeout on p's listening socket.
func (p *PassiveEndpoint) guardCM() error {
	addr, err := p.Addr()
	if err != nil {
		return err
	}
	fd, err := listeningSocket(addr)
	if err != nil {
		return err
	}
	tv := unix.NsecToTimeval(cmReadTimeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return fmt.Errorf("ofi: SO_RCVTIMEO on the listening socket: %w", err)
	}
	return nil
}

// listeningSocket returns the descriptor of the socket listening on addr.
func listeningSocket(addr netip.AddrPort) (int, error) {
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1, fmt.Errorf("ofi: looking for the listening socket: %w", err)
	}
	for _, e := range fds {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if v, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN); err != nil || v != 1 {
			continue // not a socket, or not listening (or closed meanwhile)
		}
		sa, err := unix.Getsockname(fd)
		if err != nil {
			continue
		}
		var got netip.AddrPort
		switch sa := sa.(type) {
		case *unix.SockaddrInet4:
			got = netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), uint16(sa.Port))
		case *unix.SockaddrInet6:
			got = netip.AddrPortFrom(netip.AddrFrom16(sa.Addr), uint16(sa.Port))
		default:
			continue
		}
		if got.Port() == addr.Port() && got.Addr().Unmap() == addr.Addr().Unmap() {
			return fd, nil
		}
	}
	return -1, fmt.Errorf("ofi: no socket listens on %v", addr)
}
