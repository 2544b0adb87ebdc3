package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"
)

// Result is what the timing side of one run reports to the parent, as one
// JSON line on its standard output.
type Result struct {
	Size     int     `json:"size"`     // payload bytes per message
	Messages int64   `json:"messages"` // messages received (or round trips) in the measured window
	Seconds  float64 `json:"seconds"`  // length of the measured window, at the timing side
	// Round trips only: per-iteration latency of the measured window.
	Samples  int   `json:"samples,omitempty"`
	MedianNs int64 `json:"median_ns,omitempty"`
	P99Ns    int64 `json:"p99_ns,omitempty"`
	// Pages is the number of pages (libfabric messages carrying data)
	// the receiver took in the measured window, where it knows: netio HT.
	Pages int64 `json:"pages,omitempty"`
	// SubRates are, for publish/subscribe, each subscriber's messages/s;
	// Messages and Seconds are then their sums.
	SubRates []float64 `json:"sub_rates,omitempty"`
}

// PerPage is messages per page, 0 when unknown.
func (r Result) PerPage() float64 {
	if r.Pages <= 0 {
		return 0
	}
	return float64(r.Messages) / float64(r.Pages)
}

// MsgRate is messages (or round trips) per second; for publish/subscribe,
// the mean of the subscribers' rates: messages/s per subscriber.
func (r Result) MsgRate() float64 {
	if len(r.SubRates) > 0 {
		sum := 0.0
		for _, v := range r.SubRates {
			sum += v
		}
		return sum / float64(len(r.SubRates))
	}
	return float64(r.Messages) / r.Seconds
}

// Gbps is payload Gbit/s.
func (r Result) Gbps() float64 { return r.MsgRate() * float64(r.Size) * 8 / 1e9 }

// meter splits a run into a warm-up that is not counted and a measured
// window of fixed length, both started by the first message. A timer
// goroutine flips the phase; the receiving loop looks at it after every
// message (one atomic load) and, when it changed, takes the time and the
// count there, so the window is exact at the receiver even when a message
// takes long to come.
type meter struct {
	warmup, measure time.Duration

	phase   atomic.Int32 // 0 warming up, 1 measuring, 2 over; written by the timer
	started bool
	local   int32 // the phase the loop has acted on
	t0, t1  time.Time
	c0, c1  int64
	// sample, when set, is read with the time at both ends of the window
	// (netio HT: pages received so far).
	sample func() int64
	s0, s1 int64
}

func newMeter(warmup, measure time.Duration) *meter {
	return &meter{warmup: warmup, measure: measure}
}

// tick is called after each message (or iteration) with the running count;
// it reports whether the measured window is over.
func (m *meter) tick(count int64) bool {
	if !m.started {
		m.started = true
		go func() {
			time.Sleep(m.warmup)
			m.phase.Store(1)
			time.Sleep(m.measure)
			m.phase.Store(2)
		}()
	}
	p := m.phase.Load()
	if p == m.local {
		return false
	}
	now := time.Now()
	if m.local == 0 {
		m.t0, m.c0, m.local = now, count, 1
		if m.sample != nil {
			m.s0 = m.sample()
		}
	}
	if p == 2 {
		m.t1, m.c1, m.local = now, count, 2
		if m.sample != nil {
			m.s1 = m.sample()
		}
		return true
	}
	return false
}

// measuring reports whether the loop is inside the measured window.
func (m *meter) measuring() bool { return m.local == 1 }

func (m *meter) result(size int) (*Result, error) {
	if m.c1 <= m.c0 || !m.t1.After(m.t0) {
		return nil, errors.New("nothing arrived during the measured window")
	}
	return &Result{Size: size, Messages: m.c1 - m.c0, Seconds: m.t1.Sub(m.t0).Seconds(), Pages: m.s1 - m.s0}, nil
}

// counter checks and counts the messages of a one-way stream. Every message
// starts with its sequence number (8 bytes, little endian), so a lost,
// duplicated or reordered message ends the run with an error: this is how
// the lossless modes are held to it.
type counter struct {
	m    *meter
	size int
	seq  uint64
}

func newCounter(a *childArgs) *counter {
	return &counter{m: newMeter(a.Warmup, a.Measure), size: a.Size}
}

// got checks one message and reports whether the measurement is over.
func (c *counter) got(msg []byte) (bool, error) {
	if len(msg) != c.size {
		return false, fmt.Errorf("message %d has %d bytes, want %d", c.seq, len(msg), c.size)
	}
	if s := binary.LittleEndian.Uint64(msg); s != c.seq {
		return false, fmt.Errorf("message %d carries sequence number %d: messages were lost or reordered", c.seq, s)
	}
	c.seq++
	return c.m.tick(int64(c.seq)), nil
}

func (c *counter) result() (*Result, error) { return c.m.result(c.size) }

// payload makes a sender's message buffer with every byte written, so that
// no system sends from untouched (zero-page) memory.
func payload(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + 1)
	}
	return b
}

// pinger times round trips: ping sends one message and waits for the echo.
func pinger(a *childArgs, ping func(seq uint64) error) (*Result, error) {
	m := newMeter(a.Warmup, a.Measure)
	lats := make([]time.Duration, 0, 1<<16)
	for seq := uint64(0); ; seq++ {
		t := time.Now()
		if err := ping(seq); err != nil {
			return nil, err
		}
		d := time.Since(t)
		if m.measuring() {
			lats = append(lats, d)
		}
		if m.tick(int64(seq + 1)) {
			break
		}
	}
	r, err := m.result(a.Size)
	if err != nil {
		return nil, err
	}
	slices.Sort(lats)
	r.Samples = len(lats)
	r.MedianNs = int64(percentile(lats, 0.5))
	r.P99Ns = int64(percentile(lats, 0.99))
	return r, nil
}

// checkEcho verifies that an echoed message is the ping it answers.
func checkEcho(msg []byte, size int, seq uint64) error {
	if len(msg) != size {
		return fmt.Errorf("echo %d has %d bytes, want %d", seq, len(msg), size)
	}
	if s := binary.LittleEndian.Uint64(msg); s != seq {
		return fmt.Errorf("echo carries sequence number %d, want %d", s, seq)
	}
	return nil
}
