package netio

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/netio-go/netio/internal/page"
	"github.com/netio-go/netio/internal/page/pagetest"
	"github.com/netio-go/netio/internal/wire"
)

// The packing rule (packing, sender.go) on a Conn reduced to its buffers, as in
// the fuzz targets: no libfabric, a closed reactor, and the test playing
// the reactor's part: completing sends (sentPages) and sealing what it is
// about to post (sealOpen).

// newPackingConn returns a connected LowLatency Conn that packs messages
// into buffers of bufCap payload bytes, slots of them.
func newPackingConn(t testing.TB, bufCap, slots, maxSend int) *Conn {
	c := newFuzzConn(t, maxSend)
	l, s := c.link, &c.send
	l.tx = sendQueue{mem: make([]byte, slots*(wire.HeaderSize+bufCap)), bufSize: wire.HeaderSize + bufCap, slots: slots, lens: make([]uint32, slots), wake: l.tx.wake}
	s.frames = page.Packed.Writer(bufCap)
	s.maxSend = maxSend
	s.pack = s.frames.Packs()
	l.packed = s
	return c
}

// decodePages reads pages back with a LowLatency reader and returns the
// messages and how reading ended.
func decodePages(t *testing.T, pages [][]byte, maxMsg uint64) ([][]byte, error) {
	bufSize := wire.HeaderSize + 1
	for _, p := range pages {
		bufSize = max(bufSize, len(p))
	}
	c := newReadingConn(t, len(pages), bufSize, maxMsg)
	c.link.cfg.framing = page.Packed
	c.recv.frames = page.Packed.Reader()
	pushed := deliver(c, pages, false)
	r, held := readAll(t, c, readMessageStyle, 1024, 2*len(pages)+1000)
	finish(t, c, held, false, pushed)
	return r.msgs, r.err
}

func write(t *testing.T, c *Conn, msgs ...string) {
	t.Helper()
	for _, m := range msgs {
		if _, err := c.Write([]byte(m)); err != nil {
			t.Fatalf("Write(%q): %v", m, err)
		}
	}
}

// recordsOf lists the records of each page, none spanning.
func recordsOf(t *testing.T, pages [][]byte) [][]string {
	var out [][]string
	for _, p := range pages {
		msgs, err := decodePages(t, [][]byte{p}, 1<<20)
		if err != io.EOF {
			t.Fatalf("page %x: %v", p, err)
		}
		var rs []string
		for _, m := range msgs {
			rs = append(rs, string(m))
		}
		out = append(out, rs)
	}
	return out
}

// A message written while nothing is in flight goes out at once, each in
// a buffer of its own.
func TestPackingLoneMessagesAtOnce(t *testing.T) {
	c := newPackingConn(t, 256, 4, 1<<20)
	var pages [][]byte
	for _, m := range []string{"one", "two", ""} {
		write(t, c, m)
		if c.send.open || c.link.tx.head.Load() != c.link.tx.done.Load()+1 {
			t.Fatalf("after Write(%q) on an idle link: open %v, %d buffers sealed and not sent; want it sealed at once", m, c.send.open, c.link.tx.head.Load()-c.link.tx.done.Load())
		}
		pages = append(pages, sentPages(t, c)...)
	}
	if diff := cmp.Diff([][]string{{"one"}, {"two"}, {""}}, recordsOf(t, pages)); diff != "" {
		t.Fatalf("pages (-want +got):\n%s", diff)
	}
}

// Messages written while a send is in flight wait in the open buffer, and
// go out together when the reactor posts it.
func TestPackingQueuesBehindSendInFlight(t *testing.T) {
	c := newPackingConn(t, 256, 4, 1<<20)
	q := &c.link.tx
	write(t, c, "first")
	write(t, c, "a", "bb", "ccc")
	if !c.send.open || q.head.Load() != 1 {
		t.Fatalf("with a send in flight: open %v, %d sealed; want the messages in the open buffer", c.send.open, q.head.Load())
	}
	c.link.packed.sealOpen() // the reactor, about to post
	if c.send.open || q.head.Load() != 2 {
		t.Fatalf("after the reactor's seal: open %v, %d sealed; want 2", c.send.open, q.head.Load())
	}
	write(t, c, "d") // "first" and the packed buffer are still in flight
	pages := sentPages(t, c)
	c.link.packed.sealOpen()
	pages = append(pages, sentPages(t, c)...)
	if diff := cmp.Diff([][]string{{"first"}, {"a", "bb", "ccc"}, {"d"}}, recordsOf(t, pages)); diff != "" {
		t.Fatalf("pages (-want +got):\n%s", diff)
	}
	// Nothing left open: the reactor has nothing to seal.
	c.link.packed.sealOpen()
	if q.head.Load() != q.done.Load() {
		t.Fatalf("the reactor sealed a buffer nobody wrote")
	}
}

// The reactor never waits for a writer: when one is inside the gate it
// leaves the seal to it, which happens as the writer leaves.
func TestPackingWriterSealsForTheReactor(t *testing.T) {
	c := newPackingConn(t, 256, 4, 1<<20)
	s, q := &c.send, &c.link.tx
	write(t, c, "first", "queued")
	s.gate.Lock() // a writer inside
	c.link.packed.sealOpen()
	if !s.open || q.head.Load() != 1 {
		t.Fatalf("the reactor sealed with a writer inside the gate")
	}
	s.unlock()
	if s.open || q.head.Load() != 2 {
		t.Fatalf("the writer left without sealing what the reactor asked for: open %v, %d sealed", s.open, q.head.Load())
	}
	if diff := cmp.Diff([][]string{{"first"}, {"queued"}}, recordsOf(t, sentPages(t, c))); diff != "" {
		t.Fatalf("pages (-want +got):\n%s", diff)
	}
}

// Flush and Close send the open buffer as they do on a HighThroughput
// connection.
func TestPackingFlushAndClose(t *testing.T) {
	c := newPackingConn(t, 256, 4, 1<<20)
	write(t, c, "first", "flushed")
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	write(t, c, "closed")
	c.send.sealForClose()
	if diff := cmp.Diff([][]string{{"first"}, {"flushed"}, {"closed"}}, recordsOf(t, sentPages(t, c))); diff != "" {
		t.Fatalf("pages (-want +got):\n%s", diff)
	}
}

// Whatever the order of writes, completions, the reactor's seals and
// flushes, the buffers hold the messages written, whole and in order,
// large ones spanning buffers.
func TestPackingRoundTrip(t *testing.T) {
	for seed := uint64(0); seed < 200; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 11))
			bufCap := page.PrefixSize + rng.IntN(300)
			// Enough buffers for the largest message: Write waits for
			// none, as nothing would free them.
			c := newPackingConn(t, bufCap, 5+rng.IntN(3), 1<<20)
			var want [][]byte
			var pages [][]byte
			for i := 0; i < 100; i++ {
				n := rng.IntN(40)
				if rng.IntN(10) == 0 {
					n = rng.IntN(3 * bufCap)
				}
				m := bytes.Repeat([]byte{byte(i)}, n)
				if _, err := c.TryWrite(m); err != nil {
					if !errors.Is(err, ErrWouldBlock) {
						t.Fatal(err)
					}
					pages = append(pages, sentPages(t, c)...)
					if _, err := c.Write(m); err != nil {
						t.Fatal(err)
					}
				}
				want = append(want, m)
				switch rng.IntN(4) {
				case 0:
					pages = append(pages, sentPages(t, c)...)
				case 1:
					c.link.packed.sealOpen()
				case 2:
					if rng.IntN(8) == 0 {
						c.Flush()
					}
				}
			}
			c.send.sealForClose()
			pages = append(pages, sentPages(t, c)...)
			got, err := decodePages(t, pages, 1<<20)
			if err != io.EOF {
				t.Fatalf("reading the pages back: %v", err)
			}
			if len(got) != len(want) {
				t.Fatalf("%d messages in %d pages, want %d", len(got), len(pages), len(want))
			}
			for i := range want {
				if !bytes.Equal(got[i], want[i]) {
					t.Fatalf("message %d: %d bytes %.32x, want %d bytes %.32x", i, len(got[i]), got[i], len(want[i]), want[i])
				}
			}
		})
	}
}

// A length prefix that lies inside a packed page ends the connection with
// ErrProtocol, for a reader and for OnMessage alike, after the messages
// before it (the fuzz seeds length-lies-packed* cover the same with every
// read style).
func TestPackedLyingLength(t *testing.T) {
	pageOf := func(cont uint64, payload []byte) []byte {
		b := make([]byte, wire.HeaderSize+len(payload))
		wire.PutHeader(b, wire.Header{Kind: wire.KindPage, FragLen: uint32(len(payload)), MsgLen: cont})
		copy(b[wire.HeaderSize:], payload)
		return b
	}
	bad := [][]byte{
		pageOf(0, pagetest.Cat(pagetest.Recs("a", "bb"), pagetest.Rec(50, pagetest.Fill(10, 'x')), pagetest.Recs("c"))),
		pageOf(0, pagetest.Recs("next")),
	}
	msgs, err := decodePages(t, bad, 1000)
	if !errors.Is(err, ErrProtocol) || len(msgs) != 2 {
		t.Fatalf("reader: %d messages, then %v; want 2, then ErrProtocol", len(msgs), err)
	}
	var got []string
	d := page.NewInlineReader(page.Packed, 1000)
	for _, p := range bad {
		h := wire.ReadHeader(p)
		if err = d.Deliver(p[wire.HeaderSize:], h, func(m []byte) { got = append(got, string(m)) }); err != nil {
			break
		}
	}
	if !errors.Is(err, ErrProtocol) || !cmp.Equal(got, []string{"a", "bb"}) {
		t.Fatalf("OnMessage: %q, then %v; want [a bb], then ErrProtocol", got, err)
	}
}
