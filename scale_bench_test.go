package netio_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/netio-go/netio"
)

// Cost as the work grows: a busy connection beside idle ones, one
// publisher fanning out to many subscribers, and the byte-stream Read of
// large messages beside net.TCPConn's.
//
//	go test -run '^$' -bench 'RoundTripIdle|IdleConnections|PubSubFanout|StreamRead' -benchmem .

// BenchmarkRoundTripIdle is a 64-byte round trip through Write and
// io.ReadFull (the net.Conn way) on one connection while 0, 100 and 1,000
// LowLatency connections of the same process sit idle, each used once.
// ns/op and allocs/op should not move with the count. Each row after the
// first also reports what the idle connections added to the process's
// resident memory, per connection side (both ends live in this process).
func BenchmarkRoundTripIdle(b *testing.B) { roundTripIdle(b, netio.LowLatency) }

// BenchmarkRoundTripIdleHighThroughput is BenchmarkRoundTripIdle with
// HighThroughput idle connections (the busy one stays LowLatency).
func BenchmarkRoundTripIdleHighThroughput(b *testing.B) { roundTripIdle(b, netio.HighThroughput) }

func roundTripIdle(b *testing.B, mode netio.Mode) {
	idle := &idleSet{}
	b.Cleanup(idle.close)
	// A connection side reserves its window of buffers against the
	// process's registered-memory budget (virtual: an idle one touches
	// little of it); 2,000 sides are past the default budget.
	old := netio.SetMaxRegisteredMemory(1 << 40)
	b.Cleanup(func() { netio.SetMaxRegisteredMemory(old) })
	ln, err := netio.Listen("tcp", "127.0.0.1:0", netio.WithMode(mode))
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	for _, n := range []int{0, 100, 1000} {
		perSide := 0.0
		b.Run(fmt.Sprintf("idle=%d", n), func(b *testing.B) {
			// Built on the first call only (grow keeps what it has), so
			// that a filtered-out row builds nothing.
			if len(idle.conns) < 2*n {
				needFiles(b, uint64(8*2*n+256))
				runtime.GC()
				rss0, had := residentKB(), len(idle.conns)
				if err := idle.grow(ln, n, mode); err != nil {
					b.Fatal(err)
				}
				runtime.GC()
				perSide = float64(residentKB()-rss0) / float64(len(idle.conns)-had)
			}
			c, s := pair(b)
			go echoBytes(s)
			cpu := processCPU()
			pingPong(b, c, func(p []byte) (int, error) { return io.ReadFull(c, p) })
			// What the process spent per round trip (warm-up included):
			// polling idle links shows here even when other load on the
			// machine hides it in ns/op.
			b.ReportMetric(float64(processCPU()-cpu)/float64(b.N+100), "cpu-ns/op")
			if perSide > 0 {
				b.ReportMetric(perSide, "rss-KB/added-side")
			}
		})
	}
}

// BenchmarkIdleConnections is what 1,000 idle LowLatency connections of
// one process (both ends, so 2,000 sides beating once a second) cost while
// nothing else runs: each op is 100 ms of idleness; it reports the
// process's CPU per second and the reactor's wake-ups and spin rounds per
// second. Run with -benchtime 30x or more.
func BenchmarkIdleConnections(b *testing.B) {
	idle := &idleSet{}
	b.Cleanup(idle.close)
	old := netio.SetMaxRegisteredMemory(1 << 40)
	b.Cleanup(func() { netio.SetMaxRegisteredMemory(old) })
	ln, err := netio.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	needFiles(b, 8*2*1000+256)
	if err := idle.grow(ln, 1000, netio.LowLatency); err != nil {
		b.Fatal(err)
	}
	// Past the first heartbeats, which the set-up spreads over half an
	// interval.
	time.Sleep(2 * time.Second)
	b.ResetTimer()
	cpu, st, start := processCPU(), netio.ReactorStats(), time.Now()
	for range b.N {
		time.Sleep(100 * time.Millisecond)
	}
	secs := time.Since(start).Seconds()
	after := netio.ReactorStats()
	b.ReportMetric(float64(processCPU()-cpu)/1e6/secs, "cpu-ms/s")
	b.ReportMetric(float64(after.Wakeups-st.Wakeups)/secs, "wakeups/s")
	b.ReportMetric(float64(after.Spins-st.Spins)/secs, "spins/s")
}

// idleSet holds connections that were used once and then left alone.
type idleSet struct {
	conns []*netio.Conn
}

// grow makes the set hold n connections (2n sides) of ln, each used once.
func (s *idleSet) grow(ln *netio.Listener, n int, mode netio.Mode) error {
	msg, buf := []byte("once"), make([]byte, 16)
	for len(s.conns) < 2*n {
		c, err := netio.Dial("tcp", ln.Addr().String(), netio.WithMode(mode))
		if err != nil {
			return err
		}
		s.conns = append(s.conns, c)
		a, err := ln.AcceptConn()
		if err != nil {
			return err
		}
		s.conns = append(s.conns, a)
		for _, rw := range [][2]*netio.Conn{{c, a}, {a, c}} {
			if _, err := rw[0].Write(msg); err != nil {
				return err
			}
			if mode == netio.HighThroughput { // its page goes out on Flush
				if err := rw[0].Flush(); err != nil {
					return err
				}
			}
			if _, err := rw[1].ReadMessage(buf); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *idleSet) close() {
	for _, c := range s.conns {
		c.Close()
	}
}

// needFiles raises the soft limit on open files to what n needs, up to
// the hard limit, and skips when that is not enough.
func needFiles(b *testing.B, n uint64) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		b.Fatal(err)
	}
	if lim.Cur >= n {
		return
	}
	if lim.Max < n {
		b.Skipf("needs %d open files, the hard limit is %d", n, lim.Max)
	}
	lim.Cur = n
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		b.Skipf("raising the open-file limit to %d: %v", n, err)
	}
}

// residentKB is the process's resident set (VmRSS) in KiB.
func residentKB() int64 {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range bytes.Split(status, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("VmRSS:")); ok {
			if f := bytes.Fields(v); len(f) > 0 {
				n, _ := strconv.ParseInt(string(f[0]), 10, 64)
				return n
			}
		}
	}
	return 0
}

// echoBytes writes back what it reads, through Read: the byte stream.
func echoBytes(c *netio.Conn) {
	buf := make([]byte, 64)
	for {
		n, err := c.Read(buf)
		if err != nil {
			return
		}
		if _, err := c.Write(buf[:n]); err != nil {
			return
		}
	}
}

// BenchmarkPubSubFanout is one publisher, HighThroughput, 64 B messages
// to 1, 8, 64 and 256 Block subscribers, each on a connection of its own;
// ns/delivery is the time per message received by one subscriber, which
// should stay flat as subscribers are added. The pub4 rows publish from 4
// goroutines, each on a tag of its own, to subscribers of all 4 tags.
func BenchmarkPubSubFanout(b *testing.B) {
	for _, subs := range []int{1, 8, 64, 256} {
		b.Run(fmt.Sprintf("subs=%d", subs), func(b *testing.B) { fanout(b, subs, 1) })
	}
	for _, subs := range []int{8, 64} {
		b.Run(fmt.Sprintf("pub4/subs=%d", subs), func(b *testing.B) { fanout(b, subs, 4) })
	}
}

// fanout publishes b.N messages in all, from pubs goroutines on tags
// 1..pubs, to subs subscribers of every one of those tags.
func fanout(b *testing.B, subs, pubs int) {
	needFiles(b, uint64(16*subs+256))
	p := newBenchPublisher(b, "0.0.0.0:0", netio.WithMode(netio.HighThroughput))
	port := p.Addr().(*netio.Addr).AddrPort.Port()
	tags := make([]uint64, pubs)
	for i := range tags {
		tags[i] = uint64(i + 1)
	}
	per := b.N / pubs
	want := per * pubs
	var received sync.WaitGroup
	for i := 0; i < subs; i++ {
		// A process's subscriptions to one address share a connection:
		// a loopback address each makes a connection each.
		addr := fmt.Sprintf("127.0.%d.%d:%d", i/250, i%250+1, port)
		s := benchSubscribe(b, addr, tags, netio.WithMode(netio.HighThroughput))
		received.Add(1)
		go func() {
			defer received.Done()
			for n := 0; n < want; n++ {
				m, ok := <-s.C
				if !ok {
					return
				}
				m.Release()
			}
		}()
	}
	msg := make([]byte, 64)
	ctx := context.Background()
	errs := make(chan error, pubs)
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	b.ResetTimer()
	for _, tag := range tags {
		go func() {
			for i := 0; i < per; i++ {
				if err := p.Publish(ctx, tag, msg); err != nil {
					errs <- err
					return
				}
			}
			errs <- p.Flush()
		}()
	}
	for range tags {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
	received.Wait()
	b.StopTimer()
	if want > 0 {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(want*subs), "ns/delivery")
	}
}

// BenchmarkStreamRead streams messages of 64 KiB and 1 MiB one way and
// reads them as a byte stream with io.ReadFull, as bufio, io.Copy and
// net/http do, beside ReadMessage on the same kind of connection and
// net.TCPConn read the same way.
func BenchmarkStreamRead(b *testing.B) {
	for _, size := range []int{64 << 10, 1 << 20} {
		b.Run(sizeName(size)+"/netio-read", func(b *testing.B) { streamNetioRead(b, size, false) })
		b.Run(sizeName(size)+"/netio-readmessage", func(b *testing.B) { streamNetioRead(b, size, true) })
		// Buffers as large as the message: one buffer, one completion and
		// at most one reader wake-up per message instead of four.
		b.Run(sizeName(size)+"/netio-read-buffer="+sizeName(size), func(b *testing.B) {
			streamNetioRead(b, size, false, netio.WithBufferSize(size), netio.WithWindow(8))
		})
		b.Run(sizeName(size)+"/tcp", func(b *testing.B) { streamTCP(b, size) })
	}
}

func streamNetioRead(b *testing.B, size int, messages bool, opts ...netio.Option) {
	c, s := pair(b, opts...)
	msg := make([]byte, size)
	buf := make([]byte, size)
	// Counted from the timed run on, not from the warm-up before it.
	before, parks, runs := netio.ReactorStats(), netio.ReaderParks(), 0
	defer func() { reportWakes(b, before, parks) }()
	streamRun(b, size, func(n int) error {
		if runs++; runs == 2 {
			before, parks = netio.ReactorStats(), netio.ReaderParks()
		}
		for i := 0; i < n; i++ {
			if _, err := c.Write(msg); err != nil {
				return err
			}
		}
		return nil
	}, func(n int) error {
		for i := 0; i < n; i++ {
			var err error
			if messages {
				_, err = s.ReadMessage(buf)
			} else {
				_, err = io.ReadFull(s, buf)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// BenchmarkPublisherMemory is what one more subscriber costs a publisher:
// the resident memory of this process (the publisher, HighThroughput)
// before and after 64 subscribers of a child process connect (a loopback
// address each, so a connection each) and b.N messages of 64 B reach
// them all, per subscriber. The subscribers live in the child, so the
// figure holds the publisher's side alone: its link (endpoint, queues,
// registered pages) and its queue for the subscriber.
func BenchmarkPublisherMemory(b *testing.B) {
	const subs = 64
	needFiles(b, uint64(16*subs+256))
	runtime.GC()
	rss0 := residentKB()
	p := newBenchPublisher(b, "0.0.0.0:0", netio.WithMode(netio.HighThroughput))
	port := p.Addr().(*netio.Addr).AddrPort.Port()
	kid := startPubSubChild(b, psRoleEnv+"=many", psAddrEnv+"="+strconv.Itoa(int(port)), psTagsEnv+"="+strconv.Itoa(subs))
	kid.waitFor(b, "READY") // the child exits when its stdin closes, at cleanup
	eventually(b, "the publisher counting every subscriber", func() bool { return p.Stats().Subscribers == subs })
	msg := make([]byte, 64)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := p.Publish(context.Background(), 1, msg); err != nil {
			b.Fatal(err)
		}
	}
	if err := p.Flush(); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	runtime.GC()
	b.ReportMetric(float64(residentKB()-rss0)/subs, "rss-KB/subscriber")
}

// manySubscribersChild subscribes to tag 1 of the publisher on this
// machine's port NETIO_PS_ADDR as NETIO_PS_TAGS subscribers, each through
// a loopback address of its own (a connection each), HighThroughput,
// reads everything, and exits when its parent closes stdin.
func manySubscribersChild() {
	n, _ := strconv.Atoi(os.Getenv(psTagsEnv))
	ctx, cancel := context.WithTimeout(context.Background(), hangTimeout)
	defer cancel()
	for i := 0; i < n; i++ {
		addr := fmt.Sprintf("127.0.%d.%d:%s", i/250, i%250+1, os.Getenv(psAddrEnv))
		s, err := netio.Subscribe(ctx, "tcp", addr, []uint64{1}, netio.WithMode(netio.HighThroughput))
		if err != nil {
			childFatal("subscribe %s: %v", addr, err)
		}
		go drain(s)
	}
	fmt.Println("READY")
	io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}
