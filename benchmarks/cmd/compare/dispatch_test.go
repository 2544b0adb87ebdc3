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
	for _, s := range pubsubSystems {
		testModes = append(testModes, &mode{name: "test-pubsub-" + s.name + "-2", label: s.label, timedBy: "client",
			server: s.server, client: s.client, subs: 2, system: s.name})
	}
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
	r := &runner{exe: exe, warmup: 50 * time.Millisecond, measure: 200 * time.Millisecond}
	path, remove, err := buildCPeer()
	if err != nil {
		r.cPeerErr = err
		return r
	}
	t.Cleanup(remove)
	r.cPeer = path
	return r
}

func TestModesComplete(t *testing.T) {
	seen := map[string]bool{}
	for _, m := range append(append([]*mode(nil), streamModes...), latencyModes...) {
		goSides, cSides := m.server != nil && m.client != nil, m.cArgs != nil && m.server == nil && m.client == nil
		if seen[m.name] || m.label == "" || goSides == cSides || (m.timedBy != "server" && m.timedBy != "client") {
			t.Errorf("mode %q is incomplete or repeated", m.name)
		}
		seen[m.name] = true
		if m.provider != "" && !strings.HasSuffix(m.name, "-"+m.provider) {
			t.Errorf("mode %q on %s does not say so in its name", m.name, m.provider)
		}
		if findMode(m.name) != m {
			t.Errorf("findMode(%q) does not find it", m.name)
		}
	}
	if streamModes[0].name != "netio" || streamModes[1].name != "netio-ht" || latencyModes[0].name != "rtt-netio" {
		t.Error("netio must come first: the figure draws it in black, HT in blue")
	}
	for _, tg := range htTargets {
		if findMode(tg.peer) == nil {
			t.Errorf("target against unknown mode %q", tg.peer)
		}
	}
}

func TestZmqCArgs(t *testing.T) {
	a := childArgs{Role: "server", Mode: "zmq-c", Size: 64, Warmup: 300 * time.Millisecond, Measure: time.Second}
	if got, want := strings.Join(zmqCArgs(&a), " "), "server 64 1000 300000 1000000"; got != want {
		t.Errorf("server args %q, want %q", got, want)
	}
	a.Role, a.Size, a.Addr = "client", 1<<20, "tcp://127.0.0.1:5555"
	if got, want := strings.Join(zmqCArgs(&a), " "), "client 1048576 32 tcp://127.0.0.1:5555"; got != want {
		t.Errorf("client args %q, want %q", got, want)
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

// TestQuickPoints runs a netio LL, a netio HT, a C ZeroMQ and a tcp point
// through the real dispatcher: two processes each, result from the
// receiver.
func TestQuickPoints(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	var progress bytes.Buffer
	p := plan{sizes: []int{64}, streamModes: []*mode{findMode("netio"), findMode("netio-ht"), findMode("netio-ht-batch"), findMode("zmq-c"), findMode("tcp")}, latencyModes: []*mode{findMode("rtt-tcp")}, repeat: 1}
	r := testRunner(t)
	if r.cPeerErr != nil {
		t.Fatal(r.cPeerErr)
	}
	p.warmup, p.measure = r.warmup, r.measure
	rep := execute(r, p, "test", &progress)
	lines := strings.Split(strings.TrimSpace(progress.String()), "\n")
	if len(lines) != 6 {
		t.Errorf("progress has %d lines, want one per point:\n%s", len(lines), progress.String())
	}
	for _, pt := range append(rep.Stream, rep.Latency...) {
		if len(pt.Runs) != 1 {
			t.Fatalf("%s: %v", pt.Mode, pt.Errors)
		}
		res := pt.Runs[0]
		// The window's length as the receiver saw it is 200 ms give or
		// take a stall of its loop, which a loaded machine can make long
		// (TestMeterWindow checks the meter): here only that there was one.
		if res.Messages <= 0 || res.Seconds <= 0 || res.Size != 64 {
			t.Errorf("%s: implausible result %+v", pt.Mode, res)
		}
	}
	if r := rep.Latency[0].Runs[0]; r.MedianNs <= 0 || r.P99Ns < r.MedianNs || r.Samples <= 0 {
		t.Errorf("round trip result %+v", r)
	}
	md := rep.Markdown()
	for _, want := range []string{"| netio LL / |", "| netio HT / |", "| NextBatch | ZeroMQ PUSH/PULL (C), 64 B | at least 3x | 64 B "} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
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
	// A guard against a hang: the client's exit is noticed at once, but a
	// loaded machine gets time to start the two processes.
	if el := time.Since(start); el > 30*time.Second {
		t.Errorf("took %v to notice", el)
	}
}

func TestCPeerFailure(t *testing.T) {
	r := testRunner(t)
	r.cPeer, r.cPeerErr = "", errors.New("no gcc here")
	if _, err := r.run(findMode("zmq-c"), 64); err == nil || !strings.Contains(err.Error(), "no gcc here") {
		t.Errorf("err = %v, want the build error", err)
	}
	// A C peer that dies reports its stderr.
	r = testRunner(t)
	if r.cPeerErr != nil {
		t.Skip(r.cPeerErr)
	}
	bad := &mode{name: "test-bad-c", timedBy: "server", cArgs: func(*childArgs) []string { return []string{"server", "4", "1", "1", "1"} }}
	if _, err := r.run(bad, 64); err == nil || !strings.Contains(err.Error(), "size below 8 bytes") {
		t.Errorf("err = %v, want zmq_thr's complaint", err)
	}
}

// TestPubSubPoints runs each publish/subscribe system with two
// subscribers through the real dispatcher: a publisher process and two
// subscriber processes, every subscriber's sequence checked from 0.
func TestPubSubPoints(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	r := testRunner(t)
	for _, s := range pubsubSystems {
		m := findMode("test-pubsub-" + s.name + "-2")
		res, err := r.run(m, 64)
		if err != nil {
			t.Fatalf("%s: %v", m.name, err)
		}
		if len(res.SubRates) != 2 || res.MsgRate() <= 0 || res.Messages <= 0 {
			t.Errorf("%s: implausible result %+v", m.name, res)
		}
	}
}

// TestSkipAbsentProvider: a row on a provider libfabric lacks is dropped
// with a message naming it; the others stay, in order.
func TestSkipAbsentProvider(t *testing.T) {
	absent := &mode{name: "test-absent", provider: "no-such-provider"}
	var msg bytes.Buffer
	got := skipAbsent([]*mode{findMode("netio"), absent, findMode("tcp")}, &msg)
	if len(got) != 2 || got[0].name != "netio" || got[1].name != "tcp" {
		t.Errorf("kept %v, want netio and tcp", modeNames(got))
	}
	if !strings.Contains(msg.String(), "skipping test-absent") || !strings.Contains(msg.String(), "no-such-provider") {
		t.Errorf("message %q does not name the row and its provider", msg.String())
	}
}

// TestShmPoints runs the rows on shm through the real dispatcher: the
// client dials (netio) or inserts (bare libfabric) the fi_shm:// address
// the server printed, from another process; the receivers check every
// sequence number, the pingers every echo.
func TestShmPoints(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	if err := providerPresent("shm"); err != nil {
		t.Skip(err)
	}
	var progress bytes.Buffer
	p := plan{sizes: []int{64, 1 << 20}, streamModes: []*mode{findMode("netio-shm"), findMode("netio-ht-shm"), findMode("ofi-shm")},
		latencyModes: []*mode{findMode("rtt-netio-shm"), findMode("rtt-ofi-shm")}, repeat: 1}
	r := testRunner(t)
	p.warmup, p.measure = r.warmup, r.measure
	rep := execute(r, p, "test", &progress)
	for _, pt := range append(rep.Stream, rep.Latency...) {
		if len(pt.Runs) != 1 {
			t.Fatalf("%s: %v", pt.Mode, pt.Errors)
		}
		if res := pt.Runs[0]; res.Messages <= 0 || res.Seconds <= 0 || res.Size != pt.Size {
			t.Errorf("%s: implausible result %+v", pt.Mode, res)
		}
	}
	for _, pt := range rep.Latency {
		if r := pt.Runs[0]; r.MedianNs <= 0 || r.P99Ns < r.MedianNs || r.Samples <= 0 {
			t.Errorf("%s: round trip result %+v", pt.Mode, r)
		}
	}
	if md := rep.Markdown(); !strings.Contains(md, "`shm` for the rows on shm") {
		t.Errorf("report does not name the shm provider:\n%s", md)
	}
}
