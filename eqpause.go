package netio

import (
	"errors"
	"slices"
	"time"

	"golang.org/x/sys/unix"
)

// A process out of file descriptors cannot accept: libfabric's tcp
// provider calls accept(2) whenever its event queue is read, gets EMFILE,
// and leaves the connection in the listening socket, which stays readable,
// so the event queue's descriptor stays readable too and the reactor woke
// for it without end (1,100 idle sockets against a process limited to
// 1,024 descriptors held it at 87% CPU, and every other connection's
// events waited behind it). libfabric does not report the failure, so the
// engine looks for it where it shows: a wake-up of the event queue with
// nothing to read. Then it checks whether a descriptor can be had and, if
// not, stops watching the queue for a while, 5 ms doubling up to 1 s, the
// way Go's net/http accept loop backs off on EMFILE. Requests wait in the
// kernel's backlog meanwhile, and are taken once descriptors are free. The
// queue is the fabric's: the connection events of the process's other
// endpoints on it wait too, at most a pause, which is little next to a
// process that cannot open a descriptor.

const (
	pauseFirst = 5 * time.Millisecond
	pauseMax   = time.Second
)

// afterEvents is called after each wake-up of f's event queue; got is
// whether it had events.
func (e *engine) afterEvents(f *fabricRes, got bool) {
	if got {
		e.pauseFor = 0
		return
	}
	if !outOfFiles(f.eq.FD()) {
		e.pauseFor = 0 // a partial message, as happens
		return
	}
	e.pauseFor = min(max(2*e.pauseFor, pauseFirst), pauseMax)
	if !slices.Contains(e.paused, f) {
		e.paused = append(e.paused, f)
		e.r.Modify(f.eq.FD(), 0)
		for _, t := range e.targets {
			if a, ok := t.(*acceptor); ok && a.fab == f {
				a.stats.acceptPauses.Add(1)
			}
		}
	}
	e.pauseTimer.StartOnce(e.pauseFor)
}

// resumeEvents watches the paused event queues again. If descriptors are
// still short, the next empty wake-up pauses them for twice as long.
func (e *engine) resumeEvents() {
	for _, f := range e.paused {
		e.r.Modify(f.eq.FD(), reactorIn)
	}
	clear(e.paused)
	e.paused = e.paused[:0]
}

// unpause forgets f, which is closing.
func (e *engine) unpause(f *fabricRes) {
	if i := slices.Index(e.paused, f); i >= 0 {
		e.paused = slices.Delete(e.paused, i, i+1)
	}
}

// outOfFiles reports whether the process can open no file descriptor, by
// duplicating open, one it has.
func outOfFiles(open int) bool {
	fd, err := unix.Dup(open)
	if err == nil {
		unix.Close(fd)
		return false
	}
	return errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE)
}
