package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"text/tabwriter"
	"time"

	"golang.org/x/sync/errgroup"

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
		"round-trip latency, 64-byte message rate and 1 MiB throughput, showing\n"+
		"progress on stderr and the results on stdout. With -mode ht every\n"+
		"connection uses netio's HighThroughput mode, and each ping and echo is\n"+
		"followed by Flush. Ctrl-C stops it and prints the phases measured so far\n"+
		"(exit status 130).\n", stderr)
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
	warnProvider(stderr, *provider)
	ctx, stop := interruptible(stderr, "demo")
	defer stop()
	progress, inPlace := progressTo(stderr)
	cfg := demoConfig{
		provider: *provider,
		mode:     *mode,
		duration: *duration,
		pings:    maxPings,
		progress: progress,
		inPlace:  inPlace,
	}
	res, err := runDemo(ctx, cfg)
	return report(ctx, stdout, stderr, "demo", *asJSON, res, err, printTable)
}

// runDemo listens on loopback and runs the three phases, each on a
// connection of its own so that what one phase leaves in flight cannot
// colour the next, and every phase also exercises a clean Close. Ctrl-C
// ends the phase under way and skips the others: the result then holds
// the phases done (the others are zero), or is nil if there are none.
func runDemo(ctx context.Context, cfg demoConfig) (*demoResult, error) {
	ln, err := netio.Listen(cfg.provider, "127.0.0.1:0", cfg.mode.options()...)
	if err != nil {
		return nil, err
	}
	defer ln.Close()
	res := &demoResult{Provider: ln.Addr().Network(), Mode: netio.Mode(cfg.mode).String(), Address: ln.Addr().String()}
	phases := []struct {
		name string
		run  func(pair) error
	}{
		{"round trip", func(p pair) (err error) { res.RoundTrip, err = roundTrip(ctx, p, cfg); return err }},
		{"messages/s", func(p pair) (err error) {
			res.MessageRate, err = stream(ctx, p, cfg, "messages/s", smallSize)
			return err
		}},
		{"Gbit/s", func(p pair) (err error) { res.Throughput, err = stream(ctx, p, cfg, "Gbit/s", bulkSize); return err }},
	}
	for i, ph := range phases {
		if ctx.Err() != nil {
			break
		}
		p, err := connect(ctx, ln, cfg)
		if err == nil {
			err = ph.run(p)
			if err != nil {
				err = fmt.Errorf("%s: %w", ph.name, err)
			}
		}
		if err != nil && ctx.Err() != nil {
			// Interrupted: what the phase measured, if anything, stands.
			if i == 0 && res.RoundTrip.Pings == 0 {
				return nil, fmt.Errorf("%w before a phase was measured", errInterrupted)
			}
			return res, nil
		}
		if err != nil {
			return nil, err
		}
	}
	return res, nil
}

// pair is the two ends of one connection: the client dialled, the server
// accepted.
type pair struct{ client, server *netio.Conn }

// connect dials ln and accepts the connection; Ctrl-C gives up.
func connect(ctx context.Context, ln *netio.Listener, cfg demoConfig) (pair, error) {
	type accepted struct {
		c   *netio.Conn
		err error
	}
	ch := make(chan accepted, 1)
	go func() {
		c, err := ln.AcceptConn()
		ch <- accepted{c, err}
	}()
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
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

// phaseGroup runs a phase's goroutines with errgroup: the first error is
// the phase's, and on it (or on Ctrl-C) both ends of p are closed, so that
// the other side's blocked Read or Write returns instead of waiting for a
// peer that has given up; its own error then is only a consequence. wait
// returns the first error once every goroutine has returned and p is
// closed.
type phaseGroup struct {
	g      *errgroup.Group
	closed chan struct{}
}

func newPhaseGroup(ctx context.Context, p pair) *phaseGroup {
	g, gctx := errgroup.WithContext(ctx)
	pg := &phaseGroup{g: g, closed: make(chan struct{})}
	// errgroup cancels gctx on the first error, and in any case when Wait
	// returns: p is closed either way.
	context.AfterFunc(gctx, func() {
		p.client.Close()
		p.server.Close()
		close(pg.closed)
	})
	return pg
}

func (pg *phaseGroup) Go(f func() error) { pg.g.Go(f) }

func (pg *phaseGroup) wait() error {
	err := pg.g.Wait()
	<-pg.closed
	return err
}

// roundTrip measures ping-pong latency: the client writes a ping, the
// server echoes it, the client reads it back; both flush after writing
// (which in LowLatency mode does nothing). It closes p. Ctrl-C ends it
// with the round trips measured so far.
func roundTrip(ctx context.Context, p pair, cfg demoConfig) (rttResult, error) {
	g := newPhaseGroup(ctx, p)
	g.Go(func() error {
		buf := make([]byte, smallSize)
		for {
			n, err := p.server.ReadMessage(buf)
			if errors.Is(err, io.EOF) {
				return nil // the client is done
			}
			if err != nil {
				return fmt.Errorf("echo: %w", err)
			}
			if err := writeNow(p.server, buf[:n]); err != nil {
				return fmt.Errorf("echo: %w", err)
			}
		}
	})

	m := startMeter(cfg, "round trip", func(n int64, d time.Duration) string {
		return durString(d/time.Duration(n)) + " per round trip"
	})
	samples := make([]time.Duration, 0, cfg.pings)
	start := time.Now()
	var elapsed time.Duration
	g.Go(func() error {
		defer p.client.Close() // the echo loop sees io.EOF and ends
		ping := make([]byte, smallSize)
		pong := make([]byte, smallSize)
		// At least one round trip, however long it takes: a machine that
		// stalls past the duration right at the start still measures one.
		for len(samples) < cfg.pings && (len(samples) == 0 || time.Since(start) < cfg.duration) && ctx.Err() == nil {
			// A sequence number makes a lost, repeated or stale pong visible.
			binary.LittleEndian.PutUint64(ping, uint64(len(samples)))
			t := time.Now()
			if err := writeNow(p.client, ping); err != nil {
				return err
			}
			n, err := p.client.ReadMessage(pong)
			if err != nil {
				return err
			}
			samples = append(samples, time.Since(t))
			if !bytes.Equal(pong[:n], ping) {
				return fmt.Errorf("pong %d does not match its ping", len(samples)-1)
			}
			m.add(1)
		}
		elapsed = time.Since(start)
		return nil
	})
	err := g.wait()
	m.stop()
	if err != nil && ctx.Err() == nil {
		return rttResult{}, err
	}
	if len(samples) == 0 {
		if ctx.Err() != nil {
			return rttResult{}, errInterrupted
		}
		return rttResult{}, errors.New("no round trip completed")
	}
	if elapsed == 0 {
		elapsed = time.Since(start)
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
// Ctrl-C ends the writer early; the stream is measured up to there.
func stream(ctx context.Context, p pair, cfg demoConfig, name string, size int) (streamResult, error) {
	m := startMeter(cfg, name, func(n int64, d time.Duration) string {
		if size >= bulkSize {
			return fmt.Sprintf("%.2f Gbit/s", float64(n)*float64(size)*8/d.Seconds()/1e9)
		}
		return fmt.Sprintf("%.0f msg/s", float64(n)/d.Seconds())
	})
	// The group's context is not the run's: Ctrl-C ends the writer,
	// which closes its side, and the reader still counts what arrives.
	g := newPhaseGroup(context.Background(), p)
	start := time.Now()
	g.Go(func() error {
		msg := make([]byte, size)
		// At least one message, however long the first Write takes.
		for seq := uint64(0); (seq == 0 || time.Since(start) < cfg.duration) && ctx.Err() == nil; seq++ {
			binary.LittleEndian.PutUint64(msg, seq)
			if _, err := p.client.Write(msg); err != nil {
				return fmt.Errorf("write: %w", err)
			}
		}
		p.client.Close()
		return nil
	})
	var received int64
	var last time.Time
	g.Go(func() error {
		buf := make([]byte, size)
		for {
			n, err := p.server.ReadMessage(buf)
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("read: %w", err)
			}
			last = time.Now()
			if n != size {
				return fmt.Errorf("message %d has %d bytes, want %d", received, n, size)
			}
			if seq := binary.LittleEndian.Uint64(buf); seq != uint64(received) {
				return fmt.Errorf("message %d arrived with sequence number %d", received, seq)
			}
			received++
			m.add(1)
		}
	})
	err := g.wait()
	m.stop()
	if err != nil {
		return streamResult{}, err
	}
	if received == 0 {
		if ctx.Err() != nil {
			return streamResult{}, errInterrupted
		}
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

// startMeter shows a demo phase's progress; rate turns the messages
// counted since the last tick into the rate shown.
func startMeter(cfg demoConfig, name string, rate func(n int64, d time.Duration) string) *meter {
	return startProgress(cfg.progress, cfg.inPlace, name, func(n, _ int64, d time.Duration) string { return rate(n, d) })
}

func printTable(w io.Writer, r *demoResult) {
	fmt.Fprintf(w, "netio demo: provider %s, %s mode, listener %s, one process\n\n", r.Provider, r.Mode, r.Address)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "phase\tresult\tmeasured")
	notRun := "not run (interrupted)"
	if rt := r.RoundTrip; rt.Pings > 0 {
		fmt.Fprintf(tw, "round trip\tmedian %s, p90 %s, p99 %s\t%d pings of %s in %s\n",
			durString(microsDur(rt.MedianMicros)), durString(microsDur(rt.P90Micros)), durString(microsDur(rt.P99Micros)),
			rt.Pings, sizeString(rt.MessageSize), durString(seconds(rt.Seconds)))
	} else {
		fmt.Fprintf(tw, "round trip\t%s\t\n", notRun)
	}
	if mr := r.MessageRate; mr.Messages > 0 {
		fmt.Fprintf(tw, "messages/s\t%.0f\t%d messages of %s in %s\n",
			mr.MessagesPerSecond, mr.Messages, sizeString(mr.MessageSize), durString(seconds(mr.Seconds)))
	} else {
		fmt.Fprintf(tw, "messages/s\t%s\t\n", notRun)
	}
	if tp := r.Throughput; tp.Messages > 0 {
		fmt.Fprintf(tw, "Gbit/s\t%.2f\t%d messages of %s in %s\n",
			tp.GbitPerSecond, tp.Messages, sizeString(tp.MessageSize), durString(seconds(tp.Seconds)))
	} else {
		fmt.Fprintf(tw, "Gbit/s\t%s\t\n", notRun)
	}
	tw.Flush()
}

func sizeString(n int) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d B", n)
}
