package main

import (
	"math"
	"strconv"
	"time"
)

// durString prints d for people: in the unit that keeps it between 1 and
// 1000 (ns, µs, ms, s) with three significant digits, trailing zeros
// dropped: 850 ns, 45 µs, 52.3 µs, 197 ms, 1.25 s. Three digits is what a
// latency measured to within 1% is worth; durations of 1000 s and more are
// whole seconds.
func durString(d time.Duration) string {
	if d < 0 {
		if d == math.MinInt64 {
			d++
		}
		return "-" + durString(-d)
	}
	units := []struct {
		name string
		size time.Duration
	}{{"ns", time.Nanosecond}, {"µs", time.Microsecond}, {"ms", time.Millisecond}, {"s", time.Second}}
	for i, u := range units {
		v := float64(d) / float64(u.size)
		if i == len(units)-1 && v >= 999.5 {
			return strconv.FormatFloat(math.Round(v), 'f', -1, 64) + " s"
		}
		// 999.5 and up would round to 1000: the next unit's 1.
		if v < 999.5 || i == len(units)-1 {
			return strconv.FormatFloat(v, 'g', 3, 64) + " " + u.name
		}
	}
	panic("unreachable")
}

// micros is d in µs, as the JSON output gives latencies.
func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// microsDur is the duration of us µs.
func microsDur(us float64) time.Duration {
	return time.Duration(math.Round(us * float64(time.Microsecond)))
}

// seconds is the duration of s seconds.
func seconds(s float64) time.Duration { return time.Duration(math.Round(s * float64(time.Second))) }
