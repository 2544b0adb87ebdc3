package netio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/netio-go/netio/internal/wire"
	"github.com/netio-go/netio/reactor"
)

// The fuzz targets drive a real Conn, reduced to its buffers: received
// buffers go through the reactor's checks (onRecv) into receive slots, and
// the Conn's own ReadMessage, NextMessage, AppendMessage or Read decode
// them with position() and consume(), exactly as on a live connection.
// The Conn's reactor is one that has been closed, so its kicks and its
// readFailed submissions go nowhere, and the connection ends (as a peer's
// FIN and shutdown end it) before the reads start, so no read ever parks:
// a read that would wait returns the end of the stream instead.
//
// FuzzPageDecoder builds the received buffers from the input, lying
// headers and lengths included, and holds the Conn to pageModel, a plain
// decoder written from the wire format's description. FuzzPageRoundTrip
// writes messages derived from the input with the Conn's own Write,
// TryWrite and Flush (writePage, pageWriter), and reads them back.
//
// The seeds are in testdata/fuzz/<Target>; TestPageFuzzSeeds rebuilds them
// from the tables below, checks that each one ends the way its name says,
// and rewrites the files with -update-page-seeds.

var updatePageSeeds = flag.Bool("update-page-seeds", false, "rewrite testdata/fuzz/FuzzPage* from the seed tables")

// closedReactor is a reactor that was stopped at once: Submit and
// SubmitFunc return ErrClosed without running anything.
var closedReactor = sync.OnceValues(func() (*reactor.Reactor, error) {
	r, err := reactor.New(&reactor.Config{Spin: -1})
	if err != nil {
		return nil, err
	}
	r.Close()
	return r, nil
})

func fuzzEngine(t testing.TB) *engine {
	r, err := closedReactor()
	if err != nil {
		t.Fatal(err)
	}
	return &engine{r: r}
}

// newFuzzConn returns a HighThroughput Conn, connected as far as its link
// knows, on an engine whose reactor is closed: nothing is ever posted.
func newFuzzConn(t testing.TB, maxMsg int) *Conn {
	c, err := newConn(fuzzEngine(t), Config{Mode: HighThroughput, MaxMessageSize: maxMsg}, "fuzz")
	if err != nil {
		t.Fatal(err)
	}
	l := c.link
	t.Cleanup(func() { l.rx.wake.close(); l.tx.wake.close() })
	l.life.move(linkOpen)
	l.sizes.maxSend, l.sizes.maxRecv = maxMsg, uint64(maxMsg)
	return c
}

// newReadingConn returns a connected HighThroughput Conn with n receive
// buffers of bufSize bytes (header included) and nothing to send.
func newReadingConn(t testing.TB, n, bufSize int, maxMsg uint64) *Conn {
	n = max(n, 1)
	c := newFuzzConn(t, int(min(maxMsg, math.MaxInt)))
	l := c.link
	// What no page covers holds a pattern, so that bytes read from
	// outside a page do not pass for the zeros of a fresh buffer.
	l.rx = recvQueue{mem: bytes.Repeat([]byte{0xa5}, n*bufSize), bufSize: bufSize, wake: l.rx.wake,
		ready: newSPSCRing(n), free: newSPSCRing(n), refs: make([]atomic.Int32, n), kickAt: 1}
	l.rxReclaim = make([]uint32, 0, n)
	// Credits are not what these targets test: any the pages return fit.
	l.credit.reset(math.MaxInt32, n)
	l.credit.credits = 0
	l.sizes.maxRecv = maxMsg
	l.frames = plainPages.checker(maxMsg)
	c.recv.frames = plainPages.reader()
	c.recv.pos.max = maxMsg
	c.recv.spares.limit = 4 * bufSize
	return c
}

// deliver hands bufs to c the way the reactor does, each in a receive
// buffer of its own, through onRecv, and then ends the connection the way
// a peer's FIN and shutdown do, unless onRecv has failed it already. With
// bypass, a page whose continuation count exceeds its payload skips
// onRecv (which would refuse it) and goes to the reader, which must refuse
// it on its own. It returns the buffers handed to the reader.
func deliver(c *Conn, bufs [][]byte, bypass bool) (pushed []uint32) {
	l := c.link
	for i, b := range bufs {
		if l.life.ended.Load() {
			break
		}
		slot := uint32(i)
		copy(l.rx.mem[i*l.rx.bufSize:], b)
		if bypass && len(b) >= wire.HeaderSize {
			if h := wire.ReadHeader(b); (h.Kind == wire.KindPage || h.Kind == wire.KindTagged) && uint64(h.FragLen)+wire.HeaderSize == uint64(len(b)) && h.MsgLen > uint64(h.FragLen) {
				l.rx.ready.push(slot)
				pushed = append(pushed, slot)
				continue
			}
		}
		before := l.rx.ready.len()
		l.onRecv(slot, uint64(len(b)))
		if l.rx.ready.len() > before {
			pushed = append(pushed, slot)
		}
	}
	if !l.life.ended.Load() {
		l.fail(io.EOF)
	}
	return pushed
}

// The ways the targets read.
const (
	readMessageStyle   = iota // ReadMessage, AppendMessage for what does not fit
	nextMessageStyle          // NextMessage, holding every message to the end
	appendMessageStyle        // AppendMessage after a prefix
	readStreamStyle           // Read, size+1 bytes at a time
	nextStyle                 // Next, copied at once: valid until the next read
	nextBatchStyle            // NextBatch, size+1 messages at most
	mixedStyle                // the message styles in turn, in an order size sets
	readStyles
)

var mixedStyles = []int{readMessageStyle, nextMessageStyle, appendMessageStyle, nextStyle, nextBatchStyle}

type readResult struct {
	msgs     [][]byte // whole messages, in the message styles
	stream   []byte   // every byte read, in readStreamStyle
	zeroCopy []bool   // nextMessageStyle: message i came out of its page
	err      error    // what ended the reading
}

// heldMessage is a Message from NextMessage and what it held when read.
type heldMessage struct {
	m Message
	b []byte
}

// readAll reads c until an error, at most limit calls, and checks on the
// way what holds of every read: no read returns bytes outside a received
// page or nothing at all, a Message from a page lies within that page,
// Messages do not change while later ones are read, and the error that
// ends reading is returned again.
func readAll(t *testing.T, c *Conn, style, size, limit int) (r readResult, held []heldMessage) {
	buf := make([]byte, size*16)
	p := make([]byte, size+1)
	batch := make([][]byte, size+1)
	read := func(style int) ([][]byte, error) {
		switch style {
		case readMessageStyle:
			n, err := c.ReadMessage(buf)
			if errors.Is(err, io.ErrShortBuffer) {
				l, lerr := c.MessageLen()
				if lerr != nil || l <= len(buf) {
					t.Fatalf("ReadMessage of %d bytes: short buffer, but MessageLen says %d, %v", len(buf), l, lerr)
				}
				msg, err := c.AppendMessage(nil)
				if err == nil && len(msg) != l {
					t.Fatalf("MessageLen said %d bytes, AppendMessage returned %d", l, len(msg))
				}
				return [][]byte{msg}, err
			}
			return [][]byte{bytes.Clone(buf[:n])}, err
		case nextMessageStyle:
			m, err := c.NextMessage()
			if err != nil {
				return nil, err
			}
			checkInPage(t, c, m)
			msg := bytes.Clone(m.Bytes())
			held = append(held, heldMessage{m, msg})
			return [][]byte{msg}, nil
		case appendMessageStyle:
			dst := append(make([]byte, 0, 3+size), "pfx"...)
			got, err := c.AppendMessage(dst)
			if len(got) < 3 || string(got[:3]) != "pfx" {
				t.Fatalf("AppendMessage lost the bytes already in dst: %q, %v", got, err)
			}
			return [][]byte{got[3:]}, err
		case nextStyle:
			b, err := c.Next()
			if err != nil {
				return nil, err
			}
			checkInRx(t, c, b)
			return [][]byte{bytes.Clone(b)}, nil
		case nextBatchStyle:
			n, err := c.NextBatch(batch)
			if err != nil || n < 1 || n > len(batch) {
				if err == nil || n != 0 {
					t.Fatalf("NextBatch of %d: %d, %v", len(batch), n, err)
				}
				return nil, err
			}
			msgs := make([][]byte, n)
			for i, b := range batch[:n] {
				checkInRx(t, c, b)
				msgs[i] = bytes.Clone(b)
			}
			return msgs, nil
		}
		panic("unknown read style " + strconv.Itoa(style))
	}
	turn := uint8(size)
	for calls := 1; ; calls++ {
		if calls > limit {
			t.Fatalf("read %d (%d messages, %d bytes) and still going: more than the input holds", calls, len(r.msgs), len(r.stream))
		}
		if style == readStreamStyle {
			n, err := c.Read(p)
			if n > 0 && err != nil || n == 0 && err == nil {
				t.Fatalf("Read of %d bytes: %d, %v", len(p), n, err)
			}
			r.stream = append(r.stream, p[:n]...)
			if err != nil {
				r.err = err
				break
			}
			continue
		}
		s := style
		if style == mixedStyle {
			turn = turn*37 + 11
			s = mixedStyles[int(turn)%len(mixedStyles)]
		}
		msgs, err := read(s)
		if err != nil {
			r.err = err
			break
		}
		r.msgs = append(r.msgs, msgs...)
		if style == nextMessageStyle {
			r.zeroCopy = append(r.zeroCopy, held[len(held)-1].m.slot >= 0)
		}
	}
	// A connection that ended stays ended, for the same reason, whichever
	// way it is read.
	for s := range readStyles - 1 {
		var err error
		if s == readStreamStyle {
			_, err = c.Read(p)
		} else {
			_, err = read(s)
		}
		if err == nil || errorClass(err) != errorClass(r.err) {
			t.Fatalf("read style %d after %v returned %v; want that error again", s, r.err, err)
		}
	}
	for i, h := range held {
		if !bytes.Equal(h.m.Bytes(), h.b) {
			t.Fatalf("message %d from NextMessage changed while later ones were read", i)
		}
	}
	return r, held
}

// checkInRx checks that b, if it lies in c's receive buffers, lies within
// the payload of one, and that its capacity ends with it.
func checkInRx(t *testing.T, c *Conn, b []byte) {
	if cap(b) != len(b) {
		t.Fatalf("message of %d bytes has capacity %d", len(b), cap(b))
	}
	if len(b) == 0 {
		return
	}
	rx := &c.link.rx
	base := uintptr(unsafe.Pointer(unsafe.SliceData(rx.mem)))
	at := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	if at < base || at >= base+uintptr(len(rx.mem)) {
		return // joined in a buffer of the Conn's own
	}
	slot := int(at-base) / rx.bufSize
	off := int(at-base) - slot*rx.bufSize
	h := wire.ReadHeader(rx.mem[slot*rx.bufSize:])
	if off < wire.HeaderSize || off+len(b) > wire.HeaderSize+int(h.FragLen) {
		t.Fatalf("message of %d bytes at %d of receive buffer %d, whose payload is bytes %d to %d", len(b), off, slot, wire.HeaderSize, wire.HeaderSize+int(h.FragLen))
	}
}

// checkInPage checks that a Message handed out of a receive buffer lies
// within that buffer's payload.
func checkInPage(t *testing.T, c *Conn, m Message) {
	rx := &c.link.rx
	if m.recv() != &c.recv || cap(m.b) != len(m.b) {
		t.Fatalf("Message of %d bytes: reader %p (want %p), capacity %d", len(m.b), m.recv(), &c.recv, cap(m.b))
	}
	if m.slot < 0 || len(m.b) == 0 {
		return
	}
	if int(m.slot) >= len(rx.refs) {
		t.Fatalf("Message from receive buffer %d of %d", m.slot, len(rx.refs))
	}
	off := int(m.slot) * rx.bufSize
	h := wire.ReadHeader(rx.mem[off:])
	base := uintptr(unsafe.Pointer(unsafe.SliceData(rx.mem))) + uintptr(off+wire.HeaderSize)
	at := uintptr(unsafe.Pointer(unsafe.SliceData(m.b)))
	if at < base || at+uintptr(len(m.b)) > base+uintptr(h.FragLen) {
		t.Fatalf("Message of %d bytes at %d of page %d, whose payload is %d bytes", len(m.b), int64(at)-int64(base), m.slot, h.FragLen)
	}
}

// finish releases the held messages and closes c, in the order the input
// chose, and checks that no buffer goes back to the reactor while a
// Message from it is held, and that every buffer handed to the reader
// goes back exactly once, or is still waiting to be read.
func finish(t *testing.T, c *Conn, held []heldMessage, closeFirst bool, pushed []uint32) {
	freed := map[uint32]int{}
	drain := func(r *spscRing) {
		for {
			s, ok := r.pop()
			if !ok {
				return
			}
			freed[s]++
		}
	}
	rx := &c.link.rx
	checkHeld := func(when string) {
		drain(rx.free)
		for i, h := range held {
			if h.m.slot >= 0 && freed[uint32(h.m.slot)] > 0 {
				t.Fatalf("%s: receive buffer %d went back to the reactor while message %d from it is held", when, h.m.slot, i)
			}
		}
	}
	checkHeld("after reading")
	if closeFirst {
		c.Close()
		checkHeld("after Close")
	}
	for _, h := range held {
		h.m.Release()
	}
	if !closeFirst {
		c.Close()
	}
	drain(rx.free)
	drain(rx.ready)
	for s := range rx.refs {
		if n := rx.refs[s].Load(); n != 0 {
			t.Fatalf("receive buffer %d: %d references after every message was released", s, n)
		}
	}
	for _, s := range pushed {
		if freed[s] != 1 {
			t.Fatalf("receive buffer %d came back %d times, want once", s, freed[s])
		}
		delete(freed, s)
	}
	if len(freed) > 0 {
		t.Fatalf("buffers the reader never had came back: %v", freed)
	}
}

// errorClass names the sentinel an error that ends reading stands for.
func errorClass(err error) string {
	switch {
	case err == nil:
		return "none"
	case err == io.EOF:
		return "EOF"
	case errors.Is(err, ErrMessageTooLarge) && !errors.Is(err, ErrProtocol):
		return "ErrMessageTooLarge"
	case errors.Is(err, ErrProtocol) && !errors.Is(err, ErrMessageTooLarge):
		return "ErrProtocol"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "ErrUnexpectedEOF"
	}
	return fmt.Sprintf("unexpected %T %v", err, err)
}

// checkEnd checks the error that ended reading against the expected one:
// io.EOF itself, the others wrapped in a *net.OpError.
func checkEnd(t *testing.T, got, want error) {
	if errorClass(got) != errorClass(want) {
		t.Fatalf("reading ended with %v (%s); want %s", got, errorClass(got), errorClass(want))
	}
	var oe *net.OpError
	if got != io.EOF && !errors.As(got, &oe) {
		t.Fatalf("reading ended with %T %v; want a *net.OpError", got, got)
	}
}

// ---------------------------------------------------------------------------
// FuzzPageDecoder

// pageModel decodes received buffers the plain way, from the input's own
// bytes: the reference the Conn is held to. It applies the reactor's
// checks (header length, kind, FIN) and then the page format: the
// continuation count must be what is left of the previous page's last
// message (capped by the payload), then records follow, each an 8-byte
// length no larger than max and that many bytes, the last one possibly
// going on in the next page. With tagged set, it decodes tagged pages
// instead (FuzzTaggedPages): a record's length is followed by its tag and
// sequence number.
type pageModel struct {
	max    uint64
	tagged bool
	fin    bool
	inMsg  bool   // a message goes on in the next page
	left   uint64 // its bytes still to come
	cur    []byte
	curTag [2]uint64   // its tag and sequence number, on tagged pages
	msgs   [][]byte    // whole messages
	tags   [][2]uint64 // their tags and sequence numbers, on tagged pages
	stream []byte      // every message byte, the unfinished message's included
	err    error       // the first violation
}

// kind is the kind of the pages the model decodes.
func (m *pageModel) kind() uint8 {
	if m.tagged {
		return wire.KindTagged
	}
	return wire.KindPage
}

// prefix is how many bytes come before a record's message.
func (m *pageModel) prefix() int {
	if m.tagged {
		return taggedPrefixSize
	}
	return prefixSize
}

// continuation is what an honest sender puts in the header of the next
// page if it carries n bytes of payload.
func (m *pageModel) continuation(n int) uint64 {
	if !m.inMsg {
		return 0
	}
	return min(m.left, uint64(n))
}

func (m *pageModel) receive(b []byte) {
	if m.err != nil {
		return
	}
	if len(b) < wire.HeaderSize {
		m.err = ErrProtocol
		return
	}
	h := wire.ReadHeader(b)
	p := b[wire.HeaderSize:]
	switch {
	case uint64(h.FragLen) != uint64(len(p)):
		m.err = ErrProtocol
	case h.Kind == wire.KindCredit:
	case h.Kind == wire.KindFin:
		m.fin = true
	case h.Kind != m.kind() || m.fin:
		m.err = ErrProtocol
	default:
		m.page(p, h.MsgLen)
	}
}

func (m *pageModel) page(p []byte, cont uint64) {
	if cont != m.continuation(len(p)) || m.inMsg && len(p) == 0 {
		m.err = ErrProtocol
		return
	}
	off := 0
	if m.inMsg {
		off = m.take(p, 0, int(cont))
	}
	for off < len(p) {
		if len(p)-off < m.prefix() {
			m.err = ErrProtocol
			return
		}
		n := binary.LittleEndian.Uint64(p[off:])
		if n > m.max {
			m.err = ErrMessageTooLarge
			return
		}
		if m.tagged {
			m.curTag = [2]uint64{binary.LittleEndian.Uint64(p[off+8:]), binary.LittleEndian.Uint64(p[off+16:])}
		}
		off += m.prefix()
		m.inMsg, m.left, m.cur = true, n, []byte{}
		off = m.take(p, off, int(min(n, uint64(len(p)-off))))
	}
}

func (m *pageModel) take(p []byte, off, k int) int {
	m.cur = append(m.cur, p[off:off+k]...)
	m.stream = append(m.stream, p[off:off+k]...)
	m.left -= uint64(k)
	if m.left == 0 {
		m.msgs = append(m.msgs, m.cur)
		if m.tagged {
			m.tags = append(m.tags, m.curTag)
		}
		m.inMsg, m.cur = false, nil
	}
	return off + k
}

// end is how reading ends after the last buffer.
func (m *pageModel) end() error {
	switch {
	case m.err != nil:
		return m.err
	case m.inMsg:
		return io.ErrUnexpectedEOF
	}
	return io.EOF
}

// The decoder target's input:
//
//	[opts] [max] buffer...
//
// opts: bits 0-2 the read style (7 is mixedStyle too), bit 3 bypass (see
// deliver), bits 4-7 a size s (ReadMessage reads into 16s bytes, Read into
// s+1, NextBatch into s+1 slots, and s sets mixedStyle's order), and
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
	fuzzMaxPayload = 4096 - wire.HeaderSize
	fuzzMaxBuffers = 128
)

type decoderInput struct {
	style, size int
	bypass      bool
	max         uint64
	bufs        [][]byte
	model       pageModel
}

func parseDecoderInput(data []byte, tagged bool) *decoderInput {
	d := &decoderInput{}
	d.model.tagged = tagged
	var opts, mx byte
	if len(data) > 0 {
		opts, data = data[0], data[1:]
	}
	if len(data) > 0 {
		mx, data = data[0], data[1:]
	}
	d.style, d.bypass, d.size = min(int(opts&7), mixedStyle), opts&8 != 0, int(opts>>4)
	d.max = 1 << 16
	switch mx {
	case 0:
	case 255:
		d.max = 1 << 40
	default:
		d.max = uint64(mx) * 4
	}
	d.model.max = d.max
	next := func(n int) []byte {
		n = min(n, len(data))
		b := data[:n:n]
		data = data[n:]
		return b
	}
	for len(data) > 0 && len(d.bufs) < fuzzMaxBuffers {
		ctl := next(1)[0]
		n := 0
		for i, x := range next(2) {
			n |= int(x) << (8 * i)
		}
		n = min(n, fuzzMaxPayload)
		var buf []byte
		if ctl&0x80 != 0 {
			buf = append(buf, next(wire.HeaderSize)...)
			buf = append(buf, next(n)...)
		} else {
			payload := next(n)
			h := wire.Header{Kind: d.model.kind(), FragLen: uint32(len(payload)), MsgLen: d.model.continuation(len(payload))}
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
		d.bufs = append(d.bufs, buf)
		d.model.receive(buf)
	}
	return d
}

// runDecoder feeds the input's buffers to a Conn, reads them back and
// checks the result against the model. It returns how reading ended.
func runDecoder(t *testing.T, data []byte) (*decoderInput, error) {
	d := parseDecoderInput(data, false)
	bufSize := wire.HeaderSize + 1
	for _, b := range d.bufs {
		bufSize = max(bufSize, len(b))
	}
	c := newReadingConn(t, len(d.bufs), bufSize, d.max)
	before := heapAllocs()
	pushed := deliver(c, d.bufs, d.bypass)
	limit := 2*len(d.model.msgs) + 4
	if d.style == readStreamStyle {
		limit = len(d.model.stream)/(d.size+1) + 4
	}
	r, held := readAll(t, c, d.style, d.size, limit)
	checkAllocs(t, before, len(data), c)
	m := &d.model
	checkEnd(t, r.err, m.end())
	if d.style == readStreamStyle {
		if !bytes.Equal(r.stream, m.stream) {
			t.Fatalf("Read returned %d bytes %.64x; the pages hold %d bytes %.64x", len(r.stream), r.stream, len(m.stream), m.stream)
		}
	} else {
		if len(r.msgs) != len(m.msgs) {
			t.Fatalf("read %d messages before %v; the pages hold %d", len(r.msgs), r.err, len(m.msgs))
		}
		for i, got := range r.msgs {
			if !bytes.Equal(got, m.msgs[i]) {
				t.Fatalf("message %d: %d bytes %.64x; the pages hold %d bytes %.64x", i, len(got), got, len(m.msgs[i]), m.msgs[i])
			}
		}
	}
	finish(t, c, held, d.size&1 != 0, pushed)
	return d, r.err
}

func FuzzPageDecoder(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		runDecoder(t, data)
	})
}

// ---------------------------------------------------------------------------
// FuzzPageRoundTrip

// newWritingConn returns a connected HighThroughput Conn that writes pages
// of pageCap payload bytes into slots send buffers.
func newWritingConn(t testing.TB, pageCap, slots, maxSend int) *Conn {
	c := newFuzzConn(t, maxSend)
	l, s := c.link, &c.send
	l.tx = sendQueue{mem: make([]byte, slots*(wire.HeaderSize+pageCap)), bufSize: wire.HeaderSize + pageCap, slots: slots, lens: make([]uint32, slots), wake: l.tx.wake}
	s.frames = plainPages.writer(pageCap)
	s.maxSend = maxSend
	s.lazy = true
	s.watch = &pageWatch{s: s, l: l} // its notices go to the closed reactor
	return c
}

// sentPages takes the pages c has sealed, as if the reactor had posted
// them and their sends had completed.
func sentPages(t *testing.T, c *Conn) (pages [][]byte) {
	q := &c.link.tx
	done, head := q.done.Load(), q.head.Load()
	for ; done < head; done++ {
		slot := int(done % uint64(q.slots))
		off := slot * q.bufSize
		n := int(q.lens[slot])
		if n < wire.HeaderSize || n > q.bufSize {
			t.Fatalf("page of %d bytes in a send buffer of %d", n, q.bufSize)
		}
		page := bytes.Clone(q.mem[off : off+n])
		if h := wire.ReadHeader(page); h.Kind != wire.KindPage || int(h.FragLen) != n-wire.HeaderSize {
			t.Fatalf("page header %+v on %d bytes", h, n)
		}
		pages = append(pages, page)
	}
	q.done.Store(head)
	return pages
}

// The round trip's input:
//
//	[page, 2 bytes LE] [opts] [max] message...
//
// page: the page's payload is 8 + page%4089 bytes. opts: bits 0-2 the
// read style, bits 3-6 a size s as in the decoder's input, bit 7 whether
// Close comes before the held messages are released. max: the largest
// message, 32×max, or 1 MiB for 0. Each message:
//
//	[ctl] [len, 2 bytes LE]
//
// is len bytes (16×len if ctl bit 2 is set) made from its number and ctl;
// ctl bit 0 flushes before it, bit 1 sends it with TryWrite, bit 3 sends
// it in one WriteBatch with the messages before it that have bit 3 set
// and the one before those (the flush and TryWrite bits of the batched
// ones do not count). A message above max must be refused and is not
// expected back. At most 64 KiB of messages in all.
const (
	fuzzMaxTotal    = 64 << 10
	fuzzMaxMessages = 1024
)

type roundTripMessage struct {
	b                 []byte
	flush, try, batch bool // batch: written with the message before
}

func parseRoundTripInput(data []byte) (pageCap, style, size int, closeFirst bool, maxSend int, msgs []roundTripMessage) {
	next := func(n int) []byte {
		n = min(n, len(data))
		b := data[:n:n]
		data = data[n:]
		return b
	}
	le := func(b []byte) int {
		n := 0
		for i, x := range b {
			n |= int(x) << (8 * i)
		}
		return n
	}
	pageCap = prefixSize + le(next(2))%4089
	var opts, mx byte
	if b := next(1); len(b) > 0 {
		opts = b[0]
	}
	if b := next(1); len(b) > 0 {
		mx = b[0]
	}
	style, size, closeFirst = min(int(opts&7), mixedStyle), int(opts>>3&0xf), opts&0x80 != 0
	maxSend = 1 << 20
	if mx != 0 {
		maxSend = int(mx) * 32
	}
	total := 0
	for len(data) > 0 && len(msgs) < fuzzMaxMessages && total < fuzzMaxTotal {
		ctl := next(1)[0]
		n := le(next(2))
		if ctl&4 != 0 {
			n *= 16
		}
		n = min(n, fuzzMaxTotal-total)
		total += n
		b := make([]byte, n)
		for j := range b {
			b[j] = byte(len(msgs)*131 + j*7 + j>>8 + int(ctl))
		}
		m := roundTripMessage{b: b, flush: ctl&1 != 0, try: ctl&2 != 0, batch: ctl&8 != 0 && len(msgs) > 0}
		if m.batch {
			m.flush, m.try = false, false
		}
		msgs = append(msgs, m)
	}
	return
}

// pageLayout is how many payload bytes each page holds when msgs are
// written into pages of pageCap bytes, by writePage's rules: a message
// goes into the open page behind its length if it fits; if it does not
// but fits in a page of its own, the open page is sent first; a larger one
// starts in the open page and goes on in full pages; a page with fewer
// bytes left than a length takes is sent. Flush sends the open page.
func pageLayout(pageCap, maxSend int, msgs []roundTripMessage) (pages []int) {
	used := -1 // bytes in the open page; -1: none open
	seal := func() { pages, used = append(pages, used), -1 }
	for _, m := range msgs {
		if m.flush && used >= 0 {
			seal()
		}
		if len(m.b) > maxSend {
			continue
		}
		need := prefixSize + len(m.b)
		if used >= 0 && pageCap-used < need && need <= pageCap {
			seal()
		}
		if used < 0 {
			used = 0
		}
		used += prefixSize
		rest := len(m.b)
		for {
			k := min(rest, pageCap-used)
			used += k
			if rest -= k; rest == 0 {
				break
			}
			seal()
			used = 0
		}
		if pageCap-used < prefixSize {
			seal()
		}
	}
	if used >= 0 {
		seal()
	}
	return pages
}

func runRoundTrip(t *testing.T, data []byte) {
	pageCap, style, size, closeFirst, maxSend, msgs := parseRoundTripInput(data)
	// Enough send buffers for the pages a write (a batch) may fill and the
	// open page; the pages are taken after every write, as the reactor
	// would send them.
	slots, group := 1, 0
	for _, m := range msgs {
		if !m.batch {
			group = 0
		}
		group += 2 + (prefixSize+len(m.b))/pageCap
		slots = max(slots, group+1)
	}
	w := newWritingConn(t, pageCap, slots, maxSend)
	var pages, want [][]byte
	for i := 0; i < len(msgs); {
		m := msgs[i]
		if m.flush {
			if err := w.Flush(); err != nil {
				t.Fatalf("Flush before message %d: %v", i, err)
			}
		}
		j := i + 1
		for j < len(msgs) && msgs[j].batch {
			j++
		}
		if j-i > 1 {
			// WriteBatch stops at a message above the limit: the rest go
			// in another batch.
			for b := msgs[i:j]; len(b) > 0; {
				bufs := make([][]byte, len(b))
				for k := range b {
					bufs[k] = b[k].b
				}
				n, err := w.WriteBatch(bufs)
				for _, m := range b[:n] {
					if len(m.b) > maxSend {
						t.Fatalf("WriteBatch wrote a message of %d bytes, limit %d", len(m.b), maxSend)
					}
					want = append(want, m.b)
				}
				if err == nil {
					if n != len(b) {
						t.Fatalf("WriteBatch of %d messages: %d, nil", len(b), n)
					}
					break
				}
				if n >= len(b) || len(b[n].b) <= maxSend || !errors.Is(err, ErrMessageTooLarge) {
					t.Fatalf("WriteBatch of %d messages (limit %d) stopped at %d: %v", len(b), maxSend, n, err)
				}
				b = b[n+1:]
			}
		} else {
			var n int
			var err error
			if m.try {
				n, err = w.TryWrite(m.b)
			} else {
				n, err = w.Write(m.b)
			}
			if len(m.b) > maxSend {
				if n != 0 || !errors.Is(err, ErrMessageTooLarge) {
					t.Fatalf("write %d of %d bytes, limit %d: %d, %v; want ErrMessageTooLarge", i, len(m.b), maxSend, n, err)
				}
			} else {
				if n != len(m.b) || err != nil {
					t.Fatalf("write %d of %d bytes (TryWrite %v) with %d free send buffers: %d, %v", i, len(m.b), m.try, slots, n, err)
				}
				want = append(want, m.b)
			}
		}
		if pw := w.send.frames.(*pageWriter); w.send.open && pw.room() < prefixSize {
			t.Fatalf("after write %d the open page has %d bytes left: too few for a length, it should have been sent", i, pw.room())
		}
		pages = append(pages, sentPages(t, w)...)
		i = j
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	pages = append(pages, sentPages(t, w)...)
	if want := pageLayout(pageCap, maxSend, msgs); len(pages) != len(want) {
		t.Fatalf("%d pages sent, want %d of %v bytes", len(pages), len(want), want)
	} else {
		for i, p := range pages {
			if len(p)-wire.HeaderSize != want[i] {
				t.Fatalf("page %d holds %d bytes, want %d (pages of %v bytes)", i, len(p)-wire.HeaderSize, want[i], want)
			}
		}
	}
	if w.send.msgs != uint64(len(want)) {
		t.Fatalf("writer counted %d messages, %d were written", w.send.msgs, len(want))
	}

	c := newReadingConn(t, len(pages), wire.HeaderSize+pageCap, uint64(maxSend))
	pushed := deliver(c, pages, false)
	if len(pushed) != len(pages) {
		t.Fatalf("the reactor's checks refused page %d of %d: %v", len(pushed), len(pages), c.link.life.err)
	}
	total := 0
	for _, m := range want {
		total += len(m)
	}
	limit := 2*len(want) + 4
	if style == readStreamStyle {
		limit = total/(size+1) + 4
	}
	r, held := readAll(t, c, style, size, limit)
	checkEnd(t, r.err, io.EOF)
	if style == readStreamStyle {
		if got := bytes.Join(want, nil); !bytes.Equal(r.stream, got) {
			t.Fatalf("Read returned %d bytes, %d were written", len(r.stream), len(got))
		}
	} else {
		if len(r.msgs) != len(want) {
			t.Fatalf("read %d messages, %d were written", len(r.msgs), len(want))
		}
		for i, got := range r.msgs {
			if !bytes.Equal(got, want[i]) {
				t.Fatalf("message %d: read %d bytes %.32x, wrote %d bytes %.32x", i, len(got), got, len(want[i]), want[i])
			}
		}
	}
	// A message that fits in a page with its length is never split: it
	// comes out of its page without a copy. A larger one is split, though
	// all its bytes may be in one page, its length alone ending the one
	// before.
	for i, zc := range r.zeroCopy { // nextMessageStyle
		if fits := prefixSize+len(want[i]) <= pageCap; fits && !zc || zc && len(want[i]) > pageCap {
			t.Fatalf("message %d of %d bytes in pages of %d: handed out of its page %v", i, len(want[i]), pageCap, zc)
		}
	}
	if c.recv.msgs != uint64(len(want)) {
		t.Fatalf("reader counted %d messages, %d were written", c.recv.msgs, len(want))
	}
	finish(t, c, held, closeFirst, pushed)
}

func FuzzPageRoundTrip(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		runRoundTrip(t, data)
	})
}

// ---------------------------------------------------------------------------
// Seeds

// decoderSeed builds a decoder input.
type decoderSeed []byte

func newDecoderSeed(style, size int, bypass bool, maxByte byte) decoderSeed {
	opts := byte(style) | byte(size)<<4
	if bypass {
		opts |= 8
	}
	return decoderSeed{opts, maxByte}
}

// page adds a page with an honest header; lie bits as in the input format.
func (s decoderSeed) page(payload []byte, lie ...byte) decoderSeed {
	ctl := byte(0)
	for _, l := range lie {
		ctl |= l
	}
	return append(append(s, ctl, byte(len(payload)), byte(len(payload)>>8)), payload...)
}

// raw adds a buffer with the header as given, lying or not, and payload.
func (s decoderSeed) raw(h wire.Header, payload []byte) decoderSeed {
	hb := make([]byte, wire.HeaderSize)
	wire.PutHeader(hb, h)
	s = append(s, 0x80, byte(len(payload)), byte(len(payload)>>8))
	return append(append(s, hb...), payload...)
}

// truncated adds a buffer of n < 16 bytes, the input's last.
func (s decoderSeed) truncated(n int) decoderSeed {
	return append(append(s, 0x80, 0, 0), make([]byte, n)...)
}

// rec is a record: an 8-byte length n and body (which may be shorter).
func rec(n int, body []byte) []byte {
	return append(binary.LittleEndian.AppendUint64(nil, uint64(n)), body...)
}

// recs are whole records.
func recs(msgs ...string) []byte {
	var b []byte
	for _, m := range msgs {
		b = append(b, rec(len(m), []byte(m))...)
	}
	return b
}

func cat(bs ...[]byte) []byte { return bytes.Join(bs, nil) }

func fill(n int, c byte) []byte { return bytes.Repeat([]byte{c}, n) }

const (
	lieDown  = 0x40
	lieFrag  = 0x20
	maxBy250 = 250 // max message 1000
)

type pageSeed struct {
	name string
	in   []byte
	end  error // how reading ends
	msgs int   // messages read before that (decoder seeds, message styles)
}

func decoderSeeds() []pageSeed {
	ht := func(style, size int) decoderSeed { return newDecoderSeed(style, size, false, maxBy250) }
	split := fill(3000, 's')
	return []pageSeed{
		{"empty-page", ht(nextMessageStyle, 0).page(nil), io.EOF, 0},
		{"no-pages", ht(readMessageStyle, 0), io.EOF, 0},
		{"records", ht(nextMessageStyle, 0).page(recs("a", "", "hello", string(fill(100, 'x')))), io.EOF, 4},
		{"records-readmessage-short-buffer", ht(readMessageStyle, 2).page(recs("a", "", "hello", string(fill(100, 'x')))), io.EOF, 4},
		{"records-read-stream", ht(readStreamStyle, 2).page(recs("abc", "", "defgh")).page(recs("ij")), io.EOF, 0},
		{"empty-messages-end-page", ht(nextMessageStyle, 1).page(recs("one", "", "")).page(recs("", "two")), io.EOF, 5},
		{"records-next", ht(nextStyle, 0).page(recs("a", "", "hello", string(fill(100, 'x')))).page(recs("b")), io.EOF, 5},
		{"records-nextbatch", ht(nextBatchStyle, 2).page(recs("a", "", "hello", string(fill(100, 'x')))).page(recs("b", "c")), io.EOF, 6},
		{"records-mixed", ht(mixedStyle, 5).page(recs("a", "", "hello", string(fill(100, 'x')), "six")).page(recs("b", "c", "", "d", "e", "f")), io.EOF, 11},
		{"split-two-pages", ht(appendMessageStyle, 0).page(cat(recs("x"), rec(300, fill(100, 'm')))).page(cat(fill(200, 'n'), recs("y"))), io.EOF, 3},
		{"split-three-pages", newDecoderSeed(nextMessageStyle, 0, false, 0).page(cat(recs("x"), rec(len(split), split[:1000]))).page(split[1000:2000]).page(cat(split[2000:], recs("end"))), io.EOF, 3},
		{"split-exact-end", ht(readMessageStyle, 15).page(rec(600, fill(300, 'a'))).page(fill(300, 'b')).page(recs("next")), io.EOF, 2},
		{"split-next", ht(nextStyle, 0).page(cat(recs("x"), rec(300, fill(100, 'm')))).page(cat(fill(200, 'n'), recs("y"), rec(50, fill(10, 'o')))).page(cat(fill(40, 'p'), recs("z"))), io.EOF, 5},
		{"split-nextbatch", ht(nextBatchStyle, 4).page(cat(recs("x"), rec(300, fill(100, 'm')))).page(cat(fill(200, 'n'), recs("y", "w"), rec(50, fill(10, 'o')))).page(cat(fill(40, 'p'), recs("z"))), io.EOF, 6},
		{"split-mixed", ht(mixedStyle, 1).page(cat(recs("x"), rec(300, fill(100, 'm')))).page(cat(fill(200, 'n'), recs("y", "w"), rec(50, fill(10, 'o')))).page(cat(fill(40, 'p'), recs("z", "", "q"), rec(20, fill(3, 'r')))).page(fill(17, 's')), io.EOF, 9},
		{"split-read-stream", ht(readStreamStyle, 6).page(rec(50, fill(20, 'a'))).page(cat(fill(30, 'b'), recs("tail"))), io.EOF, 0},
		{"truncated-prefix-1", ht(readMessageStyle, 2).page(cat(recs("ok"), []byte{1})), ErrProtocol, 1},
		{"truncated-prefix-7", ht(nextMessageStyle, 0).page(cat(recs("ok"), make([]byte, 7))), ErrProtocol, 1},
		{"truncated-prefix-alone", ht(appendMessageStyle, 0).page([]byte{4, 0, 0}), ErrProtocol, 0},
		{"lying-length-next-page-new", ht(nextMessageStyle, 0).page(rec(100, fill(10, 'l'))).raw(wire.Header{Kind: wire.KindPage, FragLen: 12, MsgLen: 0}, recs("next")), ErrProtocol, 0},
		{"lying-length-next-page-more", ht(readMessageStyle, 8).page(rec(100, fill(10, 'l'))).raw(wire.Header{Kind: wire.KindPage, FragLen: 120, MsgLen: 100}, fill(120, 'c')), ErrProtocol, 0},
		{"lying-length-end-of-stream", ht(readStreamStyle, 3).page(rec(100, fill(10, 'l'))), io.ErrUnexpectedEOF, 0},
		{"lying-length-short", ht(nextMessageStyle, 0).page(rec(2, []byte("abcdef"))), ErrProtocol, 1},
		{"continuation-one-more", ht(nextMessageStyle, 0).page(rec(100, fill(50, 'a'))).page(cat(fill(50, 'b'), recs("c")), 1), ErrProtocol, 0},
		{"continuation-one-less", ht(appendMessageStyle, 0).page(rec(100, fill(50, 'a'))).page(cat(fill(50, 'b'), recs("c")), lieDown|1), ErrProtocol, 0},
		{"continuation-on-first-page", ht(nextMessageStyle, 0).page(cat(fill(5, 'c'), recs("x")), 5), ErrProtocol, 0},
		{"continuation-on-first-page-after-message", ht(nextMessageStyle, 0).page(recs("ok")).page(recs("a", "b"), 8), ErrProtocol, 1},
		{"continuation-on-first-page-after-message-next", ht(nextStyle, 0).page(recs("ok")).page(recs("a", "b"), 8), ErrProtocol, 1},
		{"continuation-on-first-page-after-message-nextbatch", ht(nextBatchStyle, 3).page(recs("ok")).page(recs("a", "b"), 8), ErrProtocol, 1},
		{"continuation-after-whole-message", ht(readMessageStyle, 4).page(recs("done")).page(cat(fill(3, 'c'), recs("x")), 3), ErrProtocol, 1},
		{"empty-page-inside-message", ht(nextMessageStyle, 0).page(rec(100, fill(50, 'a'))).page(nil), ErrProtocol, 0},
		{"lying-length-within-huge-maximum", newDecoderSeed(nextMessageStyle, 0, false, 255).page(cat(recs("ok"), rec(1<<39, fill(10, 'l')))), io.ErrUnexpectedEOF, 1},
		{"lying-length-within-huge-maximum-append", newDecoderSeed(appendMessageStyle, 0, false, 255).page(rec(1<<40, fill(10, 'l'))), io.ErrUnexpectedEOF, 0},
		{"lying-length-within-huge-maximum-next", newDecoderSeed(nextStyle, 0, false, 255).page(rec(1<<38, fill(10, 'l'))).page(fill(20, 'm')), io.ErrUnexpectedEOF, 0},
		{"over-maximum", ht(readMessageStyle, 1).page(cat(recs("ok"), rec(1001, fill(10, 'o')))), ErrMessageTooLarge, 1},
		{"at-maximum", ht(nextMessageStyle, 0).page(cat(rec(1000, fill(1000, 'm')), recs("ok"))), io.EOF, 2},
		{"over-maximum-huge", ht(appendMessageStyle, 0).page(rec(-1, fill(8, 'h'))), ErrMessageTooLarge, 0},
		{"over-maximum-next-page", ht(nextMessageStyle, 0).page(recs("ok")).page(rec(5000, nil)), ErrMessageTooLarge, 1},
		{"msglen-above-fraglen", ht(nextMessageStyle, 0).page(recs("ok")).raw(wire.Header{Kind: wire.KindPage, FragLen: 5, MsgLen: 10}, fill(5, 'x')), ErrProtocol, 1},
		{"msglen-above-fraglen-reader", newDecoderSeed(nextMessageStyle, 0, true, maxBy250).page(rec(100, fill(50, 'a'))).raw(wire.Header{Kind: wire.KindPage, FragLen: 5, MsgLen: 50}, fill(5, 'x')), ErrProtocol, 0},
		{"fraglen-says-more", ht(readMessageStyle, 4).page(recs("ok")).page(recs("lie"), lieFrag), ErrProtocol, 1},
		{"fraglen-says-less", ht(nextMessageStyle, 0).page(recs("ok")).raw(wire.Header{Kind: wire.KindPage, FragLen: 3}, recs("lie")), ErrProtocol, 1},
		{"truncated-header", ht(nextMessageStyle, 0).page(recs("ok")).truncated(8), ErrProtocol, 1},
		{"data-kind", ht(nextMessageStyle, 0).page(recs("ok")).raw(wire.Header{Kind: wire.KindData, Flags: wire.FlagLast, FragLen: 3, MsgLen: 3}, []byte("abc")), ErrProtocol, 1},
		{"unknown-kind", ht(nextMessageStyle, 0).raw(wire.Header{Kind: 9, FragLen: 10}, recs("x")[:10]), ErrProtocol, 0},
		{"credit-between-pages", ht(nextMessageStyle, 0).page(rec(20, fill(10, 'a'))).raw(wire.Header{Kind: wire.KindCredit, Credits: 3}, nil).page(fill(10, 'b')), io.EOF, 1},
		{"page-after-fin", ht(readStreamStyle, 0).page(recs("ok")).raw(wire.Header{Kind: wire.KindFin, Flags: wire.FlagLast}, nil).page(recs("zombie")), ErrProtocol, 0},
		{"fin-inside-message", ht(nextMessageStyle, 0).page(rec(20, fill(10, 'a'))).raw(wire.Header{Kind: wire.KindFin, Flags: wire.FlagLast}, nil), io.ErrUnexpectedEOF, 0},
	}
}

// roundTripSeed builds a round-trip input.
type roundTripSeed []byte

func newRoundTripSeed(pageCap, style, size int, closeFirst bool, maxByte byte) roundTripSeed {
	p := pageCap - prefixSize
	opts := byte(style) | byte(size)<<3
	if closeFirst {
		opts |= 0x80
	}
	return roundTripSeed{byte(p), byte(p >> 8), opts, maxByte}
}

const (
	rtFlush = 1
	rtTry   = 2
	rtLong  = 4
	rtBatch = 8
)

func (s roundTripSeed) msg(n int, ctl byte) roundTripSeed {
	return append(s, ctl, byte(n), byte(n>>8))
}

func roundTripSeeds() []pageSeed {
	const page = 4096 - wire.HeaderSize
	small := newRoundTripSeed(page, nextMessageStyle, 0, false, 0)
	for i := range 20 {
		small = small.msg(i*13, 0)
	}
	exact := newRoundTripSeed(100, nextMessageStyle, 0, true, 0).
		msg(92, 0).          // fills a page exactly
		msg(85, 0).          // leaves 7 bytes: sealed
		msg(0, 0).msg(0, 0). // 16 bytes
		msg(76, 0).          // leaves nothing
		msg(93, 0).          // one more than a page: split
		msg(3, 0)
	return []pageSeed{
		{"small-messages", small, io.EOF, 0},
		{"small-messages-read-stream", append(newRoundTripSeed(page, readStreamStyle, 5, false, 0), small[4:]...), io.EOF, 0},
		{"exact-fits", exact, io.EOF, 0},
		{"split-large", newRoundTripSeed(256, appendMessageStyle, 0, false, 0).msg(10, 0).msg(1000, rtLong).msg(5, 0).msg(247, 0).msg(248, 0), io.EOF, 0},
		{"split-large-nextmessage", newRoundTripSeed(page, nextMessageStyle, 0, true, 0).msg(3, 0).msg(1000, rtLong).msg(page-8, 0).msg(page-7, 0), io.EOF, 0},
		{"flushes", newRoundTripSeed(page, readMessageStyle, 3, false, 0).msg(10, rtFlush).msg(20, rtFlush).msg(0, rtFlush).msg(700, 0).msg(30, rtFlush), io.EOF, 0},
		{"trywrite", newRoundTripSeed(64, nextMessageStyle, 0, false, 0).msg(10, rtTry).msg(200, rtTry).msg(56, rtTry|rtFlush).msg(57, rtTry), io.EOF, 0},
		{"tiny-pages", newRoundTripSeed(8, readMessageStyle, 1, false, 0).msg(0, 0).msg(1, 0).msg(9, 0).msg(30, rtFlush), io.EOF, 0},
		{"writebatch", newRoundTripSeed(200, nextBatchStyle, 3, false, 0).msg(10, 0).msg(20, rtBatch).msg(300, rtBatch).msg(0, rtBatch).msg(5, rtFlush).msg(180, rtBatch).msg(7, 0), io.EOF, 0},
		{"writebatch-too-large", newRoundTripSeed(300, mixedStyle, 2, true, 4).msg(10, 0).msg(200, rtBatch).msg(20, rtBatch).msg(128, rtBatch).msg(129, rtBatch).msg(3, 0).msg(1000, rtBatch), io.EOF, 0},
		{"read-next", newRoundTripSeed(100, nextStyle, 0, false, 0).msg(10, 0).msg(200, 0).msg(50, 0).msg(84, 0).msg(1, 0), io.EOF, 0},
		{"read-mixed", newRoundTripSeed(100, mixedStyle, 7, false, 0).msg(10, 0).msg(200, 0).msg(50, 0).msg(84, rtBatch).msg(1, rtBatch).msg(0, 0).msg(92, 0).msg(9, 0).msg(33, rtFlush), io.EOF, 0},
		{"length-alone-ends-page", newRoundTripSeed(100, nextMessageStyle, 0, false, 0).msg(84, 0).msg(95, 0).msg(1, 0).msg(91, 0).msg(100, 0), io.EOF, 0},
		{"too-large-refused", newRoundTripSeed(page, nextMessageStyle, 0, false, 4).msg(128, 0).msg(129, 0).msg(5, rtTry).msg(200, rtTry).msg(7, 0), io.EOF, 0},
	}
}

// TestPageFuzzSeeds checks that the seed corpus is what the tables above
// build, and that each seed ends the way its name says, so that the
// corpus covers what it claims to.
func TestPageFuzzSeeds(t *testing.T) {
	for _, target := range []struct {
		name  string
		seeds []pageSeed
		run   func(*testing.T, pageSeed)
	}{
		{"FuzzPageDecoder", decoderSeeds(), func(t *testing.T, s pageSeed) {
			d, end := runDecoder(t, s.in)
			if errorClass(end) != errorClass(s.end) {
				t.Fatalf("ends with %v, want %s", end, errorClass(s.end))
			}
			if d.style != readStreamStyle && len(d.model.msgs) != s.msgs {
				t.Fatalf("%d messages before the end, want %d", len(d.model.msgs), s.msgs)
			}
		}},
		{"FuzzPageRoundTrip", roundTripSeeds(), func(t *testing.T, s pageSeed) { runRoundTrip(t, s.in) }},
	} {
		dir := filepath.Join("testdata", "fuzz", target.name)
		for _, s := range target.seeds {
			t.Run(target.name+"/"+s.name, func(t *testing.T) {
				file := filepath.Join(dir, s.name)
				want := "go test fuzz v1\n[]byte(" + strconv.Quote(string(s.in)) + ")\n"
				if *updatePageSeeds {
					if err := os.MkdirAll(dir, 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(file, []byte(want), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				got, err := os.ReadFile(file)
				if err != nil || string(got) != want {
					t.Fatalf("%s is not the seed the table builds (%v); rewrite it with go test -run TestPageFuzzSeeds -update-page-seeds", file, err)
				}
				target.run(t, s)
			})
		}
	}
}
