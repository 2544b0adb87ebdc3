package netio

import (
	"testing"

	"github.com/netio-go/netio/ofi"
)

// busyFake is a driven link whose turns the test scripts.
type busyFake struct {
	dirty   bool
	onPoll  func() bool // the turn's completions; true: it did work
	settles bool
	beats   bool // all it did was receive heartbeats
}

func (f *busyFake) pollCQ() bool {
	if f.onPoll != nil {
		return f.onPoll()
	}
	return false
}
func (f *busyFake) urgent() bool                 { return false }
func (f *busyFake) postDeferred() bool           { return false }
func (f *busyFake) postWritten() bool            { return false }
func (f *busyFake) queue() (*fabricRes, *ofi.CQ) { return nil, nil }
func (f *busyFake) setDirty(d bool) bool         { was := f.dirty; f.dirty = d; return was }
func (f *busyFake) settled() bool                { return f.settles }
func (f *busyFake) onlyBeats() bool              { return f.beats }

// quietOf is d's count of quiet rounds in e's busy list, or -1.
func quietOf(e *engine, d driven) int {
	for _, b := range e.dirty {
		if b.d == d {
			return int(b.quiet)
		}
	}
	return -1
}

// A link that works in a round starts its quiet count again even when a
// link that ended in its turn moved it in the busy list, and the link moved
// into its place keeps counting: a count left with the wrong link would let
// a working link be armed as quiet.
func TestEngineQuietCountFollowsLinks(t *testing.T) {
	e := &engine{}
	a, b, c := &busyFake{}, &busyFake{}, &busyFake{}
	for _, d := range []*busyFake{a, b, c} {
		e.markDirty(d)
	}
	for range 10 {
		e.Poll()
	}
	b.onPoll = func() bool {
		e.forget(a) // a ended in b's turn
		return true
	}
	e.Poll()
	if q := quietOf(e, a); q != -1 {
		t.Fatalf("ended link still in the busy list (quiet %d)", q)
	}
	// The round's end counts one more for every link still listed.
	if q := quietOf(e, b); q != 1 {
		t.Errorf("link that worked: quiet %d, want 1", q)
	}
	if q := quietOf(e, c); q != 11 {
		t.Errorf("link that did nothing: quiet %d, want 11", q)
	}
}

// A link that only received heartbeats is tried for pruning after
// beatQuietRounds, one that did anything else only after quietRounds: no
// answer follows a heartbeat.
func TestEngineBeatOnlyLinkLeavesEarly(t *testing.T) {
	e := &engine{}
	beat, work := &busyFake{beats: true, settles: true}, &busyFake{settles: true}
	e.markDirty(beat)
	e.markDirty(work)
	for range beatQuietRounds + 1 {
		e.Poll()
	}
	// The fakes have no queue to arm, so a link tried stays listed and
	// its count stops where it was tried.
	if q := quietOf(e, beat); q != beatQuietRounds {
		t.Errorf("beat-only link: quiet %d after %d rounds, want %d (tried)", q, beatQuietRounds+1, beatQuietRounds)
	}
	if q := quietOf(e, work); q != beatQuietRounds+1 {
		t.Errorf("working link: quiet %d, want %d", q, beatQuietRounds+1)
	}
}
