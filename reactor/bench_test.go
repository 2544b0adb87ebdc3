//go:build linux

package reactor

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkSubmit measures burst throughput: one producer submits a
// preallocated pointer task b.N times; the time includes running them all.
func BenchmarkSubmit(b *testing.B) {
	for _, bc := range []struct {
		name string
		spin time.Duration
	}{{"spin", 0}, {"nospin", -1}} {
		b.Run(bc.name, func(b *testing.B) {
			r := newReactor(b, &Config{Spin: bc.spin})
			task := &ptrTask{}
			r.Call(func() {})
			before := r.Stats()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				r.Submit(task)
			}
			r.Call(func() {})
			b.StopTimer()
			st := r.Stats()
			b.ReportMetric(float64(st.DoorbellWrites-before.DoorbellWrites)/float64(b.N), "doorbells/op")
		})
	}
}

// BenchmarkSubmitParallel is Submit from GOMAXPROCS producers at once.
func BenchmarkSubmitParallel(b *testing.B) {
	r := newReactor(b, nil)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		task := &ptrTask{}
		for pb.Next() {
			r.Submit(task)
		}
	})
	r.Call(func() {})
}

// BenchmarkCallRoundTrip measures one Call from another goroutine: hand-over
// through the ring, run, and wake of the caller. With spinning the reactor is
// awake when each Call arrives; without, every Call pays a doorbell and a
// thread wake-up.
func BenchmarkCallRoundTrip(b *testing.B) {
	for _, bc := range []struct {
		name string
		spin time.Duration
	}{{"spin", 0}, {"nospin", -1}} {
		b.Run(bc.name, func(b *testing.B) {
			r := newReactor(b, &Config{Spin: bc.spin})
			n := 0
			f := func() { n++ }
			r.Call(f)
			before := r.Stats()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				r.Call(f)
			}
			b.StopTimer()
			st := r.Stats()
			b.ReportMetric(float64(st.Wakeups-before.Wakeups)/float64(b.N), "wakeups/op")
		})
	}
}

// BenchmarkSignalFire measures Fire and the callback it causes (one
// iteration of the loop per Fire, since the eventfd is a semaphore).
func BenchmarkSignalFire(b *testing.B) {
	r := newReactor(b, nil)
	var n atomic.Int64
	s, err := r.NewSignal(func() { n.Add(1) })
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		s.Fire()
	}
	for n.Load() != int64(b.N) {
		runtime.Gosched()
	}
	b.StopTimer()
	s.Close()
}
