package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/netio-go/netio/internal/leakcheck"
)

// The demo runs netio in this process: every listener, connection and
// reactor it starts must be gone when it returns.
func TestMain(m *testing.M) { leakcheck.Main(m) }

func TestDemoTable(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"demo", "-duration", "200ms"}, &out, &errOut); code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut.String())
	}
	table := out.String()
	rows := []struct {
		name string
		re   *regexp.Regexp
	}{
		{"round trip", regexp.MustCompile(`(?m)^round trip +median ([0-9.]+) (?:ns|µs|ms|s), p90 ([0-9.]+) (?:ns|µs|ms|s), p99 ([0-9.]+) (?:ns|µs|ms|s) +([0-9]+) pings`)},
		{"messages/s", regexp.MustCompile(`(?m)^messages/s +([0-9.]+) +([0-9]+) messages of 64 B`)},
		{"Gbit/s", regexp.MustCompile(`(?m)^Gbit/s +([0-9.]+) +([0-9]+) messages of 1 MiB`)},
	}
	for _, r := range rows {
		m := r.re.FindStringSubmatch(table)
		if m == nil {
			t.Errorf("no %s row in:\n%s", r.name, table)
			continue
		}
		for _, s := range m[1:] {
			if v, err := strconv.ParseFloat(s, 64); err != nil || v <= 0 {
				t.Errorf("%s: %q is not a positive number in:\n%s", r.name, s, table)
			}
		}
	}
	// Progress goes to stderr: stdout is the table alone.
	if !strings.HasPrefix(table, "netio demo: provider ") {
		t.Errorf("output does not start with the table:\n%s", table)
	}
}

func TestDemoJSON(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"demo", "-json", "-duration", "200ms"}, &out, &errOut); code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut.String())
	}
	var r demoResult
	dec := json.NewDecoder(&out)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("stdout is not the JSON result: %v\n%s", err, out.String())
	}
	if r.Provider == "" || r.Address == "" {
		t.Errorf("provider %q, address %q", r.Provider, r.Address)
	}
	rt := r.RoundTrip
	if rt.Pings <= 0 || rt.MedianMicros <= 0 || rt.P90Micros < rt.MedianMicros || rt.P99Micros < rt.P90Micros {
		t.Errorf("round trip %+v: want pings and ordered positive percentiles", rt)
	}
	for _, s := range []streamResult{r.MessageRate, r.Throughput} {
		if s.Messages <= 0 || s.Seconds <= 0 || s.MessagesPerSecond <= 0 || s.GbitPerSecond <= 0 {
			t.Errorf("stream %+v: want positive numbers", s)
		}
	}
	if r.MessageRate.MessageSize != smallSize || r.Throughput.MessageSize != bulkSize {
		t.Errorf("message sizes %d and %d", r.MessageRate.MessageSize, r.Throughput.MessageSize)
	}
	if r.Mode != "low-latency" {
		t.Errorf("mode %q, want low-latency by default", r.Mode)
	}
}

// Each phase measures at least one round trip or message, even when the
// duration has passed before the first one ends: a loaded machine that
// stalls longer than -duration right at the start must not fail the demo.
// A duration of 1ns has always passed by then.
func TestDemoAtLeastOne(t *testing.T) {
	for _, mode := range []string{"ll", "ht"} {
		var out, errOut bytes.Buffer
		if code := run([]string{"demo", "-json", "-mode", mode, "-duration", "1ns"}, &out, &errOut); code != exitOK {
			t.Fatalf("-mode %s: exit %d, stderr:\n%s", mode, code, errOut.String())
		}
		var r demoResult
		if err := json.Unmarshal(out.Bytes(), &r); err != nil {
			t.Fatalf("-mode %s: stdout is not the JSON result: %v\n%s", mode, err, out.String())
		}
		if r.RoundTrip.Pings < 1 || r.MessageRate.Messages < 1 || r.Throughput.Messages < 1 {
			t.Errorf("-mode %s: %d pings, %d and %d messages; want at least one each", mode, r.RoundTrip.Pings, r.MessageRate.Messages, r.Throughput.Messages)
		}
	}
}

// -mode ht runs every phase in HighThroughput mode; the round trips flush.
func TestDemoHT(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"demo", "-mode", "ht", "-duration", "200ms"}, &out, &errOut); code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut.String())
	}
	table := out.String()
	if !strings.HasPrefix(table, "netio demo: provider tcp, high-throughput mode, listener 127.0.0.1:") {
		t.Errorf("table does not name the mode:\n%s", table)
	}
	for _, re := range []string{`(?m)^round trip +median ([0-9.]+) (?:ns|µs|ms|s)`, `(?m)^messages/s +([0-9.]+) `, `(?m)^Gbit/s +([0-9.]+) `} {
		if v := field(t, table, re); v <= 0 {
			t.Errorf("%s: %v in:\n%s", re, v, table)
		}
	}
}

// On a terminal progress rewrites one line and wipes it before the table.
func TestMeterInPlace(t *testing.T) {
	var buf syncBuffer
	m := startMeter(demoConfig{progress: &buf, inPlace: true}, "phase", func(n int64, d time.Duration) string {
		return strconv.FormatInt(n, 10) + " things"
	})
	m.add(7)
	// Wait for a tick (every 200 ms) to show it, however late it comes.
	deadline := time.Now().Add(runTimeout)
	for !strings.Contains(buf.String(), "7 things") {
		if time.Now().After(deadline) {
			t.Fatalf("no progress shown within %v: %q", runTimeout, buf.String())
		}
		time.Sleep(time.Millisecond) // polling pace
	}
	m.stop()
	s := buf.String()
	if !strings.HasPrefix(s, "\rphase") || !strings.Contains(s, "7 things") || !strings.HasSuffix(s, "\r\x1b[K") || strings.Contains(s, "\n") {
		t.Errorf("progress %q: want one line rewritten with \\r and wiped at the end", s)
	}
}

func TestPercentile(t *testing.T) {
	var s []time.Duration
	for i := 1; i <= 100; i++ {
		s = append(s, time.Duration(i))
	}
	for pct, want := range map[float64]time.Duration{50: 50, 90: 90, 99: 99, 100: 100, 0: 1} {
		if got := percentile(s, pct); got != want {
			t.Errorf("percentile %v = %v, want %v", pct, got, want)
		}
	}
	if got := percentile(s[:1], 99); got != 1 {
		t.Errorf("percentile of one sample = %v", got)
	}
}

// TestCommand runs the built binary, for what only a real process shows:
// exit codes and what reaches stdout and stderr.
func TestCommand(t *testing.T) {
	bin := buildNetio(t)
	// A port that was free a moment ago: nothing listens there.
	closed := closedPort(t)
	tests := []struct {
		args       []string
		code       int
		stdout     string // a substring; "" checks nothing
		stderr     string
		stderrLine bool // stderr must be exactly one line
	}{
		{args: nil, code: exitUsage, stderr: "usage: netio"},
		{args: []string{"frobnicate"}, code: exitUsage, stderr: `netio: unknown command "frobnicate"`},
		{args: []string{"help"}, code: exitOK, stdout: "usage: netio"},
		{args: []string{"demo", "-nosuchflag"}, code: exitUsage, stderr: "netio demo: flag provided but not defined: -nosuchflag", stderrLine: true},
		{args: []string{"demo", "-duration", "0s"}, code: exitUsage, stderr: "-duration must be positive", stderrLine: true},
		{args: []string{"demo", "extra"}, code: exitUsage, stderr: "unexpected argument", stderrLine: true},
		{args: []string{"demo", "-h"}, code: exitOK, stderr: "-duration"},
		{args: []string{"demo", "-provider", "no-such-provider"}, code: exitError, stderr: "netio: demo: ", stderrLine: true},
		{args: []string{"demo", "-duration", "100ms", "-json"}, code: exitOK, stdout: `"gbit_per_second"`},
		{args: []string{"help"}, code: exitOK, stdout: "  ping    "},
		{args: []string{"send", "-h"}, code: exitOK, stderr: "-size"},
		{args: []string{"send"}, code: exitUsage, stderr: "netio send: -to is required", stderrLine: true},
		{args: []string{"send", "-to", closed}, code: exitError, stderr: "netio: send: dial tcp " + closed + ": connection refused", stderrLine: true},
		{args: []string{"recv"}, code: exitUsage, stderr: "netio recv: -listen is required", stderrLine: true},
		{args: []string{"recv", "-listen", "no-port"}, code: exitError, stderr: "netio: recv: listen", stderrLine: true},
		{args: []string{"ping", "-to", closed, "-count", "1"}, code: exitError, stderr: "netio: ping: dial tcp " + closed + ": connection refused", stderrLine: true},
		{args: []string{"info", "-provider", "no-such-provider"}, code: exitError, stderr: `netio: info: provider "no-such-provider": `, stderrLine: true},
		{args: []string{"info", "-json"}, code: exitOK, stdout: `"provider": "tcp"`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(append([]string{"netio"}, tt.args...), " "), func(t *testing.T) {
			// Each process spends 0.2 s loading libfabric's providers,
			// mostly asleep: run them side by side.
			t.Parallel()
			var stdout, stderr bytes.Buffer
			cmd := exec.Command(bin, tt.args...)
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			code := 0
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				code = exit.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tt.code {
				t.Errorf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.code, stdout.String(), stderr.String())
			}
			if !strings.Contains(stdout.String(), tt.stdout) {
				t.Errorf("stdout %q does not contain %q", stdout.String(), tt.stdout)
			}
			if !strings.Contains(stderr.String(), tt.stderr) {
				t.Errorf("stderr %q does not contain %q", stderr.String(), tt.stderr)
			}
			if tt.stderrLine && strings.Count(stderr.String(), "\n") != 1 {
				t.Errorf("stderr %q: want one line", stderr.String())
			}
		})
	}
}
