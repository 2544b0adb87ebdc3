package budget

import (
	"errors"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// CheckLockedMemory holds a pinning provider's connection to the process's
// RLIMIT_MEMLOCK, counting what is registered already, and lets any
// connection through on a provider that does not pin.
func TestCheckLockedMemory(t *testing.T) {
	// Capabilities are a thread's: drop CAP_IPC_LOCK on this one, which the
	// test goroutine keeps to its end (the runtime then ends the thread).
	runtime.LockOSThread()
	if canLockAnyMemory() {
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		if err := unix.Capget(&hdr, &data[0]); err != nil {
			t.Fatal(err)
		}
		data[unix.CAP_IPC_LOCK/32].Effective &^= 1 << (unix.CAP_IPC_LOCK % 32)
		if err := unix.Capset(&hdr, &data[0]); err != nil || canLockAnyMemory() {
			t.Skipf("cannot drop CAP_IPC_LOCK (%v): the kernel pins without bound", err)
		}
	}
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &old); err != nil {
		t.Fatal(err)
	}
	lowered := unix.Rlimit{Cur: 1 << 20, Max: old.Max}
	if old.Max != unix.RLIM_INFINITY && old.Max < lowered.Cur {
		lowered.Cur = old.Max
	}
	if err := unix.Setrlimit(unix.RLIMIT_MEMLOCK, &lowered); err != nil {
		t.Skipf("cannot lower RLIMIT_MEMLOCK: %v", err)
	}
	t.Cleanup(func() { unix.Setrlimit(unix.RLIMIT_MEMLOCK, &old) })

	var b Budget
	limit := int64(lowered.Cur)
	if err := b.CheckLockedMemory("verbs", true, limit); err != nil {
		t.Errorf("a connection of exactly the limit: %v", err)
	}
	if err := b.CheckLockedMemory("tcp", false, 4*limit); err != nil {
		t.Errorf("a provider that does not pin: %v", err)
	}
	if err := b.CheckLockedMemory("verbs", true, limit+1); !errors.Is(err, ErrLimit) {
		t.Errorf("one byte above the limit: %v, want ErrLimit", err)
	}
	if err := b.Reserve(1); err != nil {
		t.Fatal(err)
	}
	if err := b.CheckLockedMemory("verbs", true, limit); !errors.Is(err, ErrLimit) {
		t.Errorf("the limit, with a byte registered already: %v, want ErrLimit", err)
	}
}
