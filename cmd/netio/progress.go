package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// meter shows a run's progress while it runs: the run adds messages and
// bytes to counters, and a goroutine turns their growth since the last tick
// into a current rate, so that the hot loops only do atomic adds.
type meter struct {
	n, bytes atomic.Int64
	done     chan struct{}
	wg       sync.WaitGroup
}

// startProgress starts a meter that writes to w (nil: nowhere). On a
// terminal (inPlace) it rewrites one line five times a second and wipes it
// when stopped; elsewhere it adds a plain line a second. rate turns the
// messages and bytes counted since the last tick into the rate shown.
func startProgress(w io.Writer, inPlace bool, name string, rate func(n, bytes int64, d time.Duration) string) *meter {
	m := &meter{done: make(chan struct{})}
	if w == nil {
		return m
	}
	every := time.Second
	if inPlace {
		every = 200 * time.Millisecond
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		tick := time.NewTicker(every)
		defer tick.Stop()
		start := time.Now()
		prevN, prevB, prevT := int64(0), int64(0), start
		shown := false
		for {
			select {
			case <-m.done:
				if shown {
					// Leave a clean line for what comes next.
					fmt.Fprint(w, "\r\x1b[K")
				}
				return
			case now := <-tick.C:
				n, b := m.n.Load(), m.bytes.Load()
				cur := "waiting"
				if n > prevN {
					cur = rate(n-prevN, b-prevB, now.Sub(prevT))
				}
				prevN, prevB, prevT = n, b, now
				line := fmt.Sprintf("%-10s  %4.1fs  %s", name, now.Sub(start).Seconds(), cur)
				if inPlace {
					fmt.Fprintf(w, "\r%s\x1b[K", line)
					shown = true
				} else {
					fmt.Fprintln(w, line)
				}
			}
		}
	}()
	return m
}

// add counts n messages.
func (m *meter) add(n int64) { m.n.Add(n) }

// addMessage counts one message of size bytes.
func (m *meter) addMessage(size int) {
	m.n.Add(1)
	m.bytes.Add(int64(size))
}

// stop ends the meter and wipes its line; it returns once it has.
func (m *meter) stop() {
	close(m.done)
	m.wg.Wait()
}

// streamRate is the live rate of a one-way stream: messages/s and payload
// Gbit/s.
func streamRate(n, bytes int64, d time.Duration) string {
	s := d.Seconds()
	return fmt.Sprintf("%.0f msg/s  %.3f Gbit/s", float64(n)/s, float64(bytes)*8/s/1e9)
}

// isTerminal reports whether w is a character device, where rewriting one
// line with \r looks like progress; in a file or a pipe it would be noise.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
