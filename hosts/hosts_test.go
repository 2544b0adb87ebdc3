//go:build hosts

package hosts_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/netio-go/netio"
)

// Heartbeats short enough that a cut link is noticed in seconds; the
// timeout is ten intervals, far from the edge on a loaded machine.
const (
	beatInterval   = 200 * time.Millisecond
	beatTimeout    = 2 * time.Second
	connectTimeout = 2 * time.Second // a subscriber retries dialling this often while its link is down
	tags           = 10
)

func beatOpts() []netio.Option {
	return []netio.Option{netio.WithHeartbeatInterval(beatInterval), netio.WithHeartbeatTimeout(beatTimeout)}
}

// size is the length of message i of a stream: mostly up to 16 KiB, and
// now and then 300,000 bytes, more than a LowLatency buffer (it spans pages)
// and spread over pages in HighThroughput mode.
func size(i int) int {
	if i%100 == 50 {
		return 300_000
	}
	return 16 + (i*7919)%16384
}

// fill writes message seq of tag, n bytes: its first 16 bytes say which,
// the rest is a pattern of seq.
func fill(b []byte, tag, seq uint64) []byte {
	binary.LittleEndian.PutUint64(b, tag)
	binary.LittleEndian.PutUint64(b[8:], seq)
	for i := 16; i < len(b); i++ {
		b[i] = byte(seq*31 + uint64(i))
	}
	return b
}

// check reports whether b is message seq of tag as fill wrote it.
func check(b []byte, tag, seq uint64) bool {
	if len(b) < 16 || binary.LittleEndian.Uint64(b) != tag || binary.LittleEndian.Uint64(b[8:]) != seq {
		return false
	}
	for i := 16; i < len(b); i++ {
		if b[i] != byte(seq*31+uint64(i)) {
			return false
		}
	}
	return true
}

func mode() netio.Mode {
	m, err := netio.ParseMode(os.Getenv(modeEnv))
	if err != nil {
		childFatal("%v", err)
	}
	return m
}

// TestHostsChild is the child processes' entry point; as a test of its own
// it does nothing.
func TestHostsChild(t *testing.T) {
	switch os.Getenv(roleEnv) {
	case "pub":
		publisherChild()
	case "sub":
		subscriberChild()
	case "conn-recv":
		receiverChild()
	case "conn-send":
		senderChild()
	default:
		t.Skip("run by the multi-host tests")
	}
}

// publisherChild listens for subscribers. Commands: "start" publishes to
// every tag in turn, a steady stream, until "stop", which answers
// "STOPPED n" with the number published; "publish n" publishes n messages
// of the sizes of size and answers "PUBLISHED n"; "stats" answers "STATS
// subscribers timed-out".
func publisherChild() {
	p, err := netio.ListenPublisher("tcp", os.Getenv(addrEnv), beatOpts()...)
	if err != nil {
		childFatal("listen: %v", err)
	}
	fmt.Println("READY")
	var (
		published atomic.Uint64
		next      [tags]uint64
		stop      chan struct{}
		stopped   chan struct{}
	)
	buf := make([]byte, 300_000)
	publish := func(i int, n int) {
		tag := uint64(i % tags)
		ctx, cancel := context.WithTimeout(context.Background(), hangTimeout)
		defer cancel()
		if err := p.Publish(ctx, tag, fill(buf[:n], tag, next[tag])); err != nil {
			childFatal("publish: %v", err)
		}
		next[tag]++
		published.Add(1)
	}
	for cmd := range commands() {
		switch {
		case cmd == "start":
			stop, stopped = make(chan struct{}), make(chan struct{})
			go func() {
				defer close(stopped)
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					publish(i, 64)
					if i%16 == 0 {
						p.Flush()
						time.Sleep(time.Millisecond) // a steady stream, not a flood
					}
				}
			}()
		case cmd == "stop":
			close(stop)
			<-stopped
			p.Flush()
			fmt.Println("STOPPED", published.Load())
		case strings.HasPrefix(cmd, "publish "):
			n, _ := strconv.Atoi(strings.TrimPrefix(cmd, "publish "))
			for i := 0; i < n; i++ {
				publish(i, size(i))
			}
			p.Flush()
			fmt.Println("PUBLISHED", n)
		case cmd == "stats":
			st := p.Stats()
			fmt.Println("STATS", st.Subscribers, st.TimedOut)
		}
	}
	os.Exit(0)
}

// subscriberChild subscribes to every tag under Block and checks each
// message: its tag's sequence numbers never go back, and its bytes are
// what the publisher wrote. "report" answers "REPORT received bad jumps
// gaps missed reconnects": jumps are the sequence jumps it saw, the rest
// the subscription's Stats.
func subscriberChild() {
	all := make([]uint64, tags)
	for i := range all {
		all[i] = uint64(i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), hangTimeout)
	s, err := netio.Subscribe(ctx, "tcp", os.Getenv(addrEnv), all,
		append(beatOpts(), netio.WithMode(mode()), netio.WithConnectTimeout(connectTimeout))...)
	cancel()
	if err != nil {
		childFatal("subscribe: %v", err)
	}
	fmt.Println("READY")
	var mu sync.Mutex
	var received, bad, jumps uint64
	var next [tags]uint64
	go func() {
		for m := range s.C {
			tag, seq := m.Tag(), m.Seq()
			mu.Lock()
			switch {
			case tag >= tags || seq < next[tag] || !check(m.Bytes(), tag, seq):
				bad++
			case seq > next[tag]:
				jumps++
			}
			if tag < tags && seq >= next[tag] {
				next[tag] = seq + 1
			}
			received++
			mu.Unlock()
			m.Release()
		}
	}()
	for cmd := range commands() {
		if cmd == "report" {
			st := s.Stats()
			mu.Lock()
			fmt.Println("REPORT", received, bad, jumps, st.Gaps, st.Missed, st.Reconnects)
			mu.Unlock()
		}
	}
	os.Exit(0)
}

// receiverChild accepts one connection and reads messages until io.EOF,
// checking each against size and fill; after the number given by
// "expect n" it answers the sender, which then closes. It prints
// "RECEIVED n bad".
func receiverChild() {
	ln, err := netio.Listen("tcp", os.Getenv(addrEnv), append(beatOpts(), netio.WithMode(mode()))...)
	if err != nil {
		childFatal("listen: %v", err)
	}
	fmt.Println("READY")
	cmds := commands()
	want, _ := strconv.Atoi(strings.TrimPrefix(<-cmds, "expect "))
	c, err := ln.AcceptConn()
	if err != nil {
		childFatal("accept: %v", err)
	}
	ln.Close()
	buf := make([]byte, 300_000)
	n, bad := 0, 0
	for {
		k, err := c.ReadMessage(buf)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			childFatal("read %d: %v", n, err)
		}
		if k != size(n) || !check(buf[:k], 0, uint64(n)) {
			bad++
		}
		if n++; n == want {
			if _, err := c.Write([]byte("got them")); err != nil {
				childFatal("write: %v", err)
			}
			c.Flush()
		}
	}
	c.Close()
	fmt.Println("RECEIVED", n, bad)
	for range cmds {
	}
	os.Exit(0)
}

// senderChild dials, on "send n", and writes n messages of the sizes of
// size, waits for the receiver to say it has them, closes and prints
// "SENT n".
func senderChild() {
	cmds := commands()
	n, _ := strconv.Atoi(strings.TrimPrefix(<-cmds, "send "))
	c, err := netio.Dial("tcp", os.Getenv(addrEnv), append(beatOpts(), netio.WithMode(mode()))...)
	if err != nil {
		childFatal("dial: %v", err)
	}
	buf := make([]byte, 300_000)
	for i := 0; i < n; i++ {
		if _, err := c.Write(fill(buf[:size(i)], 0, uint64(i))); err != nil {
			childFatal("write %d: %v", i, err)
		}
	}
	if err := c.Flush(); err != nil {
		childFatal("flush: %v", err)
	}
	if _, err := c.ReadMessage(buf); err != nil {
		childFatal("waiting for the receiver: %v", err)
	}
	c.Close()
	fmt.Println("SENT", n)
	for range cmds {
	}
	os.Exit(0)
}

// subReport is a subscriber child's answer to "report".
type subReport struct {
	received, bad, jumps, gaps, missed, reconnects uint64
}

func (c *child) report(t *testing.T) (r subReport) {
	t.Helper()
	c.ask(t, "report", "REPORT ", &r.received, &r.bad, &r.jumps, &r.gaps, &r.missed, &r.reconnects)
	return r
}

func (c *child) pubStats(t *testing.T) (subscribers, timedOut int) {
	t.Helper()
	c.ask(t, "stats", "STATS ", &subscribers, &timedOut)
	return subscribers, timedOut
}

// A publisher on one host and subscribers on two others, as in a DAQ
// system. One subscriber's link is cut (ip link set down): the publisher
// notices within its heartbeat timeout and frees that subscriber, while
// the other loses nothing; once the link is back, the cut subscriber
// subscribes again by itself and reports what it missed as a gap.
func TestHostsLinkCut(t *testing.T) {
	for _, m := range []string{"ht", "ll"} {
		t.Run(m, func(t *testing.T) {
			pubNS, cutNS, steadyNS := newNetns(t, "pub"), newNetns(t, "cut"), newNetns(t, "steady")
			connect(t, pubNS, "p1", "10.77.1.1", cutNS, "s1", "10.77.1.2")
			connect(t, pubNS, "p2", "10.77.2.1", steadyNS, "s2", "10.77.2.2")
			pub := startChild(t, pubNS, "pub", addrEnv+"=0.0.0.0:7000")
			pub.waitFor(t, "READY")
			cut := startChild(t, cutNS, "sub", addrEnv+"=10.77.1.1:7000", modeEnv+"="+m)
			steady := startChild(t, steadyNS, "sub", addrEnv+"=10.77.2.1:7000", modeEnv+"="+m)
			cut.waitFor(t, "READY")
			steady.waitFor(t, "READY")
			pub.send(t, "start")
			eventually(t, "messages reach both subscribers", func() bool {
				return cut.report(t).received > 1000 && steady.report(t).received > 1000
			})

			cutNS.ip(t, "link", "set", "s1", "down")
			cutAt := time.Now()
			eventually(t, "the publisher drops the subscriber whose link was cut", func() bool {
				subs, timedOut := pub.pubStats(t)
				return subs == 1 && timedOut == 1
			})
			t.Logf("the publisher dropped the cut subscriber %v after the cut", time.Since(cutAt).Round(time.Millisecond))
			before := steady.report(t).received
			eventually(t, "the other subscriber receives meanwhile", func() bool { return steady.report(t).received > before+1000 })

			cutNS.ip(t, "link", "set", "s1", "up")
			upAt := time.Now()
			eventually(t, "the cut subscriber subscribes again", func() bool {
				subs, _ := pub.pubStats(t)
				return subs == 2 && cut.report(t).reconnects > 0
			})
			t.Logf("subscribed again %v after the link came back", time.Since(upAt).Round(time.Millisecond))
			before = cut.report(t).received
			eventually(t, "the cut subscriber receives again", func() bool { return cut.report(t).received > before+1000 })

			pub.send(t, "stop")
			var n uint64
			fmt.Sscan(strings.TrimPrefix(pub.waitFor(t, "STOPPED "), "STOPPED "), &n)
			var rs, rc subReport
			eventually(t, "every message accounted for", func() bool {
				rs, rc = steady.report(t), cut.report(t)
				return rs.received >= n && rc.received+rc.missed >= n
			})
			t.Logf("%d published; steady subscriber %+v; cut subscriber %+v", n, rs, rc)
			if rs != (subReport{received: n}) {
				t.Errorf("the subscriber whose link stayed up: %+v; want all %d messages, no gap, no reconnect", rs, n)
			}
			if rc.bad != 0 || rc.gaps == 0 || rc.jumps == 0 || rc.missed == 0 || rc.reconnects == 0 || rc.received+rc.missed != n {
				t.Errorf("the subscriber whose link was cut: %+v; want a gap reported, and what it received and missed to make the %d published", rc, n)
			}
		})
	}
}

// Over a link that loses packets (and delays them, where the kernel has
// netem), messages of every size still arrive whole and in order, over a
// Conn in either mode and over publish/subscribe.
func TestHostsDelayLoss(t *testing.T) {
	const n = 400
	a, b := newNetns(t, "a"), newNetns(t, "b")
	connect(t, a, "va", "10.78.0.1", b, "vb", "10.78.0.2")
	how := impair(t, a, "va")
	impair(t, b, "vb")
	t.Logf("both ends of the link: %s", how)
	port := 7100
	for _, m := range []string{"ll", "ht"} {
		port++
		t.Run("conn-"+m, func(t *testing.T) {
			addr := ":" + strconv.Itoa(port)
			recv := startChild(t, b, "conn-recv", addrEnv+"=0.0.0.0"+addr, modeEnv+"="+m)
			recv.waitFor(t, "READY")
			recv.send(t, "expect "+strconv.Itoa(n))
			send := startChild(t, a, "conn-send", addrEnv+"=10.78.0.2"+addr, modeEnv+"="+m)
			start := time.Now()
			send.send(t, "send "+strconv.Itoa(n))
			var got, bad int
			fmt.Sscan(strings.TrimPrefix(recv.waitFor(t, "RECEIVED "), "RECEIVED "), &got, &bad)
			send.waitFor(t, "SENT ")
			t.Logf("%d messages in %v", got, time.Since(start).Round(time.Millisecond))
			if got != n || bad != 0 {
				t.Fatalf("received %d messages, %d of them wrong; want %d, all right", got, bad, n)
			}
		})
		port++
		t.Run("pubsub-"+m, func(t *testing.T) {
			addr := ":" + strconv.Itoa(port)
			pub := startChild(t, a, "pub", addrEnv+"=0.0.0.0"+addr)
			pub.waitFor(t, "READY")
			sub := startChild(t, b, "sub", addrEnv+"=10.78.0.1"+addr, modeEnv+"="+m)
			sub.waitFor(t, "READY")
			start := time.Now()
			pub.send(t, "publish "+strconv.Itoa(n))
			pub.waitFor(t, "PUBLISHED ")
			var r subReport
			eventually(t, "every message delivered", func() bool { r = sub.report(t); return r.received >= n })
			t.Logf("%d messages in %v", r.received, time.Since(start).Round(time.Millisecond))
			if r != (subReport{received: n}) {
				t.Fatalf("subscriber %+v; want all %d messages, in order, no gap", r, n)
			}
		})
	}
}
