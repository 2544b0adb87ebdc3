package main

import (
	"fmt"
	"strings"
)

// Fan-out: the publish/subscribe run of pubsub.go (one publisher process,
// a process and a connection per subscriber, every subscriber checking the
// whole sequence) with one HighThroughput publisher of 64 B messages under
// one tag, to 1, 8 and 64 subscribers, beside ZeroMQ XPUB/SUB at the same
// counts. What it shows is how the deliveries scale with the subscribers:
// in total (the publisher's work) and per subscriber.

// fanoutSize is the message size of the fan-out rows.
const fanoutSize = 64

// fanoutCounts are the numbers of subscriber processes.
var fanoutCounts = []int{1, 8, 64}

// fanoutSystems are the systems of the fan-out rows, by their
// pubsubSystems name.
var fanoutSystems = []string{"netio-ht", "zmq"}

// fanoutModes are the fan-out rows: fanout-<system>-<subs>.
var fanoutModes = func() []*mode {
	var ms []*mode
	for _, name := range fanoutSystems {
		for _, s := range pubsubSystems {
			if s.name != name {
				continue
			}
			for _, n := range fanoutCounts {
				ms = append(ms, &mode{name: fmt.Sprintf("fanout-%s-%d", s.name, n), label: s.label, timedBy: "client",
					server: s.server, client: s.client, subs: n, system: s.name, fanout: true})
			}
		}
	}
	return ms
}()

// fanoutTable writes the fan-out section: deliveries/s in total and per
// subscriber for each system and count, and netio's ratio to ZeroMQ.
func (r *report) fanoutTable(w func(string, ...any)) {
	if len(r.Fanout) == 0 {
		return
	}
	find := func(sys string, n int) *point {
		for _, p := range r.Fanout {
			if p.Mode == fmt.Sprintf("fanout-%s-%d", sys, n) {
				return p
			}
		}
		return nil
	}
	w("\n## Fan-out, %s\n\nOne publisher process, 1, 8 and 64 subscriber processes (a process and a connection each), one tag, lossless (netio: HighThroughput on both sides, Block; ZeroMQ: XPUB_NODROP). **Total** is deliveries/s summed over the subscribers (what the publisher sends), **per subscriber** their mean; median of the runs and, in brackets, their min-max.\n\n| system |", sizeLabel(fanoutSize))
	for _, n := range fanoutCounts {
		w(" 1 -> %d total | 1 -> %d per subscriber |", n, n)
	}
	w("\n|---|")
	for range fanoutCounts {
		w("---|---|")
	}
	w("\n")
	label := func(sys string) string {
		for _, s := range pubsubSystems {
			if s.name == sys {
				return s.label
			}
		}
		return sys
	}
	for _, sys := range fanoutSystems {
		w("| %s |", label(sys))
		for _, n := range fanoutCounts {
			p := find(sys, n)
			if p == nil {
				w(" | |")
				continue
			}
			w(" %s | %s |", cell(p.total(), fmtRate), cell(p.rate(), fmtRate))
		}
		w("\n")
	}
	for _, sys := range fanoutSystems {
		if !strings.HasPrefix(sys, "netio") {
			continue
		}
		w("| %s / ZeroMQ (medians) |", strings.TrimSuffix(label(sys), " (Publish / Subscribe, Block)"))
		for _, n := range fanoutCounts {
			a, b := find(sys, n), find("zmq", n)
			if a == nil || b == nil {
				w(" - | - |")
				continue
			}
			w(" %s | %s |", ratio(a.total(), b.total()), ratio(a.rate(), b.rate()))
		}
		w("\n")
	}
}

// total summarises the deliveries per second of all the subscribers of a
// run together.
func (p *point) total() summary {
	var vs []float64
	for _, r := range p.Runs {
		vs = append(vs, r.MsgRate()*float64(max(len(r.SubRates), 1)))
	}
	return summarize(vs)
}

const fanoutNotes = `- **Fan-out**: the publish/subscribe run above at ` + "64 B" + ` with 1, 8 and 64 subscriber processes: netio's subscribers in HighThroughput mode, ZeroMQ's SUB sockets; a subscriber's rate is its own messages/s over its own window, the total their sum. At 64 subscribers, 65 busy processes share this machine's 2 cores, so the figures say how the publisher's work scales when the subscribers cannot all run at once, not what 64 machines would see.
`
