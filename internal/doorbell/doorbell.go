// Package doorbell is how the reactor wakes a goroutine blocked in a
// connection's Read or Write: an eventfd that the goroutine reads through
// Go's network poller.
//
// A channel send from the reactor would be simpler but slow: the Go
// scheduler queues the woken goroutine on the reactor's own processor,
// which the locked reactor thread never yields, so it runs only after
// another thread wakes up and steals it (tens of µs here). A goroutine
// parked in the netpoller is resumed by whichever thread polls, the way a
// net.TCPConn reader is. The eventfd also gives deadlines for free.
package doorbell

import (
	"errors"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Bell is one doorbell: rung by any goroutine, waited on by one.
type Bell struct {
	f    *os.File
	raw  syscall.RawConn
	ring func(fd uintptr) bool // made once: a ring allocates nothing
}

// New opens a doorbell; Close closes it.
func New() (*Bell, error) {
	fd, err := newEventfd()
	if err != nil {
		return nil, os.NewSyscallError("eventfd", err)
	}
	b := &Bell{f: os.NewFile(uintptr(fd), "netio-waker")}
	if b.raw, err = b.f.SyscallConn(); err != nil {
		b.f.Close()
		return nil, err
	}
	b.ring = func(fd uintptr) bool {
		unix.Write(int(fd), ringValue[:])
		return true // never wait: an eventfd write fails only on overflow
	}
	return b, nil
}

var ringValue = [8]byte{1}

// Ring makes a pending or the next Wait return. Any goroutine, including
// the reactor; one system call, made only when someone waits. It writes
// through the file, which holds the descriptor for the call, so a ring
// that comes after Close (a context's AfterFunc, say) does nothing instead
// of writing to whatever now has the descriptor's number.
func (b *Bell) Ring() { b.raw.Write(b.ring) }

// Wait blocks until Ring, the deadline set by SetDeadline, or Close. Rings
// since the last Wait count as one.
func (b *Bell) Wait() error {
	var buf [8]byte
	_, err := b.f.Read(buf[:])
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return os.ErrDeadlineExceeded
	}
	return err
}

// SetDeadline applies to a Wait in progress too, as in the net package.
func (b *Bell) SetDeadline(t time.Time) { b.f.SetReadDeadline(t) }

// Close closes the doorbell: a Wait in progress, or a later one, fails
// with an error wrapping os.ErrClosed.
func (b *Bell) Close() { b.f.Close() }
