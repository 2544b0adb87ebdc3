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
// Which descriptors to mark: after the call, every descriptor without
// close-on-exec is libfabric's (Go opens all of its own with it), except
// those the program keeps inheritable on purpose (a child may be meant to
// have them), which are never touched. Numbers alone cannot tell them
// apart: another thread may close a descriptor during the call (the
// reactor closing a connection while a Dial opens one) and libfabric reuse
// its number. So noInherit keeps a classification of the numbers it has
// seen: a number that appears is looked at once (F_GETFD), and after the
// call every descriptor but the inheritable ones is marked with
// close_range(CLOSE_RANGE_CLOEXEC), a few system calls whatever the number
// of descriptors (a look at every descriptor on every call made opening
// the 1,000th connection cost thousands of system calls); the few
// inheritable ones are looked at again on every call. An inheritable
// descriptor the program opens under a number noInherit last saw with
// close-on-exec is marked at its next call. Where close_range cannot mark
// (Linux before 5.11), only the numbers that appeared during the call are.
// The calls are those that open fabrics, domains, queues and endpoints,
// connect and accept, and the reads of a listening queue that may accept
// a socket; none is on the path of a message.
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

// fdClasses is what noInherit knows of the process's descriptors.
type fdClasses struct {
	mu    sync.Mutex
	seen  fdSet // the numbers open at the last look
	inh   fdSet // of those, the ones without close-on-exec, left alone
	ready bool
	// byRange: close_range(CLOSE_RANGE_CLOEXEC) works here.
	byRange bool
}

var classes fdClasses

// look lists the open descriptors into cur and classifies the numbers
// that appeared since the last look; false if they cannot be listed.
func (c *fdClasses) look(cur *fdSet) bool {
	if !openFDs(cur) {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.ready {
		c.ready = true
		c.byRange = unix.CloseRange(1<<30, 1<<30, unix.CLOSE_RANGE_CLOEXEC) == nil
	}
	for i, w := range cur.words {
		if i < len(c.seen.words) {
			w &^= c.seen.words[i]
		}
		for ; w != 0; w &= w - 1 {
			fd := i*64 + bits.TrailingZeros64(w)
			if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil && fl&unix.FD_CLOEXEC == 0 {
				c.inh.add(fd)
			} else {
				c.inh.remove(fd)
			}
		}
	}
	// The inheritable ones, few, are looked at again every time: one may
	// have been closed since and its number reused by a descriptor Go
	// opened with close-on-exec, which libfabric's may reuse in turn.
	for i := range c.inh.words {
		if i >= len(cur.words) {
			c.inh.words[i] = 0
			continue
		}
		w := c.inh.words[i] & cur.words[i]
		c.inh.words[i] = w
		for ; w != 0; w &= w - 1 {
			fd := i*64 + bits.TrailingZeros64(w)
			if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil || fl&unix.FD_CLOEXEC != 0 {
				c.inh.remove(fd)
			}
		}
	}
	c.seen.words = append(c.seen.words[:0], cur.words...)
	return true
}

// markAll marks close-on-exec every descriptor from 3 up but the
// inheritable ones.
func (c *fdClasses) markAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	lo := uint(3)
	for i, w := range c.inh.words {
		for ; w != 0; w &= w - 1 {
			fd := uint(i*64 + bits.TrailingZeros64(w))
			if fd >= lo {
				if fd > lo {
					unix.CloseRange(lo, fd-1, unix.CLOSE_RANGE_CLOEXEC)
				}
				lo = fd + 1
			}
		}
	}
	unix.CloseRange(lo, ^uint(0)>>1, unix.CLOSE_RANGE_CLOEXEC)
}

// noInherit runs call, which may open descriptors, with fork held off,
// and marks the descriptors it opened close-on-exec.
func noInherit(call func()) {
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	before := fdSets.Get().(*fdSet)
	defer fdSets.Put(before)
	listed := classes.look(before)
	call()
	if !listed {
		return
	}
	if classes.byRange {
		classes.markAll()
		return
	}
	after := fdSets.Get().(*fdSet)
	defer fdSets.Put(after)
	if !openFDs(after) {
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
