package netio_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/netio-go/netio"
)

// LowLatency and HighThroughput side by side between the same two
// processes: the parent streams bulk data to the child over a
// HighThroughput connection and makes 64-byte round trips to it over a
// LowLatency one. The round trips are timed in rounds of alternating
// phases, with the stream stopped (idle) and running (loaded); the
// stream's rate is taken while the round trips run and, right after, while
// it runs alone, so that a stream slowed down by the round trips shows.
//
// The child answers in Config.OnMessage, on its reactor, which is how a
// server should answer control messages (NetIO's low-latency receive
// socket): a goroutine answering with ReadMessage must be scheduled for
// every message, on processors that the stream's goroutines keep busy.
// BenchmarkMixed shows both, in one process and in two.

const (
	mixedRoleEnv = "NETIO_MIXED_CHILD" // the child's echo: "onmessage" or "readmessage"
	mixedAddrTag = "NETIO_MIXED_ADDRS="
	mixedPingLen = 64
	mixedHTSize  = 4 << 10 // the stream's messages: many to a page
)

// mixedSink is the receiving end: an echo server for the round trips whose
// answers carry the bulk bytes it has read so far, and a reader of the
// bulk stream.
type mixedSink struct {
	ll, ht *netio.Listener
	got    atomic.Uint64 // bulk payload bytes read
	mu     sync.Mutex
	conns  []*netio.Conn
	wg     sync.WaitGroup
}

func (s *mixedSink) answer(reply []byte) []byte {
	binary.LittleEndian.PutUint64(reply, s.got.Load())
	return reply
}

func startMixedSink(onMessage bool) (*mixedSink, error) {
	s := &mixedSink{}
	var llOpts []netio.Option
	if onMessage {
		llOpts = append(llOpts, netio.WithOnMessage(func(c *netio.Conn, msg []byte) {
			var reply [mixedPingLen]byte
			c.Write(s.answer(reply[:]))
		}))
	}
	var err error
	if s.ll, err = netio.Listen("tcp", "127.0.0.1:0", llOpts...); err != nil {
		return nil, err
	}
	if s.ht, err = netio.Listen("tcp", "127.0.0.1:0", netio.WithMode(netio.HighThroughput)); err != nil {
		s.ll.Close()
		return nil, err
	}
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		c := s.accept(s.ll)
		if c == nil || onMessage {
			return
		}
		buf := make([]byte, mixedPingLen)
		reply := make([]byte, mixedPingLen)
		for {
			if _, err := c.ReadMessage(buf); err != nil {
				return
			}
			if _, err := c.Write(s.answer(reply)); err != nil {
				return
			}
		}
	}()
	go func() {
		defer s.wg.Done()
		c := s.accept(s.ht)
		if c == nil {
			return
		}
		for {
			m, err := c.NextMessage()
			if err != nil {
				return
			}
			s.got.Add(uint64(m.Len()))
			m.Release()
		}
	}()
	return s, nil
}

func (s *mixedSink) accept(ln *netio.Listener) *netio.Conn {
	c, err := ln.AcceptConn()
	if err != nil {
		return nil
	}
	s.mu.Lock()
	s.conns = append(s.conns, c)
	s.mu.Unlock()
	return c
}

func (s *mixedSink) addrs() string { return s.ll.Addr().String() + " " + s.ht.Addr().String() }

func (s *mixedSink) close() {
	s.ll.Close()
	s.ht.Close()
	s.mu.Lock()
	for _, c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// mixedChild serves a sink for the parent until its stdin closes, and
// never returns to the testing package.
func mixedChild(role string) {
	s, err := startMixedSink(role == "onmessage")
	if err != nil {
		childFatal("sink: %v", err)
	}
	os.Stdout.WriteString(mixedAddrTag + s.addrs() + "\n")
	io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

// mixedStartChild re-executes the test binary as a child serving a sink
// and returns the addresses of its two listeners.
func mixedStartChild(tb testing.TB, onMessage bool) (ll, ht string) {
	tb.Helper()
	role := "readmessage"
	if onMessage {
		role = "onmessage"
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestLowLatencyUnderBulkLoad$", "-test.count=1")
	cmd.Env = append(os.Environ(), mixedRoleEnv+"="+role)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe() // the child exits when it is closed
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(hangTimeout):
			cmd.Process.Kill()
			<-done
		}
	})
	addrs := make(chan string, 1)
	go func() {
		r := bufio.NewReader(stdout)
		for {
			line, err := r.ReadString('\n')
			if a, ok := strings.CutPrefix(strings.TrimSpace(line), mixedAddrTag); ok {
				addrs <- a
				io.Copy(io.Discard, r)
				return
			}
			if err != nil {
				addrs <- ""
				return
			}
		}
	}()
	select {
	case a := <-addrs:
		f := strings.Fields(a)
		if len(f) != 2 {
			tb.Fatal("the child exited without listening")
		}
		return f[0], f[1]
	case <-time.After(hangTimeout):
		tb.Fatal("the child never reported its addresses")
	}
	return "", ""
}

// mixedDriver is the sending end: it times round trips and runs the bulk
// stream on demand.
type mixedDriver struct {
	ll, ht *netio.Conn
	msg    []byte
	ping   []byte
	reply  []byte

	run     atomic.Bool   // the writer writes while set
	sent    atomic.Uint64 // bulk payload bytes written
	start   chan struct{} // starts the writer
	stopped chan error    // the writer stopped and flushed
}

// newMixedDriver connects to a sink, in a child process (cross) or in this
// one, and starts the bulk writer, paused.
func newMixedDriver(tb testing.TB, cross, onMessage bool) *mixedDriver {
	tb.Helper()
	var llAddr, htAddr string
	if cross {
		llAddr, htAddr = mixedStartChild(tb, onMessage)
	} else {
		s, err := startMixedSink(onMessage)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(s.close)
		f := strings.Fields(s.addrs())
		llAddr, htAddr = f[0], f[1]
	}
	d := &mixedDriver{
		msg:     make([]byte, mixedHTSize),
		ping:    make([]byte, mixedPingLen),
		reply:   make([]byte, mixedPingLen),
		start:   make(chan struct{}),
		stopped: make(chan error, 1),
	}
	var err error
	if d.ll, err = netio.Dial("tcp", llAddr); err != nil {
		tb.Fatal(err)
	}
	if d.ht, err = netio.Dial("tcp", htAddr, netio.WithMode(netio.HighThroughput)); err != nil {
		d.ll.Close()
		tb.Fatal(err)
	}
	writerDone := make(chan struct{})
	go d.writer(writerDone)
	tb.Cleanup(func() {
		d.run.Store(false)
		d.ht.Close() // ends a Write that waits for a sink that is gone
		close(d.start)
		<-writerDone
		d.ll.Close()
	})
	return d
}

// writer writes the bulk stream, from each start until run is cleared, and
// reports on stopped. It sets no write deadline: that would take Write off
// its fast path. A sink that stops reading makes the round trips time out.
func (d *mixedDriver) writer(done chan<- struct{}) {
	defer close(done)
	for range d.start {
		var err error
		for d.run.Load() && err == nil {
			if _, err = d.ht.Write(d.msg); err == nil {
				d.sent.Add(uint64(len(d.msg)))
			}
		}
		if err == nil {
			err = d.ht.Flush()
		}
		d.stopped <- err
	}
}

// roundTrip times one round trip and returns the bulk bytes the sink had
// read when it answered.
func (d *mixedDriver) roundTrip() (time.Duration, uint64, error) {
	t := time.Now()
	if _, err := d.ll.Write(d.ping); err != nil {
		return 0, 0, err
	}
	n, err := d.ll.ReadMessage(d.reply)
	if err != nil {
		return 0, 0, err
	}
	rtt := time.Since(t)
	if n != mixedPingLen {
		return 0, 0, fmt.Errorf("answer of %d bytes", n)
	}
	return rtt, binary.LittleEndian.Uint64(d.reply), nil
}

// startStream starts the writer and waits until the sink has read a few
// pages, so that the stream flows at its full rate.
func (d *mixedDriver) startStream() error {
	d.run.Store(true)
	d.start <- struct{}{}
	_, from, err := d.roundTrip()
	for got, t := from, time.Now(); err == nil && got-from < 4<<20; {
		if time.Since(t) > hangTimeout {
			return errors.New("the bulk stream does not flow")
		}
		time.Sleep(100 * time.Microsecond) // polling pace between round trips
		_, got, err = d.roundTrip()
	}
	return err
}

// stopStream stops the writer and waits until the sink has read every
// byte, so that the next phase is idle.
func (d *mixedDriver) stopStream() error {
	d.run.Store(false)
	if err := <-d.stopped; err != nil {
		return err
	}
	deadline := time.Now().Add(hangTimeout)
	for {
		_, got, err := d.roundTrip()
		if err != nil || got == d.sent.Load() {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the sink read %d of %d bulk bytes", got, d.sent.Load())
		}
		time.Sleep(200 * time.Microsecond) // polling pace between round trips
	}
}

// mixedConfig sizes a measurement.
type mixedConfig struct {
	rounds   int           // of an idle, a loaded and an alone phase
	pings    int           // round trips per idle or loaded phase, at most
	phaseMax time.Duration // length of an idle or loaded phase, at most
}

// mixedRound is one round's result.
type mixedRound struct {
	idle, loaded time.Duration // median round trip
}

// mixedResult is a measurement: per-round medians of the round trips and
// the stream's rates.
type mixedResult struct {
	rounds      []mixedRound
	loadedBytes uint64 // bulk bytes read while the round trips ran
	loadedTime  time.Duration
	aloneBytes  uint64 // and while the stream ran alone
	aloneTime   time.Duration
}

func mixedMedian[T time.Duration | float64](s []T) T {
	s = slices.Clone(s)
	slices.Sort(s)
	return s[len(s)/2]
}

func (r *mixedResult) median(f func(mixedRound) float64) float64 {
	v := make([]float64, len(r.rounds))
	for i, x := range r.rounds {
		v[i] = f(x)
	}
	return mixedMedian(v)
}

// idleMedian and loadedMedian are the medians of the rounds' medians.
func (r *mixedResult) idleMedian() time.Duration {
	return time.Duration(r.median(func(x mixedRound) float64 { return float64(x.idle) }))
}

func (r *mixedResult) loadedMedian() time.Duration {
	return time.Duration(r.median(func(x mixedRound) float64 { return float64(x.loaded) }))
}

// ratio is the median of the rounds' loaded/idle ratios of medians: each
// compares two phases timed next to each other, so changes in the load
// that others put on the machine cancel out, and the median over rounds
// ignores rounds that were disturbed anyway.
func (r *mixedResult) ratio() float64 {
	return r.median(func(x mixedRound) float64 { return float64(x.loaded) / float64(x.idle) })
}

func mixedGbits(bytes uint64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(bytes) * 8 / d.Seconds() / 1e9
}

func (r *mixedResult) loadedRate() float64 { return mixedGbits(r.loadedBytes, r.loadedTime) }
func (r *mixedResult) aloneRate() float64  { return mixedGbits(r.aloneBytes, r.aloneTime) }

func (r *mixedResult) String() string {
	return fmt.Sprintf("round trip medians: idle %v, under the bulk stream %v: %.2fx (median of %d rounds); bulk stream %.1f Gbit/s under the round trips, %.1f Gbit/s alone",
		r.idleMedian().Round(100*time.Nanosecond), r.loadedMedian().Round(100*time.Nanosecond),
		r.ratio(), len(r.rounds), r.loadedRate(), r.aloneRate())
}

// measure runs cfg.rounds rounds of three phases: round trips alone
// (idle), round trips with the bulk stream running (loaded), and the stream
// alone for as long as the loaded phase took. The stream's rate is what
// the sink read between the round trips at either end of a phase.
func (d *mixedDriver) measure(cfg mixedConfig) (*mixedResult, error) {
	// Round trips fail rather than hang when the sink stops answering.
	d.ll.SetReadDeadline(time.Now().Add(time.Duration(cfg.rounds)*(cfg.phaseMax+3*hangTimeout) + time.Minute))
	for i := 0; i < 200; i++ { // warm up: first touches of buffers and code paths
		if _, _, err := d.roundTrip(); err != nil {
			return nil, err
		}
	}
	rtts := make([]time.Duration, 0, cfg.pings)
	// phase times up to cfg.pings round trips and returns their median,
	// the bulk bytes the sink read meanwhile and how long it took.
	phase := func() (time.Duration, uint64, time.Duration, error) {
		_, from, err := d.roundTrip()
		if err != nil {
			return 0, 0, 0, err
		}
		t := time.Now()
		rtts = rtts[:0]
		// At least one round trip, however long the machine took to get
		// here: a phase without one has no median.
		for len(rtts) < cfg.pings && (len(rtts) == 0 || time.Since(t) < cfg.phaseMax) {
			rtt, _, err := d.roundTrip()
			if err != nil {
				return 0, 0, 0, err
			}
			rtts = append(rtts, rtt)
		}
		_, to, err := d.roundTrip()
		return mixedMedian(rtts), to - from, time.Since(t), err
	}
	r := &mixedResult{}
	for range cfg.rounds {
		var x mixedRound
		var err error
		if x.idle, _, _, err = phase(); err != nil {
			return nil, err
		}
		if err := d.startStream(); err != nil {
			d.stopStream()
			return nil, err
		}
		var n uint64
		var dt time.Duration
		x.loaded, n, dt, err = phase()
		if err == nil {
			r.loadedBytes += n
			r.loadedTime += dt
			var from, to uint64
			_, from, err = d.roundTrip()
			t := time.Now()
			time.Sleep(max(dt, 10*time.Millisecond)) // the stream runs alone for as long as it ran loaded
			if err == nil {
				_, to, err = d.roundTrip()
				r.aloneBytes += to - from
				r.aloneTime += time.Since(t)
			}
		}
		if err2 := d.stopStream(); err == nil {
			err = err2
		}
		if err != nil {
			return nil, err
		}
		r.rounds = append(r.rounds, x)
	}
	return r, nil
}

// BenchmarkMixed times LowLatency round trips while a HighThroughput stream
// runs between the same two processes (xproc) or within one (inproc), with
// the server answering in OnMessage or from a goroutine with ReadMessage.
// One op is a round: 250 round trips idle, 250 with the stream running,
// and the stream alone. The metrics are the round trips' medians idle and
// loaded (µs, medians of the rounds' medians), loaded/idle (the median of
// the rounds' ratios), and the stream's rate under the round trips and
// alone, and their ratio (HT/alone):
//
//	go test -run '^$' -bench Mixed -benchtime 20x .
func BenchmarkMixed(b *testing.B) {
	for _, where := range []string{"xproc", "inproc"} {
		for _, echo := range []string{"onmessage", "readmessage"} {
			b.Run(where+"/"+echo, func(b *testing.B) {
				d := newMixedDriver(b, where == "xproc", echo == "onmessage")
				b.ResetTimer()
				r, err := d.measure(mixedConfig{rounds: b.N, pings: 250, phaseMax: 250 * time.Millisecond})
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				b.ReportMetric(0, "ns/op") // the length of a round says nothing
				b.ReportMetric(float64(r.idleMedian())/1e3, "idle-µs")
				b.ReportMetric(float64(r.loadedMedian())/1e3, "loaded-µs")
				b.ReportMetric(r.ratio(), "loaded/idle")
				b.ReportMetric(r.loadedRate(), "HT-Gbit/s")
				b.ReportMetric(r.aloneRate(), "HT-alone-Gbit/s")
				if r.aloneRate() > 0 {
					b.ReportMetric(r.loadedRate()/r.aloneRate(), "HT/alone")
				}
			})
		}
	}
}

// TestLowLatencyUnderBulkLoad: between the same two processes, round trips
// over a LowLatency connection go on while a HighThroughput connection
// between them streams as fast as it can (the child answers in OnMessage):
// every ping is answered and the stream arrives whole. How much slower the
// round trips get, and the stream's rate under the round trips against its
// rate alone, are logged here and measured by BenchmarkMixed (loaded/idle,
// HT-Gbit/s, HT-alone-Gbit/s): rates are the machine's business, and a
// stream slowed by other processes on a shared machine is no fault of
// netio's. Speed is never asserted (see BenchmarkMixed and docs/benchmarks.md).
func TestLowLatencyUnderBulkLoad(t *testing.T) {
	if role := os.Getenv(mixedRoleEnv); role != "" {
		mixedChild(role)
		return
	}
	d := newMixedDriver(t, true, true)
	r, err := d.measure(mixedConfig{rounds: 12, pings: 200, phaseMax: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(r)
	// Issue 11 asks for round trips within 5x of idle under the stream,
	// with the stream at 0.8x its rate alone: reported, not asserted, as
	// timing asserts fail on shared machines (on 2 cores shared with
	// other work this moves from 3x to 20x between runs).
	t.Logf("round trips under the bulk stream: %.2fx idle (median %v against %v idle)", r.ratio(), r.loadedMedian(), r.idleMedian())
}

// TestLowLatencyUnderBulkInOrder: in one process, whose one reactor serves
// both connections, LowLatency messages from 1 byte to several fragments
// long keep arriving whole and in order, and are echoed back so, while a
// HighThroughput stream keeps the reactor busy; the stream arrives whole
// and in order too. Once both stop, the reactor goes back to sleep: the
// slices it cuts bulk work into (slice.go) leave nothing behind that keeps
// it awake.
func TestLowLatencyUnderBulkInOrder(t *testing.T) {
	llc, lls := pair(t)
	htc, hts := pair(t, netio.WithMode(netio.HighThroughput))
	for _, c := range []*netio.Conn{llc, lls, htc, hts} {
		c.SetDeadline(time.Now().Add(3 * hangTimeout))
	}

	// The bulk stream: 4 KiB messages numbered in their first 8 bytes.
	stop := make(chan struct{})
	var sent atomic.Uint64
	writeErr := make(chan error, 1)
	go func() {
		msg := make([]byte, mixedHTSize)
		var err error
		for n := uint64(0); err == nil; n++ {
			select {
			case <-stop:
				err = htc.Flush()
				writeErr <- err
				return
			default:
			}
			binary.LittleEndian.PutUint64(msg, n)
			if _, err = htc.Write(msg); err == nil {
				sent.Add(1)
			}
		}
		writeErr <- err
	}()
	readErr := make(chan error, 1)
	var got atomic.Uint64
	go func() {
		for n := uint64(0); ; n++ {
			m, err := hts.NextMessage()
			if err != nil {
				readErr <- err
				return
			}
			b := m.Bytes()
			if len(b) != mixedHTSize || binary.LittleEndian.Uint64(b) != n {
				readErr <- fmt.Errorf("bulk message %d: %d bytes numbered %d", n, len(b), binary.LittleEndian.Uint64(b))
				m.Release()
				return
			}
			m.Release()
			got.Add(1)
		}
	}()
	eventually(t, "the bulk stream flowing", func() bool { return got.Load() >= 1000 })

	// Round trips: sizes cycle through one byte, a small message, one
	// just under a fragment and one of several fragments.
	go func() {
		buf := make([]byte, 1<<20)
		for {
			n, err := lls.ReadMessage(buf)
			if err != nil {
				return
			}
			if _, err := lls.Write(buf[:n]); err != nil {
				return
			}
		}
	}()
	sizes := []int{1, 64, 250 << 10, 700 << 10}
	out := make([]byte, 700<<10)
	in := make([]byte, 700<<10)
	for i := 0; i < 200; i++ {
		n := sizes[i%len(sizes)]
		for j := range out[:n] {
			out[j] = byte(i + j)
		}
		binary.LittleEndian.PutUint32(out, uint32(i))
		if _, err := llc.Write(out[:n]); err != nil {
			t.Fatalf("round trip %d: write: %v", i, err)
		}
		k, err := llc.ReadMessage(in)
		if err != nil {
			t.Fatalf("round trip %d: read: %v", i, err)
		}
		if !bytes.Equal(in[:k], out[:n]) {
			t.Fatalf("round trip %d: sent %d bytes, got back %d bytes that differ", i, n, k)
		}
	}
	if got.Load() == 0 {
		t.Fatal("the bulk stream stopped")
	}

	close(stop)
	if err := <-writeErr; err != nil {
		t.Fatalf("bulk writer: %v", err)
	}
	eventually(t, "every bulk message read", func() bool { return got.Load() == sent.Load() })
	select {
	case err := <-readErr:
		t.Fatalf("bulk reader: %v", err)
	default:
	}
	eventually(t, "the reactor asleep once both stopped", reactorAsleep)
}

// TestManyShortWaits: round trips with pauses of every length between them
// (none, shorter than the reactor's spin, longer than it), over a
// LowLatency connection and, interleaved, single flushed messages over a
// HighThroughput one, so that readers park and are woken, the reactor
// sleeps and is rung, and polls find work, in every order. A wake-up lost
// anywhere shows as a read that never returns (the deadline is the hang
// guard).
func TestManyShortWaits(t *testing.T) {
	llc, lls := pair(t)
	htc, hts := pair(t, netio.WithMode(netio.HighThroughput))
	for _, c := range []*netio.Conn{llc, lls, htc, hts} {
		c.SetDeadline(time.Now().Add(3 * hangTimeout))
	}
	go echoMessages(lls)
	htGot := make(chan uint64, 1)
	go func() {
		for {
			m, err := hts.NextMessage()
			if err != nil {
				return
			}
			htGot <- binary.LittleEndian.Uint64(m.Bytes())
			m.Release()
		}
	}()
	pauses := []time.Duration{0, 0, 5 * time.Microsecond, 30 * time.Microsecond, 80 * time.Microsecond, 150 * time.Microsecond, time.Millisecond}
	msg := make([]byte, 64)
	buf := make([]byte, 64)
	for i := 0; i < 1500; i++ {
		if p := pauses[i%len(pauses)]; p > 0 {
			time.Sleep(p) // the pauses of a bursty sender
		}
		binary.LittleEndian.PutUint64(msg, uint64(i))
		if i%5 == 0 {
			if _, err := htc.Write(msg); err != nil {
				t.Fatalf("message %d: HT write: %v", i, err)
			}
			if err := htc.Flush(); err != nil {
				t.Fatalf("message %d: HT flush: %v", i, err)
			}
			select {
			case n := <-htGot:
				if n != uint64(i) {
					t.Fatalf("HT message %d arrived as %d", i, n)
				}
			case <-time.After(hangTimeout):
				t.Fatalf("HT message %d never arrived", i)
			}
			continue
		}
		if _, err := llc.Write(msg); err != nil {
			t.Fatalf("round trip %d: write: %v", i, err)
		}
		n, err := llc.ReadMessage(buf)
		if err != nil {
			t.Fatalf("round trip %d: read: %v", i, err)
		}
		if n != len(msg) || binary.LittleEndian.Uint64(buf) != uint64(i) {
			t.Fatalf("round trip %d: got %d bytes numbered %d", i, n, binary.LittleEndian.Uint64(buf))
		}
	}
}
