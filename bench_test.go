package netio_test

import (
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/internal/ofipair"
	"github.com/netio-go/netio/ofi"
	"github.com/netio-go/netio/reactor"
)

// The benchmarks run netio side by side with what a Go user would pick
// instead (net.TCPConn) and with bare libfabric through the ofi package,
// so that the cost of netio's layers is a ratio read off one run:
//
//	go test -run '^$' -bench . -benchmem -count 5 .

var streamSizes = []int{64, 4 << 10, 64 << 10, 1 << 20}

func sizeName(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

// BenchmarkRoundTrip64 is a 64-byte ping-pong; ns/op is one round trip.
func BenchmarkRoundTrip64(b *testing.B) {
	b.Run("netio", func(b *testing.B) {
		c, s := pair(b)
		go echoMessages(s)
		pingPong(b, c, c.ReadMessage)
	})
	b.Run("netio-poll", func(b *testing.B) {
		// Waiting goroutines poll before parking (the default only with 4+ CPUs).
		c, s := pair(b, netio.WithPollFor(50*time.Microsecond))
		go echoMessages(s)
		pingPong(b, c, c.ReadMessage)
	})
	b.Run("netio-onmessage", func(b *testing.B) {
		// The server answers from the reactor, NetIO's low-latency receive socket.
		ln, err := netio.Listen("tcp", "127.0.0.1:0", netio.WithOnMessage(func(c *netio.Conn, msg []byte) { c.Write(msg) }))
		if err != nil {
			b.Fatal(err)
		}
		defer ln.Close()
		accepted := make(chan *netio.Conn, 1)
		go func() {
			s, _ := ln.AcceptConn()
			accepted <- s
		}()
		c, err := netio.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		if s := <-accepted; s != nil {
			defer s.Close()
		}
		pingPong(b, c, c.ReadMessage)
	})
	b.Run("ofi", func(b *testing.B) {
		// The floor: bare libfabric, one thread busy-polling both ends.
		recv := []ofi.Segment{{Offset: 0, Len: 64, Token: 1}}
		p, err := ofipair.New(ofipair.Options{RegionSize: 4096, ServerRecv: recv})
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		if _, err := p.Client.Endpoint.PostRecv(p.Client.Region, recv); err != nil {
			b.Fatal(err)
		}
		send := []ofi.Segment{{Offset: 1024, Len: 64}}
		var comps [4]ofi.Completion
		hop := func(from, to *ofipair.Side) {
			if _, err := from.Endpoint.PostSend(from.Region, send); err != nil {
				b.Fatal(err)
			}
			for got := false; !got; {
				from.CQ.Read(comps[:])
				n, err := to.CQ.Read(comps[:])
				if err != nil {
					b.Fatal(err)
				}
				for _, c := range comps[:n] {
					if c.Flags&ofi.FlagRecv != 0 {
						got = true
						to.Endpoint.PostRecv(to.Region, recv)
					}
				}
			}
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			hop(&p.Client, &p.Server)
			hop(&p.Server, &p.Client)
		}
	})
	b.Run("tcp", func(b *testing.B) {
		c, s := tcpPair(b)
		go func() {
			buf := make([]byte, 64)
			for {
				if _, err := io.ReadFull(s, buf); err != nil {
					return
				}
				if _, err := s.Write(buf); err != nil {
					return
				}
			}
		}()
		pingPong(b, c, func(p []byte) (int, error) { return io.ReadFull(c, p) })
	})
}

func pingPong(b *testing.B, w io.Writer, read func([]byte) (int, error)) {
	msg := make([]byte, 64)
	buf := make([]byte, 64)
	for i := 0; i < 100; i++ { // warm up: first touches of buffers and code paths
		w.Write(msg)
		read(buf)
	}
	b.ReportAllocs()
	before, parksBefore := netio.ReactorStats(), netio.ReaderParks()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := w.Write(msg); err != nil {
			b.Fatal(err)
		}
		if _, err := read(buf); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportWakes(b, before, parksBefore)
}

// reportWakes adds the reactor's sleeps and doorbell writes per operation:
// each is a thread wake-up, the main cost on a latency path.
func reportWakes(b *testing.B, before reactor.Stats, parksBefore uint64) {
	after := netio.ReactorStats()
	if after == (reactor.Stats{}) {
		return
	}
	b.ReportMetric(float64(after.Wakeups-before.Wakeups)/float64(b.N), "wakes/op")
	b.ReportMetric(float64(after.DoorbellWrites-before.DoorbellWrites)/float64(b.N), "doorbells/op")
	b.ReportMetric(float64(netio.ReaderParks()-parksBefore)/float64(b.N), "parks/op")
}

func echoMessages(c *netio.Conn) {
	buf := make([]byte, 1<<16)
	for {
		n, err := c.ReadMessage(buf)
		if err != nil {
			return
		}
		if _, err := c.Write(buf[:n]); err != nil {
			return
		}
	}
}

func tcpPair(b *testing.B) (client, server net.Conn) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	ch := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		ch <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	server = <-ch
	b.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// BenchmarkStream is one-way streaming; the rate is taken when the
// receiver has every message.
func BenchmarkStream(b *testing.B) {
	for _, size := range streamSizes {
		b.Run(sizeName(size)+"/netio", func(b *testing.B) { streamNetio(b, size) })
		b.Run(sizeName(size)+"/ofi", func(b *testing.B) { streamOFI(b, size) })
	}
}

func streamNetio(b *testing.B, size int) {
	c, s := pair(b)
	msg := make([]byte, size)
	done := make(chan error, 1)
	start := make(chan int)
	go func() {
		buf := make([]byte, size)
		for n := range start {
			var err error
			for i := 0; i < n && err == nil; i++ {
				_, err = s.ReadMessage(buf)
			}
			done <- err
		}
	}()
	// Warm up.
	start <- 100
	for i := 0; i < 100; i++ {
		c.Write(msg)
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	start <- b.N
	for i := 0; i < b.N; i++ {
		if _, err := c.Write(msg); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	close(start)
}

// streamOFI is the native baseline: bare libfabric, one thread polling both
// ends, a window of sends in flight, never more than the receiver posted.
func streamOFI(b *testing.B, size int) {
	const window = 16
	var recvs []ofi.Segment
	for i := 0; i < window; i++ {
		recvs = append(recvs, ofi.Segment{Offset: uint64(i * size), Len: uint64(size), Token: uint64(i)})
	}
	p, err := ofipair.New(ofipair.Options{RegionSize: window * size, ServerRecv: recvs})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	run := func(n int) {
		var comps [window]ofi.Completion
		sent, received, completed := 0, 0, 0
		seg := make([]ofi.Segment, 1)
		deadline := time.Now().Add(time.Minute)
		for received < n {
			// Credits: the receiver has re-posted every buffer it got.
			for sent < n && sent-completed < window && sent-received < window {
				seg[0] = ofi.Segment{Offset: uint64(sent%window) * uint64(size), Len: uint64(size), Token: uint64(sent % window)}
				if _, err := p.Client.Endpoint.PostSend(p.Client.Region, seg); err != nil {
					b.Fatal(err)
				}
				sent++
			}
			k, err := p.Client.CQ.Read(comps[:])
			if err != nil {
				b.Fatal(err)
			}
			completed += k
			k, err = p.Server.CQ.Read(comps[:])
			if err != nil {
				b.Fatal(err)
			}
			for i := 0; i < k; i++ {
				seg[0] = ofi.Segment{Offset: comps[i].Token * uint64(size), Len: uint64(size), Token: comps[i].Token}
				if _, err := p.Server.Endpoint.PostRecv(p.Server.Region, seg); err != nil {
					b.Fatal(err)
				}
			}
			received += k
			if time.Now().After(deadline) {
				b.Fatalf("stalled at %d of %d", received, n)
			}
		}
		for completed < sent {
			k, _ := p.Client.CQ.Read(comps[:])
			completed += k
		}
	}
	run(100)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	run(b.N)
}
