package netio

import "testing"

// slicedLink is a link as mayPost sees it: mode on a provider that copies
// in software or not, sends of the given sizes in flight.
func slicedLink(mode Mode, softCopy bool, inFlight ...int) *link {
	l := &link{cfg: linkConfig{mode: mode}, sizes: linkSizes{softCopy: softCopy}}
	for _, n := range inFlight {
		l.txPosted++
		l.txInFlight += n
	}
	return l
}

// TestMayPost: what a link may post on top of what is in flight, as the
// slice rule says (slice.go): bulk links on software-copy providers keep
// at most sliceBytes posted, and always at least one send, however large.
func TestMayPost(t *testing.T) {
	const page = 1 << 20
	cases := []struct {
		name     string
		mode     Mode
		softCopy bool
		inFlight []int
		n        int
		want     bool
	}{
		{"a page, nothing in flight", HighThroughput, true, nil, page, true},
		{"a page beside a page", HighThroughput, true, []int{page}, page, false},
		{"a small send beside a page", HighThroughput, true, []int{page}, 1, false},
		{"small sends within the slice", HighThroughput, true, []int{64 << 10, 64 << 10}, sliceBytes - 128<<10, true},
		{"a small send just beyond the slice", HighThroughput, true, []int{64 << 10, 64 << 10}, sliceBytes - 128<<10 + 1, false},
		{"pages on a hardware provider", HighThroughput, false, []int{page, page, page}, page, true},
		{"a LowLatency link", LowLatency, true, []int{page, page, page}, page, true},
	}
	for _, c := range cases {
		l := slicedLink(c.mode, c.softCopy, c.inFlight...)
		if got := l.mayPost(c.n); got != c.want {
			t.Errorf("%s: mayPost(%d) = %v, want %v", c.name, c.n, got, c.want)
		}
	}
}

// TestCopiesInSoftware: the providers whose sends the reactor thread
// copies, alone or under a utility layer, and hardware ones.
func TestCopiesInSoftware(t *testing.T) {
	for p, want := range map[string]bool{"tcp": true, "sockets": true, "tcp;ofi_rxm": true, "udp;ofi_rxd": true, "verbs": false, "verbs;ofi_rxm": false, "efa": false, "shm": false} {
		if got := copiesInSoftware(p); got != want {
			t.Errorf("copiesInSoftware(%q) = %v, want %v", p, got, want)
		}
	}
}
