// Package sendgate decides who may touch a connection's send buffers: one
// writing goroutine at a time, or the reactor sealing a page.
package sendgate

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// Gate is who may touch a connection's send buffers: one writing
// goroutine at a time (Write, Flush, Close), or the reactor when it seals a
// page that a writer left open (after FlushInterval, or when the writer
// paused). It is an atomic state word, the way internal/poll's fdMutex is,
// rather than a sync.Mutex that the reactor would TryLock: the reactor's
// attempt is one CAS that never waits, and the states are written down
// here instead of being implied by who holds a user's lock.
//
// The word also holds the reasons a writer has to look before it writes:
// a write deadline is set, or the connection is closed, ended, shut for
// writing or broken. The uncontended lock is one CAS from gateFree, which
// fails on any of them: a writer that gets in that way knows, without
// loading the deadline, the closed flag and the link's end (three cache
// lines, one of them written by the reactor), that nothing stands in its
// way (docs/decisions/2026-11-send-gate-flags.md).
//
// A writer that finds the gate taken lines up on queue and parks until the
// holder lets go. The holder may keep it across a wait for credit (a
// message that spans buffers must not interleave with another), so waiting
// writers park rather than spin.
//
// Uncontended, a writer pays one CAS and one atomic AND per call, as for a
// sync.Mutex; the reactor's failed CAS costs the writer nothing.
type Gate struct {
	state   atomic.Int32
	waiters atomic.Int32  // writers parked on free
	queue   sync.Mutex    // writers that found the gate taken, one waits at a time
	free    chan struct{} // capacity 1: rung when the gate opens and someone waits
	dlMu    sync.Mutex    // orders setDeadline's store and flag
}

const (
	gateFree    = 0
	gateWriter  = 1 // a writing goroutine is inside
	gateReactor = 2 // the reactor is sealing a page
	gateInside  = gateWriter | gateReactor

	// Flags: a writer must look before it writes.
	gateDeadline = 4 // a write deadline is set
	gateStopped  = 8 // closed, ended, shut or broken: for good
)

func New() Gate { return Gate{free: make(chan struct{}, 1)} }

// Lock is a writer entering; it waits while anyone is inside. It reports
// whether no flag was set: then nothing but a message's size can stop the
// write (unhindered need not be asked).
func (g *Gate) Lock() bool {
	if g.state.CompareAndSwap(gateFree, gateWriter) {
		return true
	}
	g.lockSlow()
	return false
}

// lockSlow is lock when the gate is taken or flagged.
func (g *Gate) lockSlow() {
	if g.enter(gateWriter) {
		return
	}
	g.queue.Lock()
	g.waiters.Add(1)
	for !g.enter(gateWriter) {
		<-g.free
	}
	g.waiters.Add(-1)
	g.queue.Unlock()
}

// LockUntil is lock that gives up when done is closed (nil: never),
// reporting whether it got in. A publisher waits so for a subscriber's
// gate, which another tag's publish may hold across a wait for room.
func (g *Gate) LockUntil(done <-chan struct{}) bool {
	if g.enter(gateWriter) {
		return true
	}
	if done == nil {
		g.lockSlow()
		return true
	}
	g.waiters.Add(1)
	defer g.waiters.Add(-1)
	for !g.enter(gateWriter) {
		select {
		case <-g.free:
		case <-done:
			return false
		}
	}
	return true
}

// enter is who (gateWriter or gateReactor) entering if nobody is inside,
// whatever the flags. A waiter counts itself before it looks, so no
// wake-up is lost: either it sees the gate open, or the unlock that opens
// it comes after its look and sees it waiting.
func (g *Gate) enter(who int32) bool {
	for {
		s := g.state.Load()
		if s&gateInside != 0 {
			return false
		}
		if g.state.CompareAndSwap(s, s|who) {
			return true
		}
	}
}

// TryLock is a writer entering only if nobody is inside.
func (g *Gate) TryLock() bool { return g.enter(gateWriter) }

// TryLockPastReactor is a writer entering unless another writer is
// inside: the reactor, which only seals a page and never waits inside, is
// waited out. A publisher offering a message must not take the reactor's
// seal for a subscriber without room, or the message would wait behind
// subscribers that have none.
func (g *Gate) TryLockPastReactor() bool {
	for {
		if g.enter(gateWriter) {
			return true
		}
		if g.state.Load()&gateWriter != 0 {
			return false
		}
		runtime.Gosched()
	}
}

// LockFree enters a gate that is free with no flag set, in one
// compare-and-swap, or reports false: a caller's fast path, before tryLock.
func (g *Gate) LockFree() bool { return g.state.CompareAndSwap(gateFree, gateWriter) }

// Occupied reports whether a writer or the reactor is inside.
func (g *Gate) Occupied() bool { return g.state.Load()&gateInside != 0 }

// TryReactor is the reactor entering only if nobody is inside.
func (g *Gate) TryReactor() bool { return g.enter(gateReactor) }

// Unlock lets the next one in. The atomic AND comes before the look at
// waiters (see enter).
func (g *Gate) Unlock() {
	g.state.And(^int32(gateInside))
	if g.waiters.Load() > 0 {
		select {
		case g.free <- struct{}{}:
		default:
		}
	}
}

// Stop flags the gate for good: the connection is closed, ended, shut for
// writing or broken, and every later writer looks. Any goroutine.
func (g *Gate) Stop() { g.state.Or(gateStopped) }

// SetDeadline stores the write deadline t (Unix ns, 0 for none) in d and
// flags the gate while one is set. Any goroutine.
func (g *Gate) SetDeadline(d *atomic.Int64, t int64) {
	g.dlMu.Lock()
	d.Store(t)
	if t != 0 {
		g.state.Or(gateDeadline)
	} else {
		g.state.And(^int32(gateDeadline))
	}
	g.dlMu.Unlock()
}
