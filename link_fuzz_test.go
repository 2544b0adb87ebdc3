package netio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime/metrics"
	"testing"

	"github.com/netio-go/netio/internal/page"
	"github.com/netio-go/netio/internal/page/pagetest"
	"github.com/netio-go/netio/internal/wire"
)

// FuzzLinkHeaders feeds received buffers through the link's own checks
// (link.onRecv: the header's length against what arrived, credits against
// the window, the kinds, FIN, and the page format's Check) into a Conn of
// either mode, and reads them back, or takes them through Config.OnMessage
// on a LowLatency one (the reactor's page.InlineReader). Both modes receive
// pages: HighThroughput ones filled, LowLatency ones packed (packing, sender.go).
// The Conn is held to linkModel, written from the wire format's
// description: the same messages, the same bytes, the same end (io.EOF,
// or the first violation's ErrProtocol or ErrMessageTooLarge, or
// io.ErrUnexpectedEOF for a stream that stops inside a message). What the
// Conn allocates is bounded by what arrived and its receive buffers, never
// by a length a header or a record announces: with the largest message at
// 1 TiB, a 10-byte piece of a 1 TiB message must cost bytes, not the
// terabyte.
//
// It reuses FuzzPageDecoder's harness (page_fuzz_test.go): a Conn reduced
// to its buffers on a closed reactor, deliver, readAll and finish; and its
// pagetest.Model.
func FuzzLinkHeaders(f *testing.F) {
	addSeeds(f, linkSeeds())
	f.Fuzz(func(t *testing.T, data []byte) { runLinkHeaders(t, data) })
}

// linkModel is the link's checks done the plain way, in front of a
// pagetest.Model.
type linkModel struct {
	mode    Mode
	max     uint64
	window  int // the peer's: credits may never exceed it
	credits int
	fin     bool
	err     error // the first violation

	pages pagetest.Model
}

func (m *linkModel) receive(b []byte) {
	if m.err != nil {
		return
	}
	if len(b) < wire.HeaderSize {
		m.err = ErrProtocol
		return
	}
	h := wire.ReadHeader(b)
	p := b[wire.HeaderSize:]
	if uint64(h.FragLen) != uint64(len(p)) {
		m.err = ErrProtocol
		return
	}
	if m.credits+int(h.Credits) > m.window {
		m.err = ErrProtocol
		return
	}
	m.credits += int(h.Credits)
	switch h.Kind {
	case wire.KindCredit, wire.KindHeartbeat:
	case wire.KindFin:
		m.fin = true
	case wire.KindPage:
		if h.MsgLen > uint64(h.FragLen) || m.fin {
			m.err = ErrProtocol
			return
		}
		m.pages.Page(p, h.MsgLen)
		m.err = m.pages.Err
	default: // a Conn takes no control messages, tagged pages, or level 2's fragments
		m.err = ErrProtocol
	}
}

// honest is the header an honest sender puts on a page of n payload bytes.
func (m *linkModel) honest(n int) wire.Header {
	return wire.Header{Kind: wire.KindPage, FragLen: uint32(n), MsgLen: m.pages.Continuation(n)}
}

// messages is what a reader reads: whole messages and all the bytes.
func (m *linkModel) messages() (msgs [][]byte, stream []byte) {
	return m.pages.Msgs, m.pages.Stream
}

// end is how reading ends after the last buffer.
func (m *linkModel) end() error {
	switch {
	case m.err != nil:
		return m.err
	case m.pages.InMsg():
		return io.ErrUnexpectedEOF
	}
	return io.EOF
}

// The input:
//
//	[opts] [max] [window] [credits] buffer...
//
// opts: bit 0 the mode (HighThroughput if set), bit 1 Config.OnMessage
// (LowLatency only), bits 2-4 the read style (7 is mixedStyle too), bit 5
// a largest message of 1 TiB instead of max's, bits 6-7 a size s as in
// FuzzPageDecoder's input. max: the largest message, 4×max, or 64 KiB for
// 0. window: the peer's window is window+1 buffers, and credits%(window+2)
// of them are ours to start with. Each buffer:
//
//	[ctl] [len, 2 bytes LE] payload (len bytes, or what is left)
//
// bit 7 of ctl set: the header is the 16 bytes before the payload, as they
// are (fewer if the input ends: a buffer shorter than a header). Clear: a
// page with the header an honest sender would write, except that it
// returns (ctl>>2)&7 credits, and that bit 0 makes its continuation count
// one more, and bit 1 its fragLen one more than the payload.
type linkInput struct {
	mode      Mode
	onMessage bool
	style     int
	size      int
	credits   int // ours at the start
	bufs      [][]byte
	model     linkModel
}

const linkHugeMax = 1 << 40

func parseLinkInput(data []byte) *linkInput {
	d := &linkInput{}
	next := func(n int) []byte {
		n = min(n, len(data))
		b := data[:n:n]
		data = data[n:]
		return b
	}
	byteAt := func() byte {
		if b := next(1); len(b) > 0 {
			return b[0]
		}
		return 0
	}
	le16 := func() int {
		n := 0
		for i, x := range next(2) {
			n |= int(x) << (8 * i)
		}
		return n
	}
	opts, mx, window, credits := byteAt(), byteAt(), byteAt(), byteAt()
	if opts&1 != 0 {
		d.mode = HighThroughput
	}
	d.onMessage = opts&2 != 0 && d.mode == LowLatency
	d.style, d.size = min(int(opts>>2&7), mixedStyle), int(opts>>6)
	m := &d.model
	m.mode = d.mode
	m.max = 1 << 16
	if mx != 0 {
		m.max = uint64(mx) * 4
	}
	if opts&0x20 != 0 {
		m.max = linkHugeMax
	}
	m.pages.Max = m.max
	m.window = int(window) + 1
	m.credits = int(credits) % (m.window + 1)
	d.credits = m.credits
	for len(data) > 0 && len(d.bufs) < pagetest.MaxBuffers {
		ctl := next(1)[0]
		n := min(le16(), pagetest.MaxPayload)
		var buf []byte
		if ctl&0x80 != 0 {
			buf = append(buf, next(wire.HeaderSize)...)
			buf = append(buf, next(n)...)
		} else {
			payload := next(n)
			h := m.honest(len(payload))
			h.Credits = uint16(ctl >> 2 & 7)
			if ctl&1 != 0 {
				h.MsgLen++
			}
			if ctl&2 != 0 {
				h.FragLen++
			}
			buf = make([]byte, wire.HeaderSize+len(payload))
			wire.PutHeader(buf, h)
			copy(buf[wire.HeaderSize:], payload)
		}
		d.bufs = append(d.bufs, buf)
		m.receive(buf)
	}
	return d
}

// heapAllocs is the bytes allocated on the heap so far.
func heapAllocs() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// checkAllocs checks what delivering and reading an input of n bytes to c
// allocated since before against a bound: a few times the input (the
// messages, copied by the reader and again by the test), c's receive
// buffers twice more (the room a read makes at once, grown once), and
// 16 MiB of slack. A Conn that trusts a length it is told allocates what
// the length says, up to the 1 TiB the inputs may allow. The slack is
// wide because the runtime counts small allocations a span at a time, as
// its caches refill: the fuzzer saw 1.3 and 1.7 MB for inputs that
// allocate far less, and neither repeated.
func checkAllocs(t *testing.T, before uint64, n int, c *Conn) {
	limit := uint64(16*n+3*len(c.link.rx.mem)) + 16<<20
	if got := heapAllocs() - before; got > limit {
		t.Fatalf("reading %d bytes of input allocated %d bytes (bound %d): the Conn trusted a length it was told", n, got, limit)
	}
}

// runLinkHeaders delivers the input's buffers to a Conn, reads them back
// and checks the result against the model. It returns the input and how
// reading ended.
func runLinkHeaders(t *testing.T, data []byte) (*linkInput, error) {
	d := parseLinkInput(data)
	m := &d.model
	bufSize := wire.HeaderSize + 1
	for _, b := range d.bufs {
		bufSize = max(bufSize, len(b))
	}
	c := newReadingConn(t, len(d.bufs), bufSize, m.max)
	l := c.link
	if d.mode == LowLatency {
		l.cfg.framing = page.Packed
		c.recv.frames = page.Packed.Reader()
	}
	l.inline = page.NewInlineReader(l.cfg.framing, m.max)
	l.credit.Reset(m.window, len(l.rx.refs))
	l.credit.Hold(d.credits)
	var got [][]byte
	if d.onMessage {
		l.onMessage = func(msg []byte) {
			if uint64(len(msg)) > m.max {
				t.Fatalf("OnMessage got %d bytes, limit %d", len(msg), m.max)
			}
			got = append(got, bytes.Clone(msg))
		}
	}
	before := heapAllocs()
	pushed := deliver(c, d.bufs, false)
	want, stream := m.messages()
	var r readResult
	var held []heldMessage
	if d.onMessage {
		r.msgs, r.err = got, l.life.Err()
	} else {
		calls := 2*len(want) + 4
		if d.style == readStreamStyle {
			calls = len(stream)/(d.size+1) + 4
		}
		r, held = readAll(t, c, d.style, d.size, calls)
	}
	checkAllocs(t, before, len(data), c)
	end := m.end()
	if d.onMessage {
		// The link's own end: a stream cut short inside a message is its
		// peer's orderly close all the same.
		if errors.Is(end, io.ErrUnexpectedEOF) {
			end = io.EOF
		}
		if errorClass(r.err) != errorClass(end) {
			t.Fatalf("link ended with %v (%s); want %s", r.err, errorClass(r.err), errorClass(end))
		}
	} else {
		checkEnd(t, r.err, end)
	}
	if d.style == readStreamStyle && !d.onMessage {
		if !bytes.Equal(r.stream, stream) {
			t.Fatalf("Read returned %d bytes %.64x; the buffers hold %d bytes %.64x", len(r.stream), r.stream, len(stream), stream)
		}
	} else {
		if len(r.msgs) != len(want) {
			t.Fatalf("read %d messages before %v; the buffers hold %d", len(r.msgs), r.err, len(want))
		}
		for i, b := range r.msgs {
			if !bytes.Equal(b, want[i]) {
				t.Fatalf("message %d: %d bytes %.64x; the buffers hold %d bytes %.64x", i, len(b), b, len(want[i]), want[i])
			}
		}
	}
	finish(t, c, held, d.size&1 != 0, pushed)
	return d, r.err
}

// ---------------------------------------------------------------------------
// Seeds

// linkSeed builds an input.
type linkSeed []byte

func newLinkSeed(mode Mode, onMessage bool, style, size int, huge bool, mx, window, credits byte) linkSeed {
	opts := byte(mode) | byte(style)<<2 | byte(size)<<6
	if onMessage {
		opts |= 2
	}
	if huge {
		opts |= 0x20
	}
	return linkSeed{opts, mx, window, credits}
}

// cont adds a page, with an honest header but for ctl's lies and credits.
func (s linkSeed) cont(ctl byte, payload []byte) linkSeed {
	return append(append(s, ctl, byte(len(payload)), byte(len(payload)>>8)), payload...)
}

// raw adds a buffer with header h as given and payload.
func (s linkSeed) raw(h wire.Header, payload []byte) linkSeed {
	hb := make([]byte, wire.HeaderSize)
	wire.PutHeader(hb, h)
	return append(append(append(s, 0x80, byte(len(payload)), byte(len(payload)>>8)), hb...), payload...)
}

// truncated adds a buffer of n < 16 bytes, the input's last.
func (s linkSeed) truncated(n int) linkSeed {
	return append(append(s, 0x80, 0, 0), pagetest.Fill(n, 't')...)
}

// credits is ctl for an honest buffer that returns n credits (n < 8).
func credits(n byte) byte { return n << 2 }

const (
	lieCont = 1 // continuation one more
	lieLen  = 2 // fragLen one more than the payload
)

func linkSeeds() []fuzzSeed {
	ll := func(style int) linkSeed {
		return newLinkSeed(LowLatency, false, style, 0, false, pagetest.MaxBy250, 15, 8)
	}
	ht := func(style int) linkSeed {
		return newLinkSeed(HighThroughput, false, style, 0, false, pagetest.MaxBy250, 15, 8)
	}
	huge := func(m Mode, style int) linkSeed { return newLinkSeed(m, false, style, 0, true, 0, 15, 8) }
	onMsg := newLinkSeed(LowLatency, true, 0, 0, false, pagetest.MaxBy250, 15, 8)
	ok := func(s linkSeed) linkSeed { return s.cont(0, pagetest.Recs("ok")) }
	hundred := pagetest.Fill(100, 'h')
	req := (&wire.Request{ID: 1, Tags: []uint64{7}}).Marshal()
	ackb := (&wire.Ack{ID: 1, Incarnation: 2, Tags: []uint64{7}, Next: []uint64{0}}).Marshal()
	garbage := []byte("\x03\x00\xff\xfe garbage that is no header at all \x00\x00\x00\x00")
	hugeLen := binary.LittleEndian.AppendUint64(nil, 1<<64-1)
	// A length prefix that lies inside a packed page: it swallows the
	// records after it, and the next page, which continues nothing, gives
	// it away.
	lies := pagetest.Cat(pagetest.Recs("a"), pagetest.Rec(50, pagetest.Fill(10, 'x')), pagetest.Recs("b"))
	after := wire.Header{Kind: wire.KindPage, FragLen: uint32(len(pagetest.Recs("next")))}
	return []fuzzSeed{
		// LowLatency: packed pages.
		{"one-message", ll(readMessageStyle).cont(0, pagetest.Recs("hello")), io.EOF, 1},
		{"empty-message", ll(nextMessageStyle).cont(0, pagetest.Recs("", "x")), io.EOF, 2},
		{"packed", ll(nextMessageStyle).cont(0, pagetest.Recs("a", "bb", "ccc")).cont(credits(2), pagetest.Recs("d", "")), io.EOF, 5},
		{"spanning", ll(nextMessageStyle).cont(0, pagetest.Cat(pagetest.Recs("x"), pagetest.Rec(300, hundred))).cont(0, hundred).cont(0, pagetest.Cat(hundred, pagetest.Recs("after"))), io.EOF, 3},
		{"spanning-append", ll(appendMessageStyle).cont(0, pagetest.Rec(300, hundred)).cont(0, hundred).cont(0, hundred), io.EOF, 1},
		{"spanning-next", ll(nextStyle).cont(0, pagetest.Rec(200, hundred)).cont(0, hundred), io.EOF, 1},
		{"packed-nextbatch", newLinkSeed(LowLatency, false, nextBatchStyle, 3, false, pagetest.MaxBy250, 15, 8).cont(0, pagetest.Cat(pagetest.Recs("a"), pagetest.Rec(200, hundred))).cont(0, pagetest.Cat(hundred, pagetest.Recs("b", "c", "d", "e"))), io.EOF, 6},
		{"packed-read-stream", newLinkSeed(LowLatency, false, readStreamStyle, 2, false, pagetest.MaxBy250, 15, 8).cont(0, pagetest.Rec(200, hundred)).cont(0, pagetest.Cat(hundred, pagetest.Recs("tail"))), io.EOF, 0},
		{"packed-mixed", newLinkSeed(LowLatency, false, mixedStyle, 3, false, pagetest.MaxBy250, 15, 8).cont(0, pagetest.Rec(200, hundred)).cont(0, pagetest.Cat(hundred, pagetest.Recs("", "c"), pagetest.Rec(100, hundred))), io.EOF, 4},
		{"packed-onmessage", onMsg.cont(0, pagetest.Cat(pagetest.Recs("a", "bb"), pagetest.Rec(300, hundred))).cont(0, hundred).cont(0, pagetest.Cat(hundred, pagetest.Recs("whole", ""))), io.EOF, 5},
		{"spanning-from-the-end", ll(nextMessageStyle).cont(0, pagetest.Cat(pagetest.Recs("a"), pagetest.Rec(5, nil))).cont(0, pagetest.Cat([]byte("abcde"), pagetest.Recs("z"))), io.EOF, 3},
		{"spanning-from-the-end-onmessage", onMsg.cont(0, pagetest.Cat(pagetest.Recs("a"), pagetest.Rec(5, nil))).cont(0, pagetest.Cat([]byte("abcde"), pagetest.Recs("z"))), io.EOF, 3},
		{"cut-short", ll(nextMessageStyle).cont(0, pagetest.Rec(200, hundred)), io.ErrUnexpectedEOF, 0},
		{"cut-short-onmessage", onMsg.cont(0, pagetest.Cat(pagetest.Recs("a"), pagetest.Rec(200, hundred))), io.ErrUnexpectedEOF, 1},
		{"at-maximum", ll(appendMessageStyle).cont(0, pagetest.Rec(1000, hundred)).cont(0, pagetest.Fill(900, 'm')), io.EOF, 1},
		{"above-maximum", ll(readMessageStyle).cont(0, pagetest.Cat(pagetest.Recs("ok"), pagetest.Rec(1001, hundred))), ErrMessageTooLarge, 1},
		{"above-maximum-onmessage", onMsg.cont(0, pagetest.Cat(pagetest.Recs("ok"), pagetest.Rec(1001, hundred))), ErrMessageTooLarge, 1},
		{"length-huge", ll(nextMessageStyle).cont(0, pagetest.Cat(pagetest.Recs("ok"), hugeLen, pagetest.Fill(10, 'x'))), ErrMessageTooLarge, 1},
		{"length-lies-within-huge-max", huge(LowLatency, nextMessageStyle).cont(0, pagetest.Cat(pagetest.Recs("ok"), pagetest.Rec(linkHugeMax, pagetest.Fill(10, 'x')))), io.ErrUnexpectedEOF, 1},
		{"length-lies-within-huge-max-append", huge(LowLatency, appendMessageStyle).cont(0, pagetest.Rec(linkHugeMax/2, pagetest.Fill(10, 'x'))), io.ErrUnexpectedEOF, 0},
		{"length-lies-within-huge-max-next", huge(LowLatency, nextStyle).cont(0, pagetest.Rec(linkHugeMax/4, pagetest.Fill(10, 'x'))), io.ErrUnexpectedEOF, 0},
		{"length-lies-within-huge-max-readmessage", huge(LowLatency, readMessageStyle).cont(0, pagetest.Rec(linkHugeMax/8, pagetest.Fill(10, 'x'))), io.ErrUnexpectedEOF, 0},
		{"length-lies-within-huge-max-onmessage", newLinkSeed(LowLatency, true, 0, 0, true, 0, 15, 8).cont(0, pagetest.Rec(linkHugeMax, pagetest.Fill(10, 'x'))), io.ErrUnexpectedEOF, 0},
		{"length-lies-packed", ll(nextMessageStyle).cont(0, lies).raw(after, pagetest.Recs("next")), ErrProtocol, 1},
		{"length-lies-packed-readmessage", ll(readMessageStyle).cont(0, lies).raw(after, pagetest.Recs("next")), ErrProtocol, 1},
		{"length-lies-packed-onmessage", onMsg.cont(0, lies).raw(after, pagetest.Recs("next")), ErrProtocol, 1},
		{"continuation-lie", ll(nextMessageStyle).cont(0, pagetest.Rec(300, hundred)).cont(lieCont, hundred), ErrProtocol, 0},
		{"continuation-lie-onmessage", onMsg.cont(0, pagetest.Rec(300, hundred)).cont(lieCont, hundred), ErrProtocol, 0},
		{"continuation-of-nothing", ok(ll(nextMessageStyle)).cont(lieCont, pagetest.Recs("x")), ErrProtocol, 1},
		{"continuation-above-fraglen", ll(nextMessageStyle).cont(0, pagetest.Rec(300, hundred)).raw(wire.Header{Kind: wire.KindPage, FragLen: 5, MsgLen: 200}, pagetest.Fill(5, 'x')), ErrProtocol, 0},
		{"empty-page-inside-message", onMsg.cont(0, pagetest.Rec(300, hundred)).cont(0, nil), ErrProtocol, 0},
		{"ends-inside-a-length", ll(nextMessageStyle).cont(0, pagetest.Cat(pagetest.Recs("ok"), []byte{1, 2, 3})), ErrProtocol, 1},
		{"ends-inside-a-length-onmessage", onMsg.cont(0, pagetest.Cat(pagetest.Recs("ok"), []byte{1, 2, 3})), ErrProtocol, 1},
		{"fraglen-says-more", ok(ll(readMessageStyle)).cont(lieLen, pagetest.Recs("abc")), ErrProtocol, 1},
		{"fraglen-says-less", ok(ll(readMessageStyle)).raw(wire.Header{Kind: wire.KindPage, FragLen: 2}, pagetest.Recs("abc")), ErrProtocol, 1},
		{"fraglen-huge", ok(ll(readMessageStyle)).raw(wire.Header{Kind: wire.KindPage, FragLen: 1<<32 - 1}, pagetest.Recs("x")), ErrProtocol, 1},
		{"fragment-of-level-2", ok(ll(nextMessageStyle)).raw(wire.Header{Kind: wire.KindData, Flags: wire.FlagLast, FragLen: 3, MsgLen: 3}, []byte("abc")), ErrProtocol, 1},
		{"fragment-of-level-2-onmessage", onMsg.raw(wire.Header{Kind: wire.KindData, Flags: wire.FlagLast, FragLen: 3, MsgLen: 3}, []byte("abc")), ErrProtocol, 0},
		{"tagged-on-lowlatency", ok(ll(nextMessageStyle)).raw(wire.Header{Kind: wire.KindTagged, FragLen: 25}, pagetest.Cat(pagetest.Rec(1, nil), pagetest.Fill(16, 0), []byte("x"))), ErrProtocol, 1},
		// Credits.
		{"credits-returned", newLinkSeed(LowLatency, false, readMessageStyle, 0, false, pagetest.MaxBy250, 7, 1).cont(credits(7), pagetest.Recs("a")).raw(wire.Header{Kind: wire.KindCredit}, nil), io.EOF, 1},
		{"credits-overflow", newLinkSeed(LowLatency, false, readMessageStyle, 0, false, pagetest.MaxBy250, 7, 8).cont(0, pagetest.Recs("a")).raw(wire.Header{Kind: wire.KindCredit, Credits: 1}, nil), ErrProtocol, 1},
		{"credits-overflow-on-data", newLinkSeed(LowLatency, false, readMessageStyle, 0, false, pagetest.MaxBy250, 3, 0).cont(credits(4), pagetest.Recs("a")).cont(credits(1), pagetest.Recs("b")), ErrProtocol, 1},
		{"credits-max", ok(ll(readMessageStyle)).raw(wire.Header{Kind: wire.KindCredit, Credits: 1<<16 - 1}, nil), ErrProtocol, 1},
		{"credits-on-page-overflow", newLinkSeed(HighThroughput, false, nextMessageStyle, 0, false, pagetest.MaxBy250, 3, 4).cont(credits(1), pagetest.Recs("a")), ErrProtocol, 0},
		{"credit-with-payload", ok(ll(readMessageStyle)).raw(wire.Header{Kind: wire.KindCredit, FragLen: 5}, []byte("12345")).cont(0, pagetest.Recs("b")), io.EOF, 2},
		// FIN.
		{"fin", ok(ll(readMessageStyle)).raw(wire.Header{Kind: wire.KindFin, Flags: wire.FlagLast}, nil), io.EOF, 1},
		{"fin-half-close", ok(ll(readStreamStyle)).raw(wire.Header{Kind: wire.KindFin, Flags: wire.FlagLast | wire.FlagHalfClose}, nil), io.EOF, 0},
		{"fin-twice", ok(ll(readMessageStyle)).raw(wire.Header{Kind: wire.KindFin}, nil).raw(wire.Header{Kind: wire.KindFin, Flags: wire.FlagHalfClose}, nil), io.EOF, 1},
		{"data-after-fin", ok(ll(readMessageStyle)).raw(wire.Header{Kind: wire.KindFin, Flags: wire.FlagLast}, nil).cont(0, pagetest.Recs("zombie")), ErrProtocol, 1},
		{"data-after-half-close", ok(ll(nextMessageStyle)).raw(wire.Header{Kind: wire.KindFin, Flags: wire.FlagHalfClose}, nil).cont(0, pagetest.Recs("zombie")), ErrProtocol, 1},
		{"fin-inside-message", ll(nextMessageStyle).cont(0, pagetest.Rec(200, hundred)).raw(wire.Header{Kind: wire.KindFin, Flags: wire.FlagLast}, nil), io.ErrUnexpectedEOF, 0},
		{"page-after-fin", ht(nextMessageStyle).cont(0, pagetest.Recs("ok")).raw(wire.Header{Kind: wire.KindFin}, nil).cont(0, pagetest.Recs("zombie")), ErrProtocol, 1},
		// Kinds.
		{"kind-zero", ok(ll(readMessageStyle)).raw(wire.Header{Kind: 0, Flags: wire.FlagLast, FragLen: 3, MsgLen: 3}, []byte("abc")), ErrProtocol, 1},
		{"kind-unknown", ok(ll(readMessageStyle)).raw(wire.Header{Kind: 9, Flags: wire.FlagLast}, nil), ErrProtocol, 1},
		{"kind-255", ok(ll(readMessageStyle)).raw(wire.Header{Kind: 255, FragLen: 1}, []byte("x")), ErrProtocol, 1},
		{"subscribe-at-conn", ok(ll(readMessageStyle)).raw(wire.Header{Kind: wire.KindSubscribe, Flags: wire.FlagLast, FragLen: uint32(len(req)), MsgLen: uint64(len(req))}, req), ErrProtocol, 1},
		{"unsubscribe-at-conn", ht(readMessageStyle).cont(0, pagetest.Recs("ok")).raw(wire.Header{Kind: wire.KindUnsubscribe, Flags: wire.FlagLast, FragLen: uint32(len(req)), MsgLen: uint64(len(req))}, req), ErrProtocol, 1},
		{"ack-at-conn", ok(ll(readMessageStyle)).raw(wire.Header{Kind: wire.KindAck, Flags: wire.FlagLast, FragLen: uint32(len(ackb)), MsgLen: uint64(len(ackb))}, ackb), ErrProtocol, 1},
		{"truncated-header", ok(ll(readMessageStyle)).truncated(8), ErrProtocol, 1},
		{"empty-buffer", ok(ll(readMessageStyle)).truncated(0), ErrProtocol, 1},
		{"garbage", ok(ll(readMessageStyle)).cont(0x80, garbage), ErrProtocol, 1},
		// HighThroughput pages.
		{"ht-records", ht(nextMessageStyle).cont(0, pagetest.Recs("a", "", "bb")).cont(credits(3), pagetest.Recs("c")), io.EOF, 4},
		{"ht-split", ht(appendMessageStyle).cont(0, pagetest.Cat(pagetest.Recs("x"), pagetest.Rec(300, hundred))).cont(0, pagetest.Cat(pagetest.Fill(200, 'n'), pagetest.Recs("y"))), io.EOF, 3},
		{"ht-continuation-lie", ht(nextMessageStyle).cont(0, pagetest.Rec(300, hundred)).cont(lieCont, pagetest.Fill(200, 'n')), ErrProtocol, 0},
		{"ht-fraglen-lie", ht(nextMessageStyle).cont(0, pagetest.Recs("a")).cont(lieLen, pagetest.Recs("b")), ErrProtocol, 1},
		{"ht-continuation-above-fraglen", ht(nextMessageStyle).cont(0, pagetest.Rec(300, hundred)).raw(wire.Header{Kind: wire.KindPage, FragLen: 5, MsgLen: 200}, pagetest.Fill(5, 'x')), ErrProtocol, 0},
		{"ht-data-kind", ht(nextMessageStyle).cont(0, pagetest.Recs("a")).raw(wire.Header{Kind: wire.KindData, Flags: wire.FlagLast, FragLen: 1, MsgLen: 1}, []byte("x")), ErrProtocol, 1},
		{"ht-tagged-kind", ht(nextMessageStyle).cont(0, pagetest.Recs("a")).raw(wire.Header{Kind: wire.KindTagged, FragLen: 25}, pagetest.Cat(pagetest.Rec(1, nil), pagetest.Fill(16, 0), []byte("x"))), ErrProtocol, 1},
		{"ht-record-above-max", ht(nextMessageStyle).cont(0, pagetest.Cat(pagetest.Recs("a"), pagetest.Rec(1001, nil))), ErrMessageTooLarge, 1},
		{"ht-record-lies-within-huge-max", huge(HighThroughput, nextMessageStyle).cont(0, pagetest.Cat(pagetest.Recs("a"), pagetest.Rec(linkHugeMax, pagetest.Fill(10, 'x')))), io.ErrUnexpectedEOF, 1},
		{"ht-record-lies-within-huge-max-next", huge(HighThroughput, nextStyle).cont(0, pagetest.Rec(linkHugeMax/2, pagetest.Fill(10, 'x'))), io.ErrUnexpectedEOF, 0},
		{"ht-record-lies-within-huge-max-append", huge(HighThroughput, appendMessageStyle).cont(0, pagetest.Rec(linkHugeMax/4, pagetest.Fill(10, 'x'))), io.ErrUnexpectedEOF, 0},
		{"ht-control-kind", ht(nextMessageStyle).cont(0, pagetest.Recs("a")).raw(wire.Header{Kind: wire.KindSubscribe, FragLen: uint32(len(req))}, req), ErrProtocol, 1},
	}
}

func TestLinkHeadersSeeds(t *testing.T) {
	checkSeedCorpus(t, "FuzzLinkHeaders", linkSeeds(), func(t *testing.T, s fuzzSeed) {
		d, end := runLinkHeaders(t, s.in)
		if d.onMessage {
			end = d.model.end()
		}
		if errorClass(end) != errorClass(s.end) {
			t.Fatalf("ends with %v, want %s", end, errorClass(s.end))
		}
		if msgs, _ := d.model.messages(); d.style != readStreamStyle && len(msgs) != s.msgs {
			t.Fatalf("%d messages before the end, want %d", len(msgs), s.msgs)
		}
	})
}
