//go:build linux

package reactor

import (
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// blindSource is work that arrives without a descriptor or a doorbell,
// as a shm provider's completions do: another goroutine sets posted, and
// only Poll sees it.
type blindSource struct {
	posted atomic.Uint64
	seen   uint64 // reactor thread
	polls  atomic.Uint64
	got    chan uint64
}

func newBlindSource() *blindSource { return &blindSource{got: make(chan uint64, 16)} }

func (s *blindSource) Poll() bool {
	s.polls.Add(1)
	if v := s.posted.Load(); v != s.seen {
		s.seen = v
		s.got <- v
		return true
	}
	return false
}

func (s *blindSource) TryWait() bool { return true }
func (s *blindSource) Blind() bool   { return true }

// asleep waits until the loop has gone to sleep at least once more than
// before.
func asleep(t *testing.T, r *Reactor, before uint64) {
	t.Helper()
	eventually(t, hangTimeout, "the loop to sleep", func() bool { return r.Stats().Sleeps > before })
}

// Work from a blind source reaches the loop while it sleeps, with no
// descriptor made ready: the loop sleeps on its timer, not for ever.
func TestBlindPollerWakesWithoutDescriptor(t *testing.T) {
	r := newReactor(t, &Config{Spin: -1})
	src := newBlindSource()
	if err := r.AddPoller(src); err != nil {
		t.Fatal(err)
	}
	for i := uint64(1); i <= 3; i++ {
		asleep(t, r, r.Stats().Sleeps)
		src.posted.Store(i)
		select {
		case v := <-src.got:
			if v != i {
				t.Fatalf("poll saw %d, want %d", v, i)
			}
		case <-time.After(hangTimeout):
			t.Fatalf("work %d posted while the loop slept was not seen within %v", i, hangTimeout)
		}
	}
}

// An idle blind source makes the loop's sleeps grow from MinIdlePoll to
// IdlePoll; work brings them back to the shortest.
func TestBlindSleepBacksOff(t *testing.T) {
	const limit = 4 * time.Millisecond
	r := newReactor(t, &Config{Spin: -1, IdlePoll: limit})
	src := newBlindSource()
	if err := r.AddPoller(src); err != nil {
		t.Fatal(err)
	}
	// Read without a Call: a Call is work, and would reset the sleep.
	next := func() time.Duration { return time.Duration(r.blind.next.Load()) }
	eventually(t, hangTimeout, "the sleep to reach IdlePoll", func() bool { return next() == limit })
	resets := r.blind.resets.Load()
	src.posted.Store(1)
	<-src.got
	eventually(t, hangTimeout, "work to reset the sleep", func() bool { return r.blind.resets.Load() > resets })
}

// A reactor whose pollers all have descriptors makes no timer and sleeps
// until one is ready; a blind poller that is not blind now does not arm it.
func TestSeeingPollersMakeNoTimer(t *testing.T) {
	r := newReactor(t, &Config{Spin: -1})
	if err := r.AddPoller(&countingPoller{}); err != nil {
		t.Fatal(err)
	}
	var fd int
	if err := r.Call(func() { fd = r.blind.fd }); err != nil {
		t.Fatal(err)
	}
	if fd != -1 {
		t.Errorf("a reactor with no BlindPoller made a timer (fd %d)", fd)
	}
}

type countingPoller struct{ n atomic.Uint64 }

func (p *countingPoller) Poll() bool    { p.n.Add(1); return false }
func (p *countingPoller) TryWait() bool { return true }

func TestNegativeIdlePoll(t *testing.T) {
	if r, err := New(&Config{IdlePoll: -time.Millisecond}); err == nil {
		r.Close()
		t.Fatal("New accepted a negative IdlePoll")
	}
}

// BenchmarkBlindIdle reports what an idle blind source costs: the CPU of
// the process per second idle, and the loop's wake-ups per second, at the
// default IdlePoll, beside a reactor with a poller that is not blind. One
// op is 10 ms idle.
func BenchmarkBlindIdle(b *testing.B) {
	b.Run("seeing", func(b *testing.B) { idleCost(b, &countingPoller{}) })
	b.Run("blind", func(b *testing.B) { idleCost(b, newBlindSource()) })
}

func idleCost(b *testing.B, p Poller) {
	r := newReactor(b, &Config{})
	if err := r.AddPoller(p); err != nil {
		b.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // past the spin and the back-off
	before, cpu := r.Stats().Wakeups, processCPU()
	start := time.Now()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	b.StopTimer()
	secs := time.Since(start).Seconds()
	b.ReportMetric(float64(processCPU()-cpu)/1e3/secs, "cpu-µs/s")
	b.ReportMetric(float64(r.Stats().Wakeups-before)/secs, "wakeups/s")
}

// BenchmarkBlindFirstEvent reports how long the first event of an idle
// blind source waits for the loop, at the default IdlePoll.
func BenchmarkBlindFirstEvent(b *testing.B) {
	r := newReactor(b, &Config{})
	src := newBlindSource()
	if err := r.AddPoller(src); err != nil {
		b.Fatal(err)
	}
	var waited time.Duration
	for i := 0; i < b.N; i++ {
		time.Sleep(10 * time.Millisecond) // idle, past the back-off
		t0 := time.Now()
		src.posted.Add(1)
		<-src.got
		waited += time.Since(t0)
	}
	b.ReportMetric(float64(waited.Microseconds())/float64(b.N), "µs/event")
}

// processCPU is the process's user and system CPU time in nanoseconds.
func processCPU() int64 {
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}
