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
// The deadline is an entry on the engine's clock (engine_clock.go): no
// goroutine or timer per connection.

// watchSetup gives the accepted link l until timeout to come up; a failure
// to is counted in stats. On the reactor.
func (l *link) watchSetup(timeout time.Duration, stats *acceptStats) {
	l.setupStats = stats
	l.eng.clock.at(&l.phase, time.Now().Add(timeout))
}

// forgetSetup stops watching l's set-up: it is up, or gone.
func (l *link) forgetSetup() { l.eng.clock.cancel(&l.phase) }

// onPhaseDeadline is the deadline of l's set-up or of its close: an
// accepted link not up in time fails, a closing one that lingered long
// enough is finished. It runs from the clock, outside any completion loop.
func (l *link) onPhaseDeadline(now time.Time) {
	switch l.life.State() {
	case lifecycle.Connecting:
		if l.setupStats == nil {
			return
		}
		l.setupStats.timedOut.Add(1)
		// The owner drops it (setupFailed), which counts it as failed.
		l.fail(fmt.Errorf("%w: the peer did not complete the handshake in time", os.ErrDeadlineExceeded))
	case lifecycle.Draining:
		if !l.lingerExpired(now) && l.life.State() == lifecycle.Draining {
			l.eng.clock.at(&l.phase, l.life.LingerUntil)
		}
	}
}
