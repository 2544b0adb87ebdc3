package netio

import (
	"sync"
	"sync/atomic"
)

// sendGate is who may touch a connection's send buffers: one writing
// goroutine at a time (Write, Flush, Close), or the reactor when it seals a
// page that a writer left open (after FlushInterval, or when the writer
// paused). It is an atomic state word, the way internal/poll's fdMutex is,
// rather than a sync.Mutex that the reactor would TryLock: the reactor's
// attempt is one CAS that never waits, and the states are written down
// here instead of being implied by who holds a user's lock.
//
// A writer that finds the gate taken lines up on queue and parks until the
// holder lets go. The holder may keep it across a wait for credit (a
// message that spans buffers must not interleave with another), so waiting
// writers park rather than spin.
//
// Uncontended, a writer pays one CAS and one store per call, as for a
// sync.Mutex; the reactor's failed CAS costs the writer nothing.
type sendGate struct {
	state   atomic.Int32
	waiters atomic.Int32  // writers parked on free
	queue   sync.Mutex    // writers that found the gate taken, one waits at a time
	free    chan struct{} // capacity 1: rung when the gate opens and someone waits
}

const (
	gateFree    = 0
	gateWriter  = 1 // a writing goroutine is inside
	gateReactor = 2 // the reactor is sealing a page
)

func newSendGate() sendGate { return sendGate{free: make(chan struct{}, 1)} }

// lock is a writer entering; it waits while anyone is inside.
func (g *sendGate) lock() {
	if g.state.CompareAndSwap(gateFree, gateWriter) {
		return
	}
	g.queue.Lock()
	g.waiters.Add(1)
	for !g.state.CompareAndSwap(gateFree, gateWriter) {
		<-g.free
	}
	g.waiters.Add(-1)
	g.queue.Unlock()
}

// tryLock is a writer entering only if nobody is inside.
func (g *sendGate) tryLock() bool { return g.state.CompareAndSwap(gateFree, gateWriter) }

// tryReactor is the reactor entering only if nobody is inside.
func (g *sendGate) tryReactor() bool { return g.state.CompareAndSwap(gateFree, gateReactor) }

// unlock lets the next one in. The store comes before the look at waiters,
// and a waiter counts itself before it tries the CAS, so no wake-up is
// lost: either the waiter's CAS sees the gate free, or unlock sees the
// waiter and rings.
func (g *sendGate) unlock() {
	g.state.Store(gateFree)
	if g.waiters.Load() > 0 {
		select {
		case g.free <- struct{}{}:
		default:
		}
	}
}
