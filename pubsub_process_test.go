package netio_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/netio-go/netio"
)

// Publish/subscribe between processes: the tests re-execute the test binary
// as subscriber or publisher children (one process's subscriptions to a
// publisher share one connection, so separate subscribers need separate
// processes), and kill them as a crash would.

const (
	psRoleEnv   = "NETIO_PS_ROLE"   // "sub" or "pub"
	psAddrEnv   = "NETIO_PS_ADDR"   // the publisher's address
	psTagsEnv   = "NETIO_PS_TAGS"   // tags 0 to n-1
	psExpectEnv = "NETIO_PS_EXPECT" // sub: messages to receive before it reports
	psModeEnv   = "NETIO_PS_MODE"   // "ll" or "ht"
	psPolicyEnv = "NETIO_PS_POLICY" // sub: the policy's name; "" is Block
	psFinalEnv  = "NETIO_PS_FINAL"  // sub with a drop policy: it reports once every tag reached this sequence number
)

// psMarkerTag is subscribed to, under Block, by a subscriber child with a
// drop policy: a message on it arrives after everything published before.
const psMarkerTag = 1 << 40

// psMessage is message seq of tag: its bytes say which.
func psMessage(buf []byte, tag, seq uint64) []byte {
	binary.LittleEndian.PutUint64(buf, tag)
	binary.LittleEndian.PutUint64(buf[8:], seq)
	return buf
}

// psReport is what a subscriber child reports at the end.
type psReport struct {
	Received, Bad  uint64 // messages, and those whose sequence or bytes were wrong
	Gaps, Missed   uint64 // from the subscription's Stats
	Tail           uint64 // drop policies: messages missing after the last one seen of each tag
	Reconnects     uint64
	FirstBadDetail string
}

func (r psReport) String() string {
	return fmt.Sprintf("DONE %d %d %d %d %d %d %q", r.Received, r.Bad, r.Gaps, r.Missed, r.Tail, r.Reconnects, r.FirstBadDetail)
}

func parseReport(line string) (r psReport, err error) {
	_, err = fmt.Sscanf(line, "DONE %d %d %d %d %d %d %q", &r.Received, &r.Bad, &r.Gaps, &r.Missed, &r.Tail, &r.Reconnects, &r.FirstBadDetail)
	return r, err
}

func psMode() netio.Mode {
	if os.Getenv(psModeEnv) == "ll" {
		return netio.LowLatency
	}
	return netio.HighThroughput
}

// TestPubSubChild is the child processes' entry point; as a test of its
// own it does nothing.
func TestPubSubChild(t *testing.T) {
	switch os.Getenv(psRoleEnv) {
	case "sub":
		subscriberChild()
	case "pub":
		publisherChild()
	case "ctl":
		ctlSubscriberChild()
	case "many":
		manySubscribersChild()
	case "churn":
		churnSubscriberChild()
	default:
		t.Skip("run by the publish/subscribe process tests")
	}
}

// subscriberChild subscribes to every tag, checks that each tag's messages
// come in sequence with the bytes published, and reports once it has the
// messages expected (or when its parent closes stdin).
func subscriberChild() {
	ntags, _ := strconv.Atoi(os.Getenv(psTagsEnv))
	expect, _ := strconv.ParseUint(os.Getenv(psExpectEnv), 10, 64)
	tags := make([]uint64, ntags)
	for i := range tags {
		tags[i] = uint64(i)
	}
	policy := netio.Block
	for _, p := range []netio.Policy{netio.DropOldest, netio.DropNewest} {
		if os.Getenv(psPolicyEnv) == p.String() {
			policy = p
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), hangTimeout)
	// Under a drop policy the test counts what the publisher dropped: C
	// is made large enough that this side never drops as well (the stream
	// it finds after SIGCONT would fill the default buffer at once).
	buffer := netio.DefaultSubscriptionBuffer
	if policy != netio.Block {
		buffer = 1 << 18
	}
	s, err := netio.Subscribe(ctx, testNetwork, os.Getenv(psAddrEnv), tags, netio.WithMode(psMode()), netio.WithPolicy(policy), netio.WithSubscriptionBuffer(buffer))
	cancel()
	if err != nil {
		childFatal("subscribe: %v", err)
	}
	var marker <-chan netio.Message
	final, _ := strconv.ParseUint(os.Getenv(psFinalEnv), 10, 64)
	if policy != netio.Block {
		ctx, cancel := context.WithTimeout(context.Background(), hangTimeout)
		ms, err := netio.Subscribe(ctx, testNetwork, os.Getenv(psAddrEnv), []uint64{psMarkerTag}, netio.WithMode(psMode()))
		cancel()
		if err != nil {
			childFatal("subscribe to the marker: %v", err)
		}
		marker = ms.C
	}
	fmt.Println("READY")
	parentGone := make(chan struct{})
	go func() { io.Copy(io.Discard, os.Stdin); close(parentGone) }()
	next := make([]uint64, ntags)
	var r psReport
	// Under Block it reports once it has every message; under a drop
	// policy at the second marker, which comes after everything published
	// before it: what is missing after the last message of a tag it saw
	// is its tail, which no later message revealed as a gap.
	markers := 0
	done := func() bool {
		if policy == netio.Block {
			return r.Received >= expect
		}
		return markers == 2
	}
	take := func(m netio.Message) {
		b := m.Bytes()
		tag, seq := m.Tag(), m.Seq()
		if policy != netio.Block && tag < uint64(ntags) && seq > next[tag] {
			next[tag] = seq // a drop policy may skip: Stats counts it
		}
		if tag >= uint64(ntags) || seq != next[tag] || len(b) < 16 || binary.LittleEndian.Uint64(b) != tag || binary.LittleEndian.Uint64(b[8:]) != seq {
			if r.Bad == 0 && tag < uint64(ntags) {
				r.FirstBadDetail = fmt.Sprintf("tag %d seq %d (want %d), %d bytes", tag, seq, next[tag], len(b))
			}
			r.Bad++
		}
		if tag < uint64(ntags) {
			next[tag] = seq + 1
		}
		r.Received++
		m.Release()
		if r.Received%100000 == 0 {
			fmt.Println("PROGRESS", r.Received)
		}
	}
	for !done() {
		select {
		case m := <-marker:
			m.Release()
			if markers++; markers == 2 {
				// Whatever came before the marker is in C already.
				for drained := false; !drained; {
					select {
					case m := <-s.C:
						take(m)
					default:
						drained = true
					}
				}
			}
			fmt.Println("MARKER")
		case m, ok := <-s.C:
			if !ok {
				childFatal("C closed: %v", s.Err())
			}
			take(m)
		case <-parentGone:
			os.Exit(0)
		}
	}
	st := s.Stats()
	r.Gaps, r.Missed, r.Reconnects = st.Gaps, st.Missed, st.Reconnects
	if policy != netio.Block {
		for _, n := range next {
			if n <= final {
				r.Tail += final + 1 - n
			}
		}
	}
	r.Received += st.Dropped // what the subscription's own policy dropped arrived too
	fmt.Println(r)
	<-parentGone // subscribed until then: the parent may count its subscribers
	s.Close()
	os.Exit(0)
}

// publisherChild listens on the address given and publishes to every tag in
// turn until it is killed or its parent goes.
func publisherChild() {
	ntags, _ := strconv.Atoi(os.Getenv(psTagsEnv))
	p, err := netio.ListenPublisher(testNetwork, os.Getenv(psAddrEnv))
	if err != nil {
		childFatal("listen: %v", err)
	}
	fmt.Println("READY", p.Addr())
	parentGone := make(chan struct{})
	go func() { io.Copy(io.Discard, os.Stdin); close(parentGone) }()
	buf := make([]byte, 64)
	for i := 0; ; i++ {
		select {
		case <-parentGone:
			os.Exit(0)
		default:
		}
		tag := uint64(i % ntags)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		p.Publish(ctx, tag, psMessage(buf, tag, uint64(i)))
		cancel()
		if i%64 == 0 {
			time.Sleep(100 * time.Microsecond) // a steady stream, not a flood
		}
	}
}

func startPubSubChild(t testing.TB, env ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestPubSubChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	return startChildCmd(t, cmd)
}

func (c *child) report(t *testing.T) psReport {
	t.Helper()
	r, err := parseReport(c.waitFor(t, "DONE "))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// 1 publisher, 8 subscriber processes, 1,000 tags, 1M messages, each
// checked for its sequence at every subscriber: none lost under Block.
func TestPubSubEightSubscribersLossless(t *testing.T) {
	const subs, tags, messages = 8, 1000, 1_000_000
	p := listenPublisher(t)
	children := make([]*child, subs)
	for i := range children {
		children[i] = startPubSubChild(t, psRoleEnv+"=sub", psAddrEnv+"="+p.Addr().String(),
			psTagsEnv+"="+strconv.Itoa(tags), psExpectEnv+"="+strconv.Itoa(messages), psModeEnv+"=ht")
	}
	for _, c := range children {
		c.waitFor(t, "READY")
	}
	publishRange(t, p, tags, 0, messages)
	want := psReport{Received: messages}
	for i, c := range children {
		if diff := cmp.Diff(want, c.report(t)); diff != "" {
			t.Errorf("subscriber %d (-want +got):\n%s", i, diff)
		}
	}
	if st := p.Stats(); st.Dropped != 0 || st.Published != messages {
		t.Errorf("publisher stats %+v", st)
	}
}

// publishRange publishes messages from..to-1, round robin over the tags,
// each tag's in sequence, and flushes.
func publishRange(t *testing.T, p *netio.Publisher, tags, from, to int) {
	t.Helper()
	ctx, progress := stallContext(t)
	buf := make([]byte, 64)
	for i := from; i < to; i++ {
		tag := uint64(i % tags)
		if err := p.Publish(ctx, tag, psMessage(buf, tag, uint64(i/tags))); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
		progress()
	}
	if err := p.Flush(); err != nil {
		t.Fatal(err)
	}
}

// A subscriber process killed mid-stream is dropped; the others lose
// nothing and the publisher never waits for the dead one.
func TestPubSubSubscriberKilled(t *testing.T) {
	const tags, messages = 100, 200_000
	for _, mode := range []string{"ht", "ll"} {
		t.Run(mode, func(t *testing.T) {
			n := messages
			if mode == "ll" {
				n = 20_000 // a send per message each
			}
			p := listenPublisher(t)
			var children []*child
			for i := 0; i < 3; i++ {
				children = append(children, startPubSubChild(t, psRoleEnv+"=sub", psAddrEnv+"="+p.Addr().String(),
					psTagsEnv+"="+strconv.Itoa(tags), psExpectEnv+"="+strconv.Itoa(n), psModeEnv+"="+mode))
			}
			for _, c := range children {
				c.waitFor(t, "READY")
			}
			publishRange(t, p, tags, 0, n/2)
			victim := children[0]
			if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			victim.cmd.Wait()
			publishRange(t, p, tags, n/2, n)
			want := psReport{Received: uint64(n)}
			for i, c := range children[1:] {
				if diff := cmp.Diff(want, c.report(t)); diff != "" {
					t.Errorf("surviving subscriber %d (-want +got):\n%s", i, diff)
				}
			}
			waitSubscribers(t, p, 2)
		})
	}
}

func waitSubscribers(t *testing.T, p *netio.Publisher, n int) {
	t.Helper()
	eventually(t, fmt.Sprintf("the publisher counting %d subscribers", n), func() bool { return p.Stats().Subscribers == n })
}

// A publisher process killed (SIGKILL) and started again on its address:
// the subscription reconnects by itself, C stays open, its events say
// disconnected, reconnected and publisher restarted, in that order, and
// Stats count the restart and a span of unknown loss.
func TestPubSubPublisherRestarted(t *testing.T) {
	const tags = 10
	skipOnRDM(t, "a publisher restarts on the same address on tcp only")
	addr := freePort(t)
	env := []string{psRoleEnv + "=pub", psAddrEnv + "=" + addr, psTagsEnv + "=" + strconv.Itoa(tags)}
	pub := startPubSubChild(t, env...)
	pub.waitFor(t, "READY")
	ctx, cancel := context.WithTimeout(context.Background(), hangTimeout)
	defer cancel()
	all := make([]uint64, tags)
	for i := range all {
		all[i] = uint64(i)
	}
	s, err := netio.Subscribe(ctx, "tcp", addr, all, netio.WithMode(netio.LowLatency))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	expectMessages(t, s, 100)
	pub.cmd.Process.Signal(syscall.SIGKILL)
	pub.cmd.Wait()
	killed := time.Now()
	// The same address again, as soon as the system lets it be bound.
	var again *child
	for again == nil {
		c := startPubSubChild(t, env...)
		select {
		case l := <-c.lines:
			if strings.HasPrefix(l, "READY") {
				again = c
			}
		case <-time.After(hangTimeout):
			t.Fatal("the publisher did not start again")
		}
	}
	restarted := time.Now()
	// What the old publisher sent before it died may still be queued
	// (more than 100 messages when sends are quick): read until the
	// subscription reports the restart, then the new one's messages. Its
	// events say what happened, in order.
	var kinds []netio.EventKind
	timeout := time.NewTimer(hangTimeout)
	defer timeout.Stop()
	for len(kinds) == 0 || kinds[len(kinds)-1] != netio.EventPublisherRestarted {
		select {
		case m, ok := <-s.C:
			if !ok {
				t.Fatalf("C closed: %v", s.Err())
			}
			m.Release()
		case ev := <-s.Events():
			if ev.Kind == netio.EventPublisherRestarted && !ev.LossUnknown {
				t.Errorf("a restart after SIGKILL with its loss known: %v", ev)
			}
			if ev.Kind != netio.EventGap {
				kinds = append(kinds, ev.Kind)
			}
		case <-timeout.C:
			t.Fatalf("no restart reported: events %v, stats %+v", kinds, s.Stats())
		}
	}
	if want := []netio.EventKind{netio.EventDisconnected, netio.EventReconnected, netio.EventPublisherRestarted}; fmt.Sprint(kinds) != fmt.Sprint(want) {
		t.Fatalf("events %v, want %v", kinds, want)
	}
	expectMessages(t, s, 100)
	st := s.Stats()
	t.Logf("publisher down %v; receiving again %v after it restarted; stats %+v", restarted.Sub(killed).Round(time.Millisecond), time.Since(restarted).Round(time.Millisecond), st)
	if st.Reconnects != 1 || st.Restarts != 1 || st.LossUnknown != 1 {
		t.Fatalf("after a publisher restart: %+v, want one reconnect and one restart counted, its loss unknown", st)
	}
	if s.Err() != nil {
		t.Fatalf("C ended: %v", s.Err())
	}
}

// expectMessages reads n messages from s, failing if C closes.
func expectMessages(t *testing.T, s *netio.Subscription, n int) {
	t.Helper()
	timeout := time.NewTimer(hangTimeout)
	defer timeout.Stop()
	for i := 0; i < n; i++ {
		select {
		case m, ok := <-s.C:
			if !ok {
				t.Errorf("C closed after %d messages: %v", i, s.Err())
				return
			}
			m.Release()
		case <-timeout.C:
			t.Errorf("%d of %d messages", i, n)
			return
		}
	}
}

// A subscription that does not read, under a drop policy, holds back
// neither the publisher nor the subscription sharing its connection, and
// counts exactly what it missed.
func TestPubSubDropPolicies(t *testing.T) {
	for _, policy := range []netio.Policy{netio.DropNewest, netio.DropOldest} {
		t.Run(policy.String(), func(t *testing.T) {
			const n, buffer = 5000, 16
			p := listenPublisher(t)
			reader := subscribe(t, p, []uint64{0}, netio.WithMode(netio.HighThroughput))
			stalled := subscribe(t, p, []uint64{0}, netio.WithMode(netio.HighThroughput), netio.WithPolicy(policy), netio.WithSubscriptionBuffer(buffer))
			published := make(chan struct{})
			go func() {
				defer close(published)
				ctx, cancel := context.WithTimeout(context.Background(), 10*hangTimeout)
				defer cancel()
				buf := make([]byte, 64)
				for i := 0; i < n; i++ {
					if err := p.Publish(ctx, 0, psMessage(buf, 0, uint64(i))); err != nil {
						t.Errorf("publish %d: %v", i, err)
						return
					}
				}
				p.Flush()
			}()
			receive(t, reader, n)
			<-published
			// The stalled one holds the buffer's worth, and counts the rest
			// (the dispatcher gives it each message after the reader). Under
			// DropOldest the newest message is counted received before the
			// oldest is dropped, and Stats reads the counters one by one, so
			// the wait is for the final counts, not for their sum.
			var st netio.SubscriptionStats
			eventually(t, fmt.Sprintf("the stalled subscription accounting for %d messages", n), func() bool {
				st = stalled.Stats()
				return st.Received == buffer && st.Received+st.Dropped >= n
			})
			if st.Received != buffer || st.Dropped != n-buffer || st.Gaps != 0 {
				t.Fatalf("stalled subscription stats %+v, want %d received and %d dropped", st, buffer, n-buffer)
			}
			first := uint64(0)
			if policy == netio.DropOldest {
				first = n - buffer
			}
			for i := uint64(0); i < buffer; i++ {
				m := <-stalled.C
				if m.Seq() != first+i {
					t.Fatalf("%v kept message %d, want %d", policy, m.Seq(), first+i)
				}
				m.Release()
			}
		})
	}
}

// A subscriber process under DropNewest that stops (SIGSTOP) never makes
// the publisher wait, and what the publisher dropped for it is exactly what
// it finds missing once it runs again, while a Block subscriber beside it
// loses nothing.
func TestPubSubStoppedSubscriberDrops(t *testing.T) {
	const tags, messages = 10, 200_000
	// The publisher does not check for silent subscribers, nor cut slow
	// ones loose: on a slow machine the stop may outlast a heartbeat
	// timeout, and the first marker may find the stopped subscriber's
	// window still full for longer than the slow-subscriber limit (on shm
	// its sends complete only once it runs again), and under load even
	// the Block subscriber may stall that long. Cut loose, either misses
	// messages for good; dropping a subscriber is not what this test counts.
	p := listenPublisher(t, netio.WithWindow(4), netio.WithBufferSize(64<<10), netio.WithHeartbeatTimeout(-1), netio.WithSlowSubscriberLimit(-1))
	env := []string{psRoleEnv + "=sub", psAddrEnv + "=" + p.Addr().String(), psTagsEnv + "=" + strconv.Itoa(tags),
		psExpectEnv + "=" + strconv.Itoa(messages), psModeEnv + "=ht"}
	lossless := startPubSubChild(t, env...)
	dropping := startPubSubChild(t, append(env, psPolicyEnv+"="+netio.DropNewest.String(), psFinalEnv+"="+strconv.Itoa(messages/tags))...)
	lossless.waitFor(t, "READY")
	dropping.waitFor(t, "READY")
	if err := dropping.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	publishRange(t, p, tags, 0, messages)
	if err := dropping.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(psReport{Received: messages}, lossless.report(t)); diff != "" {
		t.Errorf("Block subscriber beside a stopped one (-want +got):\n%s", diff)
	}
	// A drop at the end of a tag's stream shows only when the tag's next
	// message comes. A first marker (Block) lets the subscriber drain;
	// then one more message per tag shows most drops as gaps, and a
	// second marker ends the count: what is still missing after a tag's
	// last message (a closing message dropped too, on a slow machine) is
	// the subscriber's tail.
	ctx, cancel := context.WithTimeout(context.Background(), hangTimeout)
	defer cancel()
	if err := p.Publish(ctx, psMarkerTag, make([]byte, 16)); err != nil {
		t.Fatal(err)
	}
	p.Flush()
	dropping.waitFor(t, "MARKER")
	publishRange(t, p, tags, messages, messages+tags)
	if err := p.Publish(ctx, psMarkerTag, make([]byte, 16)); err != nil {
		t.Fatal(err)
	}
	p.Flush()
	r := dropping.report(t)
	dropped := p.Stats().Dropped
	t.Logf("publisher dropped %d of %d for the stopped subscriber; it reports %+v", dropped, messages, r)
	if dropped == 0 {
		t.Fatal("the publisher dropped nothing for a stopped subscriber: its link held everything?")
	}
	if r.Missed+r.Tail != dropped || r.Bad != 0 || r.Received+r.Missed+r.Tail != messages+tags {
		t.Fatalf("stopped subscriber: missed %d (bad %d), the publisher dropped %d", r.Missed, r.Bad, dropped)
	}
}

// churnSubscriberChild subscribes and unsubscribes psExpectEnv times in
// turn, then reports.
func churnSubscriberChild() {
	n, _ := strconv.Atoi(os.Getenv(psExpectEnv))
	for i := range n {
		ctx, cancel := context.WithTimeout(context.Background(), hangTimeout)
		s, err := netio.Subscribe(ctx, testNetwork, os.Getenv(psAddrEnv), []uint64{1})
		cancel()
		if err != nil {
			fmt.Printf("DONE failed at %d: %v\n", i, err)
			return
		}
		s.Close()
		// The engine stops with its last subscription: the next round dials
		// from a new endpoint, which the publisher's AV holds as a new peer.
		deadline := time.Now().Add(hangTimeout)
		for names, _ := filepath.Glob(fmt.Sprintf("/dev/shm/%d:*", os.Getpid())); len(names) > 0; names, _ = filepath.Glob(fmt.Sprintf("/dev/shm/%d:*", os.Getpid())) {
			if time.Now().After(deadline) {
				fmt.Printf("DONE failed at %d: the subscriber's endpoints not closed: %v\n", i, names)
				return
			}
			time.Sleep(time.Millisecond) // polling pace
		}
	}
	fmt.Println("DONE ok")
}

// Subscribers of another process that come and go leave nothing behind at
// the publisher: on shm each had an endpoint of its own there (docs/rdm.md),
// closed with its link, so the process's shm regions (/dev/shm/<pid>:...)
// come back to what they were; the publisher's AV, which holds each
// subscriber's endpoint, stays within shm's 256 peers over 300 endpoints
// (each round dials from a new one); and so does the subscriber's side,
// which adds each link's endpoint to its AV.
func TestPubSubSubscriberChurnShm(t *testing.T) {
	if testNetwork != "shm" {
		t.Skip("counts shm's regions")
	}
	const rounds = 300
	p := listenPublisher(t)
	regions := func() int {
		names, _ := filepath.Glob(fmt.Sprintf("/dev/shm/%d:*", os.Getpid()))
		return len(names)
	}
	base := regions()
	c := startPubSubChild(t, psRoleEnv+"=churn", psAddrEnv+"="+p.Addr().String(), psExpectEnv+"="+strconv.Itoa(rounds))
	if line := c.waitFor(t, "DONE "); line != "DONE ok" {
		t.Fatalf("subscriber: %s", line)
	}
	eventually(t, "the publisher's shm regions back to "+strconv.Itoa(base), func() bool {
		return regions() <= base && p.Stats().Subscribers == 0
	})
	if st := p.Stats(); st.Listener.Accepted != rounds {
		t.Errorf("publisher accepted %d subscribers, want %d", st.Listener.Accepted, rounds)
	}
}
