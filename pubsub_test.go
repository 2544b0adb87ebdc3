package netio_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/netio-go/netio"
)

func listenPublisher(t testing.TB, opts ...netio.Option) *netio.Publisher {
	t.Helper()
	p, err := netio.ListenPublisher("tcp", "127.0.0.1:0", opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func subscribe(t testing.TB, p *netio.Publisher, tags []uint64, opts ...netio.Option) *netio.Subscription {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangTimeout)
	defer cancel()
	s, err := netio.Subscribe(ctx, "tcp", p.Addr().String(), tags, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// payload is message i of tag: its bytes say which, so a reader can check
// what it got.
func payload(tag uint64, i int, size int) []byte {
	b := make([]byte, max(size, 16))
	binary.LittleEndian.PutUint64(b, tag)
	binary.LittleEndian.PutUint64(b[8:], uint64(i))
	return b
}

// receive reads n messages from s and checks that each tag's come in
// sequence, from 0 or from where the map given left off, with the bytes
// published. It returns how many of each tag it read in all.
func receive(t testing.TB, s *netio.Subscription, n int, from ...map[uint64]int) map[uint64]int {
	t.Helper()
	got := map[uint64]int{}
	for _, f := range from {
		for tag, k := range f {
			got[tag] = k
		}
	}
	timeout := time.NewTimer(hangTimeout)
	defer timeout.Stop()
	for i := 0; i < n; i++ {
		select {
		case m, ok := <-s.C:
			if !ok {
				t.Fatalf("C closed after %d of %d messages: %v", i, n, s.Err())
			}
			b := m.Bytes()
			want := got[m.Tag()]
			if m.Seq() != uint64(want) || binary.LittleEndian.Uint64(b) != m.Tag() || binary.LittleEndian.Uint64(b[8:]) != uint64(want) {
				t.Fatalf("message %d: tag %d seq %d holds (%d, %d), want seq %d", i, m.Tag(), m.Seq(), binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:]), want)
			}
			got[m.Tag()]++
			m.Release()
		case <-timeout.C:
			t.Fatalf("%d of %d messages after %v", i, n, hangTimeout)
		}
	}
	return got
}

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
	ln, err := netio.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, err = netio.Subscribe(context.Background(), "tcp", ln.Addr().String(), []uint64{1})
	var op *net.OpError
	if !errors.Is(err, netio.ErrRejected) || !errors.As(err, &op) {
		t.Fatalf("Subscribe to a Listener: %v, want ErrRejected in a *net.OpError", err)
	}
	p := listenPublisher(t)
	if c, err := netio.Dial("tcp", p.Addr().String()); err == nil || !errors.Is(err, netio.ErrRejected) {
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
