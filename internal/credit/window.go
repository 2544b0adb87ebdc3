// Package credit is one connection's flow control, with no I/O.
package credit

import (
	"fmt"

	"github.com/netio-go/netio/internal/wire"
)

// Window is one connection's flow control, with no I/O: the numbers
// that keep a sender from ever sending to a peer that has no receive
// buffer posted for it (which verbs turns into an error, not a wait).
//
// Each side posts receive buffers and tells the peer how many at connect.
// A credit is one such buffer of the peer's: every send takes one. When a
// side has consumed a buffer and posted it again, it owes the peer that
// credit, and returns what it owes in the header of its next send, or in
// an explicit credit message when it has nothing to send.
//
// The invariant that makes this deadlock-free: a data send never takes the
// last credit. One always stays back, so that a side can still return the
// credits it owes (or send FIN) when its data has used up the rest: two
// sides that each wait for the other's credits would otherwise both wait.
//
// All methods run on the reactor.
type Window struct {
	peerWindow int // buffers the peer posted for us at connect: the most we may hold
	ourWindow  int // buffers we post for the peer
	credits    int // sends we may still make
	owed       int // buffers we re-posted and have not told the peer about
	quiet      int // of owed, at most: buffers that held explicit credit returns
	peerHeld   int // credits the peer holds on us, as far as we know
}

// maxGive is the most credits one header carries (a uint16).
const maxGive = 0xffff

// reserveForControl is how many credits a data send leaves untouched.
const reserveForControl = 1

// Reset starts a connection: the peer may use every buffer we posted, and
// we every buffer it posted.
func (w *Window) Reset(peerWindow, ourWindow int) {
	*w = Window{peerWindow: peerWindow, ourWindow: ourWindow, credits: peerWindow, peerHeld: ourWindow}
}

// Hold sets the credits we hold, within the peer's window: a window met
// mid-flow, as a test harness builds it.
func (w *Window) Hold(credits int) { w.credits = min(credits, w.peerWindow) }

// Kind says whether a send carries data, which must leave the reserve
// alone, or is a control message (a credit return, FIN), which may use it.
type Kind bool

const (
	Data    Kind = false
	Control Kind = true
)

// CanTake reports whether a send of kind k may go out now.
func (w *Window) CanTake(k Kind) bool {
	if k == Control {
		return w.credits >= 1
	}
	return w.credits >= 1+reserveForControl
}

// Take spends a credit on a send and returns the credits owed to the peer
// that its header carries back. ok is false, and nothing changes, when the
// window does not allow the send.
func (w *Window) Take(k Kind) (give uint16, ok bool) {
	if !w.CanTake(k) {
		return 0, false
	}
	g := min(w.owed, maxGive)
	w.owed -= g
	w.quiet = min(w.quiet, w.owed)
	w.peerHeld += g
	w.credits--
	return uint16(g), true
}

// Undo takes back a send that take allowed but that was not posted (a full
// queue): its credit and what it was to give back.
func (w *Window) Undo(give uint16) {
	w.owed += int(give) // quiet or not, it is owed again: at worst one message more
	w.peerHeld -= int(give)
	w.credits++
}

// Used records that the peer's send consumed one of our buffers.
func (w *Window) Used() { w.peerHeld-- }

// Give adds credits the peer returned in a header. More than its window is
// a protocol violation.
func (w *Window) Give(n uint16) error {
	if w.credits+int(n) > w.peerWindow {
		return fmt.Errorf("%w: peer returned %d credits for a window of %d", wire.ErrProtocol, w.credits+int(n), w.peerWindow)
	}
	w.credits += int(n)
	return nil
}

// Owe records n of our buffers posted again: credits the peer gets back
// with our next send.
func (w *Window) Owe(n int) { w.owed += n }

// Owing reports whether we hold credits the peer has not been given.
func (w *Window) Owing() bool { return w.owed > 0 }

// Quietly records that the peer's explicit credit return used one of our
// buffers: on its own, that buffer's credit waits for a header that goes
// anyway (see Returnable).
func (w *Window) Quietly() { w.quiet++ }

// Returnable reports whether an explicit credit message is due: enough is
// owed to be worth a message of its own (half our window), or the peer is
// about to stall for want of it, and a credit is there to send it with.
//
// A credit message costs the peer a buffer, which the peer then owes back:
// returning just that one credit the same way would cost us one, and so on
// for ever when both sides are down to their reserve (both stopped
// reading, and a heartbeat or FIN came). So the credit of a credit
// message's buffer alone is returned by a message of its own only to a
// peer left with no credit at all, by a side that keeps one after it (the
// peer then has one, and does not answer); with anything else owed, or
// two credits at least (the exchange then shrinks what is owed), it is
// returned as usual. Otherwise it rides on the next header that goes.
func (w *Window) Returnable() bool {
	return w.owed > 0 && (w.owed >= w.ourWindow/2 || w.PeerStarved()) && w.CanTake(Control) &&
		(w.owed > w.quiet || w.owed >= 2 || w.peerHeld == 0 && w.credits >= 2)
}

// PeerStarved reports whether the peer is down to its reserve: it can send
// no data until we return credit.
func (w *Window) PeerStarved() bool { return w.peerHeld < 1+reserveForControl }
