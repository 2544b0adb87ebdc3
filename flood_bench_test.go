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
// BenchmarkRoundTripHeaderFlood makes before the other takes over.
const floodTurn = 256

// BenchmarkRoundTripHeaderFlood measures a connection's 64-byte round
// trip quiet and while 100 plain TCP clients flood the listener with
// connection requests that stop after their 32-byte header: each waits
// until the listener resets it (its ConnectTimeout, 100 ms here) and
// connects again, so that requests keep arriving for as long as they run.
// The phases take turns within one run, so that both see the same load
// from the rest of a shared machine; it reports each phase's median
// (quiet-µs, flood-µs), their ratio (flood/quiet) and the requests the
// flood made per second.
func BenchmarkRoundTripHeaderFlood(b *testing.B) {
	const clients = 100
	ln, err := netio.Listen("tcp", "127.0.0.1:0", netio.WithConnectTimeout(100*time.Millisecond))
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan *netio.Conn, 1)
	go func() {
		c, _ := ln.AcceptConn()
		accepted <- c
	}()
	c, err := netio.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	s := <-accepted
	if s == nil {
		b.Fatal("no connection accepted")
	}
	defer s.Close()
	go echoMessages(s)

	var on atomic.Bool
	var requests atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	header := tcpCMHeader(tcpCMConnReq, defaultHello(netio.LowLatency))[:32]
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 64)
			for {
				for !on.Load() {
					select {
					case <-stop:
						return
					case <-time.After(time.Millisecond):
					}
				}
				h, err := net.Dial("tcp", ln.Addr().String())
				if err != nil {
					continue
				}
				requests.Add(1)
				h.Write(header)
				h.SetReadDeadline(time.Now().Add(2 * time.Second))
				h.Read(buf) // until the listener resets it
				h.Close()
				select {
				case <-stop:
					return
				default:
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
	var quiet, flood []time.Duration
	var floodTime time.Duration
	var floodRequests int64
	b.ResetTimer()
	for i, turn := 0, 0; i < b.N; turn++ {
		flooding := turn%2 == 1
		on.Store(flooding)
		t0, r0 := time.Now(), requests.Load()
		if flooding {
			// Let the flood reach its pace before measuring.
			for requests.Load()-r0 < clients && time.Since(t0) < time.Second {
				rtt()
			}
			t0, r0 = time.Now(), requests.Load()
		}
		for j := 0; j < floodTurn && i < b.N; j, i = j+1, i+1 {
			if d := rtt(); flooding {
				flood = append(flood, d)
			} else {
				quiet = append(quiet, d)
			}
		}
		if flooding {
			floodTime += time.Since(t0)
			floodRequests += requests.Load() - r0
		}
	}
	b.StopTimer()
	on.Store(false)
	if len(quiet) == 0 || len(flood) == 0 {
		return // b.N too small for both phases
	}
	mq, mf := median(quiet), median(flood)
	b.ReportMetric(float64(mq.Nanoseconds())/1e3, "quiet-µs")
	b.ReportMetric(float64(mf.Nanoseconds())/1e3, "flood-µs")
	b.ReportMetric(float64(mf)/float64(mq), "flood/quiet")
	b.ReportMetric(float64(floodRequests)/floodTime.Seconds(), "requests/s")
}

func median(d []time.Duration) time.Duration {
	slices.Sort(d)
	return d[len(d)/2]
}
