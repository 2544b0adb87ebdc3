package netio

import (
	"encoding/binary"
	"fmt"
)

// pages is the HighThroughput framing. A page is the 16-byte header (kind
// kindPage) followed by records, each an 8-byte little-endian length and
// that many bytes:
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
type pages struct{}

const prefixSize = 8

func (pages) writer(payloadMax int) frameWriter { return &pageWriter{payloadMax: payloadMax} }
func (pages) checker(uint64) frameCheck         { return pageCheck{} }
func (pages) reader() frameReader               { return pageReader{} }

// pageWriter lays records into pages.
type pageWriter struct {
	payloadMax int
	page       []byte // the page being filled, header included
	off        int    // bytes used, header included
	cont       uint64 // bytes at the start of the page continuing a message
}

// room is how many bytes the page still takes.
func (w *pageWriter) room() int { return len(w.page) - w.off }

func (w *pageWriter) open(buf []byte, cont uint64) {
	w.page, w.off, w.cont = buf[:headerSize+w.payloadMax], headerSize, cont
}

// begin starts a record in the open page unless it does not fit there
// while it would fit a page of its own; a message larger than a page
// starts where it is and goes on in the next.
func (w *pageWriter) begin(n int) bool {
	need := prefixSize + n
	if w.room() < need && need <= w.payloadMax {
		return false
	}
	w.putPrefix(n)
	return true
}

// putPrefix writes a record's length; room() >= prefixSize.
func (w *pageWriter) putPrefix(n int) {
	binary.LittleEndian.PutUint64(w.page[w.off:], uint64(n))
	w.off += prefixSize
}

func (w *pageWriter) put(p []byte) int {
	k := copy(w.page[w.off:], p)
	w.off += k
	return k
}

// appendWhole takes a message that fits the open page with room to spare
// for the next one's length: then the page need not be sealed after it.
func (w *pageWriter) appendWhole(p []byte) bool {
	if w.room() < 2*prefixSize+len(p) {
		return false
	}
	w.putPrefix(len(p))
	w.off += copy(w.page[w.off:], p)
	return true
}

func (w *pageWriter) full() bool { return w.room() < prefixSize }

func (w *pageWriter) seal() int {
	putHeader(w.page, header{kind: kindPage, fragLen: uint32(w.off - headerSize), msgLen: w.cont})
	n := w.off
	w.page, w.off, w.cont = nil, 0, 0
	return n
}

func (w *pageWriter) buffers(n int, open bool) int {
	need := prefixSize + n
	if open {
		room := w.room()
		if need <= room {
			return 0
		}
		if need > w.payloadMax {
			need -= room // a large message starts in the open page
		}
	}
	return (need + w.payloadMax - 1) / w.payloadMax
}

func (w *pageWriter) lazy() bool { return true }

// pageCheck vets a page's header on the reactor; its records are checked
// by the reader, which decodes them.
type pageCheck struct{}

func (pageCheck) check(h header) error {
	switch {
	case h.kind != kindPage:
		return fmt.Errorf("%w: low-latency message on a %v connection", ErrProtocol, HighThroughput)
	case h.msgLen > uint64(h.fragLen):
		return fmt.Errorf("%w: page continues %d bytes but holds %d", ErrProtocol, h.msgLen, h.fragLen)
	}
	return nil
}

// pageReader walks the records of pages.
type pageReader struct{}

// enter checks that the page continues exactly what the previous one left
// of its last message.
func (pageReader) enter(c *cursor, payload []byte, h header) error {
	c.buf, c.off = payload, 0
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

// begin reads the next record's length.
func (pageReader) begin(c *cursor) error {
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

// record is the next record when it lies whole in the page and is within
// the limit.
func (pageReader) record(c *cursor) ([]byte, bool) {
	if c.inMsg || len(c.buf)-c.off < prefixSize {
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
