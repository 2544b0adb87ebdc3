package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestNamespaces runs the command between two network namespaces joined
// by a veth pair: two hosts as far as netio and libfabric can tell, with
// their own interfaces and addresses, on one kernel (and one clock). It
// needs root; it creates netio-a-XXXX and netio-b-XXXX with 10.213.x.1/30
// and 10.213.x.2/30 and always deletes them.
func TestNamespaces(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create network namespaces")
	}
	ipTool, err := exec.LookPath("ip")
	if err != nil {
		t.Skip("no ip command:", err)
	}
	ip := func(args ...string) error {
		if out, err := exec.Command(ipTool, args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	suffix := fmt.Sprintf("%04x", rand.IntN(1<<16))
	nsA, nsB := "netio-a-"+suffix, "netio-b-"+suffix
	for _, ns := range []string{nsA, nsB} {
		if err := ip("netns", "add", ns); err != nil {
			t.Skip("cannot create a network namespace: ", err)
		}
		t.Cleanup(func() {
			if err := ip("netns", "del", ns); err != nil {
				t.Error(err)
			}
		})
	}
	x := rand.IntN(256)
	addrA, addrB := fmt.Sprintf("10.213.%d.1", x), fmt.Sprintf("10.213.%d.2", x)
	vethA, vethB := "nva"+suffix, "nvb"+suffix
	for _, args := range [][]string{
		{"link", "add", vethA, "netns", nsA, "type", "veth", "peer", "name", vethB, "netns", nsB},
		{"-n", nsA, "addr", "add", addrA + "/30", "dev", vethA},
		{"-n", nsB, "addr", "add", addrB + "/30", "dev", vethB},
		{"-n", nsA, "link", "set", "lo", "up"},
		{"-n", nsB, "link", "set", "lo", "up"},
		{"-n", nsA, "link", "set", vethA, "up"},
		{"-n", nsB, "link", "set", vethB, "up"},
	} {
		if err := ip(args...); err != nil {
			t.Fatal(err)
		}
	}
	bin := buildNetio(t)
	inA := []string{ipTool, "netns", "exec", nsA, bin}
	inB := []string{ipTool, "netns", "exec", nsB, bin}

	t.Run("send/recv", func(t *testing.T) {
		recv := startBin(t, append(inA, "recv", "-listen", addrA+":0", "-count", "2000", "-json")...)
		addr := recv.waitLine(t, `^listening on (\S+) `)[1]
		send := startBin(t, append(inB, "send", "-to", addr, "-count", "2000", "-size", "1024", "-json")...)
		send.mustExit(t, exitOK)
		recv.mustExit(t, exitOK)
		var r recvResult
		decode(t, recv.stdout.String(), &r)
		var s sendResult
		decode(t, send.stdout.String(), &s)
		if r.Messages != 2000 || r.Bytes != 2000*1024 || r.GbitPerSecond <= 0 || r.Latency == nil || r.Latency.Samples != 2000 {
			t.Errorf("recv %+v: want 2000 messages of 1 KiB with latency", r)
		}
		if !strings.HasPrefix(r.Remote, addrB+":") || !strings.HasPrefix(r.Local, addrA+":") || r.Latency.Clocks == "one host, one clock" {
			t.Errorf("recv %+v: want %s -> %s, two clocks as far as it knows", r, addrB, addrA)
		}
		if s.Messages != 2000 || !s.Confirmed {
			t.Errorf("send %+v: want 2000 messages, confirmed", s)
		}
	})

	t.Run("ping/pong", func(t *testing.T) {
		pong := startBin(t, append(inA, "pong", "-listen", addrA+":0")...)
		addr := pong.waitLine(t, `^listening on (\S+) `)[1]
		ping := startBin(t, append(inB, "ping", "-to", addr, "-count", "2000", "-json")...)
		ping.mustExit(t, exitOK)
		pong.mustExit(t, exitOK)
		var p pingResult
		decode(t, ping.stdout.String(), &p)
		if p.Pings != 2000 || p.MinMicros <= 0 || p.MedianMicros < p.MinMicros || p.MaxMicros < p.P99Micros {
			t.Errorf("ping %+v", p)
		}
		if !strings.Contains(pong.stdout.String(), ": echoed 2000 messages in ") {
			t.Errorf("pong: %s", pong.stdout.String())
		}
	})
}
