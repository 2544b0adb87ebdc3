package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startBinStdin is startBin with a pipe to the command's standard input.
func startBinStdin(t *testing.T, argv ...string) (*binProc, io.WriteCloser) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	p := startBinIn(t, r, argv...)
	r.Close()
	t.Cleanup(func() { w.Close() })
	return p, w
}

func TestPubSubLines(t *testing.T) {
	bin := buildNetio(t)
	for _, mode := range []string{"ll", "ht"} {
		t.Run(mode, func(t *testing.T) {
			pub, in := startBinStdin(t, bin, "pub", "-listen", "127.0.0.1:0", "-tag", "7")
			addr := pub.waitLine(t, `^listening on (\S+) \(provider tcp\)$`)[1]
			sub := startBin(t, bin, "sub", "-to", addr, "-tag", "7,8", "-mode", mode, "-count", "4")
			sub.waitLine(t, `^subscribed to tag 7,8 at `)
			fmt.Fprint(in, "hello\nworld, with spaces\n\nbinary \x01 byte\n")
			in.Close()
			sub.mustExit(t, exitOK)
			pub.mustExit(t, exitOK)
			out := sub.stdout.String()
			want := "7\t0\thello\n7\t1\tworld, with spaces\n7\t2\t\n7\t3\t\"binary \\x01 byte\"\n"
			if !strings.HasPrefix(out, want) {
				t.Errorf("sub's stdout:\n%s\nwant it to start with the messages\n%s", out, want)
			}
			if n := field(t, out, `(?m)^received +([0-9]+) messages`); n != 4 {
				t.Errorf("received %v, want 4:\n%s", n, out)
			}
			if v := field(t, out, `(?m)^rate +([0-9.]+) msg/s`); v <= 0 {
				t.Errorf("rate %v:\n%s", v, out)
			}
			if !regexp.MustCompile(`(?m)^gaps +0 messages missing`).MatchString(out) || !strings.Contains(out, "ended       count reached\n") {
				t.Errorf("sub's summary:\n%s", out)
			}
			po := pub.stdout.String()
			if !strings.HasPrefix(po, "netio pub: provider tcp, "+addr+", tag 7, stdin\n") ||
				!regexp.MustCompile(`(?m)^published +4 messages `).MatchString(po) ||
				!regexp.MustCompile(`(?m)^subscribers +[01] at the end, at most 1 at once$`).MatchString(po) ||
				!regexp.MustCompile(`(?m)^dropped +0 `).MatchString(po) || !strings.Contains(po, "ended        end of input\n") {
				t.Errorf("pub's summary:\n%s", po)
			}
			if e := pub.errText(); !strings.Contains(e, "\nsubscriber connected (1 now)\n") {
				t.Errorf("pub's stderr:\n%s", e)
			}
		})
	}
}

// A generated load: every message arrives, in order, and both JSON
// summaries say so.
func TestPubSubGeneratedJSON(t *testing.T) {
	bin := buildNetio(t)
	pub := startBin(t, bin, "pub", "-listen", "127.0.0.1:0", "-tag", "3", "-count", "2000", "-size", "100", "-json")
	addr := pub.waitLine(t, `^listening on (\S+) `)[1]
	sub := startBin(t, bin, "sub", "-to", addr, "-tag", "3", "-mode", "ht", "-count", "2000", "-json")
	sub.mustExit(t, exitOK)
	pub.mustExit(t, exitOK)

	dec := json.NewDecoder(strings.NewReader(sub.stdout.String()))
	for i := 0; i < 2000; i++ {
		var m subMessage
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if want := fmt.Sprintf("message %d ", i); m.Tag != 3 || m.Seq != uint64(i) || len(m.Payload) != 100 || !strings.HasPrefix(m.Payload, want) {
			t.Fatalf("message %d: %+v", i, m)
		}
	}
	var s subResult
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		t.Fatalf("sub's summary: %v", err)
	}
	if s.Messages != 2000 || s.Bytes != 200000 || s.MessagesPerSecond <= 0 || s.Skipped != 0 || s.Gaps != 0 || s.Dropped != 0 ||
		s.Ended != "count reached" || s.Mode != "high-throughput" || s.Policy != "block" {
		t.Errorf("sub's summary %+v", s)
	}
	var p pubResult
	decode(t, pub.stdout.String(), &p)
	if p.Published != 2000 || p.Unsubscribed != 0 || p.Dropped != 0 || p.Bytes != 200000 || p.MaxSubscribers != 1 || p.Ended != "count reached" || p.Source != "generated" {
		t.Errorf("pub's summary %+v", p)
	}
}

// stopped waits until the process is stopped (SIGSTOP took effect).
func stopped(t *testing.T, p *binProc) {
	t.Helper()
	deadline := time.Now().Add(runTimeout)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
		if err != nil {
			t.Fatal(err)
		}
		if i := bytes.LastIndexByte(b, ')'); i > 0 && len(b) > i+2 && b[i+2] == 'T' {
			return
		}
		time.Sleep(10 * time.Millisecond) // polling pace: /proc has no event for a stop
	}
	t.Fatalf("%s did not stop", p)
}

// A subscriber under a drop policy that does not read (SIGSTOP) loses
// messages without holding the publisher back: the publisher says it
// dropped, the subscriber reports the gap on stderr once it reads again,
// and Ctrl-C ends it with its summary and exit 130.
func TestSubGapsAndInterrupt(t *testing.T) {
	bin := buildNetio(t)
	pub, in := startBinStdin(t, bin, "pub", "-listen", "127.0.0.1:0", "-tag", "1")
	addr := pub.waitLine(t, `^listening on (\S+) `)[1]
	sub := startBin(t, bin, "sub", "-to", addr, "-tag", "1", "-policy", "drop-newest", "-buffer", "1")
	sub.waitLine(t, `^subscribed to tag 1 at .*, drop-newest\)$`)
	if err := sub.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sub.cmd.Process.Signal(syscall.SIGCONT) })
	stopped(t, sub)
	// Far more than the subscriber's connection holds: the publisher
	// drops the rest instead of waiting.
	line := strings.Repeat("x", 1000) + "\n"
	dropped := make(chan struct{})
	go func() {
		defer close(dropped)
		pub.waitLine(t, `^dropped: [0-9]+ messages for subscribers under a drop policy`)
	}()
	go func() {
		for i := 0; i < 5000; i++ {
			select {
			case <-dropped:
				return
			default:
			}
			if _, err := io.WriteString(in, line); err != nil {
				return
			}
		}
	}()
	select {
	case <-dropped:
	case <-time.After(runTimeout):
		t.Fatalf("the publisher did not report drops; stderr:\n%s", pub.errText())
	}
	if err := sub.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// The subscriber shows the publisher's drops as a gap when a later
	// message reaches it; with a buffer of one under drop-newest, that
	// message may itself be dropped while the backlog drains, so lines
	// keep coming until the gap is seen.
	gapSeen := make(chan struct{})
	after := make(chan struct{})
	go func() {
		defer close(after)
		for {
			select {
			case <-gapSeen:
				return
			default:
			}
			if _, err := io.WriteString(in, "after the gap\n"); err != nil {
				return
			}
			time.Sleep(10 * time.Millisecond) // a steady trickle, not a flood that the buffer of one drops
		}
	}()
	sub.waitLine(t, `^gap: tag 1: [0-9]+ messages missing \(seq [0-9]+ to [0-9]+\)$`)
	close(gapSeen)
	<-after
	in.Close()
	pub.mustExit(t, exitOK)
	if po := pub.stdout.String(); field(t, po, `(?m)^dropped +([0-9]+) `) == 0 {
		t.Errorf("pub's summary:\n%s", po)
	}
	if err := sub.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	sub.mustExitWithin(t, exitInterruptedCode, 15*time.Second)
	out := sub.stdout.String()
	if n := field(t, out, `(?m)^gaps +([0-9]+) messages missing`); n == 0 {
		t.Errorf("sub's summary shows no gap:\n%s", out)
	}
	if !strings.Contains(out, "\nended       interrupted\n") {
		t.Errorf("sub's summary:\n%s", out)
	}
	if e := sub.errText(); !strings.Contains(e, "netio: sub: interrupted: stopping (Ctrl-C again exits at once)\n") || !strings.HasSuffix(e, "netio: sub: interrupted\n") {
		t.Errorf("sub's stderr:\n%s", e)
	}
}

// Ctrl-C ends pub and sub in every phase with exit 130, saying so last on
// stderr.
func TestPubSubInterrupt(t *testing.T) {
	bin := buildNetio(t)
	t.Run("pub waiting for subscribers", func(t *testing.T) {
		p := startBin(t, bin, "pub", "-listen", "127.0.0.1:0", "-tag", "1", "-count", "10")
		p.waitLine(t, `^waiting for 1 subscriber`)
		p.cmd.Process.Signal(os.Interrupt)
		p.mustExitWithin(t, exitInterruptedCode, 15*time.Second)
		if e := p.errText(); !strings.HasSuffix(e, "\nnetio: pub: interrupted while waiting for subscribers\n") {
			t.Errorf("stderr:\n%s", e)
		}
	})
	t.Run("pub publishing to a blocking subscriber", func(t *testing.T) {
		pub := startBin(t, bin, "pub", "-listen", "127.0.0.1:0", "-tag", "1", "-duration", "60s", "-size", "1KiB")
		addr := pub.waitLine(t, `^listening on (\S+) `)[1]
		sub := startBin(t, bin, "sub", "-to", addr, "-tag", "1")
		pub.waitLine(t, `^pub +[0-9.]+s +[0-9]+ msg/s`)
		sub.cmd.Process.Signal(syscall.SIGSTOP)
		t.Cleanup(func() { sub.cmd.Process.Signal(syscall.SIGCONT) })
		pub.waitLine(t, `^pub +[0-9.]+s +waiting$`) // Publish waits for the stopped subscriber
		pub.cmd.Process.Signal(os.Interrupt)
		pub.mustExitWithin(t, exitInterruptedCode, 15*time.Second)
		if out := pub.stdout.String(); !regexp.MustCompile(`(?m)^published +[1-9][0-9]* messages of 1024 B`).MatchString(out) || !strings.Contains(out, "\nended        interrupted\n") {
			t.Errorf("stdout:\n%s", out)
		}
		if e := pub.errText(); !strings.HasSuffix(e, "\nnetio: pub: interrupted\n") {
			t.Errorf("stderr:\n%s", e)
		}
	})
	t.Run("sub waiting for messages", func(t *testing.T) {
		pub := startBin(t, bin, "pub", "-listen", "127.0.0.1:0", "-tag", "1")
		addr := pub.waitLine(t, `^listening on (\S+) `)[1]
		sub := startBin(t, bin, "sub", "-to", addr, "-tag", "1", "-json")
		sub.waitLine(t, `^subscribed to `)
		sub.cmd.Process.Signal(os.Interrupt)
		sub.mustExitWithin(t, exitInterruptedCode, 15*time.Second)
		var s subResult
		decode(t, sub.stdout.String(), &s)
		if s.Messages != 0 || s.Ended != "interrupted" {
			t.Errorf("summary %+v", s)
		}
		if e := sub.errText(); !strings.HasSuffix(e, "\nnetio: sub: interrupted\n") {
			t.Errorf("stderr:\n%s", e)
		}
	})
}

func TestPubSubBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"pub"},
		{"pub", "-listen", "127.0.0.1:0"},
		{"pub", "-listen", "127.0.0.1:0", "-tag", "x"},
		{"pub", "-listen", "127.0.0.1:0", "-tag", "-1"},
		{"pub", "-listen", "127.0.0.1:0", "-tag", "1", "-rate", "-5"},
		{"pub", "-listen", "127.0.0.1:0", "-tag", "1", "-size", "0"},
		{"pub", "-listen", "127.0.0.1:0", "-tag", "1", "-subscribers", "-1"},
		{"pub", "-listen", "127.0.0.1:0", "-tag", "1", "-mode", "fast"},
		{"sub"},
		{"sub", "-to", "127.0.0.1:1"},
		{"sub", "-to", "127.0.0.1:1", "-tag", "1,x"},
		{"sub", "-to", "127.0.0.1:1", "-tag", "1", "-policy", "drop"},
		{"sub", "-to", "127.0.0.1:1", "-tag", "1", "-buffer", "-1"},
		{"sub", "-to", "127.0.0.1:1", "-tag", "1", "-count", "-1"},
		{"sub", "-to", "127.0.0.1:1", "-tag", "1", "stray"},
	} {
		var out, errOut bytes.Buffer
		code := run(args, &out, &errOut)
		e := errOut.String()
		if code != exitUsage || out.Len() > 0 || strings.Count(e, "\n") != 1 || !strings.HasPrefix(e, "netio "+args[0]+": ") {
			t.Errorf("netio %s: exit %d, stdout %q, stderr %q; want exit 2 and one line on stderr", strings.Join(args, " "), code, out.String(), e)
		}
	}
}

// sub -wait=false against a closed port fails in one line; against a recv
// (not a publisher) it fails whatever -wait says, and says so.
func TestSubNoPublisher(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"sub", "-to", closedPort(t), "-tag", "1", "-wait=false"}, &out, &errOut); code != exitError || strings.Count(errOut.String(), "\n") != 1 {
		t.Errorf("sub to a closed port: exit %d, stderr %q", code, errOut.String())
	}
	recv := start("recv", "-listen", "127.0.0.1:0")
	addr := recv.addr(t)
	errOut.Reset()
	if code := run([]string{"sub", "-to", addr, "-tag", "1"}, &out, &errOut); code != exitError || !strings.Contains(errOut.String(), "rejected") {
		t.Errorf("sub to a recv: exit %d, stderr %q", code, errOut.String())
	}
	send := start("send", "-to", addr, "-count", "1")
	send.wait(t)
	recv.wait(t)
}

// sub started before its publisher says it waits, and takes the messages
// once the publisher is up.
func TestSubWaitsForPub(t *testing.T) {
	bin := buildNetio(t)
	addr := closedPort(t)
	sub := startBin(t, bin, "sub", "-to", addr, "-tag", "5", "-count", "2")
	sub.waitLine(t, `^waiting for a publisher at `+regexp.QuoteMeta(addr)+` \(.*\); Ctrl-C to stop$`)
	pub, in := startBinStdin(t, bin, "pub", "-listen", addr, "-tag", "5")
	sub.waitLine(t, `^subscribed to tag 5 at `)
	fmt.Fprint(in, "one\ntwo\n")
	sub.mustExit(t, exitOK)
	in.Close()
	pub.mustExit(t, exitOK)
	if out := sub.stdout.String(); !strings.HasPrefix(out, "5\t0\tone\n5\t1\ttwo\n") {
		t.Errorf("sub's stdout:\n%s", out)
	}
}

// A publisher killed and started again: sub says the loss across the
// restart is unknown, on stderr as it happens and in its summary, instead
// of counting nothing missing.
func TestSubReportsUnknownLossAcrossRestart(t *testing.T) {
	bin := buildNetio(t)
	addr := closedPort(t)
	pubArgs := []string{bin, "pub", "-listen", addr, "-tag", "3", "-rate", "2000", "-duration", "10m", "-subscribers", "0"}
	pub := startBin(t, pubArgs...)
	pub.waitLine(t, `^listening on `)
	sub := startBin(t, bin, "sub", "-to", addr, "-tag", "3", "-json")
	sub.waitLine(t, `^subscribed to tag 3 at `)
	if err := pub.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-pub.done
	sub.waitLine(t, `^lost the publisher `)
	// Again on the same address, as soon as the system lets it listen.
	for {
		again := startBin(t, pubArgs...)
		select {
		case l := <-again.lines:
			if strings.HasPrefix(l, "listening on ") {
				goto up
			}
		case <-time.After(runTimeout):
			t.Fatal("the publisher did not start again")
		}
	}
up:
	sub.waitLine(t, `^the publisher restarted without saying where its sequences ended: how many messages were lost .* is unknown`)
	if err := sub.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	sub.mustExitWithin(t, exitInterruptedCode, 15*time.Second)
	// The messages come first, one JSON object each; the summary last.
	dec := json.NewDecoder(strings.NewReader(sub.stdout.String()))
	var last json.RawMessage
	for dec.More() {
		if err := dec.Decode(&last); err != nil {
			t.Fatal(err)
		}
	}
	var s subResult
	decode(t, string(last), &s)
	if s.Restarts != 1 || s.LossUnknown != 1 || s.Reconnects != 1 {
		t.Errorf("sub's summary %+v, want one reconnect to a restarted publisher, its loss unknown", s)
	}
}
