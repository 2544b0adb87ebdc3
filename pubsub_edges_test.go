package netio_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/netio-go/netio"
)

// A Publish whose context has already ended sends nothing and numbers
// nothing: the next message is still seq 0.
func TestPublishCancelledContext(t *testing.T) {
	p := listenPublisher(t)
	s := subscribe(t, p, []uint64{1})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.Publish(ctx, 1, payload(1, 0, 16)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Publish with a cancelled context: %v, want context.Canceled", err)
	}
	if st := p.Stats(); st.Published != 0 || st.Delivered != 0 {
		t.Fatalf("stats after a cancelled Publish: %+v", st)
	}
	if err := p.Publish(context.Background(), 1, payload(1, 0, 16)); err != nil {
		t.Fatal(err)
	}
	receive(t, s, 1) // seq 0
}

// A Publish whose context ends while a Block subscriber has no room
// reports how many subscribers missed the message; the one that did not
// read counts the gap once it reads again, and the one that reads has it.
func TestPublishPartial(t *testing.T) {
	p, err := netio.ListenPublisher(testNetwork, ownConnListenAddr(), netio.WithBufferSize(4096), netio.WithWindow(4), netio.WithSlowSubscriberLimit(0))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	// A connection each.
	sub := func(i int, opts ...netio.Option) *netio.Subscription {
		ctx, cancel := context.WithTimeout(context.Background(), hangTimeout)
		defer cancel()
		addr, own := ownConn(t, p, i)
		s, err := netio.Subscribe(ctx, testNetwork, addr, []uint64{1}, append(own, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	reader := sub(0)
	stuck := sub(1, netio.WithSubscriptionBuffer(1))
	var got atomic.Int64
	go func() {
		for m := range reader.C {
			m.Release()
			got.Add(1)
		}
	}()
	var sent int
	var pe *netio.UndeliveredError
	for pe == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := p.Publish(ctx, 1, payload(1, sent, 64))
		cancel()
		sent++
		switch {
		case errors.As(err, &pe):
		case err != nil:
			t.Fatalf("publish %d: %v", sent-1, err)
		}
	}
	if !errors.Is(pe, netio.ErrUndelivered) || !errors.Is(pe, context.DeadlineExceeded) || pe.Subscribers != 1 || pe.Messages != 1 {
		t.Fatalf("partial Publish: %v (%+v), want one subscriber missing one message at the deadline", pe, pe)
	}
	eventually(t, "the reader has every message", func() bool { return got.Load() == int64(sent) })
	if st := p.Stats(); st.Undelivered != 1 {
		t.Fatalf("publisher stats %+v, want 1 undelivered", st)
	}
	// One more message shows the stuck one its gap, once it reads.
	go func() {
		for m := range stuck.C {
			m.Release()
		}
	}()
	if err := p.Publish(context.Background(), 1, payload(1, sent, 64)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the stuck subscription counts the message it missed", func() bool { return stuck.Stats().Missed >= 1 })
}

// A subscription with no tags is connected and receives nothing until it
// subscribes to some; after Close every method returns net.ErrClosed.
func TestSubscriptionGrowsAndCloses(t *testing.T) {
	p := listenPublisher(t)
	s := subscribe(t, p, nil)
	if st := p.Stats(); st.Subscribers != 1 || st.Tags != 0 {
		t.Fatalf("an empty subscription: %+v, want connected with no tags", p.Stats())
	}
	ctx, cancel := context.WithTimeout(context.Background(), hangTimeout)
	defer cancel()
	if err := s.Subscribe(ctx, 4, 5); err != nil {
		t.Fatal(err)
	}
	for _, tag := range []uint64{4, 5, 6} {
		if err := p.Publish(ctx, tag, payload(tag, 0, 16)); err != nil {
			t.Fatal(err)
		}
	}
	if got := receive(t, s, 2); got[4] != 1 || got[5] != 1 {
		t.Fatalf("received %v", got)
	}
	if err := s.Subscribe(ctx, 5); err != nil { // already there: nothing to do
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"Subscribe":   s.Subscribe(ctx, 7),
		"Unsubscribe": s.Unsubscribe(4),
		"Close":       s.Close(),
	} {
		if !errors.Is(err, net.ErrClosed) {
			t.Errorf("%s after Close: %v, want net.ErrClosed", name, err)
		}
	}
	var closed bool
	for ev := range s.Events() {
		closed = ev.Kind == netio.EventClosed && errors.Is(ev.Err, net.ErrClosed)
	}
	if !closed {
		t.Fatal("Events closed without EventClosed last")
	}
}

// The publisher reports its subscribers coming and going; Shutdown and
// Close each end it once.
func TestPublisherEventsAndEnd(t *testing.T) {
	p := listenPublisher(t)
	s := subscribe(t, p, []uint64{1})
	ev := <-p.Events()
	if ev.Kind != netio.EventSubscriberJoined || ev.Remote == nil {
		t.Fatalf("first event %v, want a subscriber joined", ev)
	}
	s.Close()
	select {
	case ev = <-p.Events():
		if ev.Kind != netio.EventSubscriberLeft {
			t.Fatalf("event %v, want the subscriber left", ev)
		}
	case <-time.After(hangTimeout):
		t.Fatal("no event for the subscriber leaving")
	}
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-p.Events(); ok {
		t.Fatal("Events open after Shutdown")
	}
	if err := p.Shutdown(context.Background()); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("second Shutdown: %v", err)
	}
	if err := p.Flush(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Flush after Shutdown: %v", err)
	}
}

func TestPubSubOptionsInvalid(t *testing.T) {
	for name, opt := range map[string]netio.Option{
		"reconnects":     netio.WithMaxReconnects(-1),
		"reconnect time": netio.WithMaxReconnectTime(-time.Second),
		"event buffer":   netio.WithEventBuffer(0),
	} {
		_, err := netio.Subscribe(context.Background(), testNetwork, "127.0.0.1:1", []uint64{1}, opt)
		if !errors.Is(err, netio.ErrInvalidConfig) {
			t.Errorf("%s: %v, want ErrInvalidConfig", name, err)
		}
	}
}
