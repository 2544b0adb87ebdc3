package main

import (
	"os"
	"testing"
)

// Ctrl-C on either side ends a run in order: both exit 0 with a summary,
// and the receiver's count is exact.
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
			send.mustExit(t, exitOK)
			recv.mustExit(t, exitOK)
			var r recvResult
			decode(t, recv.stdout.String(), &r)
			var s sendResult
			decode(t, send.stdout.String(), &s)
			if r.Messages <= 0 || r.Latency == nil || !s.Confirmed {
				t.Errorf("recv %+v, send %+v", r, s)
			}
			switch side {
			case "send":
				if s.Ended != "interrupted" || r.Ended != "the sender ended the stream" || r.Messages != s.Messages {
					t.Errorf("recv %+v, send %+v: want the stream ended by the sender, every message counted", r, s)
				}
			case "recv":
				if r.Ended != "interrupted" || s.Ended != "the receiver asked to stop" || s.Messages < r.Messages {
					t.Errorf("recv %+v, send %+v: want the sender stopped by the receiver", r, s)
				}
			}
		})
	}
}
