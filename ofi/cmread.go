package ofi

import (
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// libfabric 1.17's tcp provider reads a connection request from the socket
// it accepted with two blocking recv calls (prov/tcp/src/tcpx_conn_mgr.c,
// rx_cm_data: the 32-byte header, then the private data it announces),
// inside fi_eq_read and so on netio's reactor thread. accept(2) does not
// pass the listener's O_NONBLOCK on, so a client that sends the header and
// then nothing stalled every connection of the process until it closed its
// socket. A receive timeout does pass on: Linux clones the listening
// socket's SO_RCVTIMEO into each accepted one. With it the second recv
// gives up with EAGAIN, the provider leaves that request waiting for more
// bytes (the header it read is gone, so more bytes fail its version check
// and end it), and the reactor goes on. A real request is one segment (one
// send of header and data, under 100 bytes), whose bytes are all there
// when the provider is woken to read them: the timeout costs it nothing.
// The provider switches accepted sockets to non-blocking before it uses
// them for data (tcpx_setup_socket), where the timeout means nothing.

// BoundRequestReads sets the receive and send timeouts of the listening
// socket under p (tcp provider only) to d, so that the provider's blocking
// reads of a connection request on the sockets it accepts give up after d.
// It finds the socket as the descriptor of this process that listens on
// p's address.
func (p *PassiveEndpoint) BoundRequestReads(d time.Duration) error {
	addr, err := p.Addr()
	if err != nil {
		return err
	}
	fd, err := listeningSocket(addr)
	if err != nil {
		return err
	}
	tv := unix.NsecToTimeval(d.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return os.NewSyscallError("setsockopt SO_RCVTIMEO", err)
	}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv); err != nil {
		return os.NewSyscallError("setsockopt SO_SNDTIMEO", err)
	}
	return nil
}

// listeningSocket returns the descriptor of this process's socket that
// listens on addr. The descriptor stays the provider's.
func listeningSocket(addr netip.AddrPort) (int, error) {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1, err
	}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if on, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN); err != nil || on != 1 {
			continue
		}
		sa, err := unix.Getsockname(fd)
		if err != nil {
			continue
		}
		if got := sockaddrPort(sa); got.Port() == addr.Port() && got.Addr().Unmap() == addr.Addr().Unmap() {
			return fd, nil
		}
	}
	return -1, fmt.Errorf("no listening socket on %v among this process's descriptors", addr)
}

func sockaddrPort(sa unix.Sockaddr) netip.AddrPort {
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(a.Addr), uint16(a.Port))
	case *unix.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(a.Addr), uint16(a.Port))
	}
	return netip.AddrPort{}
}
