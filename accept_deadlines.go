package netio

import (
	"fmt"
	"os"
	"time"

	"github.com/netio-go/netio/internal/lifecycle"
)

// Accepted links have a deadline for their set-up: a peer that sent a
// valid request and then never completed the handshake would otherwise
// hold an endpoint, its descriptors and buffers, and a place among its
// listener's MaxConns, for ever. On tcp libfabric completes the handshake
// as soon as its answer is written, so this mostly guards verbs, whose
// connection manager waits for the peer's last message; on every provider
// it bounds what a set-up can cost.
//
// The engine keeps the links being set up and one timer, armed for the
// earliest deadline: no goroutine or timer per connection.

// setupWatch is a link being set up and where its failure is counted.
type setupWatch struct {
	by    time.Time
	stats *acceptStats
}

// watchSetup gives the accepted link l until timeout to come up.
func (e *engine) watchSetup(l *link, timeout time.Duration, stats *acceptStats) {
	if e.setups == nil {
		e.setups = map[*link]setupWatch{}
	}
	by := time.Now().Add(timeout)
	e.setups[l] = setupWatch{by: by, stats: stats}
	if e.setupNext.IsZero() || by.Before(e.setupNext) {
		e.armSetupTimer(by)
	}
}

// forgetSetup stops watching l: it is up, or gone.
func (e *engine) forgetSetup(l *link) { delete(e.setups, l) }

func (e *engine) armSetupTimer(at time.Time) {
	e.setupNext = at
	e.setupTimer.StartOnce(time.Until(at))
}

// sweepSetups fails the links whose set-up is overdue and arms the timer
// for the next deadline.
func (e *engine) sweepSetups() {
	now := time.Now()
	var next time.Time
	for l, w := range e.setups {
		if now.Before(w.by) {
			if next.IsZero() || w.by.Before(next) {
				next = w.by
			}
			continue
		}
		delete(e.setups, l)
		if l.life.State() != lifecycle.Connecting {
			continue
		}
		w.stats.timedOut.Add(1)
		// The owner drops it (setupFailed), which counts it as failed.
		l.fail(fmt.Errorf("%w: the peer did not complete the handshake in time", os.ErrDeadlineExceeded))
	}
	e.setupNext = time.Time{}
	if !next.IsZero() {
		e.armSetupTimer(next)
	}
}
