package netio

import (
	"testing"
	"time"
)

// slicedLink is a link as mayPost sees it: mode on a provider that copies
// in software or not, sends of the given sizes in flight.
func slicedLink(e *engine, mode Mode, softCopy bool, inFlight ...int) *link {
	l := &link{eng: e, cfg: linkConfig{mode: mode}, sizes: linkSizes{softCopy: softCopy}}
	for _, n := range inFlight {
		l.txPosted++
		l.txInFlight += n
	}
	return l
}

// TestMayPost: what a link may post on top of what is in flight, as the
// slice rule says (slice.go), with the LowLatency links busy and quiet.
func TestMayPost(t *testing.T) {
	const page = 1 << 20
	busy := &engine{urgentAt: time.Now().Add(time.Hour)} // in the future: busy whenever the test runs
	quiet := &engine{urgentAt: time.Now().Add(-quietFor)}
	never := &engine{} // no LowLatency link ever did anything
	cases := []struct {
		name     string
		e        *engine
		mode     Mode
		softCopy bool
		inFlight []int
		n        int
		want     bool
	}{
		{"nothing in flight, LL busy", busy, HighThroughput, true, nil, page, true},
		{"a page in flight, LL busy", busy, HighThroughput, true, []int{page}, page, false},
		{"a page in flight, LL quiet", quiet, HighThroughput, true, []int{page}, page, true},
		{"a page in flight, LL never used", never, HighThroughput, true, []int{page}, page, true},
		{"two pages in flight, LL quiet", quiet, HighThroughput, true, []int{page, page}, page, false},
		{"small sends within the slice, LL busy", busy, HighThroughput, true, []int{64 << 10, 64 << 10}, 128 << 10, true},
		{"small send beyond the slice, LL busy", busy, HighThroughput, true, []int{128 << 10, 128 << 10}, 1, false},
		{"hardware provider, LL busy", busy, HighThroughput, false, []int{page, page, page}, page, true},
		{"LowLatency link, LL busy", busy, LowLatency, true, []int{page, page, page}, page, true},
	}
	for _, c := range cases {
		l := slicedLink(c.e, c.mode, c.softCopy, c.inFlight...)
		if got := l.mayPost(c.n); got != c.want {
			t.Errorf("%s: mayPost(%d) = %v, want %v", c.name, c.n, got, c.want)
		}
	}
}

// TestMayPostAfterCompletion: sends that completed no longer count, so a
// bulk link whose page completed may post the next while LL is busy.
func TestMayPostAfterCompletion(t *testing.T) {
	busy := &engine{urgentAt: time.Now().Add(time.Hour)}
	l := slicedLink(busy, HighThroughput, true, 1<<20)
	if l.mayPost(1 << 20) {
		t.Fatal("a second page posted beside one in flight while LL is busy")
	}
	l.tx.done.Store(1)
	l.txInFlight = 0
	if !l.mayPost(1 << 20) {
		t.Fatal("no page may be posted once the one in flight completed")
	}
}
