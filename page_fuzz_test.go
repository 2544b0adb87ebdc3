package netio

import (
	"bytes"
	"errors"
	"io"
	"math"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/netio-go/netio/internal/lifecycle"

	"github.com/netio-go/netio/internal/page"
	"github.com/netio-go/netio/internal/page/pagetest"
	"github.com/netio-go/netio/internal/ring"
	"github.com/netio-go/netio/internal/seedcorpus"
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
// FuzzPageDecoder builds the received buffers from the input
// (pagetest.ParseInput), lying headers and lengths included, and holds the
// Conn to pagetest.Model, a plain decoder written from the wire format's
// description. The page decoders themselves are fuzzed on bare bytes in
// internal/page; these targets hold the Conn's reads, lending and buffer
// returns to the same model. FuzzPageRoundTrip
// writes messages derived from the input with the Conn's own Write,
// TryWrite and Flush (page.Writer), and reads them back.
//
// The seeds are in testdata/fuzz/<Target>; TestPageFuzzSeeds checks them
// (internal/seedcorpus).

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
	t.Cleanup(func() { l.rx.wake.Close(); l.tx.wake.Close() })
	l.life.Move(lifecycle.Open)
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
		ready: ring.New(n), free: ring.New(n), refs: make([]atomic.Int32, n), kickAt: 1}
	l.rxReclaim = make([]uint32, 0, n)
	// Credits are not what these targets test: any the pages return fit.
	l.credit.Reset(math.MaxInt32, n)
	l.credit.Hold(0)
	l.sizes.maxRecv = maxMsg
	c.recv.frames = page.Plain.Reader()
	c.recv.pos.Max = maxMsg
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
		if l.life.Ended() {
			break
		}
		slot := uint32(i)
		copy(l.rx.mem[i*l.rx.bufSize:], b)
		if bypass && len(b) >= wire.HeaderSize {
			if h := wire.ReadHeader(b); (h.Kind == wire.KindPage || h.Kind == wire.KindTagged) && uint64(h.FragLen)+wire.HeaderSize == uint64(len(b)) && h.MsgLen > uint64(h.FragLen) {
				l.rx.ready.Push(slot)
				pushed = append(pushed, slot)
				continue
			}
		}
		before := l.rx.ready.Len()
		l.onRecv(slot, uint64(len(b)))
		if l.rx.ready.Len() > before {
			pushed = append(pushed, slot)
		}
	}
	if !l.life.Ended() {
		l.fail(io.EOF)
	}
	return pushed
}

// The ways the targets read (pagetest's styles).
const (
	readMessageStyle   = pagetest.ReadMessageStyle
	nextMessageStyle   = pagetest.NextMessageStyle
	appendMessageStyle = pagetest.AppendMessageStyle
	readStreamStyle    = pagetest.ReadStreamStyle
	nextStyle          = pagetest.NextStyle
	nextBatchStyle     = pagetest.NextBatchStyle
	mixedStyle         = pagetest.MixedStyle
	readStyles         = pagetest.ReadStyles
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
	drain := func(r *ring.SPSC) {
		for {
			s, ok := r.Pop()
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
func errorClass(err error) string { return pagetest.ErrorClass(err) }

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

// runDecoder feeds the input's buffers to a Conn, reads them back and
// checks the result against the model. It returns how reading ended.
func runDecoder(t *testing.T, data []byte) (*pagetest.Input, error) {
	d := pagetest.ParseInput(data, false)
	bufSize := wire.HeaderSize + 1
	for _, b := range d.Bufs {
		bufSize = max(bufSize, len(b))
	}
	c := newReadingConn(t, len(d.Bufs), bufSize, d.Max)
	before := heapAllocs()
	pushed := deliver(c, d.Bufs, d.Bypass)
	limit := 2*len(d.Model.Msgs) + 4
	if d.Style == readStreamStyle {
		limit = len(d.Model.Stream)/(d.Size+1) + 4
	}
	r, held := readAll(t, c, d.Style, d.Size, limit)
	checkAllocs(t, before, len(data), c)
	m := &d.Model
	checkEnd(t, r.err, m.End())
	if d.Style == readStreamStyle {
		if !bytes.Equal(r.stream, m.Stream) {
			t.Fatalf("Read returned %d bytes %.64x; the pages hold %d bytes %.64x", len(r.stream), r.stream, len(m.Stream), m.Stream)
		}
	} else {
		if len(r.msgs) != len(m.Msgs) {
			t.Fatalf("read %d messages before %v; the pages hold %d", len(r.msgs), r.err, len(m.Msgs))
		}
		for i, got := range r.msgs {
			if !bytes.Equal(got, m.Msgs[i]) {
				t.Fatalf("message %d: %d bytes %.64x; the pages hold %d bytes %.64x", i, len(got), got, len(m.Msgs[i]), m.Msgs[i])
			}
		}
	}
	finish(t, c, held, d.Size&1 != 0, pushed)
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
	s.frames = page.Plain.Writer(pageCap)
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
	pageCap = page.PrefixSize + le(next(2))%4089
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
// written into pages of pageCap bytes, by the sender's rules (page.Writer): a message
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
		need := page.PrefixSize + len(m.b)
		if used >= 0 && pageCap-used < need && need <= pageCap {
			seal()
		}
		if used < 0 {
			used = 0
		}
		used += page.PrefixSize
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
		if pageCap-used < page.PrefixSize {
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
		group += 2 + (page.PrefixSize+len(m.b))/pageCap
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
		if pw := w.send.frames; w.send.open && pw.Room() < page.PrefixSize {
			t.Fatalf("after write %d the open page has %d bytes left: too few for a length, it should have been sent", i, pw.Room())
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
		t.Fatalf("the reactor's checks refused page %d of %d: %v", len(pushed), len(pages), c.link.life.Err())
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
		if fits := page.PrefixSize+len(want[i]) <= pageCap; fits && !zc || zc && len(want[i]) > pageCap {
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

// roundTripSeed builds a round-trip input.
type roundTripSeed []byte

func newRoundTripSeed(pageCap, style, size int, closeFirst bool, maxByte byte) roundTripSeed {
	p := pageCap - page.PrefixSize
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

func roundTripSeeds() []fuzzSeed {
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
	return []fuzzSeed{
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

// TestPageFuzzSeeds checks the seed corpora of the targets, and that each
// seed ends the way its name says.
func TestPageFuzzSeeds(t *testing.T) {
	t.Run("FuzzPageDecoder", func(t *testing.T) {
		seedcorpus.Check(t, "FuzzPageDecoder", pagetest.DecoderSeeds(), func(t *testing.T, s seedcorpus.Seed) {
			d, end := runDecoder(t, s.In)
			if errorClass(end) != errorClass(s.End) {
				t.Fatalf("ends with %v, want %s", end, errorClass(s.End))
			}
			if d.Style != readStreamStyle && len(d.Model.Msgs) != s.Msgs {
				t.Fatalf("%d messages before the end, want %d", len(d.Model.Msgs), s.Msgs)
			}
		})
	})
	t.Run("FuzzPageRoundTrip", func(t *testing.T) {
		checkSeedCorpus(t, "FuzzPageRoundTrip", roundTripSeeds(), func(t *testing.T, s fuzzSeed) { runRoundTrip(t, s.in) })
	})
}
