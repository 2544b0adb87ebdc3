package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// send against a pong used to stream into it and end "confirmed" with exit
// 0; it finds out from the greeting and fails, saying what the peer is.
func TestSendToPong(t *testing.T) {
	pong := start("pong", "-listen", "127.0.0.1:0")
	send := start("send", "-to", pong.addr(t), "-count", "100")
	send.mustExit(t, exitError)
	pong.mustExit(t, exitOK)
	if e := send.stderr.String(); !strings.HasSuffix(e, "\nnetio: send: the peer echoed the greeting: it is a netio pong or another echo server, and netio send streams to a netio recv\n") {
		t.Errorf("send's stderr:\n%s", e)
	}
	if out := send.stdout.String(); out != "" {
		t.Errorf("send's stdout %q: want no summary, nothing was sent", out)
	}
	if out := pong.stdout.String(); !strings.Contains(out, "echoed 0 messages") || !strings.Contains(out, "(it was a netio send, which streams to a netio recv)") {
		t.Errorf("pong's stdout:\n%s", out)
	}
}

// ping against a recv used to wait for an echo that never comes; the recv
// answers its greeting, and both fail at once, saying why.
func TestPingToRecv(t *testing.T) {
	recv := start("recv", "-listen", "127.0.0.1:0")
	ping := start("ping", "-to", recv.addr(t), "-count", "10")
	ping.mustExit(t, exitError)
	recv.mustExit(t, exitError)
	if e := ping.stderr.String(); !strings.HasSuffix(e, "\nnetio: ping: the peer is a netio recv, which reads the stream of a netio send: netio ping needs a netio pong (or another echo server)\n") {
		t.Errorf("ping's stderr:\n%s", e)
	}
	if e := recv.stderr.String(); !strings.HasSuffix(e, "\nnetio: recv: the peer is a netio ping, which needs a netio pong: netio recv reads the stream of a netio send\n") {
		t.Errorf("recv's stderr:\n%s", e)
	}
	if ping.stdout.String() != "" || recv.stdout.String() != "" {
		t.Errorf("stdout %q and %q: want no summaries", ping.stdout, recv.stdout)
	}
}

// A receiver that stops first reads the rest without counting it; the
// sender must not call that confirmed (it said "the receiver confirmed the
// end of the stream" when the receiver had read 50,514 of 50,545).
func TestSendConfirmsOnlyWhatWasCounted(t *testing.T) {
	recv := start("recv", "-listen", "127.0.0.1:0", "-count", "300", "-json")
	send := start("send", "-to", recv.addr(t), "-size", "64KiB", "-json")
	send.mustExit(t, exitOK)
	recv.mustExit(t, exitOK)
	var r, s map[string]any
	if err := json.Unmarshal([]byte(recv.stdout.String()), &r); err != nil {
		t.Fatalf("recv: %v\n%s", err, recv.stdout)
	}
	if err := json.Unmarshal([]byte(send.stdout.String()), &s); err != nil {
		t.Fatalf("send: %v\n%s", err, send.stdout)
	}
	sent := s["messages"].(float64)
	if r["messages"] != 300.0 || sent < 300 {
		t.Fatalf("recv counted %v, send wrote %v", r["messages"], sent)
	}
	if s["confirmed"] != (sent == 300) || s["receiver_counted"] != 300.0 || s["receiver_read"] != sent || r["dropped"] != sent-300 {
		t.Errorf("send %v\nrecv %v\nwant confirmed only if all %v were counted, the receiver's count acknowledged", s, r, sent)
	}

	// The table says the same in words.
	recv = start("recv", "-listen", "127.0.0.1:0", "-count", "300")
	send = start("send", "-to", recv.addr(t), "-size", "64KiB")
	send.mustExit(t, exitOK)
	recv.mustExit(t, exitOK)
	if out := send.stdout.String(); !strings.Contains(out, "\nreceiver  counted 300 of the ") && !strings.Contains(out, "\nreceiver  confirmed: it counted all 300 messages\n") {
		t.Errorf("send's summary:\n%s", out)
	}
}
