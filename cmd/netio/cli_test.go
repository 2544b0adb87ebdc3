package main

import (
	"bytes"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestByteSize(t *testing.T) {
	for in, want := range map[string]int{"64": 64, "4KiB": 4096, "4k": 4096, "4K": 4096, "1MiB": 1 << 20, "1M": 1 << 20, "2GiB": 2 << 30, "0": 0, "16B": 16} {
		var b byteSize
		if err := b.Set(in); err != nil || int(b) != want {
			t.Errorf("%q: %d, %v; want %d", in, b, err, want)
		}
	}
	for _, in := range []string{"", "x", "1.5MiB", "-1", "1TiB", "1Q", "KiB", "9999999999999"} {
		var b byteSize
		if err := b.Set(in); err == nil {
			t.Errorf("%q: %d, want an error", in, b)
		}
	}
}

// Every bad command line gives exit 2 and one line naming the command.
func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"recv", "-listen", "127.0.0.1:0", "-nosuchflag"},
		{"recv"},
		{"recv", "-listen", "127.0.0.1:0", "-duration", "soon"},
		{"recv", "-listen", "127.0.0.1:0", "-count", "-5"},
		{"recv", "-listen", "127.0.0.1:0", "-duration", "-1s"},
		{"send"},
		{"send", "-to", "127.0.0.1:1", "-size", "0"},
		{"send", "-to", "127.0.0.1:1", "-size", "lots"},
		{"send", "-to", "127.0.0.1:1", "-count", "-1"},
		{"send", "-to", "127.0.0.1:1", "-size", "65MiB"},
		{"send", "-to", "127.0.0.1:1", "-duration", "-1s"},
		{"send", "-to", "127.0.0.1:1", "-json=maybe"},
		{"send", "-to", "127.0.0.1:1", "-mode", "fast"},
		{"recv", "-listen", "127.0.0.1:0", "-mode", "HT"},
		{"demo", "-mode", ""},
		{"ping"},
		{"ping", "-to", "127.0.0.1:1", "stray"},
		{"ping", "-to", "127.0.0.1:1", "-size", "0"},
		{"pong"},
		{"pong", "-listen", "127.0.0.1:0", "-count", "x"},
		{"pong", "-listen", "127.0.0.1:0", "-count", "-1"},
		{"info", "extra"},
		{"info", "-provider"},
	} {
		var out, errOut bytes.Buffer
		code := run(args, &out, &errOut)
		e := errOut.String()
		if code != exitUsage || out.Len() > 0 || strings.Count(e, "\n") != 1 || !strings.HasPrefix(e, "netio "+args[0]+": ") || strings.Contains(e, "goroutine") {
			t.Errorf("netio %s: exit %d, stdout %q, stderr %q; want exit 2 and one line on stderr", strings.Join(args, " "), code, out.String(), e)
		}
	}
}

func TestHist(t *testing.T) {
	// Buckets are contiguous and each value falls in its own.
	prevHi := int64(-1)
	for i := 0; i < histBuckets; i++ {
		lo, hi := histRange(i)
		if int64(lo) != prevHi+1 && !(i == histBuckets-1 && hi == 1<<64-1) {
			t.Fatalf("bucket %d starts at %d after %d", i, lo, prevHi)
		}
		if histBucket(lo) != i || histBucket(hi) != i {
			t.Fatalf("bucket %d [%d, %d]: ends map to %d and %d", i, lo, hi, histBucket(lo), histBucket(hi))
		}
		if lo >= histExact && float64(hi-lo+1)/float64(lo) > 1.0/128 {
			t.Fatalf("bucket %d [%d, %d] is too wide", i, lo, hi)
		}
		prevHi = int64(hi)
		if i == histBuckets-1 && hi != 1<<64-1 {
			t.Fatalf("last bucket ends at %d", hi)
		}
	}

	h := newHist()
	for i := 1; i <= 1000; i++ {
		h.add(time.Duration(i) * time.Microsecond)
	}
	for pct, want := range map[float64]time.Duration{0: time.Microsecond, 50: 500 * time.Microsecond, 90: 900 * time.Microsecond, 99: 990 * time.Microsecond, 100: time.Millisecond} {
		got := h.percentile(pct)
		if d := got - want; d < -want/100 || d > want/100 {
			t.Errorf("p%v = %v, want %v within 1%%", pct, got, want)
		}
	}
	if h.min != time.Microsecond || h.max != time.Millisecond || h.n != 1000 {
		t.Errorf("min %v, max %v, n %d", h.min, h.max, h.n)
	}
	rows := h.rows()
	want := []histRow{{1, 2, 1}, {2, 5, 3}, {5, 10, 5}, {10, 20, 10}, {20, 50, 30}, {50, 100, 50}, {100, 200, 100}, {200, 500, 300}, {500, 1000, 500}, {1000, 2000, 1}}
	if diff := cmp.Diff(want, rows); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
	var buf bytes.Buffer
	printHist(&buf, "x", rows, 10)
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != len(rows)+1 || lines[0] != "  x                        count" || !strings.HasSuffix(lines[1], "  #") ||
		!strings.HasSuffix(lines[9], " ##########") || lines[8] != "    200 µs - 500 µs          300  ######" ||
		lines[10] != "      1 ms - 2 ms              1  #" {
		t.Errorf("histogram:\n%s", buf.String())
	}

	// A one-way latency between clocks that disagree can be negative.
	h = newHist()
	for _, d := range []time.Duration{-300, -200, -100, 100} {
		h.add(d)
	}
	if p := h.percentile(25); p != -300 {
		t.Errorf("p25 = %v, want -300ns", p)
	}
	if p := h.percentile(50); p != -200 {
		t.Errorf("median = %v, want -200ns", p)
	}
	if p := h.percentile(100); p != 100 {
		t.Errorf("max = %v", p)
	}
	if h.rows()[0].Count != 1 {
		t.Errorf("rows %v: want the one non-negative value", h.rows())
	}
}

// The histogram's percentiles are within 1/256 of the exact nearest-rank
// percentile of the samples, whatever their magnitude: it is log-linear.
func TestHistRelativeError(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, spread := range []float64{3, 9, 15} { // from ns to ms, s and hours
		h := newHist()
		var samples []time.Duration
		for range 20000 {
			// Log-uniform from 1 ns to 10^spread ns.
			d := time.Duration(math.Pow(10, rng.Float64()*spread))
			if rng.IntN(10) == 0 {
				d = -d // clocks that disagree
			}
			h.add(d)
			samples = append(samples, d)
		}
		slices.Sort(samples)
		for _, pct := range []float64{0, 1, 10, 25, 50, 75, 90, 99, 99.9, 100} {
			want := percentile(samples, pct)
			got := h.percentile(pct)
			if diff := got - want; diff < 0 && -diff > abs(want)/256 || diff > 0 && diff > abs(want)/256 {
				t.Errorf("spread 1e%v ns: p%v = %v, exact %v: off by %.3f%%", spread, pct, got, want, 100*float64(diff)/float64(abs(want)))
			}
		}
		if h.min != samples[0] || h.max != samples[len(samples)-1] {
			t.Errorf("min %v max %v, want %v %v", h.min, h.max, samples[0], samples[len(samples)-1])
		}
		var counted int64
		for _, r := range h.rows() {
			counted += r.Count
		}
		nonNeg := int64(len(samples) - slices.IndexFunc(samples, func(d time.Duration) bool { return d >= 0 }))
		if counted != nonNeg {
			t.Errorf("rows count %d values, want the %d non-negative ones", counted, nonNeg)
		}
	}
}

func abs(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}
