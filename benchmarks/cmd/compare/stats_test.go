package main

import (
	"math"
	"testing"
	"time"
)

func TestSummarize(t *testing.T) {
	for _, tc := range []struct {
		in            []float64
		med, min, max float64
		n             int
	}{
		{[]float64{3, 1, 2}, 2, 1, 3, 3},
		{[]float64{4, 1, 3, 2}, 2.5, 1, 4, 4},
		{[]float64{5}, 5, 5, 5, 1},
		{[]float64{7, math.NaN(), 1}, 4, 1, 7, 2},
	} {
		s := summarize(tc.in)
		if s.Median != tc.med || s.Min != tc.min || s.Max != tc.max || s.N != tc.n {
			t.Errorf("summarize(%v) = %+v, want median %v min %v max %v n %d", tc.in, s, tc.med, tc.min, tc.max, tc.n)
		}
	}
	if s := summarize(nil); s.N != 0 || !math.IsNaN(s.Median) {
		t.Errorf("summarize(nil) = %+v, want N 0 and NaN", s)
	}
	in := []float64{3, 1, 2}
	summarize(in)
	if in[0] != 3 {
		t.Error("summarize reordered its argument")
	}
}

func TestPercentile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i))
	}
	for q, want := range map[float64]time.Duration{0.5: 50, 0.99: 99, 1: 100, 0: 1, 0.001: 1} {
		if got := percentile(d, q); got != want {
			t.Errorf("percentile(1..100, %v) = %v, want %v", q, got, want)
		}
	}
	if got := percentile([]time.Duration{7}, 0.99); got != 7 {
		t.Errorf("percentile of one sample = %v", got)
	}
	if got := percentile(nil, 0.5); got != 0 {
		t.Errorf("percentile(nil) = %v", got)
	}
}

// The window is what the loop saw of the measured phase: it starts at the
// first tick after the warm-up and ends at the first tick after the
// window's length, so it is the window's length give or take the longest
// gap between two ticks, which the test measures rather than assumes (a
// loaded machine can stall the loop for tens of milliseconds). A run in
// which a stall swallowed half the window says nothing about the meter and
// is done again.
func TestMeterWindow(t *testing.T) {
	const warmup, measure = 20 * time.Millisecond, 50 * time.Millisecond
	for deadline := time.Now().Add(30 * time.Second); ; {
		m := newMeter(warmup, measure)
		var n int64
		start := time.Now()
		prev := start
		var maxGap time.Duration
		for {
			done := m.tick(n + 1)
			now := time.Now()
			maxGap = max(maxGap, now.Sub(prev))
			prev = now
			if done {
				break
			}
			n++
			time.Sleep(100 * time.Microsecond) // progress comes in ticks, as in a run
		}
		elapsed := time.Since(start)
		if maxGap >= measure/2 {
			if time.Now().After(deadline) {
				t.Fatalf("the loop kept stalling for as long as %v, half the window, in every run for 30 s", maxGap)
			}
			t.Logf("the loop stalled for %v: again", maxGap)
			continue
		}
		r, err := m.result(64)
		if err != nil {
			t.Fatal(err)
		}
		if elapsed < warmup+measure {
			t.Errorf("meter ended after %v, before warm-up + window", elapsed)
		}
		window := time.Duration(r.Seconds * float64(time.Second))
		if window < measure-maxGap-time.Millisecond || window > elapsed {
			t.Errorf("window %v, want %v give or take the longest gap between ticks, %v (the run took %v)", window, measure, maxGap, elapsed)
		}
		if r.Messages <= 0 || r.Messages >= n+1 {
			t.Errorf("counted %d of %d messages: the warm-up must not count", r.Messages, n+1)
		}
		return
	}
}

func TestCounterCatchesLoss(t *testing.T) {
	c := newCounter(&childArgs{Size: 8, Warmup: time.Hour, Measure: time.Hour})
	msg := make([]byte, 8)
	if _, err := c.got(msg); err != nil {
		t.Fatal(err)
	}
	msg[0] = 2 // message 1 went missing
	if _, err := c.got(msg); err == nil {
		t.Error("a gap in the sequence numbers was not reported")
	}
	if _, err := c.got(make([]byte, 9)); err == nil {
		t.Error("a message of the wrong size was not reported")
	}
}
