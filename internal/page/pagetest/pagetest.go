// Package pagetest holds what the tests of netio's page decoders share:
// Model, a plain decoder of received buffers written from the format's
// description that the decoders are held to; the fuzz input that describes
// those buffers (ParseInput); and the seed tables of the decoder targets.
package pagetest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/netio-go/netio/internal/seedcorpus"
	"github.com/netio-go/netio/internal/wire"
)

// The ways netio's reading side reads, which an input's style bits choose;
// a reader of bare pages maps them onto its own paths.
const (
	ReadMessageStyle   = iota // ReadMessage, AppendMessage for what does not fit
	NextMessageStyle          // NextMessage, holding every message to the end
	AppendMessageStyle        // AppendMessage after a prefix
	ReadStreamStyle           // Read, size+1 bytes at a time
	NextStyle                 // Next, copied at once: valid until the next read
	NextBatchStyle            // NextBatch, size+1 messages at most
	MixedStyle                // the message styles in turn, in an order size sets
	ReadStyles
)

// Model decodes received buffers the plain way, from the input's own
// bytes: the reference the decoders are held to. It applies the reactor's
// checks (header length, kind, FIN) and then the page format: the
// continuation count must be what is left of the previous page's last
// message (capped by the payload), then records follow, each an 8-byte
// length no larger than max and that many bytes, the last one possibly
// going on in the next page. With tagged set, it decodes tagged pages
// instead: a record's length is followed by its tag and
// sequence number.
type Model struct {
	Max    uint64
	Tagged bool
	Msgs   [][]byte    // whole messages
	Tags   [][2]uint64 // their tags and sequence numbers, on tagged pages
	Stream []byte      // every message byte, the unfinished message's included
	Err    error       // the first violation

	fin    bool
	inMsg  bool   // a message goes on in the next page
	left   uint64 // its bytes still to come
	cur    []byte
	curTag [2]uint64 // its tag and sequence number, on tagged pages
}

// Kind is the kind of the pages the model decodes.
func (m *Model) Kind() uint8 {
	if m.Tagged {
		return wire.KindTagged
	}
	return wire.KindPage
}

// Prefix is how many bytes come before a record's message.
func (m *Model) Prefix() int {
	if m.Tagged {
		return 24 // length, tag, sequence number
	}
	return 8 // length
}

// Continuation is what an honest sender puts in the header of the next
// page if it carries n bytes of payload.
func (m *Model) Continuation(n int) uint64 {
	if !m.inMsg {
		return 0
	}
	return min(m.left, uint64(n))
}

func (m *Model) Receive(b []byte) {
	if m.Err != nil {
		return
	}
	if len(b) < wire.HeaderSize {
		m.Err = wire.ErrProtocol
		return
	}
	h := wire.ReadHeader(b)
	p := b[wire.HeaderSize:]
	switch {
	case uint64(h.FragLen) != uint64(len(p)):
		m.Err = wire.ErrProtocol
	case h.Kind == wire.KindCredit:
	case h.Kind == wire.KindFin:
		m.fin = true
	case h.Kind != m.Kind() || m.fin:
		m.Err = wire.ErrProtocol
	default:
		m.Page(p, h.MsgLen)
	}
}

// Page decodes the payload p of a page whose header says it continues cont
// bytes of a message, after the header's checks.
func (m *Model) Page(p []byte, cont uint64) {
	if cont != m.Continuation(len(p)) || m.inMsg && len(p) == 0 {
		m.Err = wire.ErrProtocol
		return
	}
	off := 0
	if m.inMsg {
		off = m.take(p, 0, int(cont))
	}
	for off < len(p) {
		if len(p)-off < m.Prefix() {
			m.Err = wire.ErrProtocol
			return
		}
		n := binary.LittleEndian.Uint64(p[off:])
		if n > m.Max {
			m.Err = wire.ErrMessageTooLarge
			return
		}
		if m.Tagged {
			m.curTag = [2]uint64{binary.LittleEndian.Uint64(p[off+8:]), binary.LittleEndian.Uint64(p[off+16:])}
		}
		off += m.Prefix()
		m.inMsg, m.left, m.cur = true, n, []byte{}
		off = m.take(p, off, int(min(n, uint64(len(p)-off))))
	}
}

func (m *Model) take(p []byte, off, k int) int {
	m.cur = append(m.cur, p[off:off+k]...)
	m.Stream = append(m.Stream, p[off:off+k]...)
	m.left -= uint64(k)
	if m.left == 0 {
		m.Msgs = append(m.Msgs, m.cur)
		if m.Tagged {
			m.Tags = append(m.Tags, m.curTag)
		}
		m.inMsg, m.cur = false, nil
	}
	return off + k
}

// InMsg reports whether a message goes on in the next page.
func (m *Model) InMsg() bool { return m.inMsg }

// End is how reading ends after the last buffer.
func (m *Model) End() error {
	switch {
	case m.Err != nil:
		return m.Err
	case m.inMsg:
		return io.ErrUnexpectedEOF
	}
	return io.EOF
}

// ParseInput reads a decoder target's input:
//
//	[opts] [max] buffer...
//
// opts: bits 0-2 the read style (7 is MixedStyle too), bit 3 bypass (a
// page whose continuation count exceeds its payload skips the reactor's
// check, and the reader must refuse it on its own), bits 4-7 a size s
// (ReadMessage reads into 16s bytes, Read into s+1, NextBatch into s+1
// slots, and s sets MixedStyle's order), and
// whether Close comes before the held messages are released (s odd). max: the
// largest message, 4×max, 64 KiB for 0, or 1 TiB for 255 (lengths that lie
// within it must not cost what they say). Each buffer:
//
//	[ctl] [len, 2 bytes LE] payload (len bytes, or what is left)
//
// with a header made up from the payload's length and the decoder's state
// (kind page, the honest continuation count) unless ctl says otherwise:
// bit 7 set, the header is the 16 bytes before the payload, as they are
// (fewer if the input ends: a buffer shorter than a header); bit 7 clear,
// bits 0-4 are an amount d that the continuation count is off by, down if
// bit 6 is set, and bit 5 makes fragLen say 1+d bytes more than the payload.
const (
	MaxPayload = 4096 - wire.HeaderSize
	MaxBuffers = 128
)

type Input struct {
	Style, Size int
	Bypass      bool
	Max         uint64
	Bufs        [][]byte
	Model       Model
}

func ParseInput(data []byte, tagged bool) *Input {
	d := &Input{}
	d.Model.Tagged = tagged
	var opts, mx byte
	if len(data) > 0 {
		opts, data = data[0], data[1:]
	}
	if len(data) > 0 {
		mx, data = data[0], data[1:]
	}
	d.Style, d.Bypass, d.Size = min(int(opts&7), MixedStyle), opts&8 != 0, int(opts>>4)
	d.Max = 1 << 16
	switch mx {
	case 0:
	case 255:
		d.Max = 1 << 40
	default:
		d.Max = uint64(mx) * 4
	}
	d.Model.Max = d.Max
	next := func(n int) []byte {
		n = min(n, len(data))
		b := data[:n:n]
		data = data[n:]
		return b
	}
	for len(data) > 0 && len(d.Bufs) < MaxBuffers {
		ctl := next(1)[0]
		n := 0
		for i, x := range next(2) {
			n |= int(x) << (8 * i)
		}
		n = min(n, MaxPayload)
		var buf []byte
		if ctl&0x80 != 0 {
			buf = append(buf, next(wire.HeaderSize)...)
			buf = append(buf, next(n)...)
		} else {
			payload := next(n)
			h := wire.Header{Kind: d.Model.Kind(), FragLen: uint32(len(payload)), MsgLen: d.Model.Continuation(len(payload))}
			lie := uint64(ctl & 0x1f)
			if ctl&0x40 != 0 {
				h.MsgLen -= lie
			} else {
				h.MsgLen += lie
			}
			if ctl&0x20 != 0 {
				h.FragLen += 1 + uint32(lie)
			}
			buf = make([]byte, wire.HeaderSize+len(payload))
			wire.PutHeader(buf, h)
			copy(buf[wire.HeaderSize:], payload)
		}
		d.Bufs = append(d.Bufs, buf)
		d.Model.Receive(buf)
	}
	return d
}

// Seed builds an Input's bytes.
type Seed []byte

func NewSeed(style, size int, bypass bool, maxByte byte) Seed {
	opts := byte(style) | byte(size)<<4
	if bypass {
		opts |= 8
	}
	return Seed{opts, maxByte}
}

// Page adds a page with an honest header; lie bits as in the input format.
func (s Seed) Page(payload []byte, lie ...byte) Seed {
	ctl := byte(0)
	for _, l := range lie {
		ctl |= l
	}
	return append(append(s, ctl, byte(len(payload)), byte(len(payload)>>8)), payload...)
}

// Raw adds a buffer with the header as given, lying or not, and payload.
func (s Seed) Raw(h wire.Header, payload []byte) Seed {
	hb := make([]byte, wire.HeaderSize)
	wire.PutHeader(hb, h)
	s = append(s, 0x80, byte(len(payload)), byte(len(payload)>>8))
	return append(append(s, hb...), payload...)
}

// Truncated adds a buffer of n < 16 bytes, the input's last.
func (s Seed) Truncated(n int) Seed {
	return append(append(s, 0x80, 0, 0), make([]byte, n)...)
}

// Rec is a record: an 8-byte length n and body (which may be shorter).
func Rec(n int, body []byte) []byte {
	return append(binary.LittleEndian.AppendUint64(nil, uint64(n)), body...)
}

// Recs are whole records.
func Recs(msgs ...string) []byte {
	var b []byte
	for _, m := range msgs {
		b = append(b, Rec(len(m), []byte(m))...)
	}
	return b
}

func Cat(bs ...[]byte) []byte { return bytes.Join(bs, nil) }

func Fill(n int, c byte) []byte { return bytes.Repeat([]byte{c}, n) }

const (
	LieDown  = 0x40
	LieFrag  = 0x20
	MaxBy250 = 250 // max message 1000
)

// TRec is a tagged record: an 8-byte length n, tag, seq, and body (which
// may be shorter).
func TRec(n uint64, tag, seq uint64, body []byte) []byte {
	b := binary.LittleEndian.AppendUint64(nil, n)
	b = binary.LittleEndian.AppendUint64(b, tag)
	b = binary.LittleEndian.AppendUint64(b, seq)
	return append(b, body...)
}

// TRecs are whole tagged records, of tag 7 and sequence numbers from seq.
func TRecs(seq uint64, msgs ...string) []byte {
	var b []byte
	for i, m := range msgs {
		b = append(b, TRec(uint64(len(m)), 7, seq+uint64(i), []byte(m))...)
	}
	return b
}

// DecoderSeeds are the seeds of the decoders of plain pages: each ends
// the way its name says, after Msgs messages.
func DecoderSeeds() []seedcorpus.Seed {
	ht := func(style, size int) Seed { return NewSeed(style, size, false, MaxBy250) }
	split := Fill(3000, 's')
	return corpus([]seed{
		{"empty-page", ht(NextMessageStyle, 0).Page(nil), io.EOF, 0},
		{"no-pages", ht(ReadMessageStyle, 0), io.EOF, 0},
		{"records", ht(NextMessageStyle, 0).Page(Recs("a", "", "hello", string(Fill(100, 'x')))), io.EOF, 4},
		{"records-readmessage-short-buffer", ht(ReadMessageStyle, 2).Page(Recs("a", "", "hello", string(Fill(100, 'x')))), io.EOF, 4},
		{"records-read-stream", ht(ReadStreamStyle, 2).Page(Recs("abc", "", "defgh")).Page(Recs("ij")), io.EOF, 0},
		{"empty-messages-end-page", ht(NextMessageStyle, 1).Page(Recs("one", "", "")).Page(Recs("", "two")), io.EOF, 5},
		{"records-next", ht(NextStyle, 0).Page(Recs("a", "", "hello", string(Fill(100, 'x')))).Page(Recs("b")), io.EOF, 5},
		{"records-nextbatch", ht(NextBatchStyle, 2).Page(Recs("a", "", "hello", string(Fill(100, 'x')))).Page(Recs("b", "c")), io.EOF, 6},
		{"records-mixed", ht(MixedStyle, 5).Page(Recs("a", "", "hello", string(Fill(100, 'x')), "six")).Page(Recs("b", "c", "", "d", "e", "f")), io.EOF, 11},
		{"split-two-pages", ht(AppendMessageStyle, 0).Page(Cat(Recs("x"), Rec(300, Fill(100, 'm')))).Page(Cat(Fill(200, 'n'), Recs("y"))), io.EOF, 3},
		{"split-three-pages", NewSeed(NextMessageStyle, 0, false, 0).Page(Cat(Recs("x"), Rec(len(split), split[:1000]))).Page(split[1000:2000]).Page(Cat(split[2000:], Recs("end"))), io.EOF, 3},
		{"split-exact-end", ht(ReadMessageStyle, 15).Page(Rec(600, Fill(300, 'a'))).Page(Fill(300, 'b')).Page(Recs("next")), io.EOF, 2},
		{"split-next", ht(NextStyle, 0).Page(Cat(Recs("x"), Rec(300, Fill(100, 'm')))).Page(Cat(Fill(200, 'n'), Recs("y"), Rec(50, Fill(10, 'o')))).Page(Cat(Fill(40, 'p'), Recs("z"))), io.EOF, 5},
		{"split-nextbatch", ht(NextBatchStyle, 4).Page(Cat(Recs("x"), Rec(300, Fill(100, 'm')))).Page(Cat(Fill(200, 'n'), Recs("y", "w"), Rec(50, Fill(10, 'o')))).Page(Cat(Fill(40, 'p'), Recs("z"))), io.EOF, 6},
		{"split-mixed", ht(MixedStyle, 1).Page(Cat(Recs("x"), Rec(300, Fill(100, 'm')))).Page(Cat(Fill(200, 'n'), Recs("y", "w"), Rec(50, Fill(10, 'o')))).Page(Cat(Fill(40, 'p'), Recs("z", "", "q"), Rec(20, Fill(3, 'r')))).Page(Fill(17, 's')), io.EOF, 9},
		{"split-read-stream", ht(ReadStreamStyle, 6).Page(Rec(50, Fill(20, 'a'))).Page(Cat(Fill(30, 'b'), Recs("tail"))), io.EOF, 0},
		{"truncated-prefix-1", ht(ReadMessageStyle, 2).Page(Cat(Recs("ok"), []byte{1})), wire.ErrProtocol, 1},
		{"truncated-prefix-7", ht(NextMessageStyle, 0).Page(Cat(Recs("ok"), make([]byte, 7))), wire.ErrProtocol, 1},
		{"truncated-prefix-alone", ht(AppendMessageStyle, 0).Page([]byte{4, 0, 0}), wire.ErrProtocol, 0},
		{"lying-length-next-page-new", ht(NextMessageStyle, 0).Page(Rec(100, Fill(10, 'l'))).Raw(wire.Header{Kind: wire.KindPage, FragLen: 12, MsgLen: 0}, Recs("next")), wire.ErrProtocol, 0},
		{"lying-length-next-page-more", ht(ReadMessageStyle, 8).Page(Rec(100, Fill(10, 'l'))).Raw(wire.Header{Kind: wire.KindPage, FragLen: 120, MsgLen: 100}, Fill(120, 'c')), wire.ErrProtocol, 0},
		{"lying-length-end-of-stream", ht(ReadStreamStyle, 3).Page(Rec(100, Fill(10, 'l'))), io.ErrUnexpectedEOF, 0},
		{"lying-length-short", ht(NextMessageStyle, 0).Page(Rec(2, []byte("abcdef"))), wire.ErrProtocol, 1},
		{"continuation-one-more", ht(NextMessageStyle, 0).Page(Rec(100, Fill(50, 'a'))).Page(Cat(Fill(50, 'b'), Recs("c")), 1), wire.ErrProtocol, 0},
		{"continuation-one-less", ht(AppendMessageStyle, 0).Page(Rec(100, Fill(50, 'a'))).Page(Cat(Fill(50, 'b'), Recs("c")), LieDown|1), wire.ErrProtocol, 0},
		{"continuation-on-first-page", ht(NextMessageStyle, 0).Page(Cat(Fill(5, 'c'), Recs("x")), 5), wire.ErrProtocol, 0},
		{"continuation-on-first-page-after-message", ht(NextMessageStyle, 0).Page(Recs("ok")).Page(Recs("a", "b"), 8), wire.ErrProtocol, 1},
		{"continuation-on-first-page-after-message-next", ht(NextStyle, 0).Page(Recs("ok")).Page(Recs("a", "b"), 8), wire.ErrProtocol, 1},
		{"continuation-on-first-page-after-message-nextbatch", ht(NextBatchStyle, 3).Page(Recs("ok")).Page(Recs("a", "b"), 8), wire.ErrProtocol, 1},
		{"continuation-after-whole-message", ht(ReadMessageStyle, 4).Page(Recs("done")).Page(Cat(Fill(3, 'c'), Recs("x")), 3), wire.ErrProtocol, 1},
		{"empty-page-inside-message", ht(NextMessageStyle, 0).Page(Rec(100, Fill(50, 'a'))).Page(nil), wire.ErrProtocol, 0},
		{"lying-length-within-huge-maximum", NewSeed(NextMessageStyle, 0, false, 255).Page(Cat(Recs("ok"), Rec(1<<39, Fill(10, 'l')))), io.ErrUnexpectedEOF, 1},
		{"lying-length-within-huge-maximum-append", NewSeed(AppendMessageStyle, 0, false, 255).Page(Rec(1<<40, Fill(10, 'l'))), io.ErrUnexpectedEOF, 0},
		{"lying-length-within-huge-maximum-next", NewSeed(NextStyle, 0, false, 255).Page(Rec(1<<38, Fill(10, 'l'))).Page(Fill(20, 'm')), io.ErrUnexpectedEOF, 0},
		{"over-maximum", ht(ReadMessageStyle, 1).Page(Cat(Recs("ok"), Rec(1001, Fill(10, 'o')))), wire.ErrMessageTooLarge, 1},
		{"at-maximum", ht(NextMessageStyle, 0).Page(Cat(Rec(1000, Fill(1000, 'm')), Recs("ok"))), io.EOF, 2},
		{"over-maximum-huge", ht(AppendMessageStyle, 0).Page(Rec(-1, Fill(8, 'h'))), wire.ErrMessageTooLarge, 0},
		{"over-maximum-next-page", ht(NextMessageStyle, 0).Page(Recs("ok")).Page(Rec(5000, nil)), wire.ErrMessageTooLarge, 1},
		{"msglen-above-fraglen", ht(NextMessageStyle, 0).Page(Recs("ok")).Raw(wire.Header{Kind: wire.KindPage, FragLen: 5, MsgLen: 10}, Fill(5, 'x')), wire.ErrProtocol, 1},
		{"msglen-above-fraglen-reader", NewSeed(NextMessageStyle, 0, true, MaxBy250).Page(Rec(100, Fill(50, 'a'))).Raw(wire.Header{Kind: wire.KindPage, FragLen: 5, MsgLen: 50}, Fill(5, 'x')), wire.ErrProtocol, 0},
		{"fraglen-says-more", ht(ReadMessageStyle, 4).Page(Recs("ok")).Page(Recs("lie"), LieFrag), wire.ErrProtocol, 1},
		{"fraglen-says-less", ht(NextMessageStyle, 0).Page(Recs("ok")).Raw(wire.Header{Kind: wire.KindPage, FragLen: 3}, Recs("lie")), wire.ErrProtocol, 1},
		{"truncated-header", ht(NextMessageStyle, 0).Page(Recs("ok")).Truncated(8), wire.ErrProtocol, 1},
		{"data-kind", ht(NextMessageStyle, 0).Page(Recs("ok")).Raw(wire.Header{Kind: wire.KindData, Flags: wire.FlagLast, FragLen: 3, MsgLen: 3}, []byte("abc")), wire.ErrProtocol, 1},
		{"unknown-kind", ht(NextMessageStyle, 0).Raw(wire.Header{Kind: 9, FragLen: 10}, Recs("x")[:10]), wire.ErrProtocol, 0},
		{"credit-between-pages", ht(NextMessageStyle, 0).Page(Rec(20, Fill(10, 'a'))).Raw(wire.Header{Kind: wire.KindCredit, Credits: 3}, nil).Page(Fill(10, 'b')), io.EOF, 1},
		{"page-after-fin", ht(ReadStreamStyle, 0).Page(Recs("ok")).Raw(wire.Header{Kind: wire.KindFin, Flags: wire.FlagLast}, nil).Page(Recs("zombie")), wire.ErrProtocol, 0},
		{"fin-inside-message", ht(NextMessageStyle, 0).Page(Rec(20, Fill(10, 'a'))).Raw(wire.Header{Kind: wire.KindFin, Flags: wire.FlagLast}, nil), io.ErrUnexpectedEOF, 0},
	})
}

// TaggedSeeds are DecoderSeeds for tagged pages; their style bits are 0.
func TaggedSeeds() []seedcorpus.Seed {
	sub := func(size int) Seed { return NewSeed(0, size, false, MaxBy250) }
	huge := func(size int) Seed { return NewSeed(0, size, false, 255) }
	hundred := Fill(100, 'h')
	return corpus([]seed{
		{"records", sub(15).Page(TRecs(0, "a", "", "hello")).Page(TRecs(3, "b")), io.EOF, 4},
		{"records-one-at-a-time", sub(0).Page(TRecs(0, "a", "bb", "ccc")), io.EOF, 3},
		{"tags-and-seqs-extreme", sub(3).Page(Cat(TRec(1, 0, 0, []byte("z")), TRec(2, 1<<64-1, 1<<64-1, []byte("mx")), TRec(0, 1<<63, 5, nil))), io.EOF, 3},
		{"one-record-pages", sub(1).Page(TRecs(0, "one")).Page(TRecs(1, "two")).Page(TRecs(2, "three")), io.EOF, 3},
		{"split-two-pages", sub(2).Page(Cat(TRecs(0, "x"), TRec(300, 9, 1, hundred))).Page(Cat(Fill(200, 'n'), TRecs(2, "y"))), io.EOF, 3},
		{"split-three-pages", NewSeed(0, 4, false, 0).Page(TRec(3000, 1, 1, Fill(1000, 'a'))).Page(Fill(1000, 'b')).Page(Cat(Fill(1000, 'c'), TRecs(2, "end"))), io.EOF, 2},
		{"at-maximum", sub(0).Page(TRec(1000, 1, 1, Fill(1000, 'm'))), io.EOF, 1},
		{"over-maximum", sub(0).Page(Cat(TRecs(0, "ok"), TRec(1001, 1, 1, Fill(10, 'o')))), wire.ErrMessageTooLarge, 1},
		{"over-maximum-huge", sub(0).Page(TRec(1<<64-1, 1, 1, Fill(10, 'o'))), wire.ErrMessageTooLarge, 0},
		{"lying-length-within-huge-maximum", huge(0).Page(Cat(TRecs(0, "ok"), TRec(1<<39, 1, 1, Fill(10, 'l')))), io.ErrUnexpectedEOF, 1},
		{"lying-length-within-huge-maximum-next-page", huge(2).Page(TRec(1<<40, 1, 1, Fill(10, 'l'))).Page(Fill(50, 'm')), io.ErrUnexpectedEOF, 0},
		{"lying-length-short", sub(0).Page(TRec(2, 1, 1, []byte("abcdef"))), wire.ErrProtocol, 1},
		{"lying-length-next-page-new", sub(0).Page(TRec(100, 1, 1, Fill(10, 'l'))).Raw(wire.Header{Kind: wire.KindTagged, FragLen: 25}, TRecs(1, "n")), wire.ErrProtocol, 0},
		{"prefix-truncated", sub(0).Page(Cat(TRecs(0, "ok"), Fill(20, 0))), wire.ErrProtocol, 1},
		{"plain-record-in-tagged-page", sub(0).Page(Rec(1, []byte("x"))), wire.ErrProtocol, 0},
		{"continuation-one-more", sub(0).Page(TRec(100, 1, 1, Fill(50, 'a'))).Page(Cat(Fill(50, 'b'), TRecs(1, "c")), 1), wire.ErrProtocol, 0},
		{"continuation-on-first-page", sub(0).Page(Cat(Fill(5, 'c'), TRecs(0, "x")), 5), wire.ErrProtocol, 0},
		{"empty-page-inside-message", sub(0).Page(TRec(100, 1, 1, Fill(50, 'a'))).Page(nil), wire.ErrProtocol, 0},
		{"msglen-above-fraglen", sub(0).Page(TRecs(0, "ok")).Raw(wire.Header{Kind: wire.KindTagged, FragLen: 5, MsgLen: 10}, Fill(5, 'x')), wire.ErrProtocol, 1},
		{"msglen-above-fraglen-reader", NewSeed(0, 0, true, MaxBy250).Page(TRec(100, 1, 1, Fill(50, 'a'))).Raw(wire.Header{Kind: wire.KindTagged, FragLen: 5, MsgLen: 50}, Fill(5, 'x')), wire.ErrProtocol, 0},
		{"plain-page-kind", sub(0).Page(TRecs(0, "ok")).Raw(wire.Header{Kind: wire.KindPage, FragLen: 9}, Rec(1, []byte("x"))), wire.ErrProtocol, 1},
		{"data-kind", sub(0).Page(TRecs(0, "ok")).Raw(wire.Header{Kind: wire.KindData, Flags: wire.FlagLast, FragLen: 3, MsgLen: 3}, []byte("abc")), wire.ErrProtocol, 1},
		{"ack-kind", sub(0).Page(TRecs(0, "ok")).Raw(wire.Header{Kind: wire.KindAck, FragLen: 16}, Fill(16, 0)), wire.ErrProtocol, 1},
		{"fraglen-says-more", sub(0).Page(TRecs(0, "ok")).Page(TRecs(1, "lie"), LieFrag), wire.ErrProtocol, 1},
		{"truncated-header", sub(0).Page(TRecs(0, "ok")).Truncated(8), wire.ErrProtocol, 1},
		{"page-after-fin", sub(0).Page(TRecs(0, "ok")).Raw(wire.Header{Kind: wire.KindFin, Flags: wire.FlagLast}, nil).Page(TRecs(1, "zombie")), wire.ErrProtocol, 1},
		{"fin-inside-message", sub(0).Page(TRec(20, 1, 1, Fill(10, 'a'))).Raw(wire.Header{Kind: wire.KindFin, Flags: wire.FlagLast}, nil), io.ErrUnexpectedEOF, 0},
		{"credit-between-pages", sub(0).Page(TRec(20, 1, 1, Fill(10, 'a'))).Raw(wire.Header{Kind: wire.KindCredit, Credits: 3}, nil).Page(Fill(10, 'b')), io.EOF, 1},
	})
}

// seed is a row of the tables above.
type seed struct {
	name string
	in   []byte
	end  error
	msgs int
}

func corpus(seeds []seed) []seedcorpus.Seed {
	out := make([]seedcorpus.Seed, len(seeds))
	for i, s := range seeds {
		out[i] = seedcorpus.Seed{Name: s.name, In: s.in, End: s.end, Msgs: s.msgs}
	}
	return out
}

// ErrorClass names the sentinel an error that ends reading stands for.
func ErrorClass(err error) string {
	switch {
	case err == nil:
		return "none"
	case err == io.EOF:
		return "EOF"
	case errors.Is(err, wire.ErrMessageTooLarge) && !errors.Is(err, wire.ErrProtocol):
		return "ErrMessageTooLarge"
	case errors.Is(err, wire.ErrProtocol) && !errors.Is(err, wire.ErrMessageTooLarge):
		return "ErrProtocol"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "ErrUnexpectedEOF"
	}
	return fmt.Sprintf("unexpected %T %v", err, err)
}
