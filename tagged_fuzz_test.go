package netio

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/netio-go/netio/internal/page"
	"github.com/netio-go/netio/internal/page/pagetest"
	"github.com/netio-go/netio/internal/seedcorpus"
	"github.com/netio-go/netio/internal/wire"
)

// FuzzTaggedPages is FuzzPageDecoder for the pages of publish/subscribe
// (kind wire.KindTagged: each record's length followed by its tag and sequence
// number), read the way a subscriber's dispatcher reads them, with
// receiver.nextRecords. The input is FuzzPageDecoder's (see
// pagetest.ParseInput), its honest pages tagged; the read style bits are
// unused and the size s makes batches of s+1 records. The Conn is held to
// pagetest.Model decoding tagged pages: the same records, tags and sequence
// numbers, the same end, and no allocation that a record's length asks for
// before its bytes arrive.
func FuzzTaggedPages(f *testing.F) {
	seedcorpus.Add(f, pagetest.TaggedSeeds())
	f.Fuzz(func(t *testing.T, data []byte) { runTagged(t, data) })
}

// runTagged delivers the input's pages, reads them back with nextRecords
// and checks the records against the model. It returns the input and how
// reading ended.
func runTagged(t *testing.T, data []byte) (*pagetest.Input, error) {
	d := pagetest.ParseInput(data, true)
	m := &d.Model
	bufSize := wire.HeaderSize + 1
	for _, b := range d.Bufs {
		bufSize = max(bufSize, len(b))
	}
	c := newReadingConn(t, len(d.Bufs), bufSize, d.Max)
	f := page.Tagged(false)
	c.link.cfg.framing = f
	c.recv.frames = f.Reader()
	before := heapAllocs()
	pushed := deliver(c, d.Bufs, d.Bypass)
	batch := make([]record, d.Size+1)
	var got []record
	var end error
	for calls := 1; end == nil; calls++ {
		if calls > 2*len(m.Msgs)+4 {
			t.Fatalf("read %d times (%d records) and still going: more than the input holds", calls, len(got))
		}
		n, err := c.recv.nextRecords(batch)
		switch {
		case err != nil && n != 0, err == nil && (n < 1 || n > len(batch)):
			t.Fatalf("nextRecords of %d: %d, %v", len(batch), n, err)
		case err != nil:
			end = err
		}
		for _, r := range batch[:n] {
			checkInRx(t, c, r.b)
			got = append(got, record{tag: r.tag, seq: r.seq, b: bytes.Clone(r.b)})
		}
	}
	if _, err := c.recv.nextRecords(batch); errorClass(err) != errorClass(end) {
		t.Fatalf("nextRecords after %v returned %v; want that error again", end, err)
	}
	checkAllocs(t, before, len(data), c)
	checkEnd(t, end, m.End())
	if len(got) != len(m.Msgs) {
		t.Fatalf("read %d records before %v; the pages hold %d", len(got), end, len(m.Msgs))
	}
	for i, r := range got {
		if !bytes.Equal(r.b, m.Msgs[i]) || r.tag != m.Tags[i][0] || r.seq != m.Tags[i][1] {
			t.Fatalf("record %d: tag %d seq %d, %d bytes %.64x; the pages hold tag %d seq %d, %d bytes %.64x",
				i, r.tag, r.seq, len(r.b), r.b, m.Tags[i][0], m.Tags[i][1], len(m.Msgs[i]), m.Msgs[i])
		}
	}
	finish(t, c, nil, d.Size&1 != 0, pushed)
	return d, end
}

func TestTaggedPagesSeeds(t *testing.T) {
	seedcorpus.Check(t, "FuzzTaggedPages", pagetest.TaggedSeeds(), func(t *testing.T, s seedcorpus.Seed) {
		d, end := runTagged(t, s.In)
		if errorClass(end) != errorClass(s.End) {
			t.Fatalf("ends with %v, want %s", end, errorClass(s.End))
		}
		if len(d.Model.Msgs) != s.Msgs {
			t.Fatalf("%d records before the end, want %d", len(d.Model.Msgs), s.Msgs)
		}
	})
}

// FuzzTaggedRoundTrip writes tagged records the way a publisher's link
// does (the record's tag and sequence number set on the page writer, then
// the Conn's Write or TryWrite, Flush), into packed pages (a LowLatency
// subscriber's) or lazy ones, and reads them back with nextRecords: every
// record arrives whole, with its tag and sequence number, in order, and
// one above the largest message is refused. The input is
// FuzzPageRoundTrip's (see parseRoundTripInput), with pages of at least a
// tagged prefix, packed pages for an odd read style, and batches written
// one message at a time; on packed pages, the messages of a batch are
// written while the page before them is still in flight, so that they
// share the open page until the reactor seals it.
func FuzzTaggedRoundTrip(f *testing.F) {
	addSeeds(f, taggedRoundTripSeeds())
	f.Fuzz(func(t *testing.T, data []byte) { runTaggedRoundTrip(t, data) })
}

func runTaggedRoundTrip(t *testing.T, data []byte) {
	pageCap, style, size, _, maxSend, msgs := parseRoundTripInput(data)
	pageCap = page.TaggedPrefixSize + (pageCap-page.PrefixSize)%(4089-page.TaggedPrefixSize+page.PrefixSize)
	packed := style&1 != 0
	slots := 1
	for _, m := range msgs {
		slots = max(slots, 3+(page.TaggedPrefixSize+len(m.b))/pageCap)
	}
	w := newWritingConn(t, pageCap, slots, maxSend)
	pw := page.Tagged(packed).Writer(pageCap)
	w.send.frames, w.send.lazy, w.send.pack = pw, !packed, packed
	if packed {
		w.link.packed = &w.send
	}
	var pages [][]byte
	var want []record
	for i, m := range msgs {
		if m.flush {
			if err := w.Flush(); err != nil {
				t.Fatalf("Flush before message %d: %v", i, err)
			}
		}
		tag, seq := uint64(i%3)<<62|uint64(len(m.b)), uint64(i)*0x9e3779b97f4a7c15
		pw.SetRecord(tag, seq)
		var n int
		var err error
		if m.try {
			n, err = w.TryWrite(m.b)
		} else {
			n, err = w.Write(m.b)
		}
		switch {
		case len(m.b) > maxSend:
			if n != 0 || !errors.Is(err, ErrMessageTooLarge) {
				t.Fatalf("write %d of %d bytes, limit %d: %d, %v; want ErrMessageTooLarge", i, len(m.b), maxSend, n, err)
			}
		case n != len(m.b) || err != nil:
			t.Fatalf("write %d of %d bytes with %d free send buffers: %d, %v", i, len(m.b), slots, n, err)
		default:
			want = append(want, record{tag: tag, seq: seq, b: m.b})
		}
		if !packed {
			pages = append(pages, sentTaggedPages(t, w, 0)...)
			continue
		}
		if i+1 < len(msgs) && msgs[i+1].batch {
			// The next message queues behind the last page sent: it
			// stays in flight (one page at most, so that the next
			// write finds the buffers it needs).
			pages = append(pages, sentTaggedPages(t, w, 1)...)
			continue
		}
		w.link.packed.sealOpen() // the reactor, about to post
		if w.send.open {
			t.Fatalf("after write %d and the reactor's seal, a packed page is still open", i)
		}
		pages = append(pages, sentTaggedPages(t, w, 0)...)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	pages = append(pages, sentTaggedPages(t, w, 0)...)

	c := newReadingConn(t, len(pages), wire.HeaderSize+pageCap, uint64(maxSend))
	f := page.Tagged(packed)
	c.link.cfg.framing = f
	c.recv.frames = f.Reader()
	pushed := deliver(c, pages, false)
	if len(pushed) != len(pages) {
		t.Fatalf("the reactor's checks refused page %d of %d: %v", len(pushed), len(pages), c.link.life.Err())
	}
	batch := make([]record, size+1)
	var got []record
	for calls := 1; ; calls++ {
		if calls > 2*len(want)+4 {
			t.Fatalf("read %d times (%d records) and still going", calls, len(got))
		}
		n, err := c.recv.nextRecords(batch)
		if err != nil {
			checkEnd(t, err, io.EOF)
			break
		}
		for _, r := range batch[:n] {
			got = append(got, record{tag: r.tag, seq: r.seq, b: bytes.Clone(r.b)})
		}
	}
	if len(got) != len(want) {
		t.Fatalf("read %d records, %d were written", len(got), len(want))
	}
	for i, r := range got {
		if r.tag != want[i].tag || r.seq != want[i].seq || !bytes.Equal(r.b, want[i].b) {
			t.Fatalf("record %d: tag %x seq %x, %d bytes; wrote tag %x seq %x, %d bytes", i, r.tag, r.seq, len(r.b), want[i].tag, want[i].seq, len(want[i].b))
		}
	}
	finish(t, c, nil, size&1 != 0, pushed)
}

// sentTaggedPages takes the pages c has sealed but the last keep, as if
// the reactor had posted them and their sends had completed.
func sentTaggedPages(t *testing.T, c *Conn, keep uint64) (pages [][]byte) {
	q := &c.link.tx
	done, head := q.done.Load(), q.head.Load()
	if head-done <= keep {
		return nil
	}
	head -= keep
	for ; done < head; done++ {
		slot := int(done % uint64(q.slots))
		n := int(q.lens[slot])
		page := bytes.Clone(q.mem[slot*q.bufSize : slot*q.bufSize+n])
		if h := wire.ReadHeader(page); n < wire.HeaderSize || h.Kind != wire.KindTagged || int(h.FragLen) != n-wire.HeaderSize {
			t.Fatalf("tagged page of %d bytes with header %+v", n, wire.ReadHeader(page))
		}
		pages = append(pages, page)
	}
	q.done.Store(head)
	return pages
}

func taggedRoundTripSeeds() []fuzzSeed {
	const pageCap = 4096 - wire.HeaderSize
	// Pages are packed for an odd read style, lazy for an even one.
	small := newRoundTripSeed(pageCap, nextMessageStyle, 0, false, 0)
	for i := range 20 {
		small = small.msg(i*13, 0)
	}
	lazySmall := append(newRoundTripSeed(pageCap, readMessageStyle, 3, false, 0), small[4:]...)
	queued := newRoundTripSeed(pageCap, nextMessageStyle, 3, false, 0)
	for i := range 20 {
		queued = queued.msg(i*13, rtBatch)
	}
	return []fuzzSeed{
		{"small-lazy", lazySmall, io.EOF, 0},
		{"small-packed", small, io.EOF, 0},
		{"queued-packed", queued, io.EOF, 0},
		{"queued-packed-spanning", newRoundTripSeed(128, nextBatchStyle, 1, false, 0).msg(10, 0).msg(20, rtBatch).msg(300, rtBatch|rtLong).msg(5, rtBatch).msg(90, rtBatch).msg(91, 0).msg(7, rtBatch), io.EOF, 0},
		{"exact-fits", newRoundTripSeed(100, nextMessageStyle, 0, false, 0).msg(76, 0).msg(60, 0).msg(0, 0).msg(52, 0).msg(77, 0), io.EOF, 0},
		{"split-large-lazy", newRoundTripSeed(256, appendMessageStyle, 2, false, 0).msg(10, 0).msg(1000, rtLong).msg(5, 0).msg(232, 0).msg(233, 0), io.EOF, 0},
		{"split-large-packed", newRoundTripSeed(256, nextBatchStyle, 5, false, 0).msg(10, 0).msg(1000, rtLong).msg(5, 0).msg(232, 0).msg(233, 0), io.EOF, 0},
		{"flushes-and-trywrite", newRoundTripSeed(pageCap, nextMessageStyle, 1, false, 0).msg(10, rtFlush).msg(20, rtTry).msg(0, rtFlush).msg(700, rtTry).msg(30, 0), io.EOF, 0},
		{"tiny-pages", newRoundTripSeed(page.TaggedPrefixSize, mixedStyle, 0, false, 0).msg(0, 0).msg(1, 0).msg(30, 0).msg(2, rtFlush), io.EOF, 0},
		{"too-large-refused", newRoundTripSeed(pageCap, nextMessageStyle, 0, false, 4).msg(128, 0).msg(129, 0).msg(5, rtTry).msg(200, rtTry).msg(7, 0), io.EOF, 0},
	}
}

func TestTaggedRoundTripSeeds(t *testing.T) {
	checkSeedCorpus(t, "FuzzTaggedRoundTrip", taggedRoundTripSeeds(), func(t *testing.T, s fuzzSeed) { runTaggedRoundTrip(t, s.in) })
}
