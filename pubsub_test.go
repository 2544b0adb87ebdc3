package netio_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/netio-go/netio"
)

func TestPublishSubscribe(t *testing.T) {
	for _, m := range modes() {
		t.Run(m.String(), func(t *testing.T) {
			p := listenPublisher(t)
			s := subscribe(t, p, []uint64{1, 2, 3}, netio.WithMode(m))
			const per = 2000 // more than C and the link hold: Publish must wait for the reader
			published := make(chan error, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), hangTimeout)
				defer cancel()
				for i := 0; i < per; i++ {
					for _, tag := range []uint64{1, 2, 3, 4} { // 4: nobody subscribed
						if err := p.Publish(ctx, tag, payload(tag, i, 16+i%300)); err != nil {
							published <- err
							return
						}
					}
				}
				published <- p.Flush()
			}()
			got := receive(t, s, 3*per)
			if err := <-published; err != nil {
				t.Fatal(err)
			}
			if got[1] != per || got[2] != per || got[3] != per || got[4] != 0 {
				t.Fatalf("received per tag %v", got)
			}
			st := p.Stats()
			if st.Published != 3*per || st.Unsubscribed != per || st.Subscribers != 1 || st.Tags != 3 {
				t.Fatalf("publisher stats %+v", st)
			}
			if ss := s.Stats(); ss.Received != 3*per || ss.Gaps != 0 || ss.Dropped != 0 {
				t.Fatalf("subscription stats %+v", ss)
			}
		})
	}
}

// A message larger than a page goes out in several and arrives whole.
func TestPublishLargeMessages(t *testing.T) {
	p := listenPublisher(t)
	s := subscribe(t, p, []uint64{9}, netio.WithMode(netio.HighThroughput))
	ctx, cancel := context.WithTimeout(context.Background(), hangTimeout)
	defer cancel()
	for i := 0; i < 5; i++ {
		if err := p.Publish(ctx, 9, payload(9, i, 3<<20+i)); err != nil {
			t.Fatal(err)
		}
	}
	p.Flush()
	receive(t, s, 5)
}

func TestSubscribeNotAPublisher(t *testing.T) {
	ln, err := netio.Listen(testNetwork, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, err = netio.Subscribe(context.Background(), testNetwork, ln.Addr().String(), []uint64{1})
	var op *net.OpError
	if !errors.Is(err, netio.ErrRejected) || !errors.As(err, &op) {
		t.Fatalf("Subscribe to a Listener: %v, want ErrRejected in a *net.OpError", err)
	}
	p := listenPublisher(t)
	if c, err := netio.Dial(testNetwork, p.Addr().String()); err == nil || !errors.Is(err, netio.ErrRejected) {
		if c != nil {
			c.Close()
		}
		t.Fatalf("Dial to a publisher: %v, want ErrRejected", err)
	}
}

func TestSubscriptionsShareAConnection(t *testing.T) {
	p := listenPublisher(t)
	a := subscribe(t, p, []uint64{1, 2})
	b := subscribe(t, p, []uint64{2, 3})
	if st := p.Stats(); st.Subscribers != 1 || st.Tags != 3 {
		t.Fatalf("two subscriptions of one process: %+v, want one connection with 3 tags", st)
	}
	for _, tag := range []uint64{1, 2, 3} {
		p.Publish(context.Background(), tag, payload(tag, 0, 16))
	}
	ga, gb := receive(t, a, 2), receive(t, b, 2)
	if fmt.Sprint(ga) != "map[1:1 2:1]" || fmt.Sprint(gb) != "map[2:1 3:1]" {
		t.Fatalf("a got %v, b got %v", ga, gb)
	}
	if err := a.Unsubscribe(1); err != nil {
		t.Fatal(err)
	}
	a.Close()
	if _, ok := <-a.C; ok {
		t.Fatal("C open after Close")
	}
	if !errors.Is(a.Err(), net.ErrClosed) {
		t.Fatalf("Err after Close: %v", a.Err())
	}
	p.Publish(context.Background(), 3, payload(3, 1, 16))
	receive(t, b, 1, gb)
}

// Subscriptions come and go while the publisher publishes: every one sees
// its tags in sequence from the acknowledgement on, and when all are gone
// the publisher holds nothing for them.
func TestPubSubChurn(t *testing.T) {
	const workers, rounds, tags = 6, 8, 1000
	skipOnRDM(t, "a connection per worker needs an address per worker")
	p, err := netio.ListenPublisher("tcp", "0.0.0.0:0", netio.WithWindow(4), netio.WithBufferSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	port := p.Addr().(*netio.Addr).AddrPort.Port()
	stop := make(chan struct{})
	published := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*hangTimeout)
		defer cancel()
		for i := 0; ; i++ {
			select {
			case <-stop:
				published <- nil
				return
			default:
			}
			tag := uint64(i % tags)
			if err := p.Publish(ctx, tag, payload(tag, i, 16)); err != nil {
				published <- err
				return
			}
		}
	}()
	g, _ := errgroup.WithContext(context.Background())
	for w := 0; w < workers; w++ {
		addr := fmt.Sprintf("127.0.0.%d:%d", w+1, port) // a connection of its own
		g.Go(func() error {
			for r := 0; r < rounds; r++ {
				mine := []uint64{uint64(w*100 + r), uint64(w*100 + r + 1), uint64(500 + w)}
				ctx, cancel := context.WithTimeout(context.Background(), hangTimeout)
				s, err := netio.Subscribe(ctx, "tcp", addr, mine, netio.WithMode(modes()[r%2]))
				cancel()
				if err != nil {
					return err
				}
				next := map[uint64]uint64{}
				for i := 0; i < 20; i++ {
					m, ok := <-s.C
					if !ok {
						return fmt.Errorf("C closed: %v", s.Err())
					}
					if n, seen := next[m.Tag()]; seen && m.Seq() != n {
						return fmt.Errorf("tag %d: seq %d after %d", m.Tag(), m.Seq(), n-1)
					}
					next[m.Tag()] = m.Seq() + 1
					m.Release()
				}
				if err := s.Unsubscribe(mine[0]); err != nil {
					return err
				}
				if st := s.Stats(); st.Gaps != 0 || st.Dropped != 0 {
					return fmt.Errorf("stats %+v under Block", st)
				}
				s.Close()
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	close(stop)
	if err := <-published; err != nil {
		t.Fatal(err)
	}
	eventually(t, "the publisher holding no subscriber and no tag after every subscription closed", func() bool {
		st := p.Stats()
		return st.Subscribers == 0 && st.Tags == 0
	})
}

// 100,000 tags in one Subscribe go in many requests and acknowledgements.
// That many are past DefaultMaxTags: the publisher allows them.
func TestSubscribeManyTags(t *testing.T) {
	p := listenPublisher(t, netio.WithMaxTags(100_000))
	all := make([]uint64, 100_000)
	for i := range all {
		all[i] = uint64(i) * 7919
	}
	s := subscribe(t, p, all, netio.WithMode(netio.HighThroughput))
	if st := p.Stats(); st.Tags != len(all) {
		t.Fatalf("publisher has %d tags, want %d", st.Tags, len(all))
	}
	ctx, cancel := context.WithTimeout(context.Background(), hangTimeout)
	defer cancel()
	for _, tag := range []uint64{all[0], all[50_000], all[99_999]} {
		if err := p.Publish(ctx, tag, payload(tag, 0, 16)); err != nil {
			t.Fatal(err)
		}
	}
	p.Flush()
	got := receive(t, s, 3)
	if len(got) != 3 {
		t.Fatalf("received %v", got)
	}
}

// Close ends a Publish that waits for a subscriber that does not read
// (it holds the link's send gate while it waits).
func TestPublisherCloseUnblocksPublish(t *testing.T) {
	p, err := netio.ListenPublisher(testNetwork, "127.0.0.1:0", netio.WithWindow(4), netio.WithBufferSize(4096), netio.WithLinger(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	subscribe(t, p, []uint64{1}, netio.WithMode(netio.HighThroughput), netio.WithSubscriptionBuffer(1)) // never read
	published := make(chan error, 1)
	go func() {
		msg := make([]byte, 1000)
		for {
			if err := p.Publish(context.Background(), 1, msg); err != nil {
				published <- err
				return
			}
		}
	}()
	// Blocked for good: the subscriber's pages are all held, so no
	// credit comes back (a wait for a send to complete would end by
	// itself).
	waitBlocked(t, 1, "netio.(*sender).waitWritable")
	eventually(t, "the publisher with messages to send and no credit", func() bool { return netio.PublisherStuck(p) })
	closed := make(chan error, 1)
	go func() { closed <- p.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(hangTimeout):
		t.Fatal("Close still waiting for a blocked Publish")
	}
	select {
	case err := <-published:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Publish after Close: %v, want net.ErrClosed", err)
		}
	case <-time.After(hangTimeout):
		t.Fatal("Publish still blocked after Close")
	}
}

// PublisherStats are a Publisher's counters since it started: what was
// delivered to a subscriber that left stays counted.
func TestPublisherDeliveredKeepsLeftSubscribers(t *testing.T) {
	p := listenPublisher(t)
	s := subscribe(t, p, []uint64{1})
	ctx, cancel := context.WithTimeout(context.Background(), hangTimeout)
	defer cancel()
	for i := 0; i < 10; i++ {
		if err := p.Publish(ctx, 1, payload(1, i, 16)); err != nil {
			t.Fatal(err)
		}
	}
	receive(t, s, 10)
	if d := p.Stats().Delivered; d != 10 {
		t.Fatalf("Delivered %d with the subscriber connected, want 10", d)
	}
	s.Close()
	eventually(t, "the subscriber leaving", func() bool { return p.Stats().Subscribers == 0 })
	if d := p.Stats().Delivered; d != 10 {
		t.Errorf("Delivered %d after the subscriber left, want 10: a counter since the start does not go down", d)
	}
}
