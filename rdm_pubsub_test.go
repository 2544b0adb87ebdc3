package netio_test

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/netio-go/netio"
)

// Publish/subscribe on reliable-datagram providers, in one process: one
// publisher, two subscribers (one per mode, so a connection each) with
// overlapping tags. Every tag's messages arrive in order with their
// bytes, an unsubscribed tag stops, and the ends close C with the error
// that says why.
func TestRDMPubSub(t *testing.T) {
	forEachRDMNetwork(t, func(t *testing.T, network, listen string) {
		rdmListen(t, network, listen).Close() // skips where the provider is absent
		p, err := netio.ListenPublisher(network, listen, netio.WithWindow(4), netio.WithBufferSize(16<<10))
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		addr := p.Addr().String()
		if !strings.Contains(addr, "://") || p.Addr().Network() != network {
			t.Fatalf("publisher address %s %q is not the provider's", p.Addr().Network(), addr)
		}
		ctx, cancel := context.WithTimeout(context.Background(), hangTimeout)
		defer cancel()
		// A short connect timeout: once the publisher is closed, the one
		// reconnection allowed waits for it (docs/rdm.md).
		opts := []netio.Option{netio.WithMaxReconnects(1), netio.WithConnectTimeout(2 * time.Second)}
		ll, err := netio.Subscribe(ctx, network, addr, []uint64{1, 2, 3}, append(opts, netio.WithMode(netio.LowLatency))...)
		if err != nil {
			t.Fatal(err)
		}
		defer ll.Close()
		ht, err := netio.Subscribe(ctx, network, addr, []uint64{2, 3, 4}, append(opts, netio.WithMode(netio.HighThroughput))...)
		if err != nil {
			t.Fatal(err)
		}
		defer ht.Close()
		if st := p.Stats(); st.Subscribers != 2 || st.Tags != 4 || st.Listener.Accepted != 2 {
			t.Fatalf("publisher stats %+v, want 2 subscribers and 4 tags", st)
		}

		// Messages of every size class: within the inject size, a few
		// KiB, and larger than a page (fragmented).
		sizes := []int{16, 3000, 40 << 10}
		const per = 60
		publish := func(tags []uint64, from, to int) {
			t.Helper()
			for i := from; i < to; i++ {
				for _, tag := range tags {
					if err := p.Publish(ctx, tag, payload(tag, i, sizes[i%len(sizes)])); err != nil {
						t.Fatalf("publish %d of tag %d: %v", i, tag, err)
					}
				}
			}
			if err := p.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		publish([]uint64{1, 2, 3, 4}, 0, per)
		checkInOrder(t, "low-latency", ll, map[uint64]int{1: per, 2: per, 3: per}, nil)
		checkInOrder(t, "high-throughput", ht, map[uint64]int{2: per, 3: per, 4: per}, nil)

		// Unsubscribed from tag 1, the low-latency one gets tag 2 only;
		// tag 1 has no subscriber left at the publisher.
		if err := ll.Unsubscribe(1, 3); err != nil {
			t.Fatal(err)
		}
		if st := p.Stats(); st.Tags != 3 {
			t.Fatalf("publisher tags after the unsubscribe: %+v, want 3", st)
		}
		publish([]uint64{1, 2, 3}, per, 2*per)
		next := map[uint64]uint64{2: per}
		checkInOrder(t, "low-latency after the unsubscribe", ll, map[uint64]int{2: per}, next)
		checkInOrder(t, "high-throughput beside it", ht, map[uint64]int{2: per, 3: per}, map[uint64]uint64{2: per, 3: per})
		select {
		case m := <-ll.C:
			t.Fatalf("low-latency got tag %d seq %d after the unsubscribe", m.Tag(), m.Seq())
		default:
		}

		// The subscription's own Close: C closes, Err is net.ErrClosed.
		if err := ll.Close(); err != nil {
			t.Fatal(err)
		}
		if _, ok := <-ll.C; ok {
			t.Fatal("C open after Close")
		}
		if !errors.Is(ll.Err(), net.ErrClosed) {
			t.Fatalf("Err after Close: %v, want net.ErrClosed", ll.Err())
		}
		eventually(t, "the publisher holding one subscriber", func() bool { return p.Stats().Subscribers == 1 })

		// The publisher's Close: the subscriber hears it, tries once to
		// reconnect, and C closes with an error that says the publisher
		// closed.
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		timeout := time.After(hangTimeout)
		for open := true; open; {
			select {
			case m, ok := <-ht.C:
				if ok {
					m.Release()
				}
				open = ok
			case <-timeout:
				t.Fatal("C still open after the publisher closed")
			}
		}
		if err := ht.Err(); !errors.Is(err, netio.ErrPublisherClosed) {
			t.Fatalf("Err after the publisher closed: %v, want ErrPublisherClosed", err)
		}
		if err := p.Publish(ctx, 2, []byte("late")); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Publish after Close: %v, want net.ErrClosed", err)
		}
	})
}

// checkInOrder reads from s the number of messages want says per tag and
// checks that each tag's come in sequence, from next[tag] (0 if absent),
// with the bytes payload gave them.
func checkInOrder(t *testing.T, what string, s *netio.Subscription, want map[uint64]int, next map[uint64]uint64) {
	t.Helper()
	total := 0
	for _, n := range want {
		total += n
	}
	seq := map[uint64]uint64{}
	for tag := range want {
		seq[tag] = next[tag]
	}
	timeout := time.NewTimer(hangTimeout)
	defer timeout.Stop()
	for i := 0; i < total; i++ {
		select {
		case m, ok := <-s.C:
			if !ok {
				t.Fatalf("%s: C closed after %d of %d messages: %v", what, i, total, s.Err())
			}
			tag, b := m.Tag(), m.Bytes()
			want, expected := seq[tag]
			switch {
			case !expected:
				t.Fatalf("%s: a message of tag %d, not subscribed", what, tag)
			case m.Seq() != want:
				t.Fatalf("%s: tag %d seq %d, want %d", what, tag, m.Seq(), want)
			case len(b) < 16 || binary.LittleEndian.Uint64(b) != tag || binary.LittleEndian.Uint64(b[8:]) != want:
				t.Fatalf("%s: tag %d seq %d carries the wrong bytes", what, tag, want)
			}
			seq[tag]++
			m.Release()
		case <-timeout.C:
			t.Fatalf("%s: %d of %d messages", what, i, total)
		}
	}
}
