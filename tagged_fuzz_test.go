package netio

import (
	"bytes"
	"encoding/binary"
	"io"
	"testing"
)

// FuzzTaggedPages is FuzzPageDecoder for the pages of publish/subscribe
// (kind kindTagged: each record's length followed by its tag and sequence
// number), read the way a subscriber's dispatcher reads them, with
// receiver.nextRecords. The input is FuzzPageDecoder's (see
// parseDecoderInput), its honest pages tagged; the read style bits are
// unused and the size s makes batches of s+1 records. The Conn is held to
// pageModel decoding tagged pages: the same records, tags and sequence
// numbers, the same end, and no allocation that a record's length asks for
// before its bytes arrive.
func FuzzTaggedPages(f *testing.F) {
	addSeeds(f, taggedSeeds())
	f.Fuzz(func(t *testing.T, data []byte) { runTagged(t, data) })
}

// runTagged delivers the input's pages, reads them back with nextRecords
// and checks the records against the model. It returns the input and how
// reading ended.
func runTagged(t *testing.T, data []byte) (*decoderInput, error) {
	d := parseDecoderInput(data, true)
	m := &d.model
	bufSize := headerSize + 1
	for _, b := range d.bufs {
		bufSize = max(bufSize, len(b))
	}
	c := newReadingConn(t, len(d.bufs), bufSize, d.max)
	f := taggedPages(false)
	c.link.frames = f.checker(d.max)
	c.recv.frames = f.reader()
	before := heapAllocs()
	pushed := deliver(c, d.bufs, d.bypass)
	batch := make([]record, d.size+1)
	var got []record
	var end error
	for calls := 1; end == nil; calls++ {
		if calls > 2*len(m.msgs)+4 {
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
	checkEnd(t, end, m.end())
	if len(got) != len(m.msgs) {
		t.Fatalf("read %d records before %v; the pages hold %d", len(got), end, len(m.msgs))
	}
	for i, r := range got {
		if !bytes.Equal(r.b, m.msgs[i]) || r.tag != m.tags[i][0] || r.seq != m.tags[i][1] {
			t.Fatalf("record %d: tag %d seq %d, %d bytes %.64x; the pages hold tag %d seq %d, %d bytes %.64x",
				i, r.tag, r.seq, len(r.b), r.b, m.tags[i][0], m.tags[i][1], len(m.msgs[i]), m.msgs[i])
		}
	}
	finish(t, c, nil, d.size&1 != 0, pushed)
	return d, end
}

// trec is a tagged record: an 8-byte length n, tag, seq, and body (which
// may be shorter).
func trec(n uint64, tag, seq uint64, body []byte) []byte {
	b := binary.LittleEndian.AppendUint64(nil, n)
	b = binary.LittleEndian.AppendUint64(b, tag)
	b = binary.LittleEndian.AppendUint64(b, seq)
	return append(b, body...)
}

// trecs are whole tagged records, of tag 7 and sequence numbers from seq.
func trecs(seq uint64, msgs ...string) []byte {
	var b []byte
	for i, m := range msgs {
		b = append(b, trec(uint64(len(m)), 7, seq+uint64(i), []byte(m))...)
	}
	return b
}

func taggedSeeds() []fuzzSeed {
	sub := func(size int) decoderSeed { return newDecoderSeed(0, size, false, maxBy250) }
	huge := func(size int) decoderSeed { return newDecoderSeed(0, size, false, 255) }
	hundred := fill(100, 'h')
	return []fuzzSeed{
		{"records", sub(15).page(trecs(0, "a", "", "hello")).page(trecs(3, "b")), io.EOF, 4},
		{"records-one-at-a-time", sub(0).page(trecs(0, "a", "bb", "ccc")), io.EOF, 3},
		{"tags-and-seqs-extreme", sub(3).page(cat(trec(1, 0, 0, []byte("z")), trec(2, 1<<64-1, 1<<64-1, []byte("mx")), trec(0, 1<<63, 5, nil))), io.EOF, 3},
		{"eager-pages", sub(1).page(trecs(0, "one")).page(trecs(1, "two")).page(trecs(2, "three")), io.EOF, 3},
		{"split-two-pages", sub(2).page(cat(trecs(0, "x"), trec(300, 9, 1, hundred))).page(cat(fill(200, 'n'), trecs(2, "y"))), io.EOF, 3},
		{"split-three-pages", newDecoderSeed(0, 4, false, 0).page(trec(3000, 1, 1, fill(1000, 'a'))).page(fill(1000, 'b')).page(cat(fill(1000, 'c'), trecs(2, "end"))), io.EOF, 2},
		{"at-maximum", sub(0).page(trec(1000, 1, 1, fill(1000, 'm'))), io.EOF, 1},
		{"over-maximum", sub(0).page(cat(trecs(0, "ok"), trec(1001, 1, 1, fill(10, 'o')))), ErrMessageTooLarge, 1},
		{"over-maximum-huge", sub(0).page(trec(1<<64-1, 1, 1, fill(10, 'o'))), ErrMessageTooLarge, 0},
		{"lying-length-within-huge-maximum", huge(0).page(cat(trecs(0, "ok"), trec(1<<39, 1, 1, fill(10, 'l')))), io.ErrUnexpectedEOF, 1},
		{"lying-length-within-huge-maximum-next-page", huge(2).page(trec(1<<40, 1, 1, fill(10, 'l'))).page(fill(50, 'm')), io.ErrUnexpectedEOF, 0},
		{"lying-length-short", sub(0).page(trec(2, 1, 1, []byte("abcdef"))), ErrProtocol, 1},
		{"lying-length-next-page-new", sub(0).page(trec(100, 1, 1, fill(10, 'l'))).raw(header{kind: kindTagged, fragLen: 25}, trecs(1, "n")), ErrProtocol, 0},
		{"prefix-truncated", sub(0).page(cat(trecs(0, "ok"), fill(20, 0))), ErrProtocol, 1},
		{"plain-record-in-tagged-page", sub(0).page(rec(1, []byte("x"))), ErrProtocol, 0},
		{"continuation-one-more", sub(0).page(trec(100, 1, 1, fill(50, 'a'))).page(cat(fill(50, 'b'), trecs(1, "c")), 1), ErrProtocol, 0},
		{"continuation-on-first-page", sub(0).page(cat(fill(5, 'c'), trecs(0, "x")), 5), ErrProtocol, 0},
		{"empty-page-inside-message", sub(0).page(trec(100, 1, 1, fill(50, 'a'))).page(nil), ErrProtocol, 0},
		{"msglen-above-fraglen", sub(0).page(trecs(0, "ok")).raw(header{kind: kindTagged, fragLen: 5, msgLen: 10}, fill(5, 'x')), ErrProtocol, 1},
		{"msglen-above-fraglen-reader", newDecoderSeed(0, 0, true, maxBy250).page(trec(100, 1, 1, fill(50, 'a'))).raw(header{kind: kindTagged, fragLen: 5, msgLen: 50}, fill(5, 'x')), ErrProtocol, 0},
		{"plain-page-kind", sub(0).page(trecs(0, "ok")).raw(header{kind: kindPage, fragLen: 9}, rec(1, []byte("x"))), ErrProtocol, 1},
		{"data-kind", sub(0).page(trecs(0, "ok")).raw(header{kind: kindData, flags: flagLast, fragLen: 3, msgLen: 3}, []byte("abc")), ErrProtocol, 1},
		{"ack-kind", sub(0).page(trecs(0, "ok")).raw(header{kind: kindAck, fragLen: 16}, fill(16, 0)), ErrProtocol, 1},
		{"fraglen-says-more", sub(0).page(trecs(0, "ok")).page(trecs(1, "lie"), lieFrag), ErrProtocol, 1},
		{"truncated-header", sub(0).page(trecs(0, "ok")).truncated(8), ErrProtocol, 1},
		{"page-after-fin", sub(0).page(trecs(0, "ok")).raw(header{kind: kindFin, flags: flagLast}, nil).page(trecs(1, "zombie")), ErrProtocol, 1},
		{"fin-inside-message", sub(0).page(trec(20, 1, 1, fill(10, 'a'))).raw(header{kind: kindFin, flags: flagLast}, nil), io.ErrUnexpectedEOF, 0},
		{"credit-between-pages", sub(0).page(trec(20, 1, 1, fill(10, 'a'))).raw(header{kind: kindCredit, credits: 3}, nil).page(fill(10, 'b')), io.EOF, 1},
	}
}

func TestTaggedPagesSeeds(t *testing.T) {
	checkSeedCorpus(t, "FuzzTaggedPages", taggedSeeds(), func(t *testing.T, s fuzzSeed) {
		d, end := runTagged(t, s.in)
		if errorClass(end) != errorClass(s.end) {
			t.Fatalf("ends with %v, want %s", end, errorClass(s.end))
		}
		if len(d.model.msgs) != s.msgs {
			t.Fatalf("%d records before the end, want %d", len(d.model.msgs), s.msgs)
		}
	})
}
