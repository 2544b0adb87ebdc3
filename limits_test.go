package netio_test

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/netio-go/netio"
)

// Limits: every one is an option with a ceiling, and what a peer asks
// for past them is refused at the handshake.

func TestLimitCeilings(t *testing.T) {
	bad := []struct {
		name string
		opts []netio.Option
	}{
		{"max message 1<<63-1", []netio.Option{netio.WithMaxMessageSize(1<<63 - 1)}},
		{"max message past its ceiling", []netio.Option{netio.WithMaxMessageSize(netio.MaxMaxMessageSize + 1)}},
		{"buffer of 1 GiB", []netio.Option{netio.WithBufferSize(1 << 30)}},
		{"buffer past its ceiling", []netio.Option{netio.WithBufferSize(netio.MaxBufferSize + 1)}},
		{"window past its ceiling", []netio.Option{netio.WithWindow(netio.MaxWindow + 1)}},
		{"buffers past MaxConnMemory", []netio.Option{netio.WithBufferSize(netio.MaxBufferSize), netio.WithWindow(16)}},
		{"backlog of 1e9", []netio.Option{netio.WithBacklog(1e9)}},
		{"backlog past its ceiling", []netio.Option{netio.WithBacklog(netio.MaxBacklog + 1)}},
		{"no connections", []netio.Option{netio.WithMaxConns(0)}},
		{"negative connections", []netio.Option{netio.WithMaxConns(-1)}},
		{"no tags", []netio.Option{netio.WithMaxTags(0)}},
		{"tags past their ceiling", []netio.Option{netio.WithMaxTags(netio.MaxMaxTags + 1)}},
		// A Config given whole is checked the same way.
		{"Config: max message", []netio.Option{netio.WithConfig(netio.Config{MaxMessageSize: 1 << 62})}},
		{"Config: buffers past MaxConnMemory", []netio.Option{netio.WithConfig(netio.Config{BufferSize: 64 << 20, Window: 64})}},
		{"Config: backlog", []netio.Option{netio.WithConfig(netio.Config{Backlog: 1e9})}},
		{"Config: connections", []netio.Option{netio.WithConfig(netio.Config{MaxConns: -5})}},
		{"Config: tags", []netio.Option{netio.WithConfig(netio.Config{MaxTags: netio.MaxMaxTags + 1})}},
	}
	// A publisher's subscribers choose their mode: a window that fits the
	// LowLatency default buffers may not fit HighThroughput's 1 MiB pages.
	if p, err := netio.ListenPublisher("tcp", "127.0.0.1:0", netio.WithWindow(1024)); err == nil {
		p.Close()
		t.Error("ListenPublisher with a window of 1024 pages of 1 MiB for HighThroughput subscribers succeeded")
	} else if !errors.Is(err, netio.ErrInvalidConfig) {
		t.Errorf("ListenPublisher with a window of 1024 pages of 1 MiB: %v; want ErrInvalidConfig", err)
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			check := func(what string, err error) {
				t.Helper()
				var oe *net.OpError
				if !errors.Is(err, netio.ErrInvalidConfig) || !errors.As(err, &oe) {
					t.Errorf("%s: %v; want ErrInvalidConfig in a *net.OpError", what, err)
				}
			}
			ln, err := netio.Listen("tcp", "127.0.0.1:0", tc.opts...)
			if ln != nil {
				ln.Close()
			}
			check("Listen", err)
			p, err := netio.ListenPublisher("tcp", "127.0.0.1:0", tc.opts...)
			if p != nil {
				p.Close()
			}
			check("ListenPublisher", err)
			c, err := netio.Dial("tcp", "127.0.0.1:1", tc.opts...)
			if c != nil {
				c.Close()
			}
			check("Dial", err)
		})
	}
	// The ceilings themselves are allowed.
	for name, opts := range map[string][]netio.Option{
		"max message":      {netio.WithMaxMessageSize(netio.MaxMaxMessageSize)},
		"buffer of 4":      {netio.WithBufferSize(netio.MaxBufferSize), netio.WithWindow(4)},
		"window of 4 KiB":  {netio.WithBufferSize(4 << 10), netio.WithWindow(netio.MaxWindow)},
		"backlog":          {netio.WithBacklog(netio.MaxBacklog)},
		"tags":             {netio.WithMaxTags(netio.MaxMaxTags)},
		"many connections": {netio.WithMaxConns(1 << 30)},
	} {
		ln, err := netio.Listen("tcp", "127.0.0.1:0", opts...)
		if err != nil {
			t.Errorf("%s at its ceiling: %v", name, err)
			continue
		}
		ln.Close()
	}
}

// statsDiff compares a listener's counters with want.
func statsDiff(t *testing.T, want, got netio.ListenerStats) {
	t.Helper()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("listener stats (-want +got):\n%s", diff)
	}
}

// A listener holds MaxConns connections, queued or accepted; the next
// request is rejected, the others go on, and a closed one makes room.
func TestMaxConns(t *testing.T) {
	ln := listenT(t, netio.WithMaxConns(2))
	c1, s1 := dialAccept(t, ln)
	c2, err := netio.Dial("tcp", ln.Addr().String()) // queued for Accept
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()

	start := time.Now()
	c3, err := netio.Dial("tcp", ln.Addr().String(), netio.WithConnectTimeout(hangTimeout))
	if c3 != nil {
		c3.Close()
		t.Fatal("a third Dial to a listener of MaxConns 2 succeeded")
	}
	checkDialError(t, err, time.Since(start))
	if !errors.Is(err, netio.ErrRejected) {
		t.Fatalf("Dial past MaxConns: %v; want ErrRejected", err)
	}

	echo(t, c1, s1, []byte("the first goes on"))
	s2 := acceptOne(t, ln, hangTimeout)
	echo(t, c2, s2, []byte("the second too"))

	c1.Close()
	s1.Close()
	eventually(t, "the closed connection leaves the listener's count", func() bool { return ln.Stats().Conns == 1 })
	c4, s4 := dialAccept(t, ln)
	echo(t, c4, s4, []byte("in the freed place"))
	statsDiff(t, netio.ListenerStats{Accepted: 3, RejectedFull: 1, Conns: 2}, ln.Stats())
}

// Requests that are not netio's, or in the other mode, are counted as
// rejected for the peer; a full backlog as full.
func TestListenerStatsRejections(t *testing.T) {
	ln := listenT(t, netio.WithBacklog(1))
	// Not a netio hello: the listener answers with a reject.
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Write(tcpCMHeader(tcpCMConnReq, []byte("not a netio peer, just bytes"))); err != nil {
		t.Fatal(err)
	}
	raw.SetReadDeadline(time.Now().Add(hangTimeout))
	if _, err := io.ReadAll(raw); err != nil {
		t.Fatalf("waiting for the listener to reject a bad hello: %v", err)
	}
	// The other mode.
	if c, err := netio.Dial("tcp", ln.Addr().String(), netio.WithMode(netio.HighThroughput)); err == nil {
		c.Close()
		t.Fatal("a HighThroughput Dial to a LowLatency listener succeeded")
	} else if !errors.Is(err, netio.ErrRejected) {
		t.Fatalf("Dial in the other mode: %v; want ErrRejected", err)
	}
	// A full backlog of 1.
	c1, err := netio.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	if c, err := netio.Dial("tcp", ln.Addr().String()); err == nil {
		c.Close()
		t.Fatal("a Dial into a full backlog succeeded")
	} else if !errors.Is(err, netio.ErrRejected) {
		t.Fatalf("Dial into a full backlog: %v; want ErrRejected", err)
	}
	statsDiff(t, netio.ListenerStats{Accepted: 1, RejectedPeer: 2, RejectedFull: 1, Conns: 1}, ln.Stats())
}

// A peer that sends a valid request and never completes the handshake is
// dropped at Config.ConnectTimeout, with everything it held; connections
// already up are not touched.
func TestHandshakeTimeout(t *testing.T) {
	ln := listenT(t, netio.WithConnectTimeout(200*time.Millisecond))
	c, s := dialAccept(t, ln)
	base := netio.RegisteredMemory()

	netio.StallSetups(ln, 1)
	raw := rawTCPRequest(t, ln.Addr().String(), netio.LowLatency)
	defer raw.Close()
	raw.SetReadDeadline(time.Now().Add(hangTimeout))
	n, err := raw.Read(make([]byte, 64))
	if n != 0 || (err != io.EOF && !errors.Is(err, syscall.ECONNRESET)) {
		t.Fatalf("a silent peer's socket read %d bytes, %v; want it closed by the listener", n, err)
	}
	eventually(t, "the silent peer's buffers are freed", func() bool { return netio.RegisteredMemory() <= base })

	echo(t, c, s, []byte("an open connection has no set-up deadline"))
	statsDiff(t, netio.ListenerStats{Accepted: 1, Failed: 1, TimedOut: 1, Conns: 1}, ln.Stats())
}

// A listener that closes the socket or answers with bytes that are not
// libfabric's: the dialer's error is a refusal, not the stale or obscure
// errno libfabric's tcp reports for them (EINPROGRESS, ENOPROTOOPT).
func TestDialSetupErrors(t *testing.T) {
	for name, serve := range map[string]func(net.Conn){
		"closed at once": func(net.Conn) {},
		"closed after the request": func(c net.Conn) {
			io.ReadFull(c, make([]byte, 32+52))
		},
		"answered with garbage": func(c net.Conn) {
			io.ReadFull(c, make([]byte, 32+52))
			junk := make([]byte, 32+24)
			junk[0] = 9 // not the CM protocol's version
			c.Write(junk)
			c.SetReadDeadline(time.Now().Add(hangTimeout))
			io.Copy(io.Discard, c)
		},
	} {
		t.Run(name, func(t *testing.T) {
			tl, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer tl.Close()
			served := make(chan struct{})
			go func() {
				defer close(served)
				c, err := tl.Accept()
				if err != nil {
					return
				}
				serve(c)
				c.Close()
			}()
			start := time.Now()
			c, err := netio.Dial("tcp", tl.Addr().String(), netio.WithConnectTimeout(hangTimeout))
			if c != nil {
				c.Close()
				t.Fatal("Dial succeeded")
			}
			checkDialError(t, err, time.Since(start))
			if !errors.Is(err, syscall.ECONNREFUSED) {
				t.Errorf("Dial: %v; want ECONNREFUSED", err)
			}
			for _, e := range []error{syscall.EINPROGRESS, syscall.ENOPROTOOPT, syscall.EIO} {
				if errors.Is(err, e) {
					t.Errorf("Dial: %v; it says %v, which tells the caller nothing", err, e)
				}
			}
			<-served
		})
	}
}

// The process's registered memory has a budget: a Dial past it fails
// with ErrMemoryLimit, and a listener that cannot afford a connection
// rejects it before allocating anything.
func TestRegisteredMemoryLimit(t *testing.T) {
	old := netio.SetMaxRegisteredMemory(-1)
	defer netio.SetMaxRegisteredMemory(old)
	ln := listenT(t)
	base := netio.RegisteredMemory()

	// A LowLatency connection registers 16 × 256 KiB each way.
	netio.SetMaxRegisteredMemory(base + 1<<20)
	if c, err := netio.Dial("tcp", ln.Addr().String()); err == nil {
		c.Close()
		t.Fatal("Dial past the registered-memory limit succeeded")
	} else {
		var oe *net.OpError
		if !errors.Is(err, netio.ErrMemoryLimit) || !errors.As(err, &oe) {
			t.Fatalf("Dial past the registered-memory limit: %v; want ErrMemoryLimit in a *net.OpError", err)
		}
	}

	// Room for the dialer's receive buffers, not for the listener's side.
	netio.SetMaxRegisteredMemory(base + 6<<20)
	if c, err := netio.Dial("tcp", ln.Addr().String()); err == nil {
		c.Close()
		t.Fatal("a Dial whose listener cannot afford it succeeded")
	} else if !errors.Is(err, netio.ErrRejected) {
		t.Fatalf("Dial to a listener past the registered-memory limit: %v; want ErrRejected", err)
	}
	eventually(t, "the rejected dialer's buffers are given back", func() bool { return netio.RegisteredMemory() == base })

	netio.SetMaxRegisteredMemory(old)
	c, s := dialAccept(t, ln)
	echo(t, c, s, []byte("within the limit again"))
	statsDiff(t, netio.ListenerStats{Accepted: 1, RejectedMemory: 1, Conns: 1}, ln.Stats())
	c.Close()
	s.Close()
	eventually(t, "a closed connection's buffers are given back", func() bool { return netio.RegisteredMemory() == base })
}

// A publisher holds MaxConns subscriber connections.
func TestPublisherMaxConns(t *testing.T) {
	p, err := netio.ListenPublisher(testNetwork, "127.0.0.1:0", netio.WithMaxConns(1))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), hangTimeout)
	defer cancel()
	// One process's subscriptions share a connection per mode: two modes
	// make two connections.
	s1, err := netio.Subscribe(ctx, testNetwork, p.Addr().String(), []uint64{1})
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Close()
	s2, err := netio.Subscribe(ctx, testNetwork, p.Addr().String(), []uint64{1}, netio.WithMode(netio.HighThroughput))
	if err == nil {
		s2.Close()
		t.Fatal("a second subscriber connection to a publisher of MaxConns 1 succeeded")
	}
	if !errors.Is(err, netio.ErrRejected) {
		t.Fatalf("Subscribe past MaxConns: %v; want ErrRejected", err)
	}
	if err := p.Publish(ctx, 1, []byte("to the first")); err != nil {
		t.Fatal(err)
	}
	receiveOne(t, s1, "to the first")
	statsDiff(t, netio.ListenerStats{Accepted: 1, RejectedFull: 1, Conns: 1}, p.Stats().Listener)
}

// receiveOne reads one message from s and checks it.
func receiveOne(t *testing.T, s *netio.Subscription, want string) {
	t.Helper()
	select {
	case m, ok := <-s.C:
		if !ok {
			t.Fatalf("subscription ended: %v", s.Err())
		}
		if got := string(m.Bytes()); got != want {
			t.Fatalf("received %q; want %q", got, want)
		}
		m.Release()
	case <-time.After(hangTimeout):
		t.Fatalf("nothing received in %v", hangTimeout)
	}
}

// A subscriber connection holds at most MaxTags tags at a publisher: a
// subscription past it fails with ErrRejected, and the others go on.
func TestMaxTags(t *testing.T) {
	p, err := netio.ListenPublisher(testNetwork, "127.0.0.1:0", netio.WithMaxTags(3))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), hangTimeout)
	defer cancel()
	s1, err := netio.Subscribe(ctx, testNetwork, p.Addr().String(), []uint64{1, 2, 3})
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Close()
	s2, err := netio.Subscribe(ctx, testNetwork, p.Addr().String(), []uint64{4})
	if err == nil {
		s2.Close()
		t.Fatal("a fourth tag past MaxTags 3 was subscribed")
	}
	if !errors.Is(err, netio.ErrRejected) {
		t.Fatalf("Subscribe past MaxTags: %v; want ErrRejected", err)
	}
	if err := p.Publish(ctx, 3, []byte("three")); err != nil {
		t.Fatal(err)
	}
	receiveOne(t, s1, "three")

	// Leaving a tag makes room for another.
	if err := s1.Unsubscribe(3); err != nil {
		t.Fatal(err)
	}
	s3, err := netio.Subscribe(ctx, testNetwork, p.Addr().String(), []uint64{4})
	if err != nil {
		t.Fatalf("Subscribe after leaving a tag: %v", err)
	}
	defer s3.Close()
	if err := p.Publish(ctx, 4, []byte("four")); err != nil {
		t.Fatal(err)
	}
	receiveOne(t, s3, "four")
	st := p.Stats()
	if st.TagsRefused != 1 || st.Tags != 3 {
		t.Errorf("publisher stats %+v; want TagsRefused 1 and Tags 3", st)
	}
}
