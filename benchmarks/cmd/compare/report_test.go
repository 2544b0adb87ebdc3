package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// run makes a Result with the given message rate over one second.
func run(size int, rate float64) *Result {
	return &Result{Size: size, Messages: int64(rate), Seconds: 1}
}

func testReport() *report {
	return &report{
		Date:    time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC),
		Machine: machine{NProc: "2", CPU: "Test CPU", Kernel: "6.1", Libfabric: "1.17.0", Go: "go1.26", ZeroMQ: "4.3.4", GOMAXPROCS: 2},
		Command: "`go run ./cmd/compare`", Warmup: 300 * time.Millisecond, Measure: time.Second, Repeat: 3,
		Sizes: []int{64, 1 << 20},
		Stream: []*point{
			{Mode: "netio", Size: 64, Runs: []*Result{run(64, 117e3), run(64, 112e3), run(64, 120e3)}},
			{Mode: "zmq-push", Size: 64, Runs: []*Result{run(64, 1.2e6), run(64, 1.25e6), run(64, 1.3e6)}},
			{Mode: "netio", Size: 1 << 20, Runs: []*Result{run(1<<20, 2000), run(1<<20, 2100)}, Errors: []string{"receiver: boom\nline two"}},
			{Mode: "zmq-push", Size: 1 << 20, Errors: []string{"server exited: nope"}},
			{Mode: "netio-ht", Size: 64, Runs: []*Result{run(64, 9e6)}},
			{Mode: "netio-ht", Size: 1 << 20, Runs: []*Result{run(1<<20, 2500)}},
			{Mode: "zmq-c", Size: 64, Runs: []*Result{run(64, 2.5e6)}},
			{Mode: "netio-ht-batch", Size: 64, Runs: []*Result{run(64, 18e6)}},
			{Mode: "tcp-bufio", Size: 64, Runs: []*Result{run(64, 12e6)}},
			{Mode: "ofi", Size: 1 << 20, Runs: []*Result{run(1<<20, 2600)}},
		},
		Latency: []*point{
			{Mode: "rtt-netio", Size: 64, Runs: []*Result{
				{Size: 64, Messages: 25000, Seconds: 1, MedianNs: 40000, P99Ns: 90000},
				{Size: 64, Messages: 20000, Seconds: 1, MedianNs: 50000, P99Ns: 120000},
				{Size: 64, Messages: 22000, Seconds: 1, MedianNs: 44000, P99Ns: 100000}}},
			{Mode: "rtt-tcp", Size: 64, Runs: []*Result{{Size: 64, Messages: 50000, Seconds: 1, MedianNs: 20000, P99Ns: 60000}}},
		},
	}
}

func TestMarkdown(t *testing.T) {
	md := testReport().Markdown()
	for _, want := range []string{
		"- date: 2026-11-22 10:00 UTC",
		"2 CPUs (`nproc`), Test CPU, Linux 6.1",
		"libfabric 1.17.0",
		"| system | 64 B (msg/s) | 1 MiB (Gbit/s) |",
		"| netio LL (Write / ReadMessage) | 117k (112k-120k) | 17.2 (16.8-17.6) |",
		"| ZeroMQ PUSH/PULL (Go) | 1.25M (1.20M-1.30M) | failed |",
		"| netio LL / | 64 B | 1 MiB |",
		"| ZeroMQ PUSH/PULL (Go) | 0.094x | - |",
		"| netio HT / | 64 B | 1 MiB |",
		"| netio LL (Write / ReadMessage) | 76.92x | 1.22x |",
		"| ZeroMQ PUSH/PULL (C) | 3.60x | - |",
		"| NextMessage+Release | Go net.TCPConn + 1 MiB bufio, 64 B | at least 0.8x | 64 B 0.75x | **not met** |",
		"| NextMessage+Release | ZeroMQ PUSH/PULL (C), 64 B | at least 3x | 64 B 3.60x | met |",
		"| NextMessage+Release | bare libfabric (ofi/), windowed, busy poll, 4 KiB and up | at least 0.9x | 1 MiB 0.96x | met |",
		"| NextBatch | Go net.TCPConn + 1 MiB bufio, 64 B | at least 0.8x | 64 B 1.50x | met |",
		"| netio HT (WriteBatch / NextBatch) | 18.0M |  |",
		"| netio HT (WriteBatch / NextBatch) | 0.50x | - |",
		"| netio (Write / ReadMessage both sides) | 44.0 (40.0-50.0) | 100 (90.0-120) | 22.0k (20.0k-25.0k) | 1.00x |",
		"| Go net.TCPConn, blocking | 20.0 | 60.0 | 50.0k | 2.20x |",
		"netio's median ÷ this (below 1: netio is faster) |",
		"- netio 1 MiB: receiver: boom line two",
		"- zmq-push 1 MiB: server exited: nope",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	// Every table row has as many cells as its header.
	var cols int
	for _, l := range strings.Split(md, "\n") {
		if !strings.HasPrefix(l, "|") {
			cols = 0
			continue
		}
		n := strings.Count(l, "|")
		if cols == 0 {
			cols = n
		} else if n != cols {
			t.Errorf("row %q has %d bars, header %d", l, n, cols)
		}
	}
}

func TestFormatting(t *testing.T) {
	for v, want := range map[float64]string{8: "8.00", 117400: "117k", 1234567: "1.23M", 21.4e6: "21.4M", 999: "999", 0.063: "0.063"} {
		if got := fmtRate(v); got != want && !(v < 1000 && got == fmtNum(v)) {
			t.Errorf("fmtRate(%v) = %q, want %q", v, got, want)
		}
	}
	for v, want := range map[float64]string{19.23: "19.2", 0.0635: "0.0635", 123.4: "123", 2.5: "2.50"} {
		if got := fmtNum(v); got != want && !(v < 0.1 && strings.HasPrefix(got, "0.06")) {
			t.Errorf("fmtNum(%v) = %q, want %q", v, got, want)
		}
	}
	for v, want := range map[float64]string{0.6912: "0.69x", 1.06: "1.06x", 0.00137: "0.0014x"} {
		if got := fmtRatio(v); got != want {
			t.Errorf("fmtRatio(%v) = %q, want %q", v, got, want)
		}
	}
	for n, want := range map[int]string{8: "8 B", 1024: "1 KiB", 65536: "64 KiB", 1 << 20: "1 MiB", 1000: "1000 B"} {
		if got := sizeLabel(n); got != want {
			t.Errorf("sizeLabel(%d) = %q, want %q", n, got, want)
		}
	}
	if got := cell(summary{Median: 2, Min: 1, Max: 3, N: 3}, fmtNum); got != "2.00 (1.00-3.00)" {
		t.Errorf("cell = %q", got)
	}
	if got := cell(summary{N: 0}, fmtNum); got != "failed" {
		t.Errorf("empty cell = %q", got)
	}
}

func TestWriteAndRerender(t *testing.T) {
	dir := t.TempDir()
	rep := testReport()
	if err := rep.write(dir, true); err != nil {
		t.Fatal(err)
	}
	svg, err := os.ReadFile(filepath.Join(dir, "compare.svg"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(svg, []byte("<svg")) || !bytes.Contains(svg, []byte("2026-11-22")) {
		t.Error("compare.svg is not an SVG with the date in its title")
	}
	if fi, err := os.Stat(filepath.Join(dir, "compare.png")); err != nil || fi.Size() == 0 {
		t.Errorf("compare.png: %v", err)
	}
	md1, _ := os.ReadFile(filepath.Join(dir, "compare.md"))
	out := t.TempDir()
	if err := rerender(filepath.Join(dir, "compare.json"), out, false); err != nil {
		t.Fatal(err)
	}
	md2, _ := os.ReadFile(filepath.Join(out, "compare.md"))
	if !bytes.Equal(md1, md2) {
		t.Error("markdown rendered again from compare.json differs")
	}
}

func TestPubSubMarkdown(t *testing.T) {
	rep := &report{Date: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC), Repeat: 1,
		PubSub: []*point{
			{Mode: "pubsub-netio-ll-1", Size: 64, Runs: []*Result{{Size: 64, SubRates: []float64{40e3}}}},
			{Mode: "pubsub-netio-ht-4", Size: 64, Runs: []*Result{{Size: 64, SubRates: []float64{400e3, 600e3, 500e3, 500e3}}}},
			{Mode: "pubsub-zmq-1", Size: 64, Runs: []*Result{{Size: 64, SubRates: []float64{1e6}}}},
			{Mode: "pubsub-zmq-4", Size: 64, Runs: []*Result{{Size: 64, SubRates: []float64{250e3, 250e3, 250e3, 250e3}}}},
		}}
	if rep.baseName() != "pubsub" {
		t.Errorf("a publish/subscribe run alone is written as %q", rep.baseName())
	}
	md := rep.Markdown()
	for _, want := range []string{
		"| system | 64 B, 1 -> 1 | 64 B, 1 -> 4 |",
		"| netio LL (Publish / Subscribe, Block) | 40.0k |  |",
		"| netio HT (Publish / Subscribe, Block) |  | 500k |",
		"| ZeroMQ XPUB/SUB, XPUB_NODROP (Go) | 1.00M | 250k |",
		"| netio LL / ZeroMQ (medians) | 0.04x | - |",
		"| netio HT / ZeroMQ (medians) | - | 2.00x |",
		"- **Publish/subscribe**: one publisher process",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "**netio LL**:") {
		t.Errorf("a publish/subscribe report explains the stream rows:\n%s", md)
	}
}

// The goals table holds each goal measured on both sides to its bound:
// rates at least, round-trip times at most.
func TestGoalTable(t *testing.T) {
	md := testReport().Markdown()
	for _, want := range []string{
		"| LowLatency round trip, 64 B | Go net.TCPConn, blocking | at most 1.3x | 2.20x | **not met** |",
		"| HighThroughput, Write + NextMessage/Release, 64 B | Go net.TCPConn + 1 MiB bufio | at least 0.8x | 0.75x | **not met** |",
		"| HighThroughput, WriteBatch + NextBatch, 64 B | Go net.TCPConn + 1 MiB bufio | at least 1x | 1.50x | met |",
		"| HighThroughput, 1 MiB | bare libfabric (ofi/), windowed, busy poll | at least 0.9x | 0.96x | met |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "| LowLatency stream, 64 B |") {
		t.Errorf("a goal whose peer was not measured is listed:\n%s", md)
	}
}

// The fan-out table shows each count's deliveries in total and per
// subscriber, and netio's ratios to ZeroMQ on both.
func TestFanoutMarkdown(t *testing.T) {
	rep := &report{Date: time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC), Repeat: 1,
		Fanout: []*point{
			{Mode: "fanout-netio-ht-1", Size: 64, Runs: []*Result{{Size: 64, SubRates: []float64{4e6}}}},
			{Mode: "fanout-netio-ht-8", Size: 64, Runs: []*Result{{Size: 64, SubRates: []float64{1e6, 1e6, 2e6, 2e6, 1e6, 1e6, 2e6, 2e6}}}},
			{Mode: "fanout-zmq-1", Size: 64, Runs: []*Result{{Size: 64, SubRates: []float64{1e6}}}},
			{Mode: "fanout-zmq-8", Size: 64, Runs: []*Result{{Size: 64, SubRates: []float64{250e3, 250e3, 250e3, 250e3, 250e3, 250e3, 250e3, 250e3}}}},
		}}
	if rep.baseName() != "fanout" {
		t.Errorf("a fan-out run alone is written as %q", rep.baseName())
	}
	md := rep.Markdown()
	for _, want := range []string{
		"## Fan-out, 64 B",
		"| system | 1 -> 1 total | 1 -> 1 per subscriber | 1 -> 8 total | 1 -> 8 per subscriber | 1 -> 64 total | 1 -> 64 per subscriber |",
		"| netio HT (Publish / Subscribe, Block) | 4.00M | 4.00M | 12.0M | 1.50M | | |",
		"| ZeroMQ XPUB/SUB, XPUB_NODROP (Go) | 1.00M | 1.00M | 2.00M | 250k | | |",
		"| netio HT / ZeroMQ (medians) | 4.00x | 4.00x | 6.00x | 6.00x | - | - |",
		"- **Fan-out**:",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
}
