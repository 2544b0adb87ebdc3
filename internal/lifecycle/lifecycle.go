// Package lifecycle is where a link is in its life and how its end is
// told to the goroutines that use it.
package lifecycle

import (
	"net"
	"sync/atomic"
	"time"
)

// State is where a link is in its life:
//
//	                  up                    close
//	connecting ──────────────► open ───────────────────► draining
//	    │                        │                          │
//	    │ fail                   │ fail (error, peer gone)  │ all sent, linger
//	    ▼                        ▼                          │ over, or fail
//	  ended ◄────────────────────┘                          │
//	    │                                                   │
//	    │ close (the owner lets go)                         ▼
//	    └──────────────────────────────────────────────► closed
//
// connecting can also go straight to closed when its owner gives up (a
// Dial whose context ended). Only closed releases the endpoint and memory:
// an ended link keeps its received data readable until its owner closes
// it, and a draining one sends what was written before it lets go.
type State uint8

const (
	Connecting State = iota
	Open
	Ended
	Draining
	Closed
)

var stateNames = [...]string{"connecting", "open", "ended", "draining", "closed"}

func (s State) String() string { return stateNames[s] }

// moves lists the transitions of the diagram.
var moves = [...][]State{
	Connecting: {Open, Ended, Closed},
	Open:       {Ended, Draining},
	Ended:      {Closed},
	Draining:   {Closed},
	Closed:     nil,
}

// Life is a link's state and how its end is told to the goroutines
// that use it. The state moves on the reactor only; done, ended and err are
// what other goroutines read: err is written before done is closed and
// ended set, so a reader that sees either may read err.
type Life struct {
	state       State     // reactor only
	wasOpen     bool      // reached open: the endpoint must be shut down
	LingerUntil time.Time // draining: when to stop waiting for the peer
	Over        bool      // draining, and the close is over: it finishes after the loop that found it

	err      error
	ended    atomic.Bool   // done is closed: a cheaper test for the fast paths
	done     chan struct{} // closed when the link ends, for whatever reason
	released chan struct{} // closed once the endpoint and memory are freed
}

func New() Life {
	return Life{done: make(chan struct{}), released: make(chan struct{})}
}

// State is where the link is. On the reactor.
func (l *Life) State() State { return l.state }

// WasOpen reports whether the link reached Open: its endpoint must be shut
// down. On the reactor.
func (l *Life) WasOpen() bool { return l.wasOpen }

// Ended reports whether the link has ended (Done is closed). Any goroutine.
func (l *Life) Ended() bool { return l.ended.Load() }

// Err is why the link ended, once Ended says so. Any goroutine.
func (l *Life) Err() error { return l.err }

// Done is closed when the link ends, for whatever reason.
func (l *Life) Done() <-chan struct{} { return l.done }

// Released is closed once the endpoint and memory are freed.
func (l *Life) Released() <-chan struct{} { return l.released }

// Move changes the state if the diagram allows it and reports whether it
// did. On the reactor.
func (l *Life) Move(to State) bool {
	for _, s := range moves[l.state] {
		if s == to {
			l.state = to
			if to == Open {
				l.wasOpen = true
			}
			return true
		}
	}
	return false
}

// End records why the link ended and tells every waiter; only the first
// reason counts. On the reactor.
func (l *Life) End(err error) {
	if l.ended.Load() {
		return
	}
	l.err = err
	l.ended.Store(true)
	close(l.done)
}

// Drain starts an orderly close that gives up at the deadline.
func (l *Life) Drain(linger time.Duration) bool {
	if !l.Move(Draining) {
		return false
	}
	l.LingerUntil = time.Now().Add(linger)
	return true
}

// Release marks everything freed: a link that closed without an error
// ends with net.ErrClosed.
func (l *Life) Release() {
	l.state = Closed
	l.End(net.ErrClosed)
	close(l.released)
}

// Accepting reports whether received buffers are still processed: the
// link is open, or sending the rest of what was written.
func (l *Life) Accepting() bool {
	return (l.state == Open || l.state == Draining) && !l.ended.Load() && !l.Over
}

// ClosedByOwner reports whether the owner closed the link: nobody reads
// what arrives any more.
func (l *Life) ClosedByOwner() bool { return l.state == Draining }
