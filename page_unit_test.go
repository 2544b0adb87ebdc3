package netio

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// appendAll lays out a batch exactly as appendWhole does message by
// message, and stops at the first message over max or not fitting.
func TestAppendAllMatchesAppendWhole(t *testing.T) {
	msg := func(n int, b byte) []byte { return bytes.Repeat([]byte{b}, n) }
	for _, f := range []pages{plainPages, packedPages, taggedPages(false)} {
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
			buf1, buf2 := make([]byte, headerSize+payload), make([]byte, headerSize+payload)
			w1, w2 := f.writer(payload).(*pageWriter), f.writer(payload).(*pageWriter)
			w1.open(buf1, 0)
			w2.open(buf2, 0)
			n, sum := w1.appendAll(tc.msgs, tc.max)
			want := 0
			var wantSum uint64
			for _, p := range tc.msgs {
				if len(p) > tc.max || !w2.appendWhole(p) {
					break
				}
				want++
				wantSum += uint64(len(p))
			}
			if n != tc.taken || n != want || sum != wantSum {
				t.Errorf("%d %s: appendAll took %d (%d bytes), appendWhole %d (%d bytes), want %d", f.kind, tc.name, n, sum, want, wantSum, tc.taken)
			}
			if diff := cmp.Diff(buf2, buf1); diff != "" || w1.off != w2.off {
				t.Errorf("%d %s: pages differ (offsets %d, %d):\n%s", f.kind, tc.name, w1.off, w2.off, diff)
			}
		}
	}
}
