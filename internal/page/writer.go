package page

import (
	"encoding/binary"

	"github.com/netio-go/netio/internal/wire"
)

// Writer lays records into pages. Its methods run in one goroutine at a
// time (the sender's, under its send gate).
type Writer struct {
	f          Format
	payloadMax int
	page       []byte // the page being filled, header included
	off        int    // bytes used, header included
	cont       uint64 // bytes at the start of the page continuing a message
	tag, seq   uint64 // of the next record, on tagged pages
}

// Format is the format w writes.
func (w *Writer) Format() Format { return w.f }

// PayloadMax is the most bytes a page holds after its header.
func (w *Writer) PayloadMax() int { return w.payloadMax }

// Room is how many bytes the open page still takes.
func (w *Writer) Room() int { return len(w.page) - w.off }

// Used is how many bytes of the open page are used, header included.
func (w *Writer) Used() int { return w.off }

// Open starts filling buf, a whole send buffer; cont is how many bytes at
// its start continue the previous page's message.
func (w *Writer) Open(buf []byte, cont uint64) {
	w.page, w.off, w.cont = buf[:wire.HeaderSize+w.payloadMax], wire.HeaderSize, cont
}

// Begin starts a record of n bytes in the open page unless it does not fit
// there while it would fit a page of its own, and then reports false,
// writing nothing; a message larger than a page starts where it is and
// goes on in the next.
func (w *Writer) Begin(n int) bool {
	need := w.f.Prefix + n
	if w.Room() < need && need <= w.payloadMax {
		return false
	}
	w.PutPrefix(n)
	return true
}

// PutPrefix writes what comes before a record's message: its length, and
// on tagged pages its tag and sequence number. Room() >= Prefix.
func (w *Writer) PutPrefix(n int) {
	b := w.page[w.off:]
	binary.LittleEndian.PutUint64(b, uint64(n))
	if w.f.Prefix == TaggedPrefixSize {
		binary.LittleEndian.PutUint64(b[8:], w.tag)
		binary.LittleEndian.PutUint64(b[16:], w.seq)
	}
	w.off += w.f.Prefix
}

// SetRecord gives the tag and sequence number of the next record.
func (w *Writer) SetRecord(tag, seq uint64) { w.tag, w.seq = tag, seq }

// Put copies as much of p into the open page as fits and returns how much
// it copied.
func (w *Writer) Put(p []byte) int {
	k := copy(w.page[w.off:], p)
	w.off += k
	return k
}

// Skip counts the next k bytes of the open page (k <= Room()) as written
// without writing them: the caller sends them from its own memory, after
// the page's bytes.
func (w *Writer) Skip(k int) { w.off += k }

// AppendWhole is Begin and Put for a message that fits the open page with
// room to spare for the next one's length: then the page need not be
// sealed after it. It reports false, writing nothing, for anything else.
func (w *Writer) AppendWhole(p []byte) bool {
	off := w.off
	if len(w.page)-off < 2*w.f.Prefix+len(p) {
		return false
	}
	if w.f.Prefix != PrefixSize {
		w.PutPrefix(len(p))
		w.off += copy(w.page[w.off:], p)
		return true
	}
	b := w.page[off:]
	binary.LittleEndian.PutUint64(b, uint64(len(p)))
	w.off = off + PrefixSize + copy(b[PrefixSize:], p)
	return true
}

// AppendAll is AppendWhole for the leading messages of msgs, each at most
// max bytes, that fit the open page; it returns how many it took and their
// bytes. The page's position stays in locals through the loop, not stored
// back per message.
func (w *Writer) AppendAll(msgs [][]byte, max int) (n int, bytes uint64) {
	if w.f.Prefix != PrefixSize {
		for _, p := range msgs {
			if len(p) > max || !w.AppendWhole(p) {
				break
			}
			n++
			bytes += uint64(len(p))
		}
		return n, bytes
	}
	page, off := w.page, w.off
	for _, p := range msgs {
		if len(p) > max || len(page)-off < 2*PrefixSize+len(p) {
			break
		}
		binary.LittleEndian.PutUint64(page[off:], uint64(len(p)))
		off += PrefixSize + copy(page[off+PrefixSize:], p)
		n++
		bytes += uint64(len(p))
	}
	w.off = off
	return n, bytes
}

// Full reports whether the open page must go out now, after a message
// ended in it: it has no room for another record's prefix.
func (w *Writer) Full() bool { return w.Room() < w.f.Prefix }

// Seal ends the open page, writing its header, and returns its length on
// the wire.
func (w *Writer) Seal() int {
	wire.PutHeader(w.page, wire.Header{Kind: w.f.Kind, FragLen: uint32(w.off - wire.HeaderSize), MsgLen: w.cont})
	n := w.off
	w.page, w.off, w.cont = nil, 0, 0
	return n
}

// Buffers is how many pages, besides what is left of the open one (if
// open), a message of n bytes needs.
func (w *Writer) Buffers(n int, open bool) int {
	need := w.f.Prefix + n
	if open {
		room := w.Room()
		if need <= room {
			return 0
		}
		if need > w.payloadMax {
			need -= room // a large message starts in the open page
		}
	}
	return (need + w.payloadMax - 1) / w.payloadMax
}

// Lazy reports whether pages wait to fill (and so need flushing).
func (w *Writer) Lazy() bool { return !w.f.Packed }

// Packs reports whether the sender's packing rule seals pages.
func (w *Writer) Packs() bool { return w.f.Packed }
