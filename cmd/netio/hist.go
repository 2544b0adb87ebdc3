package main

import (
	"fmt"
	"io"
	"math"
	"math/bits"
	"strings"
	"time"
)

// hist is a latency histogram in constant memory, so that a run of hours
// keeps no samples. It is log-linear, as HDR Histogram is: values below
// 256 ns are counted exactly, larger ones in 128 linear buckets per power
// of two, so that a bucket is at most 1/128 of its lowest value wide and
// the midpoint it reports is within 1/256 (0.4%) of any value in it,
// whatever the magnitude, from ns to hours, in 7424 counters (58 KiB).
// Minimum and maximum are exact; percentiles are nearest-rank, within
// 0.4%. Negative values (a one-way latency between two clocks that
// disagree) are counted by magnitude on the side.
//
// Why not a library (github.com/HdrHistogram/hdrhistogram-go, say): netio
// keeps to three dependencies, golang.org/x/sys, golang.org/x/sync and
// github.com/google/go-cmp, so that importing it pulls in nothing else,
// and this command is part of netio's module (so that 'go install
// github.com/netio-go/netio/cmd/netio@latest' works, which a nested
// module with replace directives would not), so its dependencies are the
// module's. What it needs of a histogram (add, a percentile, the
// extremes, coarse rows to draw) is the hundred lines below, tested in
// cli_test.go against exact percentiles of sorted samples.
type hist struct {
	n        int64
	min, max time.Duration
	pos      []int64
	neg      []int64 // allocated on the first negative value
}

const (
	histSubBits = 7 // 128 buckets per power of two
	histExact   = 1 << (histSubBits + 1)
	histBuckets = (64-histSubBits-1)*(1<<histSubBits) + histExact
)

func newHist() *hist { return &hist{pos: make([]int64, histBuckets)} }

// histBucket is the bucket of v.
func histBucket(v uint64) int {
	if v < histExact {
		return int(v)
	}
	shift := bits.Len64(v) - (histSubBits + 1)
	return shift<<histSubBits + int(v>>shift)
}

// histRange is the smallest and largest value of bucket i.
func histRange(i int) (lo, hi uint64) {
	if i < histExact {
		return uint64(i), uint64(i)
	}
	shift := i>>histSubBits - 1
	m := uint64(i&(1<<histSubBits-1) + 1<<histSubBits)
	return m << shift, (m+1)<<shift - 1
}

func (h *hist) add(d time.Duration) {
	if h.n == 0 || d < h.min {
		h.min = d
	}
	if h.n == 0 || d > h.max {
		h.max = d
	}
	h.n++
	if d >= 0 {
		h.pos[histBucket(uint64(d))]++
		return
	}
	if h.neg == nil {
		h.neg = make([]int64, histBuckets)
	}
	h.neg[histBucket(uint64(-d))]++
}

// percentile is the nearest-rank percentile, pct in [0, 100]: the middle
// of the bucket holding it, kept within the exact minimum and maximum.
func (h *hist) percentile(pct float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := max(int64(math.Ceil(pct/100*float64(h.n))), 1)
	v := h.max
	var seen int64
	found := false
	for i := len(h.neg) - 1; i >= 0 && !found; i-- {
		if seen += h.neg[i]; seen >= rank {
			lo, hi := histRange(i)
			v, found = -time.Duration((lo+hi)/2), true
		}
	}
	for i := 0; i < len(h.pos) && !found; i++ {
		if seen += h.pos[i]; seen >= rank {
			lo, hi := histRange(i)
			v, found = time.Duration((lo+hi)/2), true
		}
	}
	return min(max(v, h.min), h.max)
}

// histRow is one row of the printed histogram: values in [From, To).
type histRow struct {
	FromMicros float64 `json:"from_us"`
	ToMicros   float64 `json:"to_us"`
	Count      int64   `json:"count"`
}

// rows sums the non-negative values into log-spaced buckets, 1-2-5 per
// decade of microseconds, from the one holding the minimum to the one
// holding the maximum.
func (h *hist) rows() []histRow {
	if h.n == 0 {
		return nil
	}
	// Edges in ns: 0, 1 µs, 2, 5, 10, 20, 50, ...
	edges := []time.Duration{0}
	for e := time.Microsecond; ; e *= 10 {
		edges = append(edges, e, 2*e, 5*e)
		if 5*e > h.max || e > time.Hour {
			break
		}
	}
	edges = append(edges, math.MaxInt64)
	counts := make([]int64, len(edges)-1)
	row := func(v time.Duration) int {
		for i := len(edges) - 2; i > 0; i-- {
			if v >= edges[i] {
				return i
			}
		}
		return 0
	}
	for i, n := range h.pos {
		if n == 0 {
			continue
		}
		// A bucket's midpoint, kept within the exact extremes as
		// percentile does: the midpoint of the bucket holding the
		// maximum may lie past the row of the maximum, which is the last
		// row shown (and so for the minimum and the first row).
		lo, hi := histRange(i)
		counts[row(min(max(time.Duration((lo+hi)/2), h.min, 0), h.max))] += n
	}
	first, last := row(max(h.min, 0)), row(max(h.max, 0))
	var out []histRow
	for i := first; i <= last; i++ {
		r := histRow{FromMicros: micros(edges[i]), ToMicros: micros(edges[i+1]), Count: counts[i]}
		if edges[i+1] == math.MaxInt64 {
			r.ToMicros = micros(h.max) // beyond hours: the last row ends at the maximum
		}
		out = append(out, r)
	}
	return out
}

// printHist draws rows as bars of #, the longest width characters, under
// a header naming what is counted; bounds are durations in their unit
// (2 µs, 500 ms).
func printHist(w io.Writer, what string, rows []histRow, width int) {
	fmt.Fprintf(w, "  %-19s  %9s\n", what, "count")
	var most int64
	for _, r := range rows {
		most = max(most, r.Count)
	}
	bound := func(us float64) string {
		if us == 0 {
			return "0"
		}
		return durString(microsDur(us))
	}
	for _, r := range rows {
		bar := 0
		if r.Count > 0 {
			bar = max(int((r.Count*int64(width)+most-1)/most), 1)
		}
		fmt.Fprintf(w, "  %8s - %-8s  %9d  %s\n", bound(r.FromMicros), bound(r.ToMicros), r.Count, strings.Repeat("#", bar))
	}
}
