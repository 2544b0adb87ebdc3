package reactor

import "time"

// The round's clock. The loop reads the time once per round, after the
// round's tasks and ready descriptors and before its pollers, and decides
// to sleep on that reading: it sleeps only once a round whose clock is a
// full Spin past the first idle round has polled every source and found
// nothing. So anything a source received before that reading is found
// before the sleep. A peer that must wake the loop (a doorbell, for a
// source no descriptor reports) can rely on it: the loop polled a message
// at time t, so a message sent before t+Spin is found without waking it.
// Callbacks read the clock with Now and Round instead of the time: no
// system call per message.

// tick starts the clock of a round.
func (r *Reactor) tick() {
	r.now = time.Since(r.epoch)
	r.round++
}

// Now is the clock of the current round: the time since the reactor
// started, read after the round's tasks and ready descriptors and before
// its pollers. Anything a task or handler did in this round happened
// before it, anything a poller does after it. Reactor thread only.
func (r *Reactor) Now() time.Duration { return r.now }

// Round numbers the rounds: it changes when Now is read, so that a
// callback can tell whether something it recorded happened before the
// current round's clock (a smaller Round) or maybe after it. Reactor
// thread only.
func (r *Reactor) Round() uint64 { return r.round }

// Spin is how long the loop keeps polling before it sleeps (Config.Spin
// after its defaults; 0: it sleeps as soon as a round finds nothing).
func (r *Reactor) Spin() time.Duration { return r.spin }
