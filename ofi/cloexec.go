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
// those the process had without it when netio first called libfabric
// (inherited from its parent, or opened so on purpose), which are never
// touched. They are listed once (/proc/self/fd and F_GETFD); after each
// call every other descriptor from 3 up is marked with
// close_range(CLOSE_RANGE_CLOEXEC), a few system calls whatever the number
// of descriptors. Comparing lists of numbers before and after each call,
// as netio once did, missed a descriptor opened under the number of one
// another thread closed during the call (the reactor closing a connection
// while a Dial opens one), and listing /proc/self/fd on every call made
// opening the 1,000th connection take milliseconds. A descriptor the
// program opens later without close-on-exec is marked at netio's next
// call: os/exec gives a child its Files and ExtraFiles whatever their
// flag, so only a raw fork and exec (C code, syscall.Exec) would miss it.
// Where close_range cannot mark (Linux before 5.11), the lists are still
// compared, and only the numbers that appeared during the call are marked.
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

// kept is what noInherit leaves alone: the descriptors without
// close-on-exec at its first call.
var kept struct {
	once    sync.Once
	inh     fdSet
	byRange bool // close_range(CLOSE_RANGE_CLOEXEC) works here
}

// keep lists, once, the descriptors without close-on-exec.
func keep() {
	kept.once.Do(func() {
		kept.byRange = unix.CloseRange(1<<30, 1<<30, unix.CLOSE_RANGE_CLOEXEC) == nil
		if !openFDs(&kept.inh) {
			return
		}
		for i, w := range kept.inh.words {
			for ; w != 0; w &= w - 1 {
				fd := i*64 + bits.TrailingZeros64(w)
				if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil || fl&unix.FD_CLOEXEC != 0 {
					kept.inh.remove(fd)
				}
			}
		}
	})
}

// markAllButKept marks close-on-exec every descriptor from 3 up but the
// kept ones.
func markAllButKept() {
	lo := uint(3)
	for i, w := range kept.inh.words {
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
	keep()
	if kept.byRange {
		call()
		markAllButKept()
		return
	}
	before := fdSets.Get().(*fdSet)
	defer fdSets.Put(before)
	listed := openFDs(before)
	call()
	if !listed {
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
