//go:build cgo && linux

package ofi

import (
	"testing"

	"golang.org/x/sys/unix"
)

// noInherit marks close-on-exec the descriptors its call opened, also one
// that reuses the number of the descriptor it lists them with, and leaves
// alone one that was open before without close-on-exec (under a number
// it has not seen with close-on-exec: cloexec.go).
func TestNoInheritMarksNewDescriptors(t *testing.T) {
	sock, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(sock)
	const old = 4000 // a number no other test uses
	if err := unix.Dup3(sock, old, 0); err != nil {
		t.Skipf("dup3 to %d: %v", old, err)
	}
	defer unix.Close(old)
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
