package netio

import (
	"net"
	"sync/atomic"
	"time"
)

// linkState is where a link is in its life:
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
type linkState uint8

const (
	linkConnecting linkState = iota
	linkOpen
	linkEnded
	linkDraining
	linkClosed
)

var linkStateNames = [...]string{"connecting", "open", "ended", "draining", "closed"}

func (s linkState) String() string { return linkStateNames[s] }

// linkMoves lists the transitions of the diagram.
var linkMoves = [...][]linkState{
	linkConnecting: {linkOpen, linkEnded, linkClosed},
	linkOpen:       {linkEnded, linkDraining},
	linkEnded:      {linkClosed},
	linkDraining:   {linkClosed},
	linkClosed:     nil,
}

// lifecycle is a link's state and how its end is told to the goroutines
// that use it. The state moves on the reactor only; done, ended and err are
// what other goroutines read: err is written before done is closed and
// ended set, so a reader that sees either may read err.
type lifecycle struct {
	state       linkState // reactor only
	wasOpen     bool      // reached open: the endpoint must be shut down
	lingerUntil time.Time // draining: when to stop waiting for the peer
	over        bool      // draining, and the close is over: it finishes after the loop that found it

	err      error
	ended    atomic.Bool   // done is closed: a cheaper test for the fast paths
	done     chan struct{} // closed when the link ends, for whatever reason
	released chan struct{} // closed once the endpoint and memory are freed
}

func newLifecycle() lifecycle {
	return lifecycle{done: make(chan struct{}), released: make(chan struct{})}
}

// move changes the state if the diagram allows it and reports whether it
// did. On the reactor.
func (l *lifecycle) move(to linkState) bool {
	for _, s := range linkMoves[l.state] {
		if s == to {
			l.state = to
			if to == linkOpen {
				l.wasOpen = true
			}
			return true
		}
	}
	return false
}

// end records why the link ended and tells every waiter; only the first
// reason counts. On the reactor.
func (l *lifecycle) end(err error) {
	if l.ended.Load() {
		return
	}
	l.err = err
	l.ended.Store(true)
	close(l.done)
}

// drain starts an orderly close that gives up at the deadline.
func (l *lifecycle) drain(linger time.Duration) bool {
	if !l.move(linkDraining) {
		return false
	}
	l.lingerUntil = time.Now().Add(linger)
	return true
}

// release marks everything freed: a link that closed without an error
// ends with net.ErrClosed.
func (l *lifecycle) release() {
	l.state = linkClosed
	l.end(net.ErrClosed)
	close(l.released)
}

// accepting reports whether received buffers are still processed: the
// link is open, or sending the rest of what was written.
func (l *lifecycle) accepting() bool {
	return (l.state == linkOpen || l.state == linkDraining) && !l.ended.Load() && !l.over
}

// closedByOwner reports whether the owner closed the link: nobody reads
// what arrives any more.
func (l *lifecycle) closedByOwner() bool { return l.state == linkDraining }
