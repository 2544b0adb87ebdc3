package netio

import "github.com/netio-go/netio/internal/wire"

// A framing is how messages are laid into the buffers a link sends and
// receives. Both modes use pages (page.go: length-prefixed records, a
// message larger than what is left of a page going on in the next);
// HighThroughput pages go out when full or flushed, LowLatency ones at once
// or packed with what queued behind the sends in flight (packing.go). A
// framing has three parts, one per side that runs it:
//
//   - a frameWriter, in the writing goroutine, fills send buffers;
//   - a frameCheck, on the reactor, vets each received buffer's header
//     before anyone reads it;
//   - a frameReader, in the reading goroutine, walks the messages of the
//     buffers that passed.
//
// The connection code above them never asks which framing it has.

// frameWriter lays messages into send buffers. Its methods run under the
// send gate.
type frameWriter interface {
	// open starts filling buf, a whole send buffer; cont is how many bytes
	// at its start continue the previous buffer's message.
	open(buf []byte, cont uint64)
	// begin starts a message of n bytes in the open buffer and reports
	// true, or reports false, writing nothing, when the message has to
	// start in a fresh buffer instead.
	begin(n int) bool
	// put copies as much of p into the open buffer as fits and returns how
	// much it copied.
	put(p []byte) int
	// appendWhole is begin and put for a message that fits the open
	// buffer whole, the common case of a batching framing; it reports
	// false, writing nothing, for anything else.
	appendWhole(p []byte) bool
	// full reports whether the open buffer must go out now, after a
	// message ended in it.
	full() bool
	// seal ends the open buffer, writing its header, and returns its length
	// on the wire.
	seal() int
	// buffers is how many send buffers, besides what is left of the open
	// one (room bytes, if open), a message of n bytes needs.
	buffers(n int, open bool) int
	// lazy reports whether buffers wait to fill (and so need flushing).
	lazy() bool
	// packs reports whether the sender's packing rule seals buffers
	// (packing.go).
	packs() bool
}

// frameCheck vets received buffers on the reactor, in arrival order,
// before they reach a reader: what a peer sends is never trusted.
type frameCheck interface {
	// check is the header of a data buffer, already known to match the
	// length received; an error ends the connection.
	check(h wire.Header) error
}

// frameReader walks the messages of received buffers with a cursor, in
// the reading goroutine.
type frameReader interface {
	// enter starts reading payload, the data of a buffer with header h,
	// where the previous buffer left the cursor.
	enter(c *cursor, payload []byte, h wire.Header) error
	// begin starts the next message at c.off: the cursor is between
	// messages and the buffer has bytes left.
	begin(c *cursor) error
	// record is begin, chunk and consume together for a message that lies
	// whole in the buffer, the common case; false changes nothing.
	record(c *cursor) ([]byte, bool)
}

// framing builds the three parts for one connection.
type framing interface {
	writer(payloadMax int) frameWriter
	checker(maxRecv uint64) frameCheck
	reader() frameReader
}

// framingFor returns the framing of mode m.
func framingFor(m Mode) framing {
	if m == HighThroughput {
		return plainPages
	}
	return packedPages
}
