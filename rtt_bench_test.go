package netio_test

import (
	"io"
	"testing"
	"time"
)

// rttTurn is how many round trips one connection of
// BenchmarkRoundTripInterleaved makes before the next takes over: short
// enough that all see the same load from the rest of a shared machine,
// long enough that the reactor's spin (100 µs) is a small part of a turn.
const rttTurn = 64

// BenchmarkRoundTripInterleaved is BenchmarkRoundTrip64's netio, its
// OnMessage server and net.TCPConn taking turns within one run, so that
// their ratios (reported as netio/tcp, onmessage/tcp) hold while the load
// of a shared 2-core machine swings; separate runs of BenchmarkRoundTrip64
// disagree by 2x there. ns/op is the mean over all three.
func BenchmarkRoundTripInterleaved(b *testing.B) {
	tc, ts := tcpPair(b)
	go func() {
		buf := make([]byte, 64)
		for {
			if _, err := io.ReadFull(ts, buf); err != nil {
				return
			}
			if _, err := ts.Write(buf); err != nil {
				return
			}
		}
	}()
	nc, ns := pair(b)
	go echoMessages(ns)

	oc := onMessageEcho(b)

	type conn struct {
		name  string
		w     io.Writer
		read  func([]byte) (int, error)
		total time.Duration
		n     int
	}
	conns := []*conn{
		{name: "tcp", w: tc, read: func(p []byte) (int, error) { return io.ReadFull(tc, p) }},
		{name: "netio", w: nc, read: nc.ReadMessage},
		{name: "onmessage", w: oc, read: oc.ReadMessage},
	}
	msg := make([]byte, 64)
	buf := make([]byte, 64)
	for _, c := range conns {
		for i := 0; i < 100; i++ { // warm up
			c.w.Write(msg)
			c.read(buf)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i, turn := 0, 0; i < b.N; turn++ {
		c := conns[turn%len(conns)]
		start := time.Now()
		k := 0
		for ; k < rttTurn && i < b.N; k++ {
			if _, err := c.w.Write(msg); err != nil {
				b.Fatal(c.name, err)
			}
			if _, err := c.read(buf); err != nil {
				b.Fatal(c.name, err)
			}
			i++
		}
		c.total += time.Since(start)
		c.n += k
	}
	b.StopTimer()
	base := float64(conns[0].total) / float64(max(conns[0].n, 1))
	for _, c := range conns {
		if c.n == 0 {
			continue
		}
		mean := float64(c.total) / float64(c.n)
		b.ReportMetric(mean/1e3, c.name+"-µs/rt")
		if c != conns[0] {
			b.ReportMetric(mean/base, c.name+"/tcp")
		}
	}
}
