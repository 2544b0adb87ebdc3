package netio

import (
	"encoding/binary"
	"fmt"
)

// A page is what a HighThroughput connection sends: the 16-byte header
// (kind kindPage) followed by records, each an 8-byte little-endian length
// and that many bytes:
//
//	header{kind: kindPage, fragLen: payload bytes, msgLen: continuation}
//	[continuation bytes][len][msg][len][msg]...
//
// A message larger than what is left of a page goes on in the next pages.
// The header's msgLen field then counts the bytes at the start of the page
// that continue the previous page's last message, so a receiver can check
// every page against the lengths it has read so far: a length that lies
// shows up at the next page boundary at the latest. A length prefix never
// straddles two pages; a page with less than prefixSize bytes left is sent
// as it is.
const prefixSize = 8

// cursor walks the messages of received buffers in the reading goroutine:
// the records of pages (HighThroughput) or the fragments of messages
// (LowLatency, where the header gives the message length).
type cursor struct {
	buf      []byte // payload of the buffer being read
	off      int    // next unread byte of buf
	left     uint64 // bytes of the current message not yet read
	inMsg    bool   // at a message (possibly empty) whose bytes start at off
	prefixed bool   // pages: records carry their own length
	max      uint64 // largest message accepted
}

// enter starts reading a new buffer: payload is its data, h its header.
// The reactor has checked the header against the completion already.
func (c *cursor) enter(payload []byte, h header) error {
	c.buf, c.off = payload, 0
	if !c.prefixed {
		// A fragment: the reactor checked it continues the current
		// message or starts one.
		if !c.inMsg {
			c.inMsg, c.left = true, h.msgLen
		}
		return nil
	}
	want := uint64(0)
	if c.inMsg {
		want = min(c.left, uint64(len(payload)))
	}
	if h.msgLen != want {
		if c.inMsg {
			return fmt.Errorf("%w: page continues %d bytes of a message with %d bytes left", ErrProtocol, h.msgLen, c.left)
		}
		return fmt.Errorf("%w: page continues %d bytes of no message", ErrProtocol, h.msgLen)
	}
	if c.inMsg && c.left > uint64(len(payload)) && len(payload) == 0 {
		return fmt.Errorf("%w: empty page inside a message", ErrProtocol)
	}
	return nil
}

// begin reads the next record's length; the cursor is between messages
// and buf has bytes left.
func (c *cursor) begin() error {
	rest := len(c.buf) - c.off
	if rest < prefixSize {
		return fmt.Errorf("%w: page ends with %d bytes of a length prefix", ErrProtocol, rest)
	}
	n := binary.LittleEndian.Uint64(c.buf[c.off:])
	if n > c.max {
		return fmt.Errorf("%w: peer sent %d bytes, limit %d", ErrMessageTooLarge, n, c.max)
	}
	c.off += prefixSize
	c.inMsg, c.left = true, n
	return nil
}

// record is the fast path of begin, chunk and consume together: the next
// record of a page when it lies whole in the page and is within the
// limit. It reports false, changing nothing, for anything else.
func (c *cursor) record() ([]byte, bool) {
	if !c.prefixed || c.inMsg || len(c.buf)-c.off < prefixSize {
		return nil, false
	}
	n := binary.LittleEndian.Uint64(c.buf[c.off:])
	start := c.off + prefixSize
	if n > uint64(len(c.buf)-start) || n > c.max {
		return nil, false
	}
	end := start + int(n)
	c.off = end
	return c.buf[start:end:end], true
}

// ready reports whether bytes of the current message (or an empty
// message) are at hand in this buffer.
func (c *cursor) ready() bool {
	return c.inMsg && (c.left == 0 || c.off < len(c.buf))
}

// more reports whether the buffer holds another record to begin.
func (c *cursor) more() bool { return c.prefixed && !c.inMsg && c.off < len(c.buf) }

// chunk is the current message's bytes in this buffer.
func (c *cursor) chunk() []byte {
	end := len(c.buf)
	if rest := uint64(end - c.off); c.left < rest {
		end = c.off + int(c.left)
	}
	return c.buf[c.off:end:end]
}

// consume moves past k bytes of the current message.
func (c *cursor) consume(k int) {
	c.off += k
	c.left -= uint64(k)
	if c.left == 0 {
		c.inMsg = false
	}
}

// finish ends an empty message.
func (c *cursor) finish() { c.inMsg = false }

// pageWriter lays records into pages; it is the sending half of cursor, kept
// apart from the connection so that tests and the fuzz target can build
// pages the way a Conn does.
type pageWriter struct {
	page []byte // the page being filled, header included
	off  int    // bytes used, header included
	cont uint64 // bytes at the start of the page continuing a message
}

// room is how many bytes the page still takes.
func (w *pageWriter) room() int { return len(w.page) - w.off }

// start begins a page in buf, continuing cont bytes of a message.
func (w *pageWriter) start(buf []byte, cont uint64) {
	w.page, w.off, w.cont = buf, headerSize, cont
}

// putPrefix writes a record's length; room() >= prefixSize.
func (w *pageWriter) putPrefix(n int) {
	binary.LittleEndian.PutUint64(w.page[w.off:], uint64(n))
	w.off += prefixSize
}

// put copies as much of p as fits and returns how much did.
func (w *pageWriter) put(p []byte) int {
	k := copy(w.page[w.off:], p)
	w.off += k
	return k
}

// seal writes the header and returns the page's length on the wire.
func (w *pageWriter) seal() int {
	putHeader(w.page, header{kind: kindPage, fragLen: uint32(w.off - headerSize), msgLen: w.cont})
	n := w.off
	w.page, w.off, w.cont = nil, 0, 0
	return n
}
