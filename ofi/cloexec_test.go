//go:build cgo && linux

package ofi

import (
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// noInherit marks close-on-exec the descriptors its call opened, and
// leaves alone one that was without close-on-exec when it was first called
// (here: first after a reset of what it keeps).
func TestNoInheritMarksNewDescriptors(t *testing.T) {
	old, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(old)
	forgetKept()
	defer forgetKept()
	var pair [2]int
	noInherit(func() { pair, err = unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0) })
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pair[0])
	defer unix.Close(pair[1])
	cloexec := func(fd int) bool {
		fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		return err == nil && fl&unix.FD_CLOEXEC != 0
	}
	if !cloexec(pair[0]) || !cloexec(pair[1]) {
		t.Errorf("descriptors %v opened in the call are not close-on-exec", pair)
	}
	if cloexec(old) {
		t.Errorf("descriptor %d, open before the call, was changed", old)
	}
}

// A descriptor another goroutine closes during the call, whose number
// libfabric then reuses, is marked too: the number was open before the
// call, but not this descriptor.
func TestNoInheritMarksReusedNumber(t *testing.T) {
	goFD, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	var reused int
	noInherit(func() {
		unix.Close(goFD)
		reused, err = unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(reused)
	if reused != goFD {
		t.Skipf("the kernel gave number %d, not the closed %d", reused, goFD)
	}
	fl, err := unix.FcntlInt(uintptr(reused), unix.F_GETFD, 0)
	if err != nil || fl&unix.FD_CLOEXEC == 0 {
		t.Errorf("descriptor %d, opened in the call under a number closed in it, is not close-on-exec", reused)
	}
}

// A descriptor opened without close-on-exec after noInherit's first call
// is marked at its next call (cloexec.go says why that is harmless).
func TestNoInheritMarksLaterInheritable(t *testing.T) {
	noInherit(func() {})
	if !kept.byRange {
		t.Skip("no close_range(CLOSE_RANGE_CLOEXEC) here: only new numbers are marked")
	}
	late, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(late)
	noInherit(func() {})
	fl, err := unix.FcntlInt(uintptr(late), unix.F_GETFD, 0)
	if err != nil || fl&unix.FD_CLOEXEC == 0 {
		t.Errorf("descriptor %d, opened after the first call, is not close-on-exec", late)
	}
}

// forgetKept makes the next noInherit list the kept descriptors anew.
func forgetKept() {
	kept.once = sync.Once{}
	kept.inh = fdSet{}
}
