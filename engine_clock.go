package netio

import (
	"time"

	"github.com/netio-go/netio/internal/deadline"
	"github.com/netio-go/netio/reactor"
)

// A reactor thread's clock: every deadline of the thread (on the engine's:
// idle flush, set-up deadlines, heartbeats sent and checked, lingering
// closes, each sender's page flush; on the connection manager's: request
// sweeps and accept pauses) is an entry in one heap, and one timerfd is
// armed for the earliest. A deadline costs O(log n) to set or move and
// nothing while it waits: no descriptor, no scan.

// timed is a deadline and what to do when it passes, on the clock's
// thread. Its owner keeps it (in a link, a page watch) and sets it with
// clock.at.
type timed = deadline.Entry[func(now time.Time)]

// clock is the deadlines of one reactor and the timer that runs them.
// Its thread only.
type clock struct {
	q     deadline.Queue[func(now time.Time)]
	r     *reactor.Reactor
	timer *reactor.Timer
	armed time.Time // when timer fires; zero if stopped
	busy  bool      // run is running: it arms the timer when done
	due   []*timed  // run's batch, kept for its capacity
	quiet int       // entries of run's batch that called background
}

// open makes the clock's timer on r; on r's thread, before any deadline.
func (c *clock) open(r *reactor.Reactor) (err error) {
	c.r = r
	c.timer, err = r.NewTimer(c.run)
	return err
}

// background is called by an entry's function that did only background
// work (a heartbeat sent or checked): a batch of such entries alone starts
// no spin of the reactor (reactor.Reactor.Background).
func (c *clock) background() { c.quiet++ }

func (c *clock) close() { c.timer.Close() }

// at sets t to run at when, or moves it there.
func (c *clock) at(t *timed, when time.Time) {
	c.q.Set(t, when)
	if !c.busy {
		c.arm(when)
	}
}

// cancel takes t off the clock; it does not run, even if due already.
func (c *clock) cancel(t *timed) { c.q.Remove(t) }

// arm arms the timer for when, unless it fires before already. A deadline
// d away may run up to d/64 late (at most clockSlack), so that deadlines
// close together (the links' heartbeats) run in one wake-up, not one each.
// A timer armed for an entry that was removed since fires for nothing and
// is armed again for the next one, which costs less than re-arming on
// every removal.
func (c *clock) arm(when time.Time) {
	now := time.Now()
	in := when.Sub(now)
	in += min(in/64, clockSlack)
	if fire := now.Add(in); c.armed.IsZero() || fire.Before(c.armed) {
		c.armed = fire
		c.timer.StartOnceFromReactor(in)
	}
}

// clockSlack bounds how late arm lets a deadline run. Every wake-up of a
// sleeping reactor costs a thread wake and DefaultSpin of polling, so
// heartbeats run one by one cost more than in batches (docs/scaling.md:
// with 2 ms, 100 idle connections cost a busy round trip 1.65x the CPU of
// alone; with 20 ms, 1.45x).
const clockSlack = 20 * time.Millisecond

// run runs what is due. Everything due is taken off the heap first and run
// after: what runs may end a link, and so cancel or move other entries of
// the same batch (those then do not run), or set new ones.
func (c *clock) run() {
	c.armed, c.busy = time.Time{}, true
	now := time.Now()
	c.due = c.q.PopDue(now, c.due[:0])
	ran := 0
	c.quiet = 0
	for i, t := range c.due {
		c.due[i] = nil
		if t.Take() {
			ran++
			t.Value(now)
		}
	}
	if c.quiet == ran {
		c.r.Background()
	}
	c.busy = false
	if next, ok := c.q.Next(); ok {
		c.arm(next)
	}
}
