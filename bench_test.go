package netio_test

import (
	"bufio"
	"context"
	"encoding/binary"
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
		c := onMessageEcho(b)
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
		perfOn(b)
		for i := 0; i < b.N; i++ {
			hop(&p.Client, &p.Server)
			hop(&p.Server, &p.Client)
		}
		perfOff(b)
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
	perfOn(b)
	for i := 0; i < b.N; i++ {
		if _, err := w.Write(msg); err != nil {
			b.Fatal(err)
		}
		if _, err := read(buf); err != nil {
			b.Fatal(err)
		}
	}
	perfOff(b)
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

// onMessageEcho dials a listener that echoes every message from its
// OnMessage callback, on the reactor; the connections close with b.
func onMessageEcho(b *testing.B) *netio.Conn {
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
	b.Cleanup(func() { c.Close() })
	if s := <-accepted; s != nil {
		b.Cleanup(func() { s.Close() })
	}
	return c
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
// receiver has every message. netio (LowLatency, Write and ReadMessage)
// runs beside bare libfabric and net.TCPConn with one Write per message
// (the receiver reads each with io.ReadFull: the sizes are fixed).
func BenchmarkStream(b *testing.B) {
	for _, size := range streamSizes {
		b.Run(sizeName(size)+"/netio", func(b *testing.B) { streamNetio(b, size) })
		b.Run(sizeName(size)+"/ofi", func(b *testing.B) { streamOFI(b, size) })
		b.Run(sizeName(size)+"/tcp", func(b *testing.B) { streamTCP(b, size) })
	}
}

func streamTCP(b *testing.B, size int) {
	c, s := tcpPair(b)
	msg := make([]byte, size)
	buf := make([]byte, size)
	streamRun(b, size, func(n int) error {
		for i := 0; i < n; i++ {
			if _, err := c.Write(msg); err != nil {
				return err
			}
		}
		return nil
	}, func(n int) error {
		for i := 0; i < n; i++ {
			if _, err := io.ReadFull(s, buf); err != nil {
				return err
			}
		}
		return nil
	})
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
	perfOn(b)
	cpu := processCPU()
	start <- b.N
	for i := 0; i < b.N; i++ {
		if _, err := c.Write(msg); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	perfOff(b)
	b.StopTimer()
	// As streamRun's: what the machine pays per message, which other
	// load on a shared machine moves less than ns/op.
	b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
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
	perfOn(b)
	run(b.N)
	perfOff(b)
}

// bufferedSizes are the message sizes of the HighThroughput benchmarks.
var bufferedSizes = []int{8, 64, 256, 1 << 10, 4 << 10, 64 << 10, 1 << 20}

// BenchmarkBuffered is one-way HighThroughput streaming (pages of 1 MiB,
// zero-copy NextMessage on the receiving side), side by side with what a Go
// user would batch by hand: net.TCPConn behind a 1 MiB bufio.Writer with an
// 8-byte length prefix per message, read back through a 1 MiB bufio.Reader
// without copying (Peek and Discard). From 4 KiB up the bare-libfabric
// streaming baseline runs too. The rate is taken when the receiver has
// every message; msg/s is reported next to MB/s.
func BenchmarkBuffered(b *testing.B) {
	for _, size := range bufferedSizes {
		b.Run(sizeName(size)+"/netio-ht", func(b *testing.B) { streamBuffered(b, size) })
		if size <= 1<<10 {
			b.Run(sizeName(size)+"/netio-ht-release", func(b *testing.B) { streamBufferedRelease(b, size) })
		}
		if size == 64 {
			// The idle flush must cost nothing while the writer writes.
			b.Run(sizeName(size)+"/netio-ht-no-idle-flush", func(b *testing.B) { streamBuffered(b, size, netio.WithNoIdleFlush()) })
		}
		if size <= 1<<10 {
			b.Run(sizeName(size)+"/netio-ht-batch", func(b *testing.B) { streamBufferedBatch(b, size) })
		}
		b.Run(sizeName(size)+"/tcp-bufio", func(b *testing.B) { streamTCPBufio(b, size) })
		if size >= 4<<10 {
			b.Run(sizeName(size)+"/ofi", func(b *testing.B) { streamOFI(b, size) })
		}
	}
}

// streamRun runs a one-way stream of b.N messages after a warm-up: send
// writes n messages, and the receiver started by recv reads as many as it
// is told on its channel, answering on done.
func streamRun(b *testing.B, size int, send func(n int) error, recv func(n int) error) {
	start := make(chan int)
	done := make(chan error, 1)
	go func() {
		for n := range start {
			done <- recv(n)
		}
	}()
	defer close(start)
	const warm = 1000
	start <- warm
	if err := send(warm); err != nil {
		b.Fatal(err)
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	perfOn(b)
	cpu := processCPU()
	start <- b.N
	if err := send(b.N); err != nil {
		b.Fatal(err)
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	perfOff(b)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msg/s")
	// CPU time of the whole process per message: what the machine pays,
	// less sensitive than ns/op to other load on a shared machine.
	b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
}

func streamBuffered(b *testing.B, size int, opts ...netio.Option) {
	c, s := pair(b, append(opts, netio.WithMode(netio.HighThroughput))...)
	msg := make([]byte, size)
	var parks uint64
	var st0 netio.Stats
	calls := 0
	defer func() {
		// Where the time goes: the writer waiting for credit, how often the
		// reader parked per page, and how many pages a writer's pause sent.
		st := c.Stats()
		pages := float64(st.PagesSent - st0.PagesSent)
		b.ReportMetric(100*float64(st.CreditWait-st0.CreditWait)/float64(b.Elapsed()), "credit-wait-%")
		b.ReportMetric(float64(netio.ReaderParks()-parks)/pages, "parks/page")
		b.ReportMetric(100*float64(st.FlushesIdle-st0.FlushesIdle)/pages, "idle-flush-%")
	}()
	streamRun(b, size, func(n int) error {
		if calls++; calls == 2 { // the timed run, after the warm-up
			st0, parks = c.Stats(), netio.ReaderParks()
		}
		for i := 0; i < n; i++ {
			if _, err := c.Write(msg); err != nil {
				return err
			}
		}
		return c.Flush()
	}, func(n int) error {
		for i := 0; i < n; i++ {
			m, err := s.Next()
			if err != nil {
				return err
			}
			if len(m) != size {
				return fmt.Errorf("message %d: %d bytes, want %d", i, len(m), size)
			}
		}
		return nil
	})
}

// writeFlushed is a stream's writer: n Writes of msg, then Flush.
func writeFlushed(c *netio.Conn, msg []byte) func(n int) error {
	return func(n int) error {
		for i := 0; i < n; i++ {
			if _, err := c.Write(msg); err != nil {
				return err
			}
		}
		return c.Flush()
	}
}

// streamBufferedRelease is streamBuffered's writer with a reader that
// takes each message with NextMessage and releases it: the compare tool's
// netio-ht row.
func streamBufferedRelease(b *testing.B, size int) {
	c, s := pair(b, netio.WithMode(netio.HighThroughput))
	msg := make([]byte, size)
	streamRun(b, size, writeFlushed(c, msg), func(n int) error {
		for i := 0; i < n; i++ {
			m, err := s.NextMessage()
			if err != nil {
				return err
			}
			k := m.Len()
			m.Release()
			if k != size {
				return fmt.Errorf("message %d: %d bytes, want %d", i, k, size)
			}
		}
		return nil
	})
}

// streamBufferedBatch writes and reads 64 messages per call.
func streamBufferedBatch(b *testing.B, size int) {
	c, s := pair(b, netio.WithMode(netio.HighThroughput))
	const batch = 64
	msgs := make([][]byte, batch)
	for i := range msgs {
		msgs[i] = make([]byte, size)
	}
	got := make([][]byte, batch)
	streamRun(b, size, func(n int) error {
		for n > 0 {
			k := min(n, batch)
			if _, err := c.WriteBatch(msgs[:k]); err != nil {
				return err
			}
			n -= k
		}
		return c.Flush()
	}, func(n int) error {
		for n > 0 {
			k, err := s.NextBatch(got[:min(n, batch)])
			if err != nil {
				return err
			}
			for _, m := range got[:k] {
				if len(m) != size {
					return fmt.Errorf("%d bytes, want %d", len(m), size)
				}
			}
			n -= k
		}
		return nil
	})
}

func streamTCPBufio(b *testing.B, size int) {
	c, s := tcpPair(b)
	w := bufio.NewWriterSize(c, 1<<20)
	r := bufio.NewReaderSize(s, 1<<20)
	msg := make([]byte, size)
	big := make([]byte, size)
	var prefix [8]byte
	streamRun(b, size, func(n int) error {
		for i := 0; i < n; i++ {
			binary.LittleEndian.PutUint64(prefix[:], uint64(len(msg)))
			w.Write(prefix[:])
			if _, err := w.Write(msg); err != nil {
				return err
			}
		}
		return w.Flush()
	}, func(n int) error {
		for i := 0; i < n; i++ {
			p, err := r.Peek(8)
			if err != nil {
				return err
			}
			k := int(binary.LittleEndian.Uint64(p))
			r.Discard(8)
			if k != size {
				return fmt.Errorf("message %d: %d bytes, want %d", i, k, size)
			}
			if k <= r.Size() {
				if _, err := r.Peek(k); err != nil {
					return err
				}
				r.Discard(k)
			} else if _, err := io.ReadFull(r, big); err != nil {
				return err
			}
		}
		return nil
	})
}

// BenchmarkBufferedLowRate is the latency of a HighThroughput connection
// when messages are rare: one 64-byte message at a time, ns/op from Write
// to the reader having it. With the idle flush (the default) the page goes
// out when the writer pauses; with NetIO's rules alone (NoIdleFlush) it
// waits for the flush interval. LowLatency mode is the reference.
func BenchmarkBufferedLowRate(b *testing.B) {
	run := func(b *testing.B, opts ...netio.Option) {
		c, s := pair(b, opts...)
		msg := make([]byte, 64)
		for i := 0; i < b.N; i++ {
			if _, err := c.Write(msg); err != nil {
				b.Fatal(err)
			}
			if _, err := s.Next(); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("low-latency", func(b *testing.B) { run(b) })
	b.Run("ht-idle-flush", func(b *testing.B) { run(b, netio.WithMode(netio.HighThroughput)) })
	b.Run("ht-timer-only-2s", func(b *testing.B) {
		run(b, netio.WithMode(netio.HighThroughput), netio.WithNoIdleFlush())
	})
}

// BenchmarkPubSub measures publish/subscribe in one process: ns/op is per
// message published, msg/s is what each subscriber received.
func BenchmarkPubSub(b *testing.B) {
	for _, subs := range []int{1, 4} {
		b.Run(fmt.Sprintf("HT/64B/1to%d", subs), func(b *testing.B) {
			benchPubSubStream(b, subs, 64, netio.HighThroughput)
		})
	}
	b.Run("HT/4KiB/1to1", func(b *testing.B) { benchPubSubStream(b, 1, 4<<10, netio.HighThroughput) })
	b.Run("LL/64B/1to1", func(b *testing.B) { benchPubSubStream(b, 1, 64, netio.LowLatency) })
	// One-way latency of a LowLatency publish, next to half a
	// point-to-point round trip measured the same way in the same run: a
	// message goes out through one publisher and comes back through
	// another, as a ping and its pong would.
	b.Run("LL/latency", func(b *testing.B) {
		pa, pb := newBenchPublisher(b, "127.0.0.1:0"), newBenchPublisher(b, "127.0.0.1:0")
		toB := benchSubscribe(b, pa.Addr().String(), []uint64{1}, netio.WithMode(netio.LowLatency))
		toA := benchSubscribe(b, pb.Addr().String(), []uint64{2}, netio.WithMode(netio.LowLatency))
		go func() { // the other side answers every message
			for m := range toB.C {
				pb.Publish(context.Background(), 2, m.Bytes())
				m.Release()
			}
		}()
		msg := make([]byte, 64)
		ctx := context.Background()
		b.ReportAllocs()
		b.ResetTimer()
		perfOn(b)
		for i := 0; i < b.N; i++ {
			pa.Publish(ctx, 1, msg)
			m := <-toA.C
			m.Release()
		}
		perfOff(b)
		b.StopTimer()
		oneWay := float64(b.Elapsed().Nanoseconds()) / float64(b.N) / 2
		b.ReportMetric(oneWay/1e3, "pubsub-one-way-µs")
		c, s := pair(b)
		go echoMessages(s)
		buf := make([]byte, 64)
		const rounds = 2000
		start := time.Now()
		for i := 0; i < rounds; i++ {
			c.Write(buf)
			c.ReadMessage(buf)
		}
		p2p := float64(time.Since(start).Nanoseconds()) / rounds / 2
		b.ReportMetric(p2p/1e3, "p2p-one-way-µs")
		b.ReportMetric(oneWay/p2p, "pubsub/p2p")
	})
	// The cost of a publish with many tags subscribed: the table lookup.
	// 100,000 tags on one connection are past DefaultMaxTags, which the
	// publisher raises here as a user with that many would.
	for _, tags := range []int{1, 100_000} {
		b.Run(fmt.Sprintf("publish/tags=%d", tags), func(b *testing.B) {
			p := newBenchPublisher(b, "127.0.0.1:0", netio.WithMaxTags(max(tags, netio.DefaultMaxTags)))
			all := make([]uint64, tags)
			for i := range all {
				all[i] = uint64(i)
			}
			s := benchSubscribe(b, p.Addr().String(), all, netio.WithMode(netio.HighThroughput))
			go drain(s)
			msg := make([]byte, 64)
			ctx := context.Background()
			tag := uint64(tags / 2)
			b.ReportAllocs()
			b.ResetTimer()
			perfOn(b)
			for i := 0; i < b.N; i++ {
				p.Publish(ctx, tag, msg)
			}
			perfOff(b)
		})
	}
}

// benchPubSubStream publishes b.N messages of size bytes to subs
// subscribers, each on a connection of its own, and waits until every one
// has received them all through range over C.
func benchPubSubStream(b *testing.B, subs, size int, mode netio.Mode) {
	p := newBenchPublisher(b, "0.0.0.0:0")
	port := p.Addr().(*netio.Addr).AddrPort.Port()
	done := make(chan struct{}, subs)
	for i := 0; i < subs; i++ {
		// A process's subscriptions to one address share a connection:
		// another loopback address each makes one connection each.
		addr := fmt.Sprintf("127.0.0.%d:%d", i+1, port)
		s := benchSubscribe(b, addr, []uint64{1}, netio.WithMode(mode))
		go func(n int) {
			for m := range s.C {
				m.Release()
				if n--; n == 0 {
					done <- struct{}{}
				}
			}
		}(b.N)
	}
	msg := make([]byte, size)
	ctx := context.Background()
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	perfOn(b)
	for i := 0; i < b.N; i++ {
		if err := p.Publish(ctx, 1, msg); err != nil {
			b.Fatal(err)
		}
	}
	p.Flush()
	for i := 0; i < subs; i++ {
		<-done
	}
	perfOff(b)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msg/s")
}

func newBenchPublisher(b *testing.B, addr string, opts ...netio.Option) *netio.Publisher {
	p, err := netio.ListenPublisher("tcp", addr, opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.Close() })
	return p
}

func benchSubscribe(b *testing.B, addr string, tags []uint64, opts ...netio.Option) *netio.Subscription {
	s, err := netio.Subscribe(context.Background(), "tcp", addr, tags, opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

func drain(s *netio.Subscription) {
	for m := range s.C {
		m.Release()
	}
}
