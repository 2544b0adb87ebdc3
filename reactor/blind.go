package reactor

import (
	"os"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// A BlindPoller is a Poller with sources no descriptor reports: libfabric's
// shm provider, for one, cannot give its completion queues a wait object
// (fi_cq_open with FI_WAIT_FD fails with -FI_ENOSYS), so work can arrive
// while the reactor sleeps and nothing wakes it. (netio gives its shm
// endpoints a doorbell their peers ring, a descriptor, and reports them
// Blind only while that does not cover them; see clock.go for the order
// such a doorbell relies on.)
//
// While a registered BlindPoller reports Blind, the reactor, once its spin
// is over and TryWait allowed it, sleeps on a timer of its own instead of
// until a descriptor is ready: first for MinIdlePoll, then twice as long
// after every sleep that ended with nothing to do, up to Config.IdlePoll.
// So a busy blind source costs a core (the loop polls it, as it polls
// every source), and an idle one a wake-up every IdlePoll, which is also
// the longest its first event after a quiet spell waits.
type BlindPoller interface {
	Poller
	// Blind reports whether the poller has, now, sources that only
	// polling finds. Called on the reactor thread before every sleep.
	Blind() bool
}

// MinIdlePoll is the first sleep of a reactor with a blind source, right
// after its spin: a little more than a wake-up costs.
const MinIdlePoll = 50 * time.Microsecond

// DefaultIdlePoll is Config.IdlePoll's default: at most 250 wake-ups a
// second when idle (a wake-up costs 10-50 µs of CPU on a small VM, so 1 ms
// spent 1-4% of a core), for a first event after a quiet spell that waits
// up to 4 ms (docs/rdm.md).
const DefaultIdlePoll = 4 * time.Millisecond

// idleSlot is the epoll data of the blind sources' timer.
const idleSlot = -2

// blindSleep is the state of the timed sleep, on the reactor thread.
type blindSleep struct {
	fd    int           // the timerfd, made with the first BlindPoller; -1 until then
	next  atomic.Int64  // the next sleep's length (a time.Duration); 0: MinIdlePoll; atomic for tests only
	limit time.Duration // Config.IdlePoll
	fired bool          // the last sleep ended on the timer
	// resets counts the times work brought the sleep back to the
	// shortest; read by tests.
	resets atomic.Uint64
}

// armBlind arms the timer before a sleep when a poller is blind, and
// reports whether it did.
func (r *Reactor) armBlind() bool {
	b := &r.blind
	if b.fd < 0 || !r.anyBlind() {
		return false
	}
	next := time.Duration(b.next.Load())
	if next == 0 {
		next = min(MinIdlePoll, b.limit)
		b.next.Store(int64(next))
	}
	b.fired = false
	if err := setTimerfd(b.fd, next, 0); err != nil {
		panic(os.NewSyscallError("timerfd_settime", err))
	}
	return true
}

// afterBlind is called after a sleep the timer was armed for, with whether
// the loop found work on waking: an idle wake-up doubles the next sleep,
// work resets it.
func (r *Reactor) afterBlind(worked bool) {
	b := &r.blind
	if worked {
		r.resetBlind()
		return
	}
	if b.fired {
		b.next.Store(int64(min(2*time.Duration(b.next.Load()), b.limit)))
	}
}

// resetBlind is called when the loop finds work: the next sleep is short.
func (r *Reactor) resetBlind() {
	if r.blind.next.Load() != 0 {
		r.blind.next.Store(0)
		r.blind.resets.Add(1)
	}
}

// anyBlind reports whether a registered poller is blind now.
func (r *Reactor) anyBlind() bool {
	for _, p := range r.pollers {
		if bp, ok := p.(BlindPoller); ok && bp.Blind() {
			return true
		}
	}
	return false
}

// openBlind makes the timer, on the reactor thread, the first time a
// BlindPoller is added.
func (r *Reactor) openBlind() error {
	if r.blind.fd >= 0 {
		return nil
	}
	fd, err := newTimerfd()
	if err != nil {
		return os.NewSyscallError("timerfd_create", err)
	}
	ev := epollEvent{Events: epollIn, Fd: idleSlot}
	if err := epollCtl(r.epfd, epollCtlAdd, fd, &ev); err != nil {
		unix.Close(fd)
		return os.NewSyscallError("epoll_ctl", err)
	}
	r.blind.fd = fd
	return nil
}

// blindFired resets the timer after it woke the loop.
func (r *Reactor) blindFired() {
	unix.Read(r.blind.fd, r.scratch[:]) // EAGAIN: re-armed since; fine
	r.blind.fired = true
}
