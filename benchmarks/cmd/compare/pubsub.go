package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/netio-go/netio"
	zmq "github.com/pebbe/zmq4"
)

// Publish/subscribe: one publisher process and Subs subscriber processes,
// each subscriber on its own connection (subscriptions of one process to
// one publisher would share one). The parent starts the publisher, then
// the subscribers; each subscriber prints "READY" once it is subscribed,
// and once all are the parent writes "GO" to the publisher's standard
// input, so that message 0 is the first of every subscriber and every
// subscriber checks the whole sequence from it. Each subscriber times
// itself as the stream receivers do (warm-up from its first message, then
// the window) and prints its RESULT; then it goes on reading, uncounted,
// until the parent kills it, so that the others' windows see the same load
// to the end. A point's rate is the mean of the subscribers' rates:
// messages/s per subscriber, measured at the subscribers.

// pubsubSizes are the message sizes of the publish/subscribe rows, quick
// or not.
var pubsubSizes = []int{64, 4 << 10}

// pubsubTopic is the one tag (netio) the publisher publishes under.
const pubsubTopic = 1

// The publish/subscribe systems, each run with 1 and 4 subscribers.
var pubsubSystems = []struct {
	name, label string
	server      func(*childArgs, func(string)) (*Result, error)
	client      func(*childArgs) (*Result, error)
}{
	{"netio-ll", "netio LL (Publish / Subscribe, Block)", netioPublisher, netioSubscriber(netio.LowLatency)},
	{"netio-ht", "netio HT (Publish / Subscribe, Block)", netioPublisher, netioSubscriber(netio.HighThroughput)},
	{"zmq", "ZeroMQ XPUB/SUB, XPUB_NODROP (Go)", zmqPublisher, zmqSubscriber},
}

// pubsubFanouts are the numbers of subscribers.
var pubsubFanouts = []int{1, 4}

// pubsubModes are the publish/subscribe rows: pubsub-<system>-<subs>.
var pubsubModes = func() []*mode {
	var ms []*mode
	for _, s := range pubsubSystems {
		for _, n := range pubsubFanouts {
			ms = append(ms, &mode{name: fmt.Sprintf("pubsub-%s-%d", s.name, n), label: s.label, timedBy: "client",
				server: s.server, client: s.client, subs: n, system: s.name})
		}
	}
	return ms
}()

// waitGo waits for the parent's "GO" on standard input.
func waitGo() error {
	line, err := bufio.NewReader(os.Stdin).ReadString('\n')
	if err != nil {
		return fmt.Errorf("waiting for GO: %w", err)
	}
	if strings.TrimSpace(line) != "GO" {
		return fmt.Errorf("expected GO, got %q", line)
	}
	return nil
}

// ready tells the parent that this subscriber is subscribed.
func ready() { fmt.Println("READY") }

// emitResult prints a subscriber's result while it goes on reading.
func emitResult(r *Result) {
	b, _ := json.Marshal(r)
	fmt.Printf("RESULT %s\n", b)
}

func netioPublisher(a *childArgs, announce func(string)) (*Result, error) {
	p, err := netio.ListenPublisher("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	announce(p.Addr().String())
	if err := waitGo(); err != nil {
		return nil, err
	}
	if st := p.Stats(); st.Subscribers != a.Subs {
		return nil, fmt.Errorf("%d subscribers at GO, want %d", st.Subscribers, a.Subs)
	}
	msg := payload(a.Size)
	ctx := context.Background()
	for seq := uint64(0); ; seq++ {
		binary.LittleEndian.PutUint64(msg, seq)
		if err := p.Publish(ctx, pubsubTopic, msg); err != nil {
			return nil, err
		}
	}
}

func netioSubscriber(m netio.Mode) func(*childArgs) (*Result, error) {
	return func(a *childArgs) (*Result, error) {
		s, err := netio.Subscribe(context.Background(), "tcp", a.Addr, []uint64{pubsubTopic}, netio.WithMode(m))
		if err != nil {
			return nil, err
		}
		ready()
		cnt := newCounter(a)
		reported := false
		for msg := range s.C {
			if !reported {
				if msg.Seq() != cnt.seq {
					return nil, fmt.Errorf("message %d has tag sequence number %d", cnt.seq, msg.Seq())
				}
				if err := cnt.reportOnce(msg.Bytes(), &reported); err != nil {
					return nil, err
				}
			}
			msg.Release()
		}
		return nil, fmt.Errorf("subscription ended: %v", s.Err())
	}
}

// zmqPublisher is the XPUB_NODROP publisher of the XPUB/SUB stream row,
// with XPUB_VERBOSE so that every subscriber's subscription reaches it
// (not only the first to a topic): it starts when all have subscribed and
// the parent says GO.
func zmqPublisher(a *childArgs, announce func(string)) (*Result, error) {
	s, err := zmqSocket(zmq.XPUB, a.Size)
	if err != nil {
		return nil, err
	}
	if err := s.SetXpubNodrop(true); err != nil {
		return nil, err
	}
	if err := s.SetXpubVerbose(1); err != nil {
		return nil, err
	}
	if err := zmqBind(s, announce); err != nil {
		return nil, err
	}
	for i := 0; i < a.Subs; i++ {
		sub, err := s.RecvBytes(0)
		if err != nil {
			return nil, err
		}
		if len(sub) == 0 || sub[0] != 1 {
			return nil, fmt.Errorf("expected a subscription, got %q", sub)
		}
	}
	if err := waitGo(); err != nil {
		return nil, err
	}
	return zmqSend(a, s)
}

// zmqSubscriber is a SUB subscribed to everything. ZeroMQ's subscription
// travels asynchronously, so READY only says it connected: the publisher
// waits for the subscriptions themselves.
func zmqSubscriber(a *childArgs) (*Result, error) {
	s, err := zmqSocket(zmq.SUB, a.Size)
	if err != nil {
		return nil, err
	}
	if err := s.SetSubscribe(""); err != nil {
		return nil, err
	}
	if err := s.Connect(a.Addr); err != nil {
		return nil, err
	}
	ready()
	cnt := newCounter(a)
	reported := false
	for {
		msg, err := s.RecvBytes(0)
		if err != nil {
			return nil, err
		}
		if err := cnt.reportOnce(msg, &reported); err != nil {
			return nil, err
		}
	}
}

// subscribeWave is how many subscriber processes runPubSub lets start
// and subscribe at once.
const subscribeWave = 4

// runPubSub measures one publish/subscribe point once: a publisher
// process, m.subs subscriber processes, the mean of the subscribers'
// rates.
func (r *runner) runPubSub(m *mode, size int) (*Result, error) {
	a := childArgs{Role: "server", Mode: m.name, Size: size, Warmup: r.warmup, Measure: r.measure, Subs: m.subs}
	pub, err := r.start(m, a)
	if err != nil {
		return nil, err
	}
	defer pub.stop()
	addr, err := expect(pub, nil, "ADDR ", 30*time.Second)
	if err != nil {
		return nil, err
	}
	a.Role, a.Addr = "client", addr
	subs := make([]*child, m.subs)
	for i := range subs {
		// At most subscribeWave subscribers subscribing at once: on this
		// 2-core machine, 32 netio subscriber processes started together
		// all timed out in Subscribe (10 s), and so did some of 64 let
		// start 8 at a time under other load; one at a time, each took
		// 0.5-1.5 s from its start.
		if i >= subscribeWave {
			if _, err := expect(subs[i-subscribeWave], pub, "READY", 30*time.Second); err != nil {
				return nil, err
			}
		}
		if subs[i], err = r.start(m, a); err != nil {
			return nil, err
		}
		defer subs[i].stop()
	}
	for _, s := range subs[max(len(subs)-subscribeWave, 0):] {
		if _, err := expect(s, pub, "READY", 30*time.Second); err != nil {
			return nil, err
		}
	}
	if _, err := io.WriteString(pub.stdin, "GO\n"); err != nil {
		return nil, fmt.Errorf("starting the publisher: %w", err)
	}
	res := &Result{Size: size}
	for _, s := range subs {
		line, err := expect(s, pub, "RESULT ", r.warmup+r.measure+60*time.Second)
		if err != nil {
			return nil, err
		}
		one := new(Result)
		if err := json.Unmarshal([]byte(line), one); err != nil {
			return nil, err
		}
		res.Messages += one.Messages
		res.Seconds += one.Seconds
		res.SubRates = append(res.SubRates, one.MsgRate())
	}
	if len(res.SubRates) == 0 {
		return nil, errors.New("no subscriber")
	}
	return res, nil
}

// pubsubTable writes the publish/subscribe section: messages/s per
// subscriber for each system, size and fan-out, and netio's ratios to
// ZeroMQ.
func (r *report) pubsubTable(w func(string, ...any)) {
	if len(r.PubSub) == 0 {
		return
	}
	find := func(name string, size int) *point {
		for _, p := range r.PubSub {
			if p.Mode == name && p.Size == size {
				return p
			}
		}
		return nil
	}
	var sizes []int
	for _, s := range pubsubSizes {
		for _, p := range r.PubSub {
			if p.Size == s {
				sizes = append(sizes, s)
				break
			}
		}
	}
	w("\n## Publish/subscribe\n\nMessages/s **per subscriber**, measured at each subscriber (its own process and connection) and averaged over the subscribers of a run; 1 -> 1 is one subscriber, 1 -> 4 four. Lossless on both sides: netio's subscribers use the default policy (Block), ZeroMQ's publisher XPUB_NODROP; every subscriber checks every sequence number from message 0.\n\n| system |")
	for _, s := range sizes {
		for _, n := range pubsubFanouts {
			w(" %s, 1 -> %d |", sizeLabel(s), n)
		}
	}
	w("\n|---|")
	for range sizes {
		for range pubsubFanouts {
			w("---|")
		}
	}
	w("\n")
	rows := func(label string, cellOf func(sys string, size, n int) string, systems ...string) {
		for _, sys := range systems {
			lbl := label
			if lbl == "" {
				for _, s := range pubsubSystems {
					if s.name == sys {
						lbl = s.label
					}
				}
			} else {
				lbl = fmt.Sprintf(label, strings.ToUpper(strings.TrimPrefix(sys, "netio-")))
			}
			w("| %s |", lbl)
			for _, s := range sizes {
				for _, n := range pubsubFanouts {
					w(" %s |", cellOf(sys, s, n))
				}
			}
			w("\n")
		}
	}
	rows("", func(sys string, size, n int) string {
		p := find(fmt.Sprintf("pubsub-%s-%d", sys, n), size)
		if p == nil {
			return ""
		}
		return cell(p.rate(), fmtRate)
	}, "netio-ll", "netio-ht", "zmq")
	rows("netio %s / ZeroMQ (medians)", func(sys string, size, n int) string {
		a, b := find(fmt.Sprintf("pubsub-%s-%d", sys, n), size), find(fmt.Sprintf("pubsub-zmq-%d", n), size)
		if a == nil || b == nil {
			return "-"
		}
		return ratio(a.rate(), b.rate())
	}, "netio-ll", "netio-ht")
}

const pubsubNotes = `- **Publish/subscribe**: one publisher process and 1 or 4 subscriber processes, each subscriber on its own connection. netio: ` + "`netio.ListenPublisher`" + ` with default options, one ` + "`Publish`" + ` per message under one tag; each subscriber ` + "`netio.Subscribe`" + `s to it in LL or HT mode (the subscriber chooses) with the default policy, Block, so the slowest subscriber holds the publisher back and nothing is lost; it reads ` + "`sub.C`" + `, checks the message and its tag sequence number, and calls ` + "`Release`" + ` (a subscription's messages are copies out of the connection's buffers). ZeroMQ: XPUB with XPUB_NODROP=1 (a send at the high-water mark waits) and XPUB_VERBOSE, the same HWMs as the stream rows, SUB subscribed to everything, ` + "`SendBytes`/`RecvBytes`" + `. Both publishers start when every subscriber has subscribed (netio: ` + "`Subscribe`" + ` returned in every subscriber; ZeroMQ: every subscription arrived at the XPUB), so every subscriber checks the whole sequence from 0. Each subscriber times its own window as the stream receivers do and keeps reading, uncounted, after it, so the others see the same load to the end of theirs. On this 2-vCPU machine 1 -> 4 runs five busy processes on two cores.
`

// reportOnce counts msg until the measured window is over, emits the
// result once, and ignores what comes after (a subscriber keeps reading
// so that the others see the same load to the end of their windows).
func (c *counter) reportOnce(msg []byte, reported *bool) error {
	if *reported {
		return nil
	}
	done, err := c.got(msg)
	if err != nil || !done {
		return err
	}
	r, err := c.result()
	if err != nil {
		return err
	}
	emitResult(r)
	*reported = true
	return nil
}
