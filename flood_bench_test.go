package netio_test

import (
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/netio-go/netio"
)

// floodTurn is how many round trips one phase of
// BenchmarkRoundTripHeaderFlood makes before the next takes over.
const floodTurn = 256

// Phases of BenchmarkRoundTripHeaderFlood.
const (
	phaseQuiet = iota // no other client
	phaseHeld         // 100 clients have sent a request's header and wait
	phaseChurn        // 100 clients send a header, wait 100 ms, close and start again
	phaseFlood        // the same, waiting 10 ms
	phases
)

// BenchmarkRoundTripHeaderFlood measures a connection's 64-byte round
// trip quiet; while 100 plain TCP clients hold connection requests that
// stopped after their 32-byte header (the listener has taken them all,
// PendingRequests); and while 100 such clients close theirs after 100 ms
// (churn) or 10 ms (flood) and start again, so that requests keep coming,
// about 1,000 and 7,000 a second. The phases take turns within one run,
// so that all see the same load from the rest of a shared machine; it
// reports each phase's median round trip and its ratio to quiet, and the
// requests per second of the two churning phases. The clients run in the
// benchmark's process: on a small machine their own cost, not only the
// listener's, is in the figures.
func BenchmarkRoundTripHeaderFlood(b *testing.B) {
	const clients = 100
	ln, err := netio.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	c, s := dialAccept(b, ln)
	go echoMessages(s)

	var requests, ready atomic.Int64
	var mu sync.Mutex
	phase, changed := int32(phaseQuiet), make(chan struct{})
	setPhase := func(p int32) {
		mu.Lock()
		phase = p
		close(changed)
		changed = make(chan struct{})
		mu.Unlock()
	}
	current := func() (int32, <-chan struct{}) {
		mu.Lock()
		defer mu.Unlock()
		return phase, changed
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	header := tcpCMHeader(tcpCMConnReq, defaultHello(netio.LowLatency))[:32]
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var h net.Conn
			var since time.Time
			drop := func() {
				if h != nil {
					h.Close()
					h = nil
					ready.Add(-1)
				}
			}
			defer drop()
			for {
				p, next := current()
				if p == phaseQuiet {
					drop()
					select {
					case <-next:
						continue
					case <-stop:
						return
					}
				}
				if h == nil {
					var err error
					if h, err = net.Dial("tcp", ln.Addr().String()); err != nil {
						h = nil
						continue
					}
					h.Write(header)
					requests.Add(1)
					ready.Add(1)
					// Spread the clients' turns.
					since = time.Now().Add(-time.Duration(i) * 100 * time.Microsecond)
				}
				var expire <-chan time.Time
				switch p {
				case phaseChurn:
					expire = time.After(time.Until(since.Add(100 * time.Millisecond)))
				case phaseFlood:
					expire = time.After(time.Until(since.Add(10 * time.Millisecond)))
				}
				select {
				case <-next:
				case <-expire:
					drop()
				case <-stop:
					return
				}
			}
		}()
	}
	defer func() {
		close(stop)
		wg.Wait()
	}()

	msg, buf := make([]byte, 64), make([]byte, 64)
	rtt := func() time.Duration {
		t0 := time.Now()
		if _, err := c.Write(msg); err != nil {
			b.Fatal(err)
		}
		if _, err := c.ReadMessage(buf); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	for range 200 { // warm up
		rtt()
	}
	var times [phases][]time.Duration
	var churnTime [phases]time.Duration
	var churnRequests [phases]int64
	b.ResetTimer()
	for i, turn := 0, 0; i < b.N; turn++ {
		p := int32(turn % phases)
		setPhase(p)
		// Let the phase set in before measuring: every client connected
		// (and, held, taken by the listener), or gone.
		last := ln.Stats()
		for t0, same := time.Now(), 0; time.Since(t0) < 2*time.Second; rtt() {
			// Quiet once the clients are gone and the listener has had
			// nothing to do for a while: after a flood it still resets
			// what the clients left in its backlog.
			st := ln.Stats()
			if st.Incomplete == last.Incomplete && st.PendingRequests == 0 {
				same++
			} else {
				same = 0
			}
			last = st
			n := ready.Load()
			if p == phaseQuiet && n == 0 && same >= 50 || p >= phaseChurn && n > clients/2 ||
				p == phaseHeld && n == clients && st.PendingRequests >= clients {
				break
			}
		}
		t0, r0 := time.Now(), requests.Load()
		for j := 0; j < floodTurn && i < b.N; j, i = j+1, i+1 {
			times[p] = append(times[p], rtt())
		}
		churnTime[p] += time.Since(t0)
		churnRequests[p] += requests.Load() - r0
	}
	b.StopTimer()
	setPhase(phaseQuiet)
	for _, t := range times {
		if len(t) == 0 {
			return // b.N too small for every phase
		}
	}
	q := median(times[phaseQuiet])
	b.ReportMetric(float64(q.Nanoseconds())/1e3, "quiet-µs")
	for p, name := range []string{phaseHeld: "held", phaseChurn: "churn", phaseFlood: "flood"} {
		if name == "" {
			continue
		}
		m := median(times[p])
		b.ReportMetric(float64(m.Nanoseconds())/1e3, name+"-µs")
		b.ReportMetric(float64(m)/float64(q), name+"/quiet")
		if p >= phaseChurn {
			b.ReportMetric(float64(churnRequests[p])/churnTime[p].Seconds(), name+"-req/s")
		}
	}
}

func median(d []time.Duration) time.Duration {
	slices.Sort(d)
	return d[len(d)/2]
}
