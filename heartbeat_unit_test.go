package netio

import (
	"testing"
	"time"
)

// Heartbeat deadlines of links with the same interval fall on shared
// instants, a grain of 1/64 of the interval apart (at most clockSlack), and
// are never moved earlier or by a grain or more.
func TestBeatGrainUp(t *testing.T) {
	for _, period := range []time.Duration{minBeatInterval, 100 * time.Millisecond, time.Second, time.Minute} {
		grain := min(period/64, clockSlack)
		base := time.Now().Add(period)
		seen := map[time.Time]int{}
		for i := range 1000 {
			when := base.Add(time.Duration(i) * grain / 100)
			got := beatGrainUp(when, period)
			if got.Before(when) || !got.Before(when.Add(grain)) {
				t.Fatalf("period %v: %v rounded to %v, want within [0, %v) later", period, when, got, grain)
			}
			if off := got.Sub(beatEpoch); off%grain != 0 {
				t.Fatalf("period %v: %v is %v past the epoch, not a multiple of %v", period, got, off, grain)
			}
			seen[got]++
		}
		// 1,000 deadlines spread over 10 grains share at most 11 instants.
		if len(seen) > 11 {
			t.Errorf("period %v: 1,000 deadlines over 10 grains fell on %d instants", period, len(seen))
		}
	}
	if when := time.Now(); !beatGrainUp(when, 0).Equal(when) {
		t.Error("no period: the deadline moved")
	}
}
