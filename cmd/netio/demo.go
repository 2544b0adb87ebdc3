package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/netio-go/netio"
)

const (
	smallSize = 64      // bytes in a ping and in a message-rate message
	bulkSize  = 1 << 20 // bytes in a throughput message
	// maxPings caps the round-trip phase: 20000 samples give a stable
	// p99, and more would only make the phase longer on fast machines.
	maxPings = 20000
	// hangGuard is added to every phase's duration as a read deadline on its
	// connections, so a stalled transfer fails the demo with a time-out
	// instead of hanging it.
	hangGuard = 30 * time.Second
	// connectTimeout bounds setting up each phase's connection.
	connectTimeout = 10 * time.Second
)

// demoConfig is what the demo's flags decide.
type demoConfig struct {
	provider string        // "" lets netio pick (DefaultNetwork or $NETIO_PROVIDER)
	mode     connMode      // netio's mode, on every connection
	duration time.Duration // length of each measured phase
	pings    int           // most round trips measured
	progress io.Writer     // where progress goes; nil for none
	inPlace  bool          // progress rewrites one line (a terminal) instead of adding lines
}

// demoResult is what the demo measured; -json prints it as it is.
type demoResult struct {
	// Provider is the libfabric provider that was used.
	Provider string `json:"provider"`
	// Mode is netio's mode: "low-latency" or "high-throughput".
	Mode string `json:"mode"`
	// Address is where the demo's listener listened.
	Address string `json:"address"`
	// RoundTrip is the ping-pong latency.
	RoundTrip rttResult `json:"round_trip"`
	// MessageRate is the one-way stream of small messages.
	MessageRate streamResult `json:"message_rate"`
	// Throughput is the one-way stream of large messages.
	Throughput streamResult `json:"throughput"`
}

// rttResult summarises the round trips of one ping-pong phase.
type rttResult struct {
	// MessageSize is the size of a ping, in bytes.
	MessageSize int `json:"message_size"`
	// Pings is the number of round trips measured.
	Pings int `json:"pings"`
	// Seconds is how long they took in all.
	Seconds float64 `json:"seconds"`
	// MedianMicros, P90Micros and P99Micros are round-trip percentiles.
	MedianMicros float64 `json:"median_us"`
	P90Micros    float64 `json:"p90_us"`
	P99Micros    float64 `json:"p99_us"`
}

// streamResult is a one-way stream as its receiver saw it.
type streamResult struct {
	// MessageSize is the size of each message, in bytes.
	MessageSize int `json:"message_size"`
	// Messages is the number of messages received.
	Messages int64 `json:"messages"`
	// Seconds is the time from the start of the phase to the last message.
	Seconds float64 `json:"seconds"`
	// MessagesPerSecond is Messages / Seconds.
	MessagesPerSecond float64 `json:"messages_per_second"`
	// GbitPerSecond counts payload bits only, as an application sees them.
	GbitPerSecond float64 `json:"gbit_per_second"`
}

func demoMain(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("demo", "usage: netio demo [flags]\n\n"+
		"Runs a netio listener and client in this process over loopback and measures\n"+
		"round-trip latency, 64-byte message rate and 1 MiB throughput.\n"+
		"With -mode ht every connection uses netio's HighThroughput mode, and\n"+
		"each ping and echo is followed by Flush.\n", stderr)
	provider := providerFlag(fs)
	mode := modeFlag(fs)
	duration := fs.Duration("duration", 3*time.Second, "length of each of the three phases")
	asJSON := fs.Bool("json", false, "print the results as JSON instead of a table")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if *duration <= 0 {
		return usageError(fs, "-duration must be positive")
	}

	// Progress shares stdout with the table; with -json it moves to stderr
	// so that stdout stays valid JSON.
	progress := stdout
	if *asJSON {
		progress = stderr
	}
	cfg := demoConfig{
		provider: *provider,
		mode:     *mode,
		duration: *duration,
		pings:    maxPings,
		progress: progress,
		inPlace:  isTerminal(progress),
	}
	res, err := runDemo(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "netio: demo: %v\n", err)
		return exitError
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			fmt.Fprintf(stderr, "netio: %v\n", err)
			return exitError
		}
		return exitOK
	}
	printTable(stdout, res)
	return exitOK
}

// runDemo listens on loopback and runs the three phases, each on a
// connection of its own so that what one phase leaves in flight cannot
// colour the next, and every phase also exercises a clean Close.
func runDemo(cfg demoConfig) (*demoResult, error) {
	ln, err := netio.Listen(cfg.provider, "127.0.0.1:0", cfg.mode.options()...)
	if err != nil {
		return nil, err
	}
	defer ln.Close()
	res := &demoResult{Provider: ln.Addr().Network(), Mode: netio.Mode(cfg.mode).String(), Address: ln.Addr().String()}

	p, err := connect(ln, cfg)
	if err != nil {
		return nil, err
	}
	if res.RoundTrip, err = roundTrip(p, cfg); err != nil {
		return nil, fmt.Errorf("round trip: %w", err)
	}
	if p, err = connect(ln, cfg); err != nil {
		return nil, err
	}
	if res.MessageRate, err = stream(p, cfg, "messages/s", smallSize); err != nil {
		return nil, fmt.Errorf("messages/s: %w", err)
	}
	if p, err = connect(ln, cfg); err != nil {
		return nil, err
	}
	if res.Throughput, err = stream(p, cfg, "Gbit/s", bulkSize); err != nil {
		return nil, fmt.Errorf("Gbit/s: %w", err)
	}
	return res, nil
}

// pair is the two ends of one connection: the client dialled, the server
// accepted.
type pair struct{ client, server *netio.Conn }

// connect dials ln and accepts the connection.
func connect(ln *netio.Listener, cfg demoConfig) (pair, error) {
	type accepted struct {
		c   *netio.Conn
		err error
	}
	ch := make(chan accepted, 1)
	go func() {
		c, err := ln.AcceptConn()
		ch <- accepted{c, err}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
	defer cancel()
	client, err := netio.DialContext(ctx, cfg.provider, ln.Addr().String(), cfg.mode.options()...)
	if err != nil {
		// Closing the listener ends the Accept, which must not outlive us.
		ln.Close()
		if a := <-ch; a.c != nil {
			a.c.Close()
		}
		return pair{}, err
	}
	var a accepted
	select {
	case a = <-ch:
	case <-ctx.Done():
		ln.Close()
		a = <-ch
		if a.err == nil {
			a.err = errors.New("accept: the dialled connection never arrived")
		}
	}
	if a.err != nil {
		client.Close()
		if a.c != nil {
			a.c.Close()
		}
		return pair{}, a.err
	}
	// Read deadlines alone guard against a hang: every phase reads on at
	// least one side, and a failed read closes both ends (failure), which
	// ends a blocked Write too. A write deadline would also take every
	// HighThroughput Write off netio's fast path.
	deadline := time.Now().Add(cfg.duration + hangGuard)
	client.SetReadDeadline(deadline)
	a.c.SetReadDeadline(deadline)
	return pair{client, a.c}, nil
}

// failure keeps the first error of a phase and closes its connection, so
// that the other side's blocked Read or Write returns instead of waiting
// for a peer that has given up; its own error then is only a consequence.
type failure struct {
	once sync.Once
	err  error
	p    pair
}

func (f *failure) fail(err error) {
	f.once.Do(func() {
		f.err = err
		f.p.client.Close()
		f.p.server.Close()
	})
}

// roundTrip measures ping-pong latency: the client writes a ping, the
// server echoes it, the client reads it back; both flush after writing
// (which in LowLatency mode does nothing). It closes p.
func roundTrip(p pair, cfg demoConfig) (rttResult, error) {
	f := &failure{p: p}
	echoed := make(chan struct{})
	go func() {
		defer close(echoed)
		buf := make([]byte, smallSize)
		for {
			n, err := p.server.ReadMessage(buf)
			if errors.Is(err, io.EOF) {
				return // the client is done
			}
			if err != nil {
				f.fail(fmt.Errorf("echo: %w", err))
				return
			}
			if err := writeNow(p.server, buf[:n]); err != nil {
				f.fail(fmt.Errorf("echo: %w", err))
				return
			}
		}
	}()

	m := startMeter(cfg, "round trip", func(n int64, d time.Duration) string {
		return fmt.Sprintf("%.1f µs per round trip", micros(d)/float64(n))
	})
	ping := make([]byte, smallSize)
	pong := make([]byte, smallSize)
	samples := make([]time.Duration, 0, cfg.pings)
	start := time.Now()
	for len(samples) < cfg.pings && time.Since(start) < cfg.duration {
		// A sequence number makes a lost, repeated or stale pong visible.
		binary.LittleEndian.PutUint64(ping, uint64(len(samples)))
		t := time.Now()
		if err := writeNow(p.client, ping); err != nil {
			f.fail(err)
			break
		}
		n, err := p.client.ReadMessage(pong)
		if err != nil {
			f.fail(err)
			break
		}
		samples = append(samples, time.Since(t))
		if !bytes.Equal(pong[:n], ping) {
			f.fail(fmt.Errorf("pong %d does not match its ping", len(samples)-1))
			break
		}
		m.add(1)
	}
	elapsed := time.Since(start)
	m.stop()
	p.client.Close() // the echo loop sees io.EOF and ends
	<-echoed
	p.server.Close()
	if f.err != nil {
		return rttResult{}, f.err
	}
	if len(samples) == 0 {
		return rttResult{}, errors.New("no round trip completed")
	}
	slices.Sort(samples)
	return rttResult{
		MessageSize:  smallSize,
		Pings:        len(samples),
		Seconds:      elapsed.Seconds(),
		MedianMicros: micros(percentile(samples, 50)),
		P90Micros:    micros(percentile(samples, 90)),
		P99Micros:    micros(percentile(samples, 99)),
	}, nil
}

// stream measures a one-way stream of size-byte messages for cfg.duration.
// The writer closes its side when time is up, and the reader counts until
// io.EOF: netio delivers everything written before a Close, so the count
// and the time of the last message are the receiver's own. It closes p.
func stream(p pair, cfg demoConfig, name string, size int) (streamResult, error) {
	f := &failure{p: p}
	m := startMeter(cfg, name, func(n int64, d time.Duration) string {
		if size >= bulkSize {
			return fmt.Sprintf("%.2f Gbit/s", float64(n)*float64(size)*8/d.Seconds()/1e9)
		}
		return fmt.Sprintf("%.0f msg/s", float64(n)/d.Seconds())
	})
	var wg sync.WaitGroup
	wg.Add(2)
	start := time.Now()
	go func() {
		defer wg.Done()
		msg := make([]byte, size)
		for seq := uint64(0); time.Since(start) < cfg.duration; seq++ {
			binary.LittleEndian.PutUint64(msg, seq)
			if _, err := p.client.Write(msg); err != nil {
				f.fail(fmt.Errorf("write: %w", err))
				return
			}
		}
		p.client.Close()
	}()
	var received int64
	var last time.Time
	go func() {
		defer wg.Done()
		buf := make([]byte, size)
		for {
			n, err := p.server.ReadMessage(buf)
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				f.fail(fmt.Errorf("read: %w", err))
				return
			}
			last = time.Now()
			if n != size {
				f.fail(fmt.Errorf("message %d has %d bytes, want %d", received, n, size))
				return
			}
			if seq := binary.LittleEndian.Uint64(buf); seq != uint64(received) {
				f.fail(fmt.Errorf("message %d arrived with sequence number %d", received, seq))
				return
			}
			received++
			m.add(1)
		}
	}()
	wg.Wait()
	m.stop()
	p.client.Close()
	p.server.Close()
	if f.err != nil {
		return streamResult{}, f.err
	}
	if received == 0 {
		return streamResult{}, errors.New("no message arrived")
	}
	secs := last.Sub(start).Seconds()
	return streamResult{
		MessageSize:       size,
		Messages:          received,
		Seconds:           secs,
		MessagesPerSecond: float64(received) / secs,
		GbitPerSecond:     float64(received) * float64(size) * 8 / secs / 1e9,
	}, nil
}

// percentile returns the nearest-rank percentile of sorted samples.
func percentile(sorted []time.Duration, pct float64) time.Duration {
	i := int(math.Ceil(pct/100*float64(len(sorted)))) - 1
	return sorted[max(i, 0)]
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// startMeter shows a demo phase's progress; rate turns the messages
// counted since the last tick into the rate shown.
func startMeter(cfg demoConfig, name string, rate func(n int64, d time.Duration) string) *meter {
	return startProgress(cfg.progress, cfg.inPlace, name, func(n, _ int64, d time.Duration) string { return rate(n, d) })
}

func printTable(w io.Writer, r *demoResult) {
	fmt.Fprintf(w, "netio demo: provider %s, %s mode, listener %s, one process\n\n", r.Provider, r.Mode, r.Address)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "phase\tresult\tmeasured")
	fmt.Fprintf(tw, "round trip\tmedian %.1f µs, p90 %.1f µs, p99 %.1f µs\t%d pings of %s in %.2f s\n",
		r.RoundTrip.MedianMicros, r.RoundTrip.P90Micros, r.RoundTrip.P99Micros,
		r.RoundTrip.Pings, sizeString(r.RoundTrip.MessageSize), r.RoundTrip.Seconds)
	fmt.Fprintf(tw, "messages/s\t%.0f\t%d messages of %s in %.2f s\n",
		r.MessageRate.MessagesPerSecond, r.MessageRate.Messages, sizeString(r.MessageRate.MessageSize), r.MessageRate.Seconds)
	fmt.Fprintf(tw, "Gbit/s\t%.2f\t%d messages of %s in %.2f s\n",
		r.Throughput.GbitPerSecond, r.Throughput.Messages, sizeString(r.Throughput.MessageSize), r.Throughput.Seconds)
	tw.Flush()
}

func sizeString(n int) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d B", n)
}
