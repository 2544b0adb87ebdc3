package netio

import (
	"encoding/binary"
	"fmt"

	"github.com/netio-go/netio/internal/wire"
)

// pages is the HighThroughput framing. A page is the 16-byte header (kind
// wire.KindPage) followed by records, each an 8-byte little-endian length and
// that many bytes:
//
//	header{kind: wire.KindPage, fragLen: payload bytes, msgLen: continuation}
//	[continuation bytes][len][msg][len][msg]...
//
// A message larger than what is left of a page goes on in the next pages.
// The header's msgLen field then counts the bytes at the start of the page
// that continue the previous page's last message, so a receiver can check
// every page against the lengths it has read so far: a length that lies
// shows up at the next page boundary at the latest. A length prefix never
// straddles two pages; a page with less than prefixSize bytes left is sent
// as it is.
//
// Tagged pages (kind wire.KindTagged) are the pages of publish/subscribe: each
// record's length is followed by the message's tag and its sequence number,
// both 8 bytes little-endian, before the message:
//
//	[continuation bytes][len][tag][seq][msg][len][tag][seq][msg]...
//
// LowLatency connections send the same pages as HighThroughput ones, and
// publishers to LowLatency subscribers the same tagged pages, but sealed by
// the packing rule (packing.go) instead of when full or flushed.
type pages struct {
	kind   uint8
	prefix int  // bytes before a record's message
	packed bool // sealed by the packing rule, not left to fill
}

const (
	prefixSize       = 8                  // a record's length
	taggedPrefixSize = prefixSize + 8 + 8 // and its tag and sequence number
)

// plainPages is the framing of HighThroughput connections.
var plainPages = pages{kind: wire.KindPage, prefix: prefixSize}

// packedPages is the framing of LowLatency connections.
var packedPages = pages{kind: wire.KindPage, prefix: prefixSize, packed: true}

// taggedPages is the framing of publish/subscribe links, packed to a
// LowLatency subscriber.
func taggedPages(packed bool) pages {
	return pages{kind: wire.KindTagged, prefix: taggedPrefixSize, packed: packed}
}

// pad is what a page holds besides one message: its header and the
// message's prefix. A page's buffer is Config.BufferSize plus pad
// (bufferFor), so that a message of BufferSize bytes travels whole in one
// page. Sized at BufferSize, a page of 1 MiB took 1 MiB - 24 bytes of a
// 1 MiB message and the next page the rest, and the reader joined the two
// by a copy (HT 1 MiB at 0.72x bare libfabric, cross-process).
func (f pages) pad() int { return wire.HeaderSize + f.prefix }

// bufferFor is the size of the buffers that carry size bytes of messages
// in framing f: with pages, size plus what a page holds besides one
// message, up to the largest buffer (at MaxBufferSize a message that large
// is cut in two, as it always was).
func bufferFor(f framing, size int) int {
	if p, ok := f.(interface{ pad() int }); ok {
		return min(size+p.pad(), maxBufferSize)
	}
	return size
}

func (f pages) writer(payloadMax int) frameWriter { return &pageWriter{f: f, payloadMax: payloadMax} }
func (f pages) checker(uint64) frameCheck         { return pageCheck{kind: f.kind} }
func (f pages) reader() frameReader               { return pageReader{prefix: f.prefix} }

// pageWriter lays records into pages.
type pageWriter struct {
	f          pages
	payloadMax int
	page       []byte // the page being filled, header included
	off        int    // bytes used, header included
	cont       uint64 // bytes at the start of the page continuing a message
	tag, seq   uint64 // of the next record, on tagged pages
}

// room is how many bytes the page still takes.
func (w *pageWriter) room() int { return len(w.page) - w.off }

func (w *pageWriter) open(buf []byte, cont uint64) {
	w.page, w.off, w.cont = buf[:wire.HeaderSize+w.payloadMax], wire.HeaderSize, cont
}

// begin starts a record in the open page unless it does not fit there
// while it would fit a page of its own; a message larger than a page
// starts where it is and goes on in the next.
func (w *pageWriter) begin(n int) bool {
	need := w.f.prefix + n
	if w.room() < need && need <= w.payloadMax {
		return false
	}
	w.putPrefix(n)
	return true
}

// putPrefix writes what comes before a record's message: its length, and
// on tagged pages its tag and sequence number. room() >= prefix.
func (w *pageWriter) putPrefix(n int) {
	b := w.page[w.off:]
	binary.LittleEndian.PutUint64(b, uint64(n))
	if w.f.prefix == taggedPrefixSize {
		binary.LittleEndian.PutUint64(b[8:], w.tag)
		binary.LittleEndian.PutUint64(b[16:], w.seq)
	}
	w.off += w.f.prefix
}

// setRecord gives the tag and sequence number of the next record.
func (w *pageWriter) setRecord(tag, seq uint64) { w.tag, w.seq = tag, seq }

func (w *pageWriter) put(p []byte) int {
	k := copy(w.page[w.off:], p)
	w.off += k
	return k
}

// appendWhole takes a message that fits the open page with room to spare
// for the next one's length: then the page need not be sealed after it.
func (w *pageWriter) appendWhole(p []byte) bool {
	off := w.off
	if len(w.page)-off < 2*w.f.prefix+len(p) {
		return false
	}
	if w.f.prefix != prefixSize {
		w.putPrefix(len(p))
		w.off += copy(w.page[w.off:], p)
		return true
	}
	b := w.page[off:]
	binary.LittleEndian.PutUint64(b, uint64(len(p)))
	w.off = off + prefixSize + copy(b[prefixSize:], p)
	return true
}

// appendAll is appendWhole for the leading messages of msgs, each at most
// max bytes, that fit the open page; it returns how many it took and
// their bytes. With the page's position in locals, a batch of 64 B
// messages no longer stores it back per message: see writeBatch.
func (w *pageWriter) appendAll(msgs [][]byte, max int) (n int, bytes uint64) {
	if w.f.prefix != prefixSize {
		for _, p := range msgs {
			if len(p) > max || !w.appendWhole(p) {
				break
			}
			n++
			bytes += uint64(len(p))
		}
		return n, bytes
	}
	page, off := w.page, w.off
	for _, p := range msgs {
		if len(p) > max || len(page)-off < 2*prefixSize+len(p) {
			break
		}
		binary.LittleEndian.PutUint64(page[off:], uint64(len(p)))
		off += prefixSize + copy(page[off+prefixSize:], p)
		n++
		bytes += uint64(len(p))
	}
	w.off = off
	return n, bytes
}

func (w *pageWriter) full() bool { return w.room() < w.f.prefix }

func (w *pageWriter) seal() int {
	wire.PutHeader(w.page, wire.Header{Kind: w.f.kind, FragLen: uint32(w.off - wire.HeaderSize), MsgLen: w.cont})
	n := w.off
	w.page, w.off, w.cont = nil, 0, 0
	return n
}

func (w *pageWriter) buffers(n int, open bool) int {
	need := w.f.prefix + n
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

func (w *pageWriter) lazy() bool { return !w.f.packed }

func (w *pageWriter) packs() bool { return w.f.packed }

// pageCheck vets a page's header on the reactor; its records are checked
// by the reader, which decodes them.
type pageCheck struct{ kind uint8 }

func (p pageCheck) check(h wire.Header) error {
	switch {
	case h.Kind != p.kind && p.kind == wire.KindPage:
		return fmt.Errorf("%w: publish/subscribe page on a connection", ErrProtocol)
	case h.Kind != p.kind:
		return fmt.Errorf("%w: message of kind %d on a publish/subscribe link", ErrProtocol, h.Kind)
	case h.MsgLen > uint64(h.FragLen):
		return fmt.Errorf("%w: page continues %d bytes but holds %d", ErrProtocol, h.MsgLen, h.FragLen)
	}
	return nil
}

// pageReader walks the records of pages.
type pageReader struct{ prefix int }

// enter checks that the page continues exactly what the previous one left
// of its last message.
func (pageReader) enter(c *cursor, payload []byte, h wire.Header) error {
	c.buf, c.off = payload, 0
	want := uint64(0)
	if c.inMsg {
		want = min(c.left, uint64(len(payload)))
	}
	if h.MsgLen != want {
		if c.inMsg {
			return fmt.Errorf("%w: page continues %d bytes of a message with %d bytes left", ErrProtocol, h.MsgLen, c.left)
		}
		return fmt.Errorf("%w: page continues %d bytes of no message", ErrProtocol, h.MsgLen)
	}
	if c.inMsg && c.left > uint64(len(payload)) && len(payload) == 0 {
		return fmt.Errorf("%w: empty page inside a message", ErrProtocol)
	}
	return nil
}

// begin reads the next record's length (and tag and sequence number).
func (r pageReader) begin(c *cursor) error {
	rest := len(c.buf) - c.off
	if rest < r.prefix {
		return fmt.Errorf("%w: page ends with %d bytes of a length prefix", ErrProtocol, rest)
	}
	n := binary.LittleEndian.Uint64(c.buf[c.off:])
	if n > c.max {
		return fmt.Errorf("%w: peer sent %d bytes, limit %d", ErrMessageTooLarge, n, c.max)
	}
	r.tagOf(c)
	c.off += r.prefix
	c.inMsg, c.left = true, n
	return nil
}

// tagOf reads a tagged record's tag and sequence number into c.
func (r pageReader) tagOf(c *cursor) {
	if r.prefix == taggedPrefixSize {
		c.tag = binary.LittleEndian.Uint64(c.buf[c.off+8:])
		c.seq = binary.LittleEndian.Uint64(c.buf[c.off+16:])
	}
}

// records is record for as many of the next records as dst takes, into
// dst, with the cursor in locals: it returns how many it took and their
// bytes. Untagged pages only (tagged ones go record by record).
func (r pageReader) records(c *cursor, dst [][]byte) (n int, bytes uint64) {
	if c.inMsg || r.prefix != prefixSize {
		return 0, 0
	}
	buf, off, limit := c.buf, c.off, c.max
	for n < len(dst) && len(buf)-off >= prefixSize {
		m := binary.LittleEndian.Uint64(buf[off:])
		start := off + prefixSize
		if m > uint64(len(buf)-start) || m > limit {
			break
		}
		off = start + int(m)
		dst[n] = buf[start:off:off]
		n++
		bytes += m
	}
	c.off = off
	return n, bytes
}

// record is the next record when it lies whole in the page and is within
// the limit.
func (r pageReader) record(c *cursor) ([]byte, bool) {
	if c.inMsg || len(c.buf)-c.off < r.prefix {
		return nil, false
	}
	n := binary.LittleEndian.Uint64(c.buf[c.off:])
	start := c.off + r.prefix
	if n > uint64(len(c.buf)-start) || n > c.max {
		return nil, false
	}
	r.tagOf(c)
	end := start + int(n)
	c.off = end
	return c.buf[start:end:end], true
}
