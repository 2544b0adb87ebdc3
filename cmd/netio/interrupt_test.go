package main

import (
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Ctrl-C on either side ends a run in order: the interrupted side exits
// 130 (128 + SIGINT) with its summary and says so on stderr, the other
// exits 0 with its own, and the receiver's count is acknowledged exactly.
func TestInterrupt(t *testing.T) {
	bin := buildNetio(t)
	for _, side := range []string{"send", "recv"} {
		t.Run(side, func(t *testing.T) {
			recv := startBin(t, bin, "recv", "-listen", "127.0.0.1:0", "-json")
			addr := recv.waitLine(t, `^listening on (\S+) `)[1]
			send := startBin(t, bin, "send", "-to", addr, "-json", "-size", "100")
			send.waitLine(t, `^connected to `)
			// Interrupt once messages have arrived: the receiver's progress
			// line (one a second) shows a rate instead of "waiting".
			recv.waitLine(t, `^recv +[0-9.]+s +[0-9]+ msg/s`)
			victim := send
			if side == "recv" {
				victim = recv
			}
			if err := victim.cmd.Process.Signal(os.Interrupt); err != nil {
				t.Fatal(err)
			}
			sendCode, recvCode := exitOK, exitOK
			if side == "send" {
				sendCode = 130
			} else {
				recvCode = 130
			}
			send.mustExit(t, sendCode)
			recv.mustExit(t, recvCode)
			if e := victim.errText(); !strings.Contains(e, "netio: "+side+": interrupted: stopping (Ctrl-C again exits at once)\n") ||
				!strings.HasSuffix(e, "netio: "+side+": interrupted\n") {
				t.Errorf("%s's stderr:\n%s\nwant the interrupt acknowledged, and reported last", side, e)
			}
			var r recvResult
			decode(t, recv.stdout.String(), &r)
			var s sendResult
			decode(t, send.stdout.String(), &s)
			if r.Messages <= 0 || r.Latency == nil || s.ReceiverCounted == nil || *s.ReceiverCounted != r.Messages || *s.ReceiverRead != s.Messages {
				t.Errorf("recv %+v, send %+v: want the receiver's count acknowledged", r, s)
			}
			switch side {
			case "send":
				if s.Ended != "interrupted" || r.Ended != "the sender ended the stream" || r.Messages != s.Messages || !s.Confirmed {
					t.Errorf("recv %+v, send %+v: want the stream ended by the sender, every message counted", r, s)
				}
			case "recv":
				if r.Ended != "interrupted" || s.Ended != "the receiver asked to stop" || s.Messages < r.Messages || s.Confirmed != (s.Messages == r.Messages) {
					t.Errorf("recv %+v, send %+v: want the sender stopped by the receiver", r, s)
				}
			}
		})
	}
}

// exitInterruptedCode is what a run ended by SIGINT exits with, 128 + 2,
// spelled out so that the tests say what the user sees.
const exitInterruptedCode = 130

// stalledStream starts a recv and a send between them, and stops the recv
// (SIGSTOP) once the stream flows: a receiver that does not read. It
// returns once the sender's progress says it is waiting, blocked in Write.
func stalledStream(t *testing.T, bin, mode string, sendArgs ...string) (recv, send *binProc) {
	t.Helper()
	recv = startBin(t, bin, "recv", "-listen", "127.0.0.1:0", "-mode", mode)
	addr := recv.waitLine(t, `^listening on (\S+) `)[1]
	send = startBin(t, append([]string{bin, "send", "-to", addr, "-mode", mode}, sendArgs...)...)
	send.waitLine(t, `^send +[0-9.]+s +[0-9]+ msg/s`)
	if err := recv.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { recv.cmd.Process.Signal(syscall.SIGCONT) })
	send.waitLine(t, `^send +[0-9.]+s +waiting$`)
	return recv, send
}

// Ctrl-C ends a send blocked on a receiver that does not read: at once
// (it took 33.5 s, the hang guard's, before), with its summary on stdout,
// "interrupted" on stderr and exit 130.
func TestInterruptBlockedSend(t *testing.T) {
	bin := buildNetio(t)
	for _, mode := range []string{"ll", "ht"} {
		t.Run(mode, func(t *testing.T) {
			_, send := stalledStream(t, bin, mode, "-duration", "60s")
			interrupted := time.Now()
			if err := send.cmd.Process.Signal(os.Interrupt); err != nil {
				t.Fatal(err)
			}
			send.mustExitWithin(t, exitInterruptedCode, 15*time.Second)
			t.Logf("-mode %s: ended %v after Ctrl-C", mode, time.Since(interrupted).Round(time.Millisecond))
			out := send.stdout.String()
			if !strings.HasPrefix(out, "netio send: provider tcp, ") ||
				!regexp.MustCompile(`(?m)^ended +interrupted\nreceiver +no acknowledgment: not confirmed`).MatchString(out) {
				t.Errorf("stdout:\n%s\nwant the summary, interrupted and not confirmed", out)
			}
			if e := send.errText(); !strings.Contains(e, "\nnetio: send: interrupted: stopping (Ctrl-C again exits at once)\n") ||
				!regexp.MustCompile(`\nnetio: send: interrupted[^\n]*\n$`).MatchString(e) {
				t.Errorf("stderr:\n%s\nwant the interrupt acknowledged at once and reported last", e)
			}
		})
	}
}

// A second Ctrl-C exits at once, with a line on stderr, while the first
// is still ending the run in order.
func TestInterruptTwice(t *testing.T) {
	bin := buildNetio(t)
	_, send := stalledStream(t, bin, "ll", "-duration", "60s")
	if err := send.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	send.waitLine(t, `^netio: send: interrupted: stopping`)
	if err := send.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Skip("the run ended before the second Ctrl-C:", err)
	}
	send.mustExitWithin(t, exitInterruptedCode, 15*time.Second)
	e := send.errText()
	if strings.Contains(e, "netio: send: interrupted;") && !strings.Contains(e, "again") {
		t.Skip("the run ended in order before the second Ctrl-C arrived")
	}
	if !strings.HasSuffix(e, "netio: send: interrupted again: exiting at once, without a summary\n") {
		t.Errorf("stderr:\n%s\nwant the second Ctrl-C to exit at once, saying so", e)
	}
}

// Ctrl-C ends a ping whose pong has gone silent at once (it took 5.4 s),
// with the round trips measured so far.
func TestInterruptPingSilentPeer(t *testing.T) {
	bin := buildNetio(t)
	pong := startBin(t, bin, "pong", "-listen", "127.0.0.1:0")
	addr := pong.waitLine(t, `^listening on (\S+) `)[1]
	ping := startBin(t, bin, "ping", "-to", addr, "-duration", "60s")
	ping.waitLine(t, `^round trip +[0-9.]+s +[0-9.]+ (ns|µs|ms|s) per round trip$`)
	if err := pong.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pong.cmd.Process.Signal(syscall.SIGCONT) })
	ping.waitLine(t, `^round trip +[0-9.]+s +waiting$`)
	interrupted := time.Now()
	if err := ping.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	ping.mustExitWithin(t, exitInterruptedCode, 15*time.Second)
	t.Logf("ended %v after Ctrl-C", time.Since(interrupted).Round(time.Millisecond))
	if out := ping.stdout.String(); !regexp.MustCompile(`(?m)^round trips +[1-9][0-9]* in .* \(interrupted\)$`).MatchString(out) {
		t.Errorf("stdout:\n%s\nwant the round trips measured, interrupted", out)
	}
	if e := ping.errText(); !strings.HasSuffix(e, "netio: ping: interrupted\n") {
		t.Errorf("stderr:\n%s", e)
	}
}

// Every command, in every phase, exits 130 on Ctrl-C and says so on
// stderr (recv before a peer connected exited 1, demo died of the signal).
func TestInterruptExitCode(t *testing.T) {
	bin := buildNetio(t)
	for _, tt := range []struct {
		name  string
		args  []string
		ready string // a line of stderr after which to interrupt
		last  string // the last line of stderr
	}{
		{"recv waiting for a sender", []string{"recv", "-listen", "127.0.0.1:0"}, `^listening on `, "netio: recv: interrupted before a peer connected"},
		{"pong waiting for a ping", []string{"pong", "-listen", "127.0.0.1:0", "-count", "0"}, `^listening on `, "netio: pong: interrupted"},
		{"demo measuring", []string{"demo", "-duration", "5s"}, `^round trip +[0-9.]+s `, "netio: demo: interrupted"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := startBin(t, append([]string{bin}, tt.args...)...)
			p.waitLine(t, tt.ready)
			if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
				t.Fatal(err)
			}
			p.mustExitWithin(t, exitInterruptedCode, 15*time.Second)
			if e := p.errText(); !strings.HasSuffix(e, "\n"+tt.last+"\n") {
				t.Errorf("stderr:\n%s\nwant it to end with %q", e, tt.last)
			}
		})
	}
}
