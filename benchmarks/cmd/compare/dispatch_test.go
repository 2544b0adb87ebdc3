package main

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

func init() {
	testModes = append(testModes, &mode{name: "test-dying-sender", timedBy: "server",
		server: tcpReceiver(false),
		client: func(*childArgs) (*Result, error) { return nil, errors.New("deliberate failure") }})
}

// The test binary doubles as the child processes, as the compare binary does.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		childMain()
	}
	os.Exit(m.Run())
}

func testRunner(t *testing.T) *runner {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return &runner{exe: exe, warmup: 50 * time.Millisecond, measure: 200 * time.Millisecond}
}

func TestModesComplete(t *testing.T) {
	seen := map[string]bool{}
	for _, m := range append(append([]*mode(nil), streamModes...), latencyModes...) {
		if seen[m.name] || m.label == "" || m.server == nil || m.client == nil || (m.timedBy != "server" && m.timedBy != "client") {
			t.Errorf("mode %q is incomplete or repeated", m.name)
		}
		seen[m.name] = true
		if findMode(m.name) != m {
			t.Errorf("findMode(%q) does not find it", m.name)
		}
	}
	if streamModes[0].name != "netio" || latencyModes[0].name != "rtt-netio" {
		t.Error("netio must come first: the ratio tables divide by the first row")
	}
}

func TestChildArgsRoundTrip(t *testing.T) {
	a := childArgs{Role: "client", Mode: "tcp", Size: 4096, Addr: "127.0.0.1:9", Warmup: time.Millisecond, Measure: 2 * time.Second}
	b, err := parseChildArgs(a.flags())
	if err != nil {
		t.Fatal(err)
	}
	if *b != a {
		t.Errorf("parsed %+v, want %+v", *b, a)
	}
	for _, args := range [][]string{{"-mode=nope", "-role=server"}, {"-mode=tcp", "-role=nobody"}, {"-mode=tcp", "-role=server", "-size=4"}} {
		if err := runChild(args, new(bytes.Buffer)); err == nil {
			t.Errorf("runChild(%v) succeeded", args)
		}
	}
}

// TestQuickPoints runs one netio point and one tcp point through the real
// dispatcher: two processes each, result from the receiver.
func TestQuickPoints(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	var progress bytes.Buffer
	p := plan{sizes: []int{64}, streamModes: []*mode{findMode("netio"), findMode("tcp")}, latencyModes: []*mode{findMode("rtt-tcp")}, repeat: 1}
	r := testRunner(t)
	p.warmup, p.measure = r.warmup, r.measure
	rep := execute(r, p, "test", &progress)
	lines := strings.Split(strings.TrimSpace(progress.String()), "\n")
	if len(lines) != 3 {
		t.Errorf("progress has %d lines, want one per point:\n%s", len(lines), progress.String())
	}
	for _, pt := range append(rep.Stream, rep.Latency...) {
		if len(pt.Runs) != 1 {
			t.Fatalf("%s: %v", pt.Mode, pt.Errors)
		}
		res := pt.Runs[0]
		if res.Messages <= 0 || res.Seconds < 0.15 || res.Size != 64 {
			t.Errorf("%s: implausible result %+v", pt.Mode, res)
		}
	}
	if r := rep.Latency[0].Runs[0]; r.MedianNs <= 0 || r.P99Ns < r.MedianNs || r.Samples <= 0 {
		t.Errorf("round trip result %+v", r)
	}
	if !strings.Contains(rep.Markdown(), "| netio / |") {
		t.Error("no ratio table")
	}
}

func TestFailedRunReportsStderr(t *testing.T) {
	// A server that cannot start: the error names it and carries its stderr.
	r := testRunner(t)
	_, err := r.run(&mode{name: "no-such-mode", timedBy: "server"}, 64)
	if err == nil || !strings.Contains(err.Error(), "unknown mode") {
		t.Errorf("err = %v, want the child's complaint about its mode", err)
	}
}

func TestDyingSenderReported(t *testing.T) {
	r := testRunner(t)
	start := time.Now()
	_, err := r.run(findMode("test-dying-sender"), 64)
	if err == nil || !strings.Contains(err.Error(), "deliberate failure") || !strings.Contains(err.Error(), "client exited") {
		t.Errorf("err = %v, want the client's exit with its stderr", err)
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Errorf("took %v to notice", el)
	}
}
