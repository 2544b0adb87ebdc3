package netio

import (
	"errors"
	"os"
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
	f  *os.File
	fd int
}

func newWaker() (*waker, error) {
	fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("eventfd", err)
	}
	return &waker{f: os.NewFile(uintptr(fd), "netio-waker"), fd: fd}, nil
}

var wakeValue = [8]byte{1}

// wake makes a pending or the next wait return. Any goroutine, including
// the reactor; one system call, made only when someone waits.
func (w *waker) wake() { unix.Write(w.fd, wakeValue[:]) }

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
