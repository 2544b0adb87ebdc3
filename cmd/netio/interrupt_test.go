package main

import (
	"os"
	"strings"
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
			time.Sleep(300 * time.Millisecond)
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
