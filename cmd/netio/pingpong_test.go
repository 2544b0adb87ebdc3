package main

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestPingPong(t *testing.T) {
	pong := start("pong", "-listen", "127.0.0.1:0")
	ping := start("ping", "-to", pong.addr(t), "-count", "2000")
	ping.mustExit(t, exitOK)
	pong.mustExit(t, exitOK)

	out := ping.stdout.String()
	if n := field(t, out, `(?m)^round trips +([0-9]+) in `+durRE+` \(count reached\)`); n != 2000 {
		t.Errorf("%v round trips, want 2000:\n%s", n, out)
	}
	m := regexp.MustCompile(`(?m)^rtt +min (` + durRE + `), median (` + durRE + `), p90 (` + durRE + `), p99 (` + durRE + `), max (` + durRE + `)$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no percentiles in:\n%s", out)
	}
	prev := time.Duration(0)
	for _, s := range m[1:] {
		v := parseDur(t, s)
		if v <= 0 || v < prev {
			t.Errorf("min, median, p90, p99, max %v: want positive and ordered", m[1:])
		}
		prev = v
	}
	// The histogram's counts add up to the round trips.
	rows := regexp.MustCompile(`(?m)^ +(0|`+durRE+`) - (`+durRE+`) +([0-9]+)  (#*)$`).FindAllStringSubmatch(out, -1)
	if len(rows) == 0 || !strings.Contains(out, "\n  round trip               count\n") {
		t.Fatalf("no histogram in:\n%s", out)
	}
	total := 0.0
	for _, r := range rows {
		n := field(t, r[3], `(.*)`)
		total += n
		if (n > 0) != (len(r[4]) > 0) {
			t.Errorf("row %q: a bar for every non-empty bucket and only those", r[0])
		}
	}
	if total != 2000 {
		t.Errorf("histogram counts %v round trips:\n%s", total, out)
	}

	if n := field(t, pong.stdout.String(), `(?m)^127\.0\.0\.1:[0-9]+: echoed ([0-9]+) messages in `+durRE+`, the peer (closed|ended the run)$`); n != 2000 {
		t.Errorf("pong echoed %v messages:\n%s", n, pong.stdout)
	}
}

func TestPingPongJSON(t *testing.T) {
	pong := start("pong", "-listen", "127.0.0.1:0", "-count", "2", "-json")
	addr := pong.addr(t)
	// Two pings at once, one large enough to span buffers.
	small := start("ping", "-to", addr, "-count", "200", "-json")
	large := start("ping", "-to", addr, "-count", "20", "-size", "1MiB", "-json")
	small.mustExit(t, exitOK)
	large.mustExit(t, exitOK)
	pong.mustExit(t, exitOK)

	for _, p := range []struct {
		proc  *proc
		pings int64
		size  int
	}{{small, 200, 64}, {large, 20, 1 << 20}} {
		var r pingResult
		decode(t, p.proc.stdout.String(), &r)
		if r.Pings != p.pings || r.MessageSize != p.size || r.Seconds <= 0 || r.Ended != "count reached" {
			t.Errorf("%+v: want %d pings of %d bytes", r, p.pings, p.size)
		}
		if !(0 < r.MinMicros && r.MinMicros <= r.MedianMicros && r.MedianMicros <= r.P90Micros && r.P90Micros <= r.P99Micros && r.P99Micros <= r.MaxMicros) {
			t.Errorf("%+v: want positive ordered percentiles", r)
		}
		var sum int64
		for _, row := range r.Histogram {
			sum += row.Count
		}
		if sum != p.pings {
			t.Errorf("histogram %+v counts %d", r.Histogram, sum)
		}
	}
	var pr pongResult
	decode(t, pong.stdout.String(), &pr)
	if len(pr.Connections) != 2 || pr.Provider != "tcp" || pr.Address == "" {
		t.Fatalf("pong %+v: want two connections", pr)
	}
	total := pr.Connections[0].Messages + pr.Connections[1].Messages
	for _, c := range pr.Connections {
		if c.Error != "" || !strings.HasPrefix(c.Ended, "the peer") || c.Peer != "netio ping" {
			t.Errorf("pong connection %+v", c)
		}
	}
	if total != 220 {
		t.Errorf("pong echoed %d messages, want 220", total)
	}
}
