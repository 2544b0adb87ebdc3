package netio

import (
	"errors"
	"slices"
	"time"

	"golang.org/x/sys/unix"
)

// A process out of file descriptors cannot accept: libfabric's tcp
// provider calls accept(2) whenever a listener's event queue is read, gets
// EMFILE, and leaves the connection in the listening socket, which stays
// readable, so the queue's descriptor stays readable too and the thread
// reading it woke for it without end (1,100 idle sockets against a process
// limited to 1,024 descriptors held it at 87% CPU). libfabric does not
// report the failure, so the connection manager looks for it where it
// shows: a wake-up of a queue with nothing to read. Then it checks whether
// a descriptor can be had and, if not, stops watching the queue for a
// while, 5 ms doubling up to 1 s, the way Go's net/http accept loop backs
// off on EMFILE. Requests wait in the kernel's backlog meanwhile, and are
// taken once descriptors are free.

const (
	pauseFirst = 5 * time.Millisecond
	pauseMax   = time.Second
)

// afterEvents is called after each wake-up of w's queue; got is whether it
// had events. On the manager's thread.
func (m *connManager) afterEvents(w *listenWatch, got bool) {
	if got {
		m.pauseFor = 0
		return
	}
	if !outOfFiles(w.q.FD()) {
		m.pauseFor = 0 // a partial request, as happens
		return
	}
	m.pauseFor = min(max(2*m.pauseFor, pauseFirst), pauseMax)
	if !w.paused {
		w.paused = true
		m.paused = append(m.paused, w)
		m.r.Modify(w.q.FD(), 0)
		w.a.stats.acceptPauses.Add(1)
	}
	m.clock.at(&m.resume, time.Now().Add(m.pauseFor))
}

// resumeEvents watches the paused queues again. If descriptors are still
// short, the next empty wake-up pauses them for twice as long.
func (m *connManager) resumeEvents(time.Time) {
	for _, w := range m.paused {
		w.paused = false
		m.r.Modify(w.q.FD(), reactorIn)
	}
	clear(m.paused)
	m.paused = m.paused[:0]
}

// unpause forgets w, which stops.
func (m *connManager) unpause(w *listenWatch) {
	if i := slices.Index(m.paused, w); i >= 0 {
		m.paused = slices.Delete(m.paused, i, i+1)
	}
	w.paused = false
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
