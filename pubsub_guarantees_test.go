package netio_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/netio-go/netio"
)

// The guarantees publish/subscribe keeps when subscribers misbehave, tested
// with subscribers in processes of their own (a process's subscriptions to
// one publisher share a connection): a stuck subscriber neither stalls the
// others nor other tags, and is cut loose with its loss counted; Shutdown
// and a killed publisher leave no loss uncounted; a subscriber can wait
// for a publisher that is not up yet.

// The command-driven subscriber child ("ctl"): it subscribes as its
// environment says, reports its events on stdout as they come, and reads
// C only once told to.
const (
	psBufferEnv     = "NETIO_PS_BUFFER"     // ctl: SubscriptionBuffer
	psReconnectsEnv = "NETIO_PS_RECONNECTS" // ctl: MaxReconnects
	psWaitEnv       = "NETIO_PS_WAIT"       // ctl: "1" subscribes WithWaitForPublisher
	psPauseEnv      = "NETIO_PS_PAUSE"      // ctl: reads sleep 1 ms every this many messages (a slow reader)
)

// Its commands, one a line on stdin:
//
//	READ          start reading C (and go on until C closes)
//	AT tag seq    print "AT tag seq" once the tag's messages up to seq
//	              were received or counted missed
//	REPORT        print "REPORT" and the subscription's counts
//	CLOSED        print "CLOSED" once C has closed
//
// and what it prints besides: "READY" once subscribed, "EVENT ..." per
// event (see ctlEventLine), "BAD ..." for a message out of sequence.
func ctlSubscriberChild() {
	tags := make([]uint64, 0)
	for _, f := range strings.Split(os.Getenv(psTagsEnv), ",") {
		v, _ := strconv.ParseUint(f, 10, 64)
		tags = append(tags, v)
	}
	opts := []netio.Option{netio.WithMode(psMode())}
	if n, _ := strconv.Atoi(os.Getenv(psBufferEnv)); n > 0 {
		opts = append(opts, netio.WithSubscriptionBuffer(n))
	}
	if n, _ := strconv.Atoi(os.Getenv(psReconnectsEnv)); n > 0 {
		opts = append(opts, netio.WithMaxReconnects(n))
	}
	if os.Getenv(psWaitEnv) == "1" {
		opts = append(opts, netio.WithWaitForPublisher())
	}
	pause, _ := strconv.Atoi(os.Getenv(psPauseEnv))
	ctx, cancel := context.WithTimeout(context.Background(), 5*hangTimeout)
	s, err := netio.Subscribe(ctx, testNetwork, os.Getenv(psAddrEnv), tags, opts...)
	cancel()
	if err != nil {
		childFatal("subscribe: %v", err)
	}
	out := make(chan string, 1024)
	go func() {
		for l := range out {
			fmt.Println(l)
		}
	}()
	out <- "READY"
	commands := make(chan []string)
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			commands <- strings.Fields(sc.Text())
		}
		os.Exit(0) // the parent is gone
	}()
	next := map[uint64]uint64{} // per tag: received or missed up to here
	// A gap's event and the messages before it travel on different
	// channels, and this child may read the event first (it reads events
	// even while it does not read C): a gap is kept until the tag's
	// sequence reaches it.
	gaps := map[uint64][][2]uint64{}
	skipGaps := func(tag uint64) {
		for moved := true; moved; {
			moved = false
			kept := gaps[tag][:0]
			for _, g := range gaps[tag] {
				switch {
				case g[0] <= next[tag] && next[tag] <= g[1]:
					next[tag], moved = g[1]+1, true
				case g[1] >= next[tag]:
					kept = append(kept, g)
				}
			}
			gaps[tag] = kept
		}
	}
	var received, bad uint64
	type at struct{ tag, seq uint64 }
	var waits []at
	var closedWaits int
	checkWaits := func() {
		kept := waits[:0]
		for _, w := range waits {
			if next[w.tag] > w.seq {
				out <- fmt.Sprintf("AT %d %d", w.tag, w.seq)
			} else {
				kept = append(kept, w)
			}
		}
		waits = kept
	}
	var c <-chan netio.Message
	events := s.Events()
	cClosed := false
	for {
		select {
		case cmd := <-commands:
			switch cmd[0] {
			case "READ":
				if !cClosed {
					c = s.C
				}
			case "AT":
				tag, _ := strconv.ParseUint(cmd[1], 10, 64)
				seq, _ := strconv.ParseUint(cmd[2], 10, 64)
				waits = append(waits, at{tag, seq})
				checkWaits()
			case "REPORT":
				st := s.Stats()
				out <- fmt.Sprintf("REPORT %d %d %d %d %d %d %d %d", received, bad, st.Gaps, st.Missed, st.Reconnects, st.Restarts, st.LossUnknown, st.Received)
			case "CLOSED":
				if cClosed {
					out <- "CLOSED"
				} else {
					closedWaits++
				}
			}
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			if ev.Kind == netio.EventGap {
				gaps[ev.Tag] = append(gaps[ev.Tag], [2]uint64{ev.From, ev.To})
				skipGaps(ev.Tag)
			}
			out <- ctlEventLine(ev)
			if ev.Kind == netio.EventClosed {
				out <- "ERR " + s.Err().Error()
			}
			checkWaits()
		case m, ok := <-c:
			if !ok {
				c, cClosed = nil, true
				for ; closedWaits > 0; closedWaits-- {
					out <- "CLOSED"
				}
				continue
			}
			b := m.Bytes()
			tag, seq := m.Tag(), m.Seq()
			// A gap's event comes before the message that revealed it,
			// but the two travel on different channels: take the
			// message's word for where the sequence stands.
			if seq < next[tag] || len(b) < 16 || binary.LittleEndian.Uint64(b) != tag || binary.LittleEndian.Uint64(b[8:]) != seq {
				bad++
				out <- fmt.Sprintf("BAD tag %d seq %d, expected from %d", tag, seq, next[tag])
			}
			next[tag] = seq + 1
			skipGaps(tag)
			received++
			m.Release()
			if pause > 0 && received%uint64(pause) == 0 {
				time.Sleep(time.Millisecond) // a slow reader
			}
			checkWaits()
		}
	}
}

// ctlEventLine is how the child reports an event: "EVENT disconnected
// slow|closed|timeout|other", "EVENT reconnected", "EVENT restarted
// unknown|known", "EVENT gap tag from to", "EVENT closed".
func ctlEventLine(ev netio.Event) string {
	switch ev.Kind {
	case netio.EventDisconnected:
		cause := "other"
		switch {
		case errors.Is(ev.Err, netio.ErrSlowSubscriber):
			cause = "slow"
		case errors.Is(ev.Err, netio.ErrPublisherClosed):
			cause = "closed"
		case errors.Is(ev.Err, netio.ErrPeerTimeout):
			cause = "timeout"
		}
		return "EVENT disconnected " + cause
	case netio.EventReconnected:
		return "EVENT reconnected"
	case netio.EventPublisherRestarted:
		if ev.LossUnknown {
			return "EVENT restarted unknown"
		}
		return "EVENT restarted known"
	case netio.EventGap:
		return fmt.Sprintf("EVENT gap %d %d %d", ev.Tag, ev.From, ev.To)
	case netio.EventClosed:
		return "EVENT closed"
	}
	return "EVENT " + ev.Kind.String()
}

// ctlReport is a ctl child's REPORT.
type ctlReport struct {
	Received, Bad, Gaps, Missed, Reconnects, Restarts, LossUnknown, StatsReceived uint64
}

// ctlChild is a running ctl child and what it said.
type ctlChild struct {
	*child
	seen []string // every line so far, in order
}

func startCtl(t *testing.T, addr, tags string, env ...string) *ctlChild {
	t.Helper()
	c := startCtlWaiting(t, addr, tags, env...)
	c.await(t, "READY")
	return c
}

// startCtlWaiting starts a ctl child that subscribes to a publisher not up
// yet (WithWaitForPublisher), and returns without waiting for READY.
//
// A child started after the publisher listens holds the publisher's
// listening socket: libfabric opens its sockets without close-on-exec, so
// the child inherits it, and once the publisher closes, the child's own
// reconnection connects to that socket, which nobody accepts from, and
// times out instead of being refused.
func startCtlWaiting(t *testing.T, addr, tags string, env ...string) *ctlChild {
	t.Helper()
	env = append([]string{psRoleEnv + "=ctl", psAddrEnv + "=" + addr, psTagsEnv + "=" + tags, psWaitEnv + "=1"}, env...)
	return &ctlChild{child: startPubSubChild(t, env...)}
}

func (c *ctlChild) send(t *testing.T, cmd string) {
	t.Helper()
	if _, err := fmt.Fprintln(c.stdin, cmd); err != nil {
		t.Fatal(err)
	}
}

// await returns the child's next line starting with prefix, keeping every
// line it passes.
func (c *ctlChild) await(t *testing.T, prefix string) string {
	t.Helper()
	timeout := time.NewTimer(5 * hangTimeout)
	defer timeout.Stop()
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				t.Fatalf("child exited before a line starting %q; it said %q", prefix, c.seen)
			}
			c.seen = append(c.seen, l)
			if strings.HasPrefix(l, "BAD") {
				t.Errorf("child: %s", l)
			}
			if strings.HasPrefix(l, prefix) {
				return l
			}
		case <-timeout.C:
			t.Fatalf("no line starting %q from the child; it said %q", prefix, c.seen)
		}
	}
}

// awaitOnce returns the first line starting with prefix the child has
// said, before this call or after: events travel apart from the answers to
// commands, so a line the child says once may already have been passed by
// an await for another.
func (c *ctlChild) awaitOnce(t *testing.T, prefix string) string {
	t.Helper()
	for _, l := range c.seen {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return c.await(t, prefix)
}

// at waits until the child has every message of tag up to seq, received or
// counted missed.
func (c *ctlChild) at(t *testing.T, tag, seq uint64) {
	t.Helper()
	c.send(t, fmt.Sprintf("AT %d %d", tag, seq))
	c.await(t, fmt.Sprintf("AT %d %d", tag, seq))
}

func (c *ctlChild) report(t *testing.T) ctlReport {
	t.Helper()
	c.send(t, "REPORT")
	var r ctlReport
	if _, err := fmt.Sscanf(c.await(t, "REPORT "), "REPORT %d %d %d %d %d %d %d %d",
		&r.Received, &r.Bad, &r.Gaps, &r.Missed, &r.Reconnects, &r.Restarts, &r.LossUnknown, &r.StatsReceived); err != nil {
		t.Fatal(err)
	}
	return r
}

// events is the child's events so far, in order.
func (c *ctlChild) events() []string {
	var ev []string
	for _, l := range c.seen {
		if e, ok := strings.CutPrefix(l, "EVENT "); ok {
			ev = append(ev, e)
		}
	}
	return ev
}

// publishLoop publishes tag's messages from seq 0 on in a goroutine until
// stop closes or a Publish fails; each Publish's outcome goes to results.
func publishLoop(p *netio.Publisher, tag uint64, stop <-chan struct{}) (results <-chan error) {
	res := make(chan error, 1<<16)
	go func() {
		defer close(res)
		buf := make([]byte, 64)
		for i := uint64(0); ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			err := p.Publish(context.Background(), tag, psMessage(buf, tag, i))
			res <- err
			if err != nil {
				return
			}
		}
	}()
	return res
}

// smallPages keeps a publisher's links small, so that a subscriber that
// stops reading fills its window after a few hundred messages.
var smallPages = []netio.Option{netio.WithBufferSize(4096), netio.WithWindow(4)}

// A Block subscriber that stops reading holds back only the Publish calls
// of its own tag: publishes to another tag go through while one to its
// tag waits for it (here without limit, for as long as the test runs), and
// the subscriber that reads both tags gets every message, the one the
// stuck subscriber holds up included.
func TestPubSubStuckSubscriberHoldsOnlyItsTag(t *testing.T) {
	p := listenPublisher(t, append(smallPages, netio.WithSlowSubscriberLimit(0))...)
	addr := p.Addr().String()
	startCtl(t, addr, "0", psBufferEnv+"=16") // never reads
	reader := startCtl(t, addr, "0,1")
	reader.send(t, "READ")
	// Stopped before the children go (cleanups run last first): once the
	// stuck one has gone, tag 0 has no subscriber left to wait for, and an
	// unstopped loop would fill results before the publisher closes and
	// then block on it for good.
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	results := publishLoop(p, 0, stop)
	waitBlocked(t, 1, "netio.(*pubLink).publishWaiting")
	const k = 2000
	ctx, cancel := context.WithTimeout(context.Background(), hangTimeout)
	defer cancel()
	buf := make([]byte, 64)
	for i := uint64(0); i < k; i++ {
		if err := p.Publish(ctx, 1, psMessage(buf, 1, i)); err != nil {
			t.Fatalf("publish %d to tag 1 while tag 0 waits: %v", i, err)
		}
	}
	p.Flush()
	// The stuck subscriber's window fills for good: the publish of tag 0
	// in progress waits until the publisher closes.
	published := uint64(len(results))
	waitBlocked(t, 1, "netio.(*pubLink).publishWaiting")
	reader.at(t, 1, k-1)
	reader.at(t, 0, published) // the message the stuck one holds up too
	if r := reader.report(t); r.Missed != 0 || r.Bad != 0 {
		t.Fatalf("reader: %+v, want every message in sequence", r)
	}
	if st := p.Stats(); st.CutSlow != 0 {
		t.Fatalf("cut loose without a limit: %+v", st)
	}
	for len(results) > 0 { // the one waiting is not in it
		if err := <-results; err != nil {
			t.Fatalf("publish to tag 0: %v", err)
		}
	}
}

// A Block subscriber that stops reading is cut loose once its window has
// stayed full for the limit: the publisher says so (an event and
// CutSlow), the reader beside it gets every message, and when the stuck
// one reads again it reconnects by itself, its events say why it was cut,
// and what it missed is exactly what it did not receive of what was
// published.
func TestPubSubSlowSubscriberCutLoose(t *testing.T) {
	const n = 20000
	// The default limit: a reader slowed down by the race detector on a
	// loaded machine must not look stuck.
	p := listenPublisher(t, smallPages...)
	addr := p.Addr().String()
	stuck := startCtl(t, addr, "0", psBufferEnv+"=16")
	reader := startCtl(t, addr, "0")
	reader.send(t, "READ")
	events := p.Events()
	published := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*hangTimeout)
		defer cancel()
		buf := make([]byte, 64)
		for i := uint64(0); i < n; i++ {
			if err := p.Publish(ctx, 0, psMessage(buf, 0, i)); err != nil {
				published <- fmt.Errorf("publish %d: %w", i, err)
				return
			}
		}
		published <- p.Flush()
	}()
	for cut := false; !cut; {
		select {
		case ev := <-events:
			cut = ev.Kind == netio.EventSubscriberLeft && errors.Is(ev.Err, netio.ErrSlowSubscriber)
		case <-time.After(5 * hangTimeout):
			t.Fatal("no subscriber cut loose")
		}
	}
	if err := <-published; err != nil {
		t.Fatal(err) // the cut one is not live: every Publish reached everyone
	}
	if st := p.Stats(); st.CutSlow != 1 {
		t.Fatalf("publisher stats %+v, want one subscriber cut loose", st)
	}
	reader.at(t, 0, n-1)
	if r := reader.report(t); r.Received != n || r.Missed != 0 || r.Reconnects != 0 {
		t.Fatalf("reader beside the stuck one: %+v, want all %d messages", r, n)
	}
	stuck.send(t, "READ")
	stuck.at(t, 0, n-1)
	r := stuck.report(t)
	t.Logf("the stuck subscriber received %d, missed %d in %d gaps; events %q", r.Received, r.Missed, r.Gaps, stuck.events())
	if r.Received+r.Missed != n || r.Missed == 0 || r.Reconnects != 1 || r.Restarts != 0 || r.LossUnknown != 0 {
		t.Fatalf("stuck subscriber: %+v; want received + missed = %d, one reconnect", r, n)
	}
	ev := stuck.events()
	if i := indexOf(ev, "disconnected slow"); i < 0 || indexOf(ev[i:], "reconnected") < 0 {
		t.Fatalf("stuck subscriber's events %q: want disconnected (slow), then reconnected", ev)
	}
	var gapped uint64
	for _, e := range ev {
		var tag, from, to uint64
		if _, err := fmt.Sscanf(e, "gap %d %d %d", &tag, &from, &to); err == nil {
			gapped += to - from + 1
		}
	}
	if gapped != r.Missed {
		t.Fatalf("gap events cover %d messages, Stats say %d missed", gapped, r.Missed)
	}
}

func indexOf(s []string, x string) int {
	for i, v := range s {
		if v == x {
			return i
		}
	}
	return -1
}

// Shutdown with a subscriber that reads slowly waits until it has every
// message and returns nil; the subscriber hears that the publisher closed.
func TestPublisherShutdownSlowReader(t *testing.T) {
	const n = 3000
	p, sub := publisherWithCtl(t, smallPages, "0", psBufferEnv+"=16", psPauseEnv+"=50")
	sub.send(t, "READ")
	publishRange(t, p, 1, 0, n)
	ctx, cancel := context.WithTimeout(context.Background(), 5*hangTimeout)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown with a slow reader: %v", err)
	}
	sub.at(t, 0, n-1)
	sub.awaitOnce(t, "EVENT disconnected closed")
	if r := sub.report(t); r.Received != n || r.Missed != 0 {
		t.Fatalf("slow reader after Shutdown: %+v, want all %d messages", r, n)
	}
	if err := p.Publish(ctx, 0, []byte("late")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Publish after Shutdown: %v, want net.ErrClosed", err)
	}
	if err := p.Close(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Close after Shutdown: %v, want net.ErrClosed", err)
	}
}

// Shutdown with a subscriber that never reads returns when its context
// ends, with an error that counts what did not reach it; the subscriber,
// once it reads, finds exactly that many missing, and gives up
// reconnecting to a publisher that is gone (C closes).
func TestPublisherShutdownStuckReader(t *testing.T) {
	// The subscriber is stopped (SIGSTOP) while the publisher fills its
	// window: the publisher must not drop it as silent meanwhile.
	p, sub := publisherWithCtl(t, append(smallPages, netio.WithSlowSubscriberLimit(0), netio.WithHeartbeatTimeout(-1)), "0",
		psBufferEnv+"=16", psReconnectsEnv+"=2")
	results := publishLoop(p, 0, nil)
	waitBlocked(t, 1, "netio.(*pubLink).publishWaiting")
	// Stopped, the subscriber returns no credit: once the publisher has
	// used what it had, what it still holds can never go.
	if err := sub.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitStopped(t, sub.cmd.Process.Pid)
	eventually(t, "the publisher holding what a stopped subscriber cannot take", func() bool { return netio.PublisherStuck(p) })
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err := p.Shutdown(ctx)
	var ue *netio.UndeliveredError
	if !errors.As(err, &ue) || !errors.Is(err, netio.ErrUndelivered) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown with a subscriber that does not read: %v, want an UndeliveredError at the deadline", err)
	}
	if ue.Subscribers != 1 || ue.Messages == 0 {
		t.Fatalf("Shutdown: %+v, want messages missed by one subscriber", ue)
	}
	var published uint64 // the messages numbered: the last one stranded by Shutdown
	for err := range results {
		switch {
		case err == nil, errors.Is(err, netio.ErrUndelivered):
			published++
		case !errors.Is(err, net.ErrClosed):
			t.Fatalf("publish: %v", err)
		}
	}
	if err := sub.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	sub.send(t, "READ")
	sub.at(t, 0, published-1)
	r := sub.report(t)
	t.Logf("Shutdown: %v; the subscriber received %d of %d, events %q", err, r.Received, published, sub.events())
	if r.Missed != ue.Messages || r.Received+r.Missed != published {
		t.Fatalf("subscriber: %+v; Shutdown said %d undelivered of %d published", r, ue.Messages, published)
	}
	sub.send(t, "CLOSED")
	sub.awaitOnce(t, "CLOSED")
	sub.awaitOnce(t, "EVENT closed")
	t.Logf("the subscription ended: %s", sub.awaitOnce(t, "ERR "))
	ev := sub.events()
	if i := indexOf(ev, "disconnected closed"); i < 0 || ev[len(ev)-1] != "closed" {
		t.Fatalf("events %q: want disconnected (publisher closed), and closed for good last", ev)
	}
}

// publisherWithCtl starts a publisher with opts and a ctl child
// subscribed to tags, and waits until it is. On tcp the child starts
// first, waiting for the publisher on a free port: started after, it
// would inherit the listening socket (startCtlWaiting). On a
// reliable-datagram provider the address is known only once the
// publisher listens (shm names it after the process).
func publisherWithCtl(t *testing.T, opts []netio.Option, tags string, env ...string) (*netio.Publisher, *ctlChild) {
	t.Helper()
	if testOnRDM {
		p := listenPublisher(t, opts...)
		return p, startCtl(t, p.Addr().String(), tags, env...)
	}
	addr := freePort(t)
	sub := startCtlWaiting(t, addr, tags, env...)
	p, err := netio.ListenPublisher(testNetwork, addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	sub.await(t, "READY")
	return p, sub
}

// waitStopped waits until process pid is stopped (SIGSTOP took effect).
func waitStopped(t *testing.T, pid int) {
	t.Helper()
	eventually(t, "the process stopped", func() bool {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			t.Fatal(err)
		}
		i := strings.LastIndexByte(string(b), ')')
		return i > 0 && len(b) > i+2 && b[i+2] == 'T'
	})
}

// Subscribe WithWaitForPublisher before the publisher is up returns once
// it is, and the messages flow; without it, Subscribe fails at once.
func TestSubscribeWaitsForPublisher(t *testing.T) {
	skipOnRDM(t, "the publisher's address is known before it listens on tcp only")
	addr := freePort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*hangTimeout)
	defer cancel()
	if _, err := netio.Subscribe(ctx, "tcp", addr, []uint64{0}); err == nil {
		t.Fatal("Subscribe to no publisher succeeded")
	}
	type result struct {
		s   *netio.Subscription
		err error
	}
	subscribed := make(chan result, 1)
	go func() {
		s, err := netio.Subscribe(ctx, "tcp", addr, []uint64{0}, netio.WithWaitForPublisher(), netio.WithMode(netio.LowLatency))
		subscribed <- result{s, err}
	}()
	waitBlocked(t, 1, "netio.dialSubConn")
	select {
	case r := <-subscribed:
		t.Fatalf("Subscribe returned before the publisher started: %v", r.err)
	default:
	}
	pub := startPubSubChild(t, psRoleEnv+"=pub", psAddrEnv+"="+addr, psTagsEnv+"=1")
	pub.waitFor(t, "READY")
	r := <-subscribed
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.s.Close()
	expectMessages(t, r.s, 100)
}
