//go:build cgo && linux

package ofi

import (
	"math/bits"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// libfabric opens its sockets, epoll instances, eventfds and pipes without
// close-on-exec, so a child process started while a listener or a
// connection is up inherits them: after the parent closed its listener
// the child still held the listening socket, the port stayed open, and
// connections to it hung. Every call that may make descriptors therefore
// runs through noInherit, which holds off fork (the read side of
// syscall.ForkLock, whose write side os/exec holds while it forks) from
// before the call until the new descriptors are marked close-on-exec, so
// no child can be forked in between.
//
// The descriptors to mark are found by listing the process's descriptors
// before and after the call (/proc/self/fd): after it, every descriptor
// without close-on-exec is libfabric's (Go opens all of its own with it),
// except those that were already without it before the call, which are
// never touched: the caller may mean a child to inherit them. Comparing
// numbers alone is not enough: another goroutine may close a descriptor
// during the call and libfabric reuse its number. The calls
// are those that open fabrics, domains, queues and endpoints, connect and
// accept, and the reads of a listening queue that may accept a socket;
// none is on the path of a message.
//
// What this cannot reach: descriptors a provider opens on a thread of its
// own (the sockets provider accepts on its connection-manager thread), and
// the few libfabric opens once when it loads its providers.

// fdSet is a set of descriptor numbers, and the buffer that lists them.
type fdSet struct {
	words []uint64
	buf   []byte
}

func (s *fdSet) add(fd int) {
	for fd/64 >= len(s.words) {
		s.words = append(s.words, 0)
	}
	s.words[fd/64] |= 1 << (fd % 64)
}

func (s *fdSet) remove(fd int) {
	if fd/64 < len(s.words) {
		s.words[fd/64] &^= 1 << (fd % 64)
	}
}

// openFDs lists the open descriptors into s (emptied first); false if
// they cannot be listed. The directory's own descriptor is left out: it
// is closed on return, and the call may reuse its number.
func openFDs(s *fdSet) bool {
	s.words = s.words[:0]
	dir, err := unix.Open("/proc/self/fd", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(dir)
	if s.buf == nil {
		s.buf = make([]byte, 8<<10)
	}
	for {
		n, err := unix.Getdents(dir, s.buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return false
		}
		if n <= 0 {
			s.remove(dir)
			return true
		}
		parseFDs(s.buf[:n], s)
	}
}

// parseFDs adds the numeric names of the linux_dirent64 records in b.
func parseFDs(b []byte, s *fdSet) {
	for len(b) >= 19 {
		reclen := int(b[16]) | int(b[17])<<8
		if reclen < 19 || reclen > len(b) {
			return
		}
		fd, ok := 0, false
		for _, c := range b[19:reclen] {
			if c < '0' || c > '9' {
				break
			}
			fd, ok = fd*10+int(c-'0'), true
		}
		if ok {
			s.add(fd)
		}
		b = b[reclen:]
	}
}

var fdSets = sync.Pool{New: func() any { return new(fdSet) }}

// inheritable lists into s the open descriptors without close-on-exec;
// false if they cannot be listed.
func inheritable(s *fdSet) bool {
	if !openFDs(s) {
		return false
	}
	for i, w := range s.words {
		for ; w != 0; w &= w - 1 {
			fd := i*64 + bits.TrailingZeros64(w)
			if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil || fl&unix.FD_CLOEXEC != 0 {
				s.remove(fd)
			}
		}
	}
	return true
}

// noInherit runs call, which may open descriptors, with fork held off,
// and marks the descriptors it opened close-on-exec.
func noInherit(call func()) {
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	before := fdSets.Get().(*fdSet)
	defer fdSets.Put(before)
	listed := inheritable(before)
	call()
	if !listed {
		return
	}
	after := fdSets.Get().(*fdSet)
	defer fdSets.Put(after)
	if !inheritable(after) {
		return
	}
	for i, w := range after.words {
		if i < len(before.words) {
			w &^= before.words[i]
		}
		for ; w != 0; w &= w - 1 {
			fd := i*64 + bits.TrailingZeros64(w)
			if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil && fl&unix.FD_CLOEXEC == 0 {
				unix.FcntlInt(uintptr(fd), unix.F_SETFD, fl|unix.FD_CLOEXEC)
			}
		}
	}
}
