package main

import (
	"math"
	"slices"
	"time"
)

// summary is the median and the spread of one point's repeated runs.
type summary struct {
	Median, Min, Max float64
	N                int // runs that produced a value
}

// summarize takes the median (the mean of the middle two for an even
// count) and the range of vs. NaNs (failed runs) are ignored.
func summarize(vs []float64) summary {
	var xs []float64
	for _, v := range vs {
		if !math.IsNaN(v) {
			xs = append(xs, v)
		}
	}
	if len(xs) == 0 {
		return summary{Median: math.NaN(), Min: math.NaN(), Max: math.NaN()}
	}
	slices.Sort(xs)
	n := len(xs)
	med := xs[n/2]
	if n%2 == 0 {
		med = (xs[n/2-1] + xs[n/2]) / 2
	}
	return summary{Median: med, Min: xs[0], Max: xs[n-1], N: n}
}

// percentile returns the q-quantile (0 <= q <= 1) of sorted durations by the
// nearest-rank method: the smallest value with at least q of the samples at
// or below it.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(q * float64(len(sorted))))
	if rank < 1 {
		rank = 1
	}
	if rank > len(sorted) {
		rank = len(sorted)
	}
	return sorted[rank-1]
}
