package netio

import (
	"sync/atomic"
	"time"
)

// pageWatch sends the pages a writer leaves open: after FlushInterval at
// the latest, and as soon as the writer pauses (unless NoIdleFlush). It is
// the reactor's side of a lazy framing; it seals a page only when it gets
// the send gate with one CAS (a writer inside is busy, not paused, and is
// looked at again later), so it never waits for a user's goroutine.
//
// Where each page's send comes from: the writer seals it when it is full
// or on Flush and Close (sender), the flush timer when it has waited
// FlushInterval (onTimer), the idle look when its writer wrote nothing
// between two looks (checkIdle). All of them call sender.seal.
type pageWatch struct {
	s        *sender
	l        *link
	interval time.Duration
	noIdle   bool

	scheduled atomic.Bool // notify queued a look on the reactor

	// Reactor only.
	flush      timed     // the flush deadline, on the engine's clock
	seenOpened uint64    // sender.opened at the last look
	since      time.Time // when the open page was first seen
	watched    bool      // in the engine's idle list
	seenMsgs   uint64    // sender.msgs at the last idle look
}

// flushRetry is how soon the flush timer looks again when a writer is
// inside the gate (copying a large message, or waiting for a buffer).
const flushRetry = 10 * time.Millisecond

// newPageWatch makes the watch of s; on the reactor.
func newPageWatch(s *sender, l *link, cfg *Config) *pageWatch {
	w := &pageWatch{s: s, l: l, interval: cfg.FlushInterval, noIdle: cfg.NoIdleFlush}
	w.flush.Value = w.onTimer
	return w
}

// notify tells the reactor that the writer opened a page. Any goroutine;
// one task queued at a time.
func (w *pageWatch) notify() {
	if !w.scheduled.Load() && w.scheduled.CompareAndSwap(false, true) {
		if w.l.eng.r.Submit(w) != nil {
			w.scheduled.Store(false)
		}
	}
}

// Run notices a page opened since the last look: it arms the flush timer
// and the pause watch. On the reactor.
func (w *pageWatch) Run() {
	w.scheduled.Store(false)
	if !w.l.flowing() {
		return
	}
	opened := w.s.opened.Load()
	if opened == w.seenOpened {
		return
	}
	w.seenOpened = opened
	w.since = time.Now()
	if !w.flush.Queued() {
		w.l.eng.clock.at(&w.flush, w.since.Add(w.interval))
	}
	if !w.noIdle {
		w.l.eng.watchIdle(w)
	}
}

// onTimer sends a page that has waited FlushInterval.
func (w *pageWatch) onTimer(now time.Time) {
	if !w.l.flowing() {
		return
	}
	if !w.s.gate.TryReactor() {
		w.l.eng.clock.at(&w.flush, now.Add(min(flushRetry, w.interval)))
		return
	}
	sealed := false
	if w.s.open {
		if opened := w.s.opened.Load(); opened != w.seenOpened {
			w.seenOpened, w.since = opened, now
		}
		if now.Sub(w.since) >= w.interval {
			w.s.seal(flushTimer)
			sealed = true
		} else {
			w.l.eng.clock.at(&w.flush, w.since.Add(w.interval))
		}
	}
	w.s.gate.Unlock()
	if sealed {
		w.l.service()
	}
}

// checkIdle seals the open page when its writer has written nothing into
// it since the last look: the writer paused, and waiting longer would only
// delay what it wrote. It reports whether to stop watching (no page is
// open any more) and whether it sealed; after a seal the link sends.
func (w *pageWatch) checkIdle() (done, sealed bool) {
	if !w.l.flowing() {
		return true, false
	}
	if !w.s.gate.TryReactor() {
		return false, false // a writer is inside: not a pause
	}
	switch {
	case !w.s.open:
		done = true
	case w.s.msgs != w.seenMsgs:
		w.seenMsgs = w.s.msgs
	default:
		w.s.seal(flushIdle)
		done, sealed = true, true
	}
	w.s.gate.Unlock()
	if sealed {
		w.l.service()
	}
	return done, sealed
}

// startIdle is the engine starting to watch w.
func (w *pageWatch) startIdle() bool {
	if w.watched {
		return false
	}
	w.watched, w.seenMsgs = true, ^uint64(0)
	return true
}

// stopIdle is the engine no longer watching w.
func (w *pageWatch) stopIdle() { w.watched = false }

// close takes the watch off the engine; on the reactor, when the link is
// released.
func (w *pageWatch) close() {
	w.l.eng.forgetIdle(w)
	w.l.eng.clock.cancel(&w.flush)
}
