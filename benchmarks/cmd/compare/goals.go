package main

import (
	"fmt"
	"strconv"
	"strings"
)

// goal is one of netio's speed goals against a peer measured in the same
// run: the ratio of the two medians at one message size, for a
// stream a rate (netio's over the peer's, at least bound) and for a round
// trip a time (netio's over the peer's, at most bound).
type goal struct {
	what       string
	netio, vs  string
	size       int
	bound      float64
	roundTrips bool
}

var goals = []goal{
	{what: "LowLatency stream, 64 B", netio: "netio", vs: "tcp", size: 64, bound: 1.0},
	{what: "LowLatency round trip, 64 B", netio: "rtt-netio", vs: "rtt-tcp", size: 64, bound: 1.3, roundTrips: true},
	{what: "HighThroughput, Write + NextMessage/Release, 64 B", netio: "netio-ht", vs: "tcp-bufio", size: 64, bound: 0.8},
	{what: "HighThroughput, WriteBatch + NextBatch, 64 B", netio: "netio-ht-batch", vs: "tcp-bufio", size: 64, bound: 1.0},
	{what: "HighThroughput, 1 MiB", netio: "netio-ht", vs: "ofi", size: 1 << 20, bound: 0.9},
	{what: "LowLatency, 1 MiB", netio: "netio", vs: "tcp", size: 1 << 20, bound: 0.9},
	// netio on shm against netio on tcp, both between two processes.
	{what: "on shm, LowLatency round trip, 64 B, against netio on tcp", netio: "rtt-netio-shm", vs: "rtt-netio", size: 64, bound: 0.5, roundTrips: true},
	{what: "on shm, LowLatency, 1 MiB, against netio on tcp", netio: "netio-shm", vs: "netio", size: 1 << 20, bound: 1.0},
}

// point finds mode's point at size among the stream or round-trip points.
func (r *report) point(mode string, size int) *point {
	for _, ps := range [][]*point{r.Stream, r.Latency} {
		for _, p := range ps {
			if p.Mode == mode && p.Size == size {
				return p
			}
		}
	}
	return nil
}

// goalTable checks every goal this run measured both sides of.
func (r *report) goalTable(w func(string, ...any)) {
	var rows []string
	for _, g := range goals {
		a, b := r.point(g.netio, g.size), r.point(g.vs, g.size)
		if a == nil || b == nil {
			continue
		}
		var x, y summary
		if g.roundTrips {
			x, _ = a.latency()
			y, _ = b.latency()
		} else {
			x, y = a.rate(), b.rate()
		}
		target, got, verdict := "at least ", "-", "**not met**"
		if g.roundTrips {
			target = "at most "
		}
		target += strconv.FormatFloat(g.bound, 'g', -1, 64) + "x"
		if x.N > 0 && y.N > 0 && y.Median > 0 {
			v := x.Median / y.Median
			got = fmtRatio(v)
			if (!g.roundTrips && v >= g.bound) || (g.roundTrips && v <= g.bound) {
				verdict = "met"
			}
		}
		rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s | %s |", g.what, findMode(g.vs).label, target, got, verdict))
	}
	if len(rows) == 0 {
		return
	}
	w("\n## netio against its goals (medians of this run)\n\nStreams compare rates (above 1: netio is faster), round trips compare times (below 1: netio is faster).\n\n| netio | / | goal | this run | |\n|---|---|---|---|---|\n%s\n", strings.Join(rows, "\n"))
}
