package netio

import (
	"errors"
	"net"
)

// Misuse that netio catches instead of panicking deep inside or handing
// out stale bytes.

// errZeroConn is the error of every call on a Conn that Dial, DialContext
// or Accept did not make (the zero Conn, a nil *Conn).
var errZeroConn = errors.New("netio: Conn not made by Dial, DialContext or Accept")

// ok reports whether c was made by Dial or Accept, as net's conn.ok does.
func (c *Conn) ok() bool { return c != nil && c.link != nil }

// zeroError is the error of op on a Conn that is not ok.
func zeroError(op string) error {
	return &net.OpError{Op: op, Net: "netio", Err: errZeroConn}
}

// usedAfterRelease is what Bytes panics with after Release: the buffer
// may hold another message by then, or be filling with one.
const usedAfterRelease = "netio: Message used after Release"

// released reports whether m has been released, where what holds its
// bytes can tell: every Message but the zero one and a subscription's
// message too large for its arena (whose bytes are its own and stay
// valid).
func (m Message) released() bool {
	switch {
	case m.own == nil:
		return false
	case m.slot >= 0:
		return (*receiver)(m.own).q.lending.isBack(m.slot, m.gen, m.idx)
	case m.slot == slotChunk:
		return (*chunk)(m.own).isBack(m.gen, m.idx)
	}
	return (*spareBuf)(m.own).gen.Load() != m.gen
}

// settable is nil when c's deadlines may be set: c was made by Dial or
// Accept and is not closed (net's conns fail then with ErrClosed too).
func (c *Conn) settable() error {
	switch {
	case !c.ok():
		return zeroError("set")
	case c.closed.Load():
		return c.opError("set", net.ErrClosed)
	}
	return nil
}

// nilOption is the error for a nil Option, the i-th of its call.
func nilOption(i int) error { return invalid("option %d is nil", i) }
