package doorbell

import (
	"errors"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func newBell(t *testing.T) *Bell {
	t.Helper()
	b, err := New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

// waitAsync waits on b in a goroutine of its own and delivers the result.
func waitAsync(b *Bell) <-chan error {
	done := make(chan error, 1)
	go func() { done <- b.Wait() }()
	return done
}

// A ring before the wait is kept for it, and several count as one: the
// wait after them returns, the next one waits again.
func TestRingsBeforeWaitCountAsOne(t *testing.T) {
	b := newBell(t)
	b.Ring()
	b.Ring()
	b.Ring()
	if err := b.Wait(); err != nil {
		t.Fatalf("wait after rings: %v", err)
	}
	b.SetDeadline(time.Now().Add(-time.Second))
	if err := b.Wait(); err != os.ErrDeadlineExceeded {
		t.Fatalf("second wait with no ring: %v, want os.ErrDeadlineExceeded", err)
	}
}

// A ring from another goroutine ends a wait, whenever it comes.
func TestRingWakesWaiter(t *testing.T) {
	b := newBell(t)
	for range 100 {
		done := waitAsync(b)
		b.Ring()
		if err := <-done; err != nil {
			t.Fatalf("wait: %v", err)
		}
	}
}

// A deadline ends a wait with os.ErrDeadlineExceeded itself (not wrapped),
// also one set while the wait is in progress; a zero deadline clears it.
func TestDeadline(t *testing.T) {
	b := newBell(t)
	b.SetDeadline(time.Now().Add(-time.Second))
	if err := b.Wait(); err != os.ErrDeadlineExceeded {
		t.Fatalf("wait past its deadline: %v, want os.ErrDeadlineExceeded", err)
	}
	b.SetDeadline(time.Time{})
	done := waitAsync(b)
	b.SetDeadline(time.Now().Add(-time.Second))
	if err := <-done; err != os.ErrDeadlineExceeded {
		t.Fatalf("wait whose deadline passed while it waited: %v, want os.ErrDeadlineExceeded", err)
	}
	b.SetDeadline(time.Time{})
	b.Ring()
	if err := b.Wait(); err != nil {
		t.Fatalf("wait after the deadline was cleared: %v", err)
	}
}

// Close ends a wait in progress with os.ErrClosed, and a ring after Close
// writes nothing, not even to a descriptor that took the closed one's
// number.
func TestClose(t *testing.T) {
	b, err := New()
	if err != nil {
		t.Fatal(err)
	}
	done := waitAsync(b)
	b.Close()
	if err := <-done; !errors.Is(err, os.ErrClosed) {
		t.Fatalf("wait across Close: %v, want os.ErrClosed", err)
	}
	fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	b.Ring()
	var buf [8]byte
	if n, err := unix.Read(fd, buf[:]); err != unix.EAGAIN {
		t.Fatalf("a ring after Close reached descriptor %d: read %d bytes, %v", fd, n, err)
	}
	if err := b.Wait(); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("wait after Close: %v, want os.ErrClosed", err)
	}
}
