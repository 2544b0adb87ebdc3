//go:build soak

package netio_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/ofi"
)

// The soak (make soak): mixed traffic for NETIO_SOAK (default 10m) under
// the race detector, in one process plus subscriber children that are
// killed:
//
//   - a LowLatency connection doing request/response round trips, each
//     checked;
//   - a HighThroughput connection streaming messages of 64 B to 200 KiB,
//     each checked, none lost;
//   - a publisher on 64 tags with a Block subscriber for the whole run
//     (no gap allowed), in-process subscribers joining and leaving under
//     every policy (a Block one may lose nothing, a dropping one must count
//     every message it misses), and subscriber processes killed with
//     SIGKILL while the publisher keeps publishing.
//
// Memory is sampled every few seconds, and what the program's allocators
// hold must stay within 10% of its value after the warm-up (checkFlat);
// TestMain's leakcheck fails the run on a leaked goroutine or descriptor.
// The figures are logged as a table for docs/reliability.md.

const soakEnv = "NETIO_SOAK"

const soakTags = 64

func TestSoak(t *testing.T) {
	d := 10 * time.Minute
	if s := os.Getenv(soakEnv); s != "" {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			t.Fatalf("%s=%q: %v", soakEnv, s, err)
		}
	}
	warm := max(d/10, 20*time.Second)
	t.Logf("soak for %v, warm-up %v, GOMAXPROCS %d", d, warm, runtime.GOMAXPROCS(0))

	ctx, stop := context.WithTimeout(context.Background(), d)
	defer stop()
	var f soakFigures
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return soakRoundTrips(gctx, &f) })
	g.Go(func() error { return soakStream(gctx, &f) })
	g.Go(func() error { return soakPubSub(gctx, t, &f) })
	samples := make(chan []soakSample, 1)
	go func() { samples <- soakSampler(ctx, t) }()
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	stop()
	s := <-samples
	f.report(t, d, warm, s)
	checkFlat(t, warm, s)
}

// soakFigures are the run's counters, for the report.
type soakFigures struct {
	roundTrips                        atomic.Uint64
	streamMsgs, streamBytes           atomic.Uint64
	published, delivered, pubDropped  atomic.Uint64
	stableReceived                    atomic.Uint64
	joined, joinedReceived            atomic.Uint64
	dropSeen, dropCounted             atomic.Uint64
	childrenKilled, childrenConnected atomic.Uint64
}

type soakSample struct {
	at         time.Duration
	rss        uint64
	heap       uint64 // HeapInuse after a GC: Go's own share of rss
	regions    uint64 // resident bytes of the registered buffers mapped now (ofi.RegionsResident)
	goSys      uint64 // what the Go runtime holds from the OS and has not released (Sys - HeapReleased)
	cHeap      uint64 // what the C allocator has handed out: libfabric's own memory (ofi.CHeapInUse)
	race       uint64 // resident bytes of the race detector's shadow and metadata (raceResident)
	threads    int
	goroutines int
	fds        int
}

// soakSampler samples until ctx ends, every 5 s.
func soakSampler(ctx context.Context, t *testing.T) []soakSample {
	start := time.Now()
	var out []soakSample
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		regions, _ := ofi.RegionsResident()
		out = append(out, soakSample{at: time.Since(start), rss: uint64(rssBytes(t)), heap: ms.HeapInuse, regions: regions, goSys: ms.Sys - ms.HeapReleased,
			cHeap: ofi.CHeapInUse(), race: raceResident(), threads: osThreads(), goroutines: runtime.NumGoroutine(), fds: openFDs(t)})
		select {
		case <-ctx.Done():
			return out
		case <-tick.C:
		}
	}
}

// atWarm is the sample taken when the warm-up ended.
func atWarm(warm time.Duration, s []soakSample) (soakSample, []soakSample) {
	for i, x := range s {
		if x.at >= warm {
			return x, s[i:]
		}
	}
	return s[len(s)-1], nil
}

// checkFlat fails when the memory the program's allocators hold, the Go
// runtime's (Sys - HeapReleased) and the C heap's (libfabric's), grew by
// more than 10% from the first quarter after the warm-up to the last
// quarter of the run, each taken as its median: the connections open at
// one sample make single samples jump either way, and a leak shows as a
// trend. Every allocation netio or libfabric makes is in one of them, or
// in the registered buffers, which the limits bound and which are counted
// apart (ofi.RegionsResident): on tcp their pages come in as they are
// first written, so the buffers of the run's long-lived connections (16
// MiB for each HighThroughput one) keep adding resident pages for
// minutes, up to their size (verbs pins them whole at once).
//
// Resident memory as a whole is not the measure under -race: the race
// detector maps shadow memory, metadata and its own allocator's regions
// beside the program's and never gives back what it learnt (its stack
// depot, the histories of goroutines; golang/go#37233). Seen with strace -k
// in a 10-minute soak: what grew outside the registered buffers was the
// shadow and metadata ranges (+3.6 MiB) and 1 MiB regions of
// __sanitizer::SizeClassAllocator32 (+5 MiB), with the Go runtime and the
// C heap flat. Resident memory is logged, its race-detector part apart.
func checkFlat(t *testing.T, warm time.Duration, s []soakSample) {
	_, after := atWarm(warm, s)
	q := len(after) / 4
	if q < 2 {
		t.Logf("too few samples after the warm-up (%d) to judge memory", len(after))
		return
	}
	quarters := func(f func(soakSample) uint64) (uint64, uint64) {
		return soakMedian(after[:q], f), soakMedian(after[len(after)-q:], f)
	}
	held := func(x soakSample) uint64 { return x.goSys + x.cHeap }
	first, last := quarters(held)
	mib := func(f func(soakSample) uint64) string {
		a, b := quarters(f)
		return fmt.Sprintf("%.1f, %.1f MiB", float64(a)/(1<<20), float64(b)/(1<<20))
	}
	t.Logf("medians of the first and the last quarter after the warm-up: held by the allocators %s (Go runtime %s, C heap %s); registered buffers resident %s; race detector %s; resident in all %s",
		mib(held), mib(func(x soakSample) uint64 { return x.goSys }), mib(func(x soakSample) uint64 { return x.cHeap }),
		mib(func(x soakSample) uint64 { return x.regions }), mib(func(x soakSample) uint64 { return x.race }), mib(func(x soakSample) uint64 { return x.rss }))
	if float64(last) > 1.10*float64(first) {
		t.Errorf("memory held by the Go runtime and the C heap grew from %.1f MiB to %.1f MiB (over 10%%)", float64(first)/(1<<20), float64(last)/(1<<20))
	}
}

func soakMedian(s []soakSample, f func(soakSample) uint64) uint64 {
	v := make([]uint64, len(s))
	for i, x := range s {
		v[i] = f(x)
	}
	slices.Sort(v)
	return v[len(v)/2]
}

func (f *soakFigures) report(t *testing.T, d, warm time.Duration, s []soakSample) {
	w, after := atWarm(warm, s)
	var peak soakSample
	for _, x := range after {
		if x.rss > peak.rss {
			peak = x
		}
	}
	last := s[len(s)-1]
	secs := d.Seconds()
	var b strings.Builder
	fmt.Fprintf(&b, "\n| soak, %v under -race | figure |\n|---|---|\n", d)
	row := func(k, format string, args ...any) { fmt.Fprintf(&b, "| %s | %s |\n", k, fmt.Sprintf(format, args...)) }
	row("LowLatency round trips, each checked", "%d (%.0f/s)", f.roundTrips.Load(), float64(f.roundTrips.Load())/secs)
	row("HighThroughput messages (64 B-200 KiB), none lost", "%d, %.1f GiB", f.streamMsgs.Load(), float64(f.streamBytes.Load())/(1<<30))
	row("published to subscribed tags", "%d", f.published.Load())
	row("delivered by the publisher (all subscribers)", "%d, %d dropped by policy", f.delivered.Load(), f.pubDropped.Load())
	row("Block subscriber for the whole run: received, gaps", "%d, 0", f.stableReceived.Load())
	row("subscribers joined and left in-process", "%d, %d messages", f.joined.Load(), f.joinedReceived.Load())
	row("dropping subscribers: messages missed, counted by Stats", "%d, %d", f.dropSeen.Load(), f.dropCounted.Load())
	row("subscriber processes killed (SIGKILL)", "%d (%d connected first)", f.childrenKilled.Load(), f.childrenConnected.Load())
	row("resident memory: after warm-up, peak, end", "%d, %d, %d MiB", w.rss>>20, peak.rss>>20, last.rss>>20)
	row("of which registered buffers: after warm-up, end", "%d, %d MiB", w.regions>>20, last.regions>>20)
	row("Go heap in use: after warm-up, end", "%d, %d MiB", w.heap>>20, last.heap>>20)
	row("held by the Go runtime (Sys - HeapReleased): after warm-up, end", "%d, %d MiB", w.goSys>>20, last.goSys>>20)
	row("C heap in use (libfabric): after warm-up, end", "%d, %d MiB", w.cHeap>>20, last.cHeap>>20)
	row("race detector's shadow and metadata: after warm-up, end", "%d, %d MiB", w.race>>20, last.race>>20)
	row("OS threads: after warm-up, end", "%d, %d", w.threads, last.threads)
	row("goroutines: after warm-up, end", "%d, %d", w.goroutines, last.goroutines)
	row("open fds: after warm-up, end", "%d, %d", w.fds, last.fds)
	for _, x := range s {
		fmt.Fprintf(&b, "\t%4.0fs rss %4d MiB (buffers %4d, Go runtime %4d, C heap %4d, race %4d MiB) heap %4d MiB threads %3d goroutines %3d fds %3d\n",
			x.at.Seconds(), x.rss>>20, x.regions>>20, x.goSys>>20, x.cHeap>>20, x.race>>20, x.heap>>20, x.threads, x.goroutines, x.fds)
	}
	t.Log(b.String())
	if path := os.Getenv("NETIO_SOAK_REPORT"); path != "" {
		os.WriteFile(path, []byte(b.String()), 0o644)
	}
}

// soakPayload fills b with bytes that tell seq: its first 8 bytes, then
// a pattern.
func soakPayload(b []byte, seq uint64) []byte {
	binary.LittleEndian.PutUint64(b, seq)
	for i := 8; i < len(b); i++ {
		b[i] = byte(seq) + byte(i)
	}
	return b
}

func checkPayload(b []byte, seq uint64) error {
	if len(b) < 8 || binary.LittleEndian.Uint64(b) != seq {
		return fmt.Errorf("message %d: wrong sequence in %d bytes", seq, len(b))
	}
	for i := 8; i < len(b); i++ {
		if b[i] != byte(seq)+byte(i) {
			return fmt.Errorf("message %d: byte %d of %d is wrong", seq, i, len(b))
		}
	}
	return nil
}

// soakPair is a connected pair in mode.
func soakPair(mode netio.Mode) (client, server *netio.Conn, err error) {
	ln, err := netio.Listen("tcp", "127.0.0.1:0", netio.WithMode(mode))
	if err != nil {
		return nil, nil, err
	}
	defer ln.Close()
	accepted := make(chan *netio.Conn, 1)
	go func() {
		c, _ := ln.AcceptConn()
		accepted <- c
	}()
	client, err = netio.Dial("tcp", ln.Addr().String(), netio.WithMode(mode))
	if err != nil {
		return nil, nil, err
	}
	if server = <-accepted; server == nil {
		client.Close()
		return nil, nil, errors.New("accept failed")
	}
	return client, server, nil
}

// soakRoundTrips: small LowLatency requests echoed back, every one
// checked, until ctx ends.
func soakRoundTrips(ctx context.Context, f *soakFigures) error {
	c, s, err := soakPair(netio.LowLatency)
	if err != nil {
		return err
	}
	defer c.Close()
	echoed := make(chan error, 1)
	go func() {
		defer s.Close()
		buf := make([]byte, 4096)
		for {
			n, err := s.ReadMessage(buf)
			if err == io.EOF {
				echoed <- nil
				return
			}
			if err == nil {
				_, err = s.Write(buf[:n])
			}
			if err != nil {
				echoed <- fmt.Errorf("echo: %w", err)
				return
			}
		}
	}()
	out, in := make([]byte, 4096), make([]byte, 4096)
	for seq := uint64(0); ctx.Err() == nil; seq++ {
		msg := soakPayload(out[:8+seq%1000], seq)
		if _, err := c.Write(msg); err != nil {
			return fmt.Errorf("round trip write: %w", err)
		}
		n, err := c.ReadMessage(in)
		if err != nil {
			return fmt.Errorf("round trip read: %w", err)
		}
		if n != len(msg) {
			return fmt.Errorf("round trip %d: %d bytes back, want %d", seq, n, len(msg))
		}
		if err := checkPayload(in[:n], seq); err != nil {
			return fmt.Errorf("round trip: %w", err)
		}
		f.roundTrips.Add(1)
	}
	if err := c.CloseWrite(); err != nil {
		return err
	}
	return <-echoed
}

var soakSizes = [...]int{64, 1000, 16 << 10, 64, 200 << 10, 4096}

// soakStream: a HighThroughput stream, read with NextMessage, every
// message checked and counted.
func soakStream(ctx context.Context, f *soakFigures) error {
	c, s, err := soakPair(netio.HighThroughput)
	if err != nil {
		return err
	}
	defer s.Close()
	sent := make(chan uint64, 1)
	go func() {
		defer c.Close()
		buf := make([]byte, 200<<10)
		seq := uint64(0)
		for ; ctx.Err() == nil; seq++ {
			if _, err := c.Write(soakPayload(buf[:soakSizes[seq%uint64(len(soakSizes))]], seq)); err != nil {
				break
			}
		}
		c.CloseWrite()
		sent <- seq
	}()
	var seq uint64
	for ; ; seq++ {
		m, err := s.NextMessage()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("stream read: %w", err)
		}
		err = checkPayload(m.Bytes(), seq)
		if err == nil && m.Len() != soakSizes[seq%uint64(len(soakSizes))] {
			err = fmt.Errorf("stream message %d: %d bytes", seq, m.Len())
		}
		f.streamBytes.Add(uint64(m.Len()))
		m.Release()
		if err != nil {
			return err
		}
		f.streamMsgs.Add(1)
	}
	if n := <-sent; n != seq {
		return fmt.Errorf("stream: %d messages written, %d read", n, seq)
	}
	return nil
}

// soakPubSub runs the publisher and its subscribers until ctx ends.
func soakPubSub(ctx context.Context, t *testing.T, f *soakFigures) error {
	p, err := netio.ListenPublisher("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer p.Close()
	addr := p.Addr().String()
	all := make([]uint64, soakTags)
	for i := range all {
		all[i] = uint64(i)
	}
	subCtx, cancel := context.WithTimeout(ctx, hangTimeout)
	stable, err := netio.Subscribe(subCtx, "tcp", addr, all, netio.WithMode(netio.HighThroughput))
	cancel()
	if err != nil {
		return fmt.Errorf("stable subscriber: %w", err)
	}
	defer stable.Close()

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return soakPublish(gctx, p, f) })
	g.Go(func() error { return soakStable(gctx, stable, f) })
	g.Go(func() error { return soakChurn(gctx, addr, f) })
	g.Go(func() error { return soakKilled(gctx, t, addr, f) })
	err = g.Wait()
	st := p.Stats()
	f.published.Store(st.Published)
	f.delivered.Store(st.Delivered)
	f.pubDropped.Store(st.Dropped)
	return err
}

// soakPublish publishes to every tag in turn; each message's bytes carry
// its tag and the publisher's count of it.
func soakPublish(ctx context.Context, p *netio.Publisher, f *soakFigures) error {
	buf := make([]byte, 256)
	for i := uint64(0); ; i++ {
		tag := i % soakTags
		pctx, cancel := context.WithTimeout(ctx, hangTimeout)
		err := p.Publish(pctx, tag, psMessage(buf[:16+i%240], tag, i))
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return fmt.Errorf("publish: %w", err)
		}
		if i%256 == 0 {
			time.Sleep(200 * time.Microsecond) // a steady stream: the churn must keep up under -race
		}
	}
}

// seqCheck follows each tag's sequence numbers of one subscription.
type seqCheck struct {
	next   map[uint64]uint64
	missed uint64 // messages the jumps skipped
}

// take checks m and reports an error for a message that is not its tag's
// or that goes back.
func (c *seqCheck) take(m netio.Message) error {
	b := m.Bytes()
	if len(b) < 16 || binary.LittleEndian.Uint64(b) != m.Tag() {
		return fmt.Errorf("tag %d seq %d: bytes of another tag", m.Tag(), m.Seq())
	}
	if c.next == nil {
		c.next = map[uint64]uint64{}
	}
	if want, ok := c.next[m.Tag()]; ok {
		if m.Seq() < want {
			return fmt.Errorf("tag %d: seq %d after %d", m.Tag(), m.Seq(), want-1)
		}
		c.missed += m.Seq() - want
	}
	c.next[m.Tag()] = m.Seq() + 1
	return nil
}

func soakStable(ctx context.Context, s *netio.Subscription, f *soakFigures) error {
	var c seqCheck
	for {
		select {
		case <-ctx.Done():
			if st := s.Stats(); c.missed != 0 || st.Gaps != 0 || st.Dropped != 0 {
				return fmt.Errorf("Block subscriber lost messages: %d missed, stats %+v", c.missed, st)
			}
			return nil
		case m, ok := <-s.C:
			if !ok {
				return fmt.Errorf("stable subscription ended: %w", s.Err())
			}
			err := c.take(m)
			m.Release()
			if err != nil {
				return fmt.Errorf("stable subscriber: %w", err)
			}
			if c.missed != 0 {
				return fmt.Errorf("Block subscriber lost %d messages", c.missed)
			}
			f.stableReceived.Add(1)
		}
	}
}

// soakChurn keeps subscribers joining and leaving: a few tags each, every
// policy, each mode, some reading slowly.
func soakChurn(ctx context.Context, addr string, f *soakFigures) error {
	rng := rand.New(rand.NewPCG(1, 2))
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	defer wg.Wait()
	for i := 0; ctx.Err() == nil; i++ {
		tags := make([]uint64, 1+rng.IntN(8))
		for j := range tags {
			tags[j] = uint64(rng.IntN(soakTags))
		}
		policy := netio.Policy(i % 3)
		mode := netio.Mode(i / 3 % 2)
		life := time.Duration(500+rng.IntN(2500)) * time.Millisecond
		slow := policy != netio.Block && i%2 == 0
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := soakJoin(ctx, addr, tags, policy, mode, life, slow, f); err != nil {
				errs <- fmt.Errorf("subscriber %d (%v, %v): %w", i, policy, mode, err)
			}
		}()
		select {
		case err := <-errs:
			return err
		case <-ctx.Done():
		case <-time.After(300 * time.Millisecond):
		}
	}
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

// soakJoin is one subscriber that joins, reads for life and leaves.
func soakJoin(ctx context.Context, addr string, tags []uint64, policy netio.Policy, mode netio.Mode, life time.Duration, slow bool, f *soakFigures) error {
	sctx, cancel := context.WithTimeout(ctx, hangTimeout)
	s, err := netio.Subscribe(sctx, "tcp", addr, tags, netio.WithMode(mode), netio.WithPolicy(policy), netio.WithSubscriptionBuffer(64))
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	f.joined.Add(1)
	var c seqCheck
	end := time.After(life)
	n := uint64(0)
read:
	for {
		select {
		case <-ctx.Done():
			break read
		case <-end:
			break read
		case m, ok := <-s.C:
			if !ok {
				s.Close()
				return fmt.Errorf("ended: %w", s.Err())
			}
			err := c.take(m)
			m.Release()
			if err != nil {
				s.Close()
				return err
			}
			n++
			if slow {
				time.Sleep(time.Millisecond) // a slow reader
			}
		}
	}
	st := s.Stats()
	s.Close()
	f.joinedReceived.Add(n)
	if policy == netio.Block {
		if c.missed != 0 || st.Gaps != 0 {
			return fmt.Errorf("Block subscriber lost %d messages (stats %+v)", c.missed, st)
		}
		return nil
	}
	// Every message this subscriber saw missing was counted: dropped
	// from its own buffer, or by the publisher (a gap).
	f.dropSeen.Add(c.missed)
	f.dropCounted.Add(st.Dropped + st.Missed)
	if c.missed > st.Dropped+st.Missed {
		return fmt.Errorf("%d messages missed, only %d counted (stats %+v)", c.missed, st.Dropped+st.Missed, st)
	}
	return nil
}

// soakKilled starts subscriber processes and kills them with SIGKILL
// while they read, one at a time.
func soakKilled(ctx context.Context, t *testing.T, addr string, f *soakFigures) error {
	for i := 0; ctx.Err() == nil; i++ {
		mode := "ht"
		if i%2 == 1 {
			mode = "ll"
		}
		c := startPubSubChild(t, psRoleEnv+"=sub", psAddrEnv+"="+addr, fmt.Sprintf("%s=%d", psTagsEnv, soakTags),
			psExpectEnv+"=1000000000000", psModeEnv+"="+mode)
		ready := false
		deadline := time.After(time.Duration(1000+i%4*500) * time.Millisecond)
	watch:
		for {
			select {
			case l, ok := <-c.lines:
				if !ok {
					break watch
				}
				ready = ready || l == "READY"
			case <-deadline:
				break watch
			case <-ctx.Done():
				break watch
			}
		}
		c.cmd.Process.Kill()
		c.cmd.Wait()
		for range c.lines {
		}
		f.childrenKilled.Add(1)
		if ready {
			f.childrenConnected.Add(1)
		}
	}
	return nil
}

// soakRace is set under -race (soak_race_test.go).
var soakRace bool

// raceResident is the resident memory of the race detector's shadow and
// metadata: the mappings in the ranges its runtime reserves for Go on
// linux/amd64, 0x2000_0000_0000 to 0x4000_0000_0000 (compiler-rt's
// tsan_platform.h: shadow from 0x2000..., sync metadata from 0x3000...).
// Its own allocator's regions lie elsewhere and are not told apart.
func raceResident() uint64 {
	if !soakRace || runtime.GOARCH != "amd64" {
		return 0
	}
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return 0
	}
	var total, start uint64
	for _, line := range strings.Split(string(b), "\n") {
		if lo, _, ok := strings.Cut(line, "-"); ok && !strings.Contains(lo, " ") {
			start, _ = strconv.ParseUint(lo, 16, 64)
			continue
		}
		if v, ok := strings.CutPrefix(line, "Rss:"); ok && start >= 0x2000_0000_0000 && start < 0x4000_0000_0000 {
			kb, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			total += kb << 10
		}
	}
	return total
}

// osThreads is the process's thread count.
func osThreads() int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}
