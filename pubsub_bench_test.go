package netio_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/netio-go/netio"
)

// BenchmarkSlowSubscriberNeighbour measures what a Block subscriber that stops
// reading costs the subscriber beside it, in one process: a publisher
// publishes 64 B messages to one tag as fast as it can (HighThroughput),
// a reader takes them; after a second alone, a second subscription of the
// tag (its own connection) joins and never reads. The publisher's
// slow-subscriber limit is 1 s. Reported, from the last run:
//
//	solo-msg/s       the reader's rate alone
//	stalled-ms       from the stuck one joining until the reader fell below
//	                 half its solo rate (its window filling)
//	recovery-ms      from then until the reader was back at half its solo
//	                 rate or more for 100 ms: the limit, plus what the cut
//	                 and the publisher's catching up take
//	after-msg/s      the reader's rate in the second after it recovered
//
// Run it alone: go test -run '^$' -bench SlowSubscriberNeighbour -benchtime 1x.
func BenchmarkSlowSubscriberNeighbour(b *testing.B) {
	const limit = time.Second
	const sample = 100 * time.Millisecond
	for i := 0; i < b.N; i++ {
		p, err := netio.ListenPublisher("tcp", "0.0.0.0:0", netio.WithSlowSubscriberLimit(limit))
		if err != nil {
			b.Fatal(err)
		}
		port := p.Addr().(*netio.Addr).AddrPort.Port()
		reader := benchSubscribe(b, fmt.Sprintf("127.0.0.1:%d", port), []uint64{1}, netio.WithMode(netio.HighThroughput))
		var got atomic.Int64
		go func() {
			for m := range reader.C {
				m.Release()
				got.Add(1)
			}
		}()
		stop := make(chan struct{})
		published := make(chan struct{})
		go func() {
			defer close(published)
			msg := make([]byte, 64)
			for {
				select {
				case <-stop:
					return
				default:
				}
				p.Publish(context.Background(), 1, msg)
			}
		}()
		rate := func(d time.Duration) float64 {
			n := got.Load()
			time.Sleep(d) // the interval the rate is measured over
			return float64(got.Load()-n) / d.Seconds()
		}
		rate(200 * time.Millisecond) // warm up
		solo := rate(time.Second)
		joined := time.Now()
		stuck := benchSubscribe(b, fmt.Sprintf("127.0.0.2:%d", port), []uint64{1}, netio.WithMode(netio.HighThroughput))
		_ = stuck // never read
		var stalledAt, recoveredAt time.Time
		for time.Since(joined) < limit+10*time.Second {
			r := rate(sample)
			now := time.Now()
			if stalledAt.IsZero() {
				if r < solo/2 {
					stalledAt = now.Add(-sample)
				}
				continue
			}
			if r >= solo/2 {
				if p.Stats().CutSlow == 0 {
					// A dip of a loaded machine, not the stuck one's window:
					// the stall is yet to come.
					stalledAt = time.Time{}
					continue
				}
				recoveredAt = now.Add(-sample)
				break
			}
		}
		after := rate(time.Second)
		close(stop)
		p.Close()
		<-published
		if stalledAt.IsZero() || recoveredAt.IsZero() {
			b.Fatalf("the reader did not stall and recover (solo %.0f msg/s; stalled %v, recovered %v)", solo, !stalledAt.IsZero(), !recoveredAt.IsZero())
		}
		if st := p.Stats(); st.CutSlow != 1 {
			b.Fatalf("publisher stats %+v, want the stuck subscriber cut loose", st)
		}
		b.ReportMetric(solo, "solo-msg/s")
		b.ReportMetric(float64(stalledAt.Sub(joined).Milliseconds()), "stalled-ms")
		b.ReportMetric(float64(recoveredAt.Sub(stalledAt).Milliseconds()), "recovery-ms")
		b.ReportMetric(after, "after-msg/s")
	}
}
