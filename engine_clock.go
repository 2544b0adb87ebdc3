package netio

import (
	"time"

	"github.com/netio-go/netio/internal/deadline"
)

// The engine's clock: every deadline of the reactor's (idle flush, set-up
// deadlines, heartbeats sent and checked, lingering closes, each sender's
// page flush) is an entry in one heap, and one timerfd is armed for the
// earliest. A deadline costs O(log n) to set or move and nothing while it
// waits: no descriptor, no scan.

// timed is a deadline and what to do when it passes, on the reactor. Its
// owner keeps it (in a link, a page watch) and sets it with engine.at.
type timed = deadline.Entry[func(now time.Time)]

// at sets t to run at when, or moves it there. On the reactor.
func (e *engine) at(t *timed, when time.Time) {
	e.clock.Set(t, when)
	if !e.clockBusy {
		e.armClock(when)
	}
}

// cancel takes t off the clock; it does not run, even if due already. On
// the reactor.
func (e *engine) cancel(t *timed) { e.clock.Remove(t) }

// armClock arms the timer for when, unless it fires before already. A
// deadline d away may run up to d/64 late (at most clockSlack), so that
// deadlines close together (the links' heartbeats) run in one wake-up,
// not one each. A timer armed for an entry that was removed since fires
// for nothing and is armed again for the next one, which costs less than
// re-arming on every removal.
func (e *engine) armClock(when time.Time) {
	now := time.Now()
	in := when.Sub(now)
	in += min(in/64, clockSlack)
	if fire := now.Add(in); e.clockAt.IsZero() || fire.Before(e.clockAt) {
		e.clockAt = fire
		e.clockTimer.StartOnceFromReactor(in)
	}
}

// clockSlack bounds how late armClock lets a deadline run.
const clockSlack = 2 * time.Millisecond

// onClock runs what is due. Everything due is taken off the heap first and
// run after: what runs may end a link, and so cancel or move other entries
// of the same batch (those then do not run), or set new ones.
func (e *engine) onClock() {
	e.clockAt, e.clockBusy = time.Time{}, true
	now := time.Now()
	e.due = e.clock.PopDue(now, e.due[:0])
	for i, t := range e.due {
		e.due[i] = nil
		if t.Take() {
			t.Value(now)
		}
	}
	e.clockBusy = false
	if next, ok := e.clock.Next(); ok {
		e.armClock(next)
	}
}
