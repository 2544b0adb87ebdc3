package page

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/netio-go/netio/internal/wire"
)

// appendAll lays out a batch exactly as appendWhole does message by
// message, and stops at the first message over max or not fitting.
func TestAppendAllMatchesAppendWhole(t *testing.T) {
	msg := func(n int, b byte) []byte { return bytes.Repeat([]byte{b}, n) }
	for _, f := range []Format{Plain, Packed, Tagged(false)} {
		for _, tc := range []struct {
			name  string
			msgs  [][]byte
			max   int
			taken int
		}{
			{"all fit", [][]byte{msg(1, 'a'), msg(0, 'b'), msg(64, 'c'), msg(7, 'd')}, 100, 4},
			{"stops at one over max", [][]byte{msg(3, 'a'), msg(101, 'b'), msg(3, 'c')}, 100, 1},
			{"stops where the page is full", [][]byte{msg(200, 'a'), msg(200, 'b'), msg(200, 'c'), msg(1, 'd')}, 1000, 2},
			{"empty batch", nil, 100, 0},
		} {
			const payload = 512
			buf1, buf2 := make([]byte, wire.HeaderSize+payload), make([]byte, wire.HeaderSize+payload)
			w1, w2 := f.Writer(payload), f.Writer(payload)
			w1.Open(buf1, 0)
			w2.Open(buf2, 0)
			n, sum := w1.AppendAll(tc.msgs, tc.max)
			want := 0
			var wantSum uint64
			for _, p := range tc.msgs {
				if len(p) > tc.max || !w2.AppendWhole(p) {
					break
				}
				want++
				wantSum += uint64(len(p))
			}
			if n != tc.taken || n != want || sum != wantSum {
				t.Errorf("%d %s: appendAll took %d (%d bytes), appendWhole %d (%d bytes), want %d", f.Kind, tc.name, n, sum, want, wantSum, tc.taken)
			}
			if diff := cmp.Diff(buf2, buf1); diff != "" || w1.off != w2.off {
				t.Errorf("%d %s: pages differ (offsets %d, %d):\n%s", f.Kind, tc.name, w1.off, w2.off, diff)
			}
		}
	}
}

// records reads what record reads, record by record, and stops where it
// stops: at a message that goes on in the next page, over the limit, or at
// the end of dst.
func TestRecordsMatchesRecord(t *testing.T) {
	page := func(lens ...int) []byte {
		var b []byte
		for i, n := range lens {
			b = binary.LittleEndian.AppendUint64(b, uint64(n))
			if n < 1000 { // a length that lies about what follows is left as it is
				b = append(b, bytes.Repeat([]byte{byte(i)}, n)...)
			}
		}
		return b
	}
	for _, tc := range []struct {
		name string
		buf  []byte
		max  uint64
		dst  int
	}{
		{"whole page", page(1, 0, 64, 5), 100, 10},
		{"dst full first", page(1, 2, 3, 4), 100, 2},
		{"over the limit", page(3, 200, 3), 100, 10},
		{"goes on in the next page", page(3, 4, 5000), 1 << 20, 10},
		{"ends with part of a prefix", append(page(3), 1, 2, 3), 100, 10},
	} {
		c1 := Cursor{Buf: tc.buf, Max: tc.max}
		c2 := c1
		dst := make([][]byte, tc.dst)
		n, sum := Plain.Reader().Records(&c1, dst)
		var want [][]byte
		var wantSum uint64
		for len(want) < tc.dst {
			b, ok := Plain.Reader().Record(&c2)
			if !ok {
				break
			}
			want = append(want, b)
			wantSum += uint64(len(b))
		}
		if diff := cmp.Diff(want, dst[:n]); diff != "" || sum != wantSum || c1.Off != c2.Off || c1.InMsg != c2.InMsg {
			t.Errorf("%s: records (-record +records):\n%s\nbytes %d, want %d; cursor %+v, want %+v", tc.name, diff, sum, wantSum, c1, c2)
		}
	}
}

// CountRecords counts the tagged records that begin in a page: what a
// publisher that gives up on its unsent pages reports undelivered.
func TestCountRecords(t *testing.T) {
	w := Tagged(false).Writer(4096 - wire.HeaderSize)
	page := make([]byte, 4096)
	w.Open(page, 0)
	for i := 0; i < 5; i++ {
		w.SetRecord(1, uint64(i))
		w.Begin(100)
		w.Put(make([]byte, 100))
	}
	w.SetRecord(1, 5)
	w.Begin(10000) // a message larger than the page begins in it
	w.Put(make([]byte, 10000))
	n := w.Seal()
	h := wire.ReadHeader(page)
	if got := CountRecords(page[wire.HeaderSize:n], h.MsgLen, TaggedPrefixSize); got != 6 {
		t.Fatalf("%d records counted, want 6", got)
	}
	// A page that continues a message, then holds two.
	w.Open(page, 300)
	w.Put(make([]byte, 300))
	for i := 0; i < 2; i++ {
		w.SetRecord(2, uint64(i))
		w.Begin(8)
		w.Put(make([]byte, 8))
	}
	n = w.Seal()
	h = wire.ReadHeader(page)
	if got := CountRecords(page[wire.HeaderSize:n], h.MsgLen, TaggedPrefixSize); got != 2 {
		t.Fatalf("%d records counted after a continuation, want 2", got)
	}
}
