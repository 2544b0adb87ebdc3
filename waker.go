package netio

import (
	"errors"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// waker is how the reactor wakes a goroutine blocked in Read or Write: an
// eventfd that the goroutine reads through Go's network poller.
//
// A channel send from the reactor would be simpler but slow: the Go
// scheduler queues the woken goroutine on the reactor's own processor,
// which the locked reactor thread never yields, so it runs only after
// another thread wakes up and steals it (tens of µs here). A goroutine
// parked in the netpoller is resumed by whichever thread polls, the way a
// net.TCPConn reader is. The eventfd also gives deadlines for free.
type waker struct {
	f    *os.File
	raw  syscall.RawConn
	ring func(fd uintptr) bool // made once: a wake allocates nothing
}

func newWaker() (*waker, error) {
	fd, err := newEventfd()
	if err != nil {
		return nil, os.NewSyscallError("eventfd", err)
	}
	w := &waker{f: os.NewFile(uintptr(fd), "netio-waker")}
	if w.raw, err = w.f.SyscallConn(); err != nil {
		w.f.Close()
		return nil, err
	}
	w.ring = func(fd uintptr) bool {
		unix.Write(int(fd), wakeValue[:])
		return true // never wait: an eventfd write fails only on overflow
	}
	return w, nil
}

var wakeValue = [8]byte{1}

// wake makes a pending or the next wait return. Any goroutine, including
// the reactor; one system call, made only when someone waits. It writes
// through the file, which holds the descriptor for the call, so a wake
// that comes after close (a context's AfterFunc, say) does nothing instead
// of writing to whatever now has the descriptor's number.
func (w *waker) wake() { w.raw.Write(w.ring) }

// wait blocks until wake, the deadline set by setDeadline, or close.
func (w *waker) wait() error {
	var buf [8]byte
	_, err := w.f.Read(buf[:])
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return os.ErrDeadlineExceeded
	}
	return err
}

// setDeadline applies to a wait in progress too, as in the net package.
func (w *waker) setDeadline(t time.Time) { w.f.SetReadDeadline(t) }

func (w *waker) close() { w.f.Close() }
