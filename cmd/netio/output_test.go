package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"
)

// Results go to stdout, progress to stderr: '> file' captures the summary
// alone (progress lines used to go to stdout with it).
func TestProgressOnStderr(t *testing.T) {
	recv := start("recv", "-listen", "127.0.0.1:0")
	send := start("send", "-to", recv.addr(t), "-duration", "2500ms", "-size", "64")
	send.mustExit(t, exitOK)
	recv.mustExit(t, exitOK)
	for _, p := range []*proc{send, recv} {
		cmd := p.args[0]
		if out := p.stdout.String(); !strings.HasPrefix(out, "netio "+cmd+": provider ") || strings.Contains(out, "msg/s  ") {
			t.Errorf("%s's stdout:\n%s\nwant the summary alone", cmd, out)
		}
	}
	// send writes without pause for 2.5 s: its meter ticks every second.
	if e := send.stderr.String(); !regexp.MustCompile(`(?m)^send +[0-9.]+s +[0-9]+ msg/s +[0-9.]+ Gbit/s$`).MatchString(e) {
		t.Errorf("send's stderr:\n%s\nwant progress lines", e)
	}
}

// The JSON counts LowLatency mode's libfabric messages as fragments (its
// field since before they were packed pages), and pages only in
// HighThroughput mode.
func TestJSONFragmentsNotPages(t *testing.T) {
	for _, mode := range []string{"ll", "ht"} {
		recv := start("recv", "-listen", "127.0.0.1:0", "-mode", mode, "-json")
		send := start("send", "-to", recv.addr(t), "-mode", mode, "-count", "100", "-json")
		send.mustExit(t, exitOK)
		recv.mustExit(t, exitOK)
		for _, p := range []*proc{send, recv} {
			var m map[string]any
			if err := json.Unmarshal([]byte(p.stdout.String()), &m); err != nil {
				t.Fatalf("%s: %v", p.args[0], err)
			}
			_, pages := m["pages"]
			_, frags := m["fragments"]
			if want := mode == "ht"; pages != want || frags == want {
				t.Errorf("-mode %s, %s: pages %v, fragments %v in %v", mode, p.args[0], pages, frags, m)
			}
		}
	}
}

func TestDurString(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                                   "0 ns",
		850:                                 "850 ns",
		999:                                 "999 ns",
		1000:                                "1 µs",
		45 * time.Microsecond:               "45 µs",
		52345:                               "52.3 µs",
		999499:                              "999 µs",
		999500:                              "1 ms",
		196608 * time.Microsecond:           "197 ms",
		1250 * time.Millisecond:             "1.25 s",
		10 * time.Second:                    "10 s",
		999*time.Second + 600_000_000:       "1000 s",
		2 * time.Hour:                       "7200 s",
		-45 * time.Microsecond:              "-45 µs",
		time.Duration(-1 << 63):             "-9223372037 s",
		time.Millisecond + time.Microsecond: "1 ms",
	} {
		if got := durString(d); got != want {
			t.Errorf("durString(%d) = %q, want %q", int64(d), got, want)
		}
	}
}

// Messages larger than a page take several pages each: say so, rather than
// "0.0 messages per page".
func TestPerPage(t *testing.T) {
	for _, tt := range []struct {
		messages int64
		pages    uint64
		want     string
	}{
		{20000, 2, "10000.0 messages per page on average"},
		{10, 640, "64.0 pages per message on average"},
		{1, 1, "1.0 messages per page on average"},
		{0, 0, "no messages per page"},
	} {
		if got := perPage(tt.messages, tt.pages); got != tt.want {
			t.Errorf("perPage(%d, %d) = %q, want %q", tt.messages, tt.pages, got, tt.want)
		}
	}
}

// The usage text documents the exit codes, 130 for Ctrl-C among them.
func TestUsageExitCodes(t *testing.T) {
	var out, errOut strings.Builder
	if code := run([]string{"help"}, &out, &errOut); code != exitOK {
		t.Fatalf("exit %d", code)
	}
	if !strings.Contains(out.String(), "Exit status: 0 done,\n1 failed, 2 bad command line, 130 interrupted by Ctrl-C") {
		t.Errorf("usage:\n%s\nwant the exit codes", out.String())
	}
}
