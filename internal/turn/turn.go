// Package turn is a tag's place in line at a publisher: a lock that is
// handed to its waiters in the order they came, and that a waiter may give
// up waiting for.
package turn

import (
	"sync"
	"sync/atomic"
)

// Turn is a tag's place in line at a publisher: the Publish that holds it
// numbers the tag's next message and hands it to the tag's subscribers, so
// that each gets the tag's messages in sequence order. It is held across
// a wait for a Block subscriber that has fallen behind, and only a Publish
// of the same tag (or a change of the tag's subscribers) ever waits for
// it: every other tag has a turn of its own.
//
// Uncontended it is one CAS to take and one to give back, as a
// sync.Mutex. Unlike one, a waiter can give up (its Publish's context
// ended), and a turn given back while others wait goes to the first of
// them, not to whoever asks next: a tag published in a tight loop would
// otherwise starve a subscriber that asks to join it.
type Turn struct {
	state atomic.Uint32 // turnHeld, with turnQueued while anyone waits
	line  atomic.Pointer[turnLine]
}

// turnLine is the line of a turn that was ever waited for: most turns
// never are, and a tag's entry stays small (a publisher may hold a million).
type turnLine struct {
	mu    sync.Mutex // queue, and the turnQueued bit's changes
	queue []*turnWaiter
}

// waitLine returns t's line, made on first use.
func (t *Turn) waitLine() *turnLine {
	if l := t.line.Load(); l != nil {
		return l
	}
	t.line.CompareAndSwap(nil, &turnLine{})
	return t.line.Load()
}

const (
	turnHeld   = 1
	turnQueued = 2 // only ever set with turnHeld
)

// turnWaiter is one waiter in line: ready is closed when the turn is
// handed to it.
type turnWaiter struct{ ready chan struct{} }

// Lock takes the turn, waiting in line if it is held, and reports false
// (not holding it) if done is closed first. A nil done waits for ever.
func (t *Turn) Lock(done <-chan struct{}) bool {
	if t.state.CompareAndSwap(0, turnHeld) {
		return true
	}
	return t.lockSlow(done)
}

func (t *Turn) lockSlow(done <-chan struct{}) bool {
	tl := t.waitLine()
	tl.mu.Lock()
	for {
		s := t.state.Load()
		if s&turnHeld == 0 {
			if t.state.CompareAndSwap(s, s|turnHeld) {
				tl.mu.Unlock()
				return true
			}
			continue
		}
		if t.state.CompareAndSwap(s, s|turnQueued) {
			break
		}
	}
	w := &turnWaiter{ready: make(chan struct{})}
	tl.queue = append(tl.queue, w)
	tl.mu.Unlock()
	select {
	case <-w.ready:
		return true
	case <-done:
	}
	tl.mu.Lock()
	for i, x := range tl.queue {
		if x == w {
			tl.queue = append(tl.queue[:i], tl.queue[i+1:]...)
			if len(tl.queue) == 0 {
				t.state.Store(turnHeld) // held by someone else still
			}
			tl.mu.Unlock()
			return false
		}
	}
	tl.mu.Unlock()
	// Handed over while giving up: pass it on.
	t.Unlock()
	return false
}

// Unlock gives the turn back, to the first waiter if any.
func (t *Turn) Unlock() {
	if t.state.CompareAndSwap(turnHeld, 0) {
		return
	}
	tl := t.line.Load() // made before turnQueued was set
	tl.mu.Lock()
	if len(tl.queue) == 0 {
		t.state.Store(0)
		tl.mu.Unlock()
		return
	}
	w := tl.queue[0]
	tl.queue[0] = nil
	tl.queue = tl.queue[1:]
	if len(tl.queue) == 0 {
		t.state.Store(turnHeld) // now w's
	}
	tl.mu.Unlock()
	close(w.ready)
}
