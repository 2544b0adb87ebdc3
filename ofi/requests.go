//go:build cgo && linux

package ofi

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The request watch keeps the sockets of connection requests that the tcp
// provider accepted, and has not read a whole request from yet, from
// hurting the thread that reads the listening queue, and bounds them.
//
// libfabric 1.17's tcp provider accepts a socket for every TCP connection
// to the listener, adds it to the queue's wait set (an epoll instance) and,
// whenever the queue is read (fi_eq_read, and fi_trywait, which peeks),
// reads the 32-byte request header and then the private data it announces,
// with one recv() each on a socket accept() left blocking
// (prov/tcp/src/tcpx_conn_mgr.c: tcpx_accept, tcpx_cm_recv_req,
// rx_cm_data). A client that sends a header and nothing more held that
// thread, and before netio read listening queues on a thread of their own,
// every connection of the process.
//
// The watch finds those sockets in the wait set
// (/proc/self/fdinfo/<epoll fd> lists every descriptor in it, with its
// inode) after every call that may have accepted one (the listening
// socket was readable before it: the provider accepts at most one socket
// per call), and before the provider's next read of it, and makes them
// non-blocking: a read of an incomplete request then fails with EAGAIN at
// once, and the provider keeps the socket for later. A real request never
// waits: its header and private data leave the dialer in one send
// (tx_cm_data). A connection that completes between that look and the
// provider's own is missed until the next look; its reads stay bounded by
// the listening socket's receive timeout, which accepted sockets inherit
// (cmguard.go).
//
// The provider owns those sockets, so the watch never closes one. To drop
// a request it aborts the connection instead (connect with AF_UNSPEC: the
// peer gets a reset and the socket's next read fails with ECONNRESET or
// ENOTCONN), and the provider, seeing the error on its next read, closes
// the socket and frees the request itself. It aborts a request that has
// not completed within the owner's bound, the oldest beyond the owner's
// limit on their number, and one whose peer closed its end: at end of file
// the provider tells a failed read from "try again" by the thread's errno,
// left over from an earlier call, and when that is EAGAIN it keeps the
// socket in the wait set, readable for ever, and the reading thread spun
// (seen on this machine after a header-only client closed).

// pendingRequest is a socket the provider accepted whose request it has not
// read whole yet.
type pendingRequest struct {
	ino     uint64
	since   time.Time
	aborted bool
}

// requestWatch follows the request sockets in one listening queue's wait
// set. Its methods run on the thread that reads the queue, between the
// provider's calls on it.
type requestWatch struct {
	epfd     int
	info     int             // /proc/self/fdinfo/<epfd>, open: read again from the start, it is made anew
	fresh    bool            // no provider call since the last scan
	listenFD int             // the listening socket: the provider's, open until the passive endpoint closes
	own      map[uint64]bool // inodes of the wait set's own descriptors: the listening socket, the wake-up signal
	pending  map[int]*pendingRequest
	buf      []byte
	polls    []unix.PollFd
	aborted  uint64 // requests aborted since the watch began

	maxAge     time.Duration // a request not complete by then is aborted (sweep)
	maxPending int           // beyond this many, the oldest are aborted (track)
}

// newRequestWatch starts watching the wait set epfd of a queue that has
// accepted nothing yet: what it holds now is its own.
func newRequestWatch(epfd int) (*requestWatch, error) {
	w := &requestWatch{epfd: epfd, listenFD: -1, own: map[uint64]bool{}, pending: map[int]*pendingRequest{},
		maxAge: 1<<63 - 1, maxPending: 1<<31 - 1}
	var err error
	if w.info, err = unix.Open("/proc/self/fdinfo/"+strconv.Itoa(epfd), unix.O_RDONLY|unix.O_CLOEXEC, 0); err != nil {
		return nil, fmt.Errorf("ofi: reading the listening queue's wait set: %w", os.NewSyscallError("open", err))
	}
	fds, err := w.scan()
	if err != nil {
		w.close()
		return nil, err
	}
	for _, d := range fds {
		w.own[d.ino] = true
		if v, err := unix.GetsockoptInt(d.fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN); err == nil && v == 1 {
			w.listenFD = d.fd
		}
	}
	return w, nil
}

// mayAccept reports whether the provider's next call may accept a socket:
// whether the listening socket has a connection waiting.
func (w *requestWatch) mayAccept() bool {
	if w.listenFD < 0 {
		return true
	}
	p := []unix.PollFd{{Fd: int32(w.listenFD), Events: unix.POLLIN}}
	n, err := unix.Poll(p, 0)
	return err != nil || n > 0
}

// waitFD is one descriptor of a wait set.
type waitFD struct {
	fd  int
	ino uint64
}

// close closes the watch's own descriptor.
func (w *requestWatch) close() {
	if w.info >= 0 {
		unix.Close(w.info)
		w.info = -1
	}
}

// scan lists the descriptors in the wait set.
func (w *requestWatch) scan() ([]waitFD, error) {
	w.buf = w.buf[:0]
	for {
		if len(w.buf) == cap(w.buf) {
			w.buf = append(w.buf, make([]byte, 4096)...)[:len(w.buf)]
		}
		n, err := unix.Pread(w.info, w.buf[len(w.buf):cap(w.buf)], int64(len(w.buf)))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("ofi: reading the listening queue's wait set: %w", os.NewSyscallError("pread", err))
		}
		if n == 0 {
			break
		}
		w.buf = w.buf[:len(w.buf)+n]
	}
	w.fresh = true
	return parseWaitSet(w.buf)
}

var errWaitSet = errors.New("ofi: unexpected format of an epoll descriptor's fdinfo")

// parseWaitSet parses the "tfd:" lines of an epoll descriptor's fdinfo:
//
//	tfd:       13 events:       19 data:     7fe8c8000ba0  pos:0 ino:7af0 sdev:9
func parseWaitSet(info []byte) ([]waitFD, error) {
	var out []waitFD
	for len(info) > 0 {
		line := info
		if i := bytes.IndexByte(info, '\n'); i >= 0 {
			line, info = info[:i], info[i+1:]
		} else {
			info = nil
		}
		rest, ok := bytes.CutPrefix(line, []byte("tfd:"))
		if !ok {
			continue
		}
		fields := bytes.Fields(rest)
		if len(fields) == 0 {
			return nil, errWaitSet
		}
		fd, err := strconv.Atoi(string(fields[0]))
		if err != nil {
			return nil, errWaitSet
		}
		var ino uint64
		found := false
		for _, f := range fields[1:] {
			if v, ok := bytes.CutPrefix(f, []byte("ino:")); ok {
				if ino, err = strconv.ParseUint(string(v), 16, 64); err != nil {
					return nil, errWaitSet
				}
				found = true
			}
		}
		if !found {
			return nil, errWaitSet
		}
		out = append(out, waitFD{fd: fd, ino: ino})
	}
	return out, nil
}

// track brings the watch up to date after a provider call on the queue:
// new request sockets become non-blocking, sockets the provider let go are
// forgotten, and those whose peer closed its end are aborted.
func (w *requestWatch) track(now time.Time) error {
	fds, err := w.scan()
	if err != nil {
		return err
	}
	seen := make(map[int]bool, len(fds))
	for _, d := range fds {
		if w.own[d.ino] {
			continue
		}
		seen[d.fd] = true
		if p := w.pending[d.fd]; p != nil && p.ino == d.ino {
			continue
		}
		// A new socket (a descriptor number may come back with another
		// socket behind it: the inode tells them apart).
		if fl, err := unix.FcntlInt(uintptr(d.fd), unix.F_GETFL, 0); err == nil && fl&unix.O_NONBLOCK == 0 {
			unix.FcntlInt(uintptr(d.fd), unix.F_SETFL, fl|unix.O_NONBLOCK)
		}
		w.pending[d.fd] = &pendingRequest{ino: d.ino, since: now}
	}
	for fd := range w.pending {
		if !seen[fd] {
			delete(w.pending, fd)
		}
	}
	w.abortClosed()
	w.abortExcess()
	return nil
}

// live lists the pending requests not aborted yet, oldest first.
func (w *requestWatch) live() []int {
	var fds []int
	for fd, p := range w.pending {
		if !p.aborted {
			fds = append(fds, fd)
		}
	}
	sort.Slice(fds, func(i, j int) bool { return w.pending[fds[i]].since.Before(w.pending[fds[j]].since) })
	return fds
}

// abortExcess aborts the oldest requests beyond maxPending.
func (w *requestWatch) abortExcess() {
	n := 0
	for _, p := range w.pending {
		if !p.aborted {
			n++
		}
	}
	if n <= w.maxPending {
		return
	}
	live := w.live()
	for _, fd := range live[:len(live)-w.maxPending] {
		w.abort(fd)
	}
}

// abortClosed aborts the requests whose peer closed or reset its end: the
// provider may never tell them from "try again" (see above).
func (w *requestWatch) abortClosed() {
	w.polls = w.polls[:0]
	for fd, p := range w.pending {
		if !p.aborted {
			w.polls = append(w.polls, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN | unix.POLLRDHUP})
		}
	}
	if len(w.polls) == 0 {
		return
	}
	if n, err := unix.Poll(w.polls, 0); err != nil || n == 0 {
		return
	}
	var b [1]byte
	for _, pf := range w.polls {
		fd := int(pf.Fd)
		switch {
		case pf.Revents == 0:
			continue
		case pf.Revents&(unix.POLLERR|unix.POLLHUP|unix.POLLNVAL) != 0:
		default:
			// Readable: data for the provider's next read, or the end.
			n, _, err := unix.Recvfrom(fd, b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
			if n > 0 || err == unix.EAGAIN {
				continue
			}
		}
		w.abort(fd)
	}
}

// abort resets the connection of the request on fd without closing the
// descriptor, which stays the provider's: its next read fails, and it
// closes the socket.
func (w *requestWatch) abort(fd int) {
	p := w.pending[fd]
	if p == nil || p.aborted {
		return
	}
	p.aborted = true
	w.aborted++
	sa := unix.RawSockaddr{Family: unix.AF_UNSPEC}
	unix.Syscall(unix.SYS_CONNECT, uintptr(fd), uintptr(unsafe.Pointer(&sa)), unsafe.Sizeof(sa))
}

// sweep aborts the requests pending for maxAge or longer.
func (w *requestWatch) sweep(now time.Time) {
	for fd, p := range w.pending {
		if !p.aborted && now.Sub(p.since) >= w.maxAge {
			w.abort(fd)
		}
	}
}

// status returns how many requests are pending, not aborted, and when the
// oldest of them will be due (zero if none is).
func (w *requestWatch) status() (pending int, next time.Time) {
	for _, p := range w.pending {
		if p.aborted {
			continue
		}
		pending++
		if by := p.since.Add(w.maxAge); next.IsZero() || by.Before(next) {
			next = by
		}
	}
	return pending, next
}

// abortAll aborts every pending request.
func (w *requestWatch) abortAll() {
	for fd := range w.pending {
		w.abort(fd)
	}
}

// orphans lists the request sockets still in the wait set: after the
// passive endpoint is closed, the provider will never read or close them.
func (w *requestWatch) orphans() []int {
	fds, err := w.scan()
	if err != nil {
		return nil
	}
	var out []int
	for _, d := range fds {
		if !w.own[d.ino] {
			out = append(out, d.fd)
		}
	}
	return out
}
