package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/netio-go/netio"
)

// netio send and netio recv speak a small protocol on top of netio's
// messages:
//
//   - Data messages go from the sender to the receiver. One of 16 bytes or
//     more starts with the time the sender wrote it (time.Now().UnixNano(),
//     little endian) and its sequence number from 0, for one-way latency
//     and to catch a lost or reordered message.
//   - An empty message from the sender ends the stream. The receiver echoes
//     it back once it has read everything before it, and closes when the
//     sender does.
//   - A non-empty message from the receiver asks the sender to stop: the
//     receiver has its -count, its -duration is up or it was interrupted.
//     The sender then ends the stream as above; the receiver drops what
//     was still in flight.
//
// The echo is there so that the sender knows, and says, that the receiver
// read everything: the sender exits only once the receiver has confirmed
// it, and each side waits for the other to close before exiting. A peer
// that simply closes, as any netio program may, ends a run too.
//
// Both sides use the same -mode. In HighThroughput mode every control
// message (the end of the stream, its echo, a stop request) is followed by
// Flush, so that it goes out at once instead of waiting for its page to
// fill or for the writer's pause to be noticed.

// stampSize is the smallest message that carries a send time and a
// sequence number.
const stampSize = 16

// stopRequest is what the receiver sends to ask the sender to stop.
var stopRequest = []byte("stop")

// plausibleSkew bounds how far a send time may be from the receiver's
// clock for the messages to be taken as timestamped by netio send.
const plausibleSkew = time.Hour

const sendUsage = `usage: netio send -to host:port [flags]

Connects to a 'netio recv' and writes messages of -size bytes as fast as
Write allows, showing the rate it writes at, until -count messages are
written or -duration is up (10s when neither is given), Ctrl-C, or the
receiver asks it to stop. It then waits for the receiver to confirm it read
every message, and prints a summary. Messages of 16 bytes or more carry
their send time, from which the receiver measures one-way latency.

-mode ht sends in netio's HighThroughput mode: each Write copies the
message into a 1 MiB page, and pages go out when full or when the writer
pauses; small messages then cost a copy instead of a fabric operation each.
The receiver must use the same -mode:

  netio recv -listen 127.0.0.1:5000 -mode ht
  netio send -to 127.0.0.1:5000 -mode ht -size 64
`

// sendResult is what netio send prints; -json prints it as it is.
type sendResult struct {
	// Provider is the libfabric provider used.
	Provider string `json:"provider"`
	// Mode is netio's mode: "low-latency" or "high-throughput".
	Mode string `json:"mode"`
	// Local and Remote are the connection's addresses.
	Local  string `json:"local"`
	Remote string `json:"remote"`
	// MessageSize is the size of each message, in bytes.
	MessageSize int `json:"message_size"`
	// Messages and Bytes count what Write took: the receiver's summary
	// says what arrived.
	Messages int64 `json:"messages"`
	Bytes    int64 `json:"bytes"`
	// Seconds is the time from connecting to the last Write returning.
	Seconds           float64 `json:"seconds"`
	MessagesPerSecond float64 `json:"messages_per_second"`
	GbitPerSecond     float64 `json:"gbit_per_second"`
	// Pages counts the libfabric messages that carried data: pages in
	// HighThroughput mode, message fragments in LowLatency mode.
	Pages uint64 `json:"pages"`
	// Flushes counts the pages sent (HighThroughput mode) by what sent
	// them; null in LowLatency mode.
	Flushes *flushCounts `json:"flushes"`
	// Timestamped says the messages carried their send time.
	Timestamped bool `json:"timestamped"`
	// Ended says why sending stopped.
	Ended string `json:"ended"`
	// Confirmed says the receiver echoed the end of the stream: it read
	// every message.
	Confirmed bool `json:"confirmed"`
}

type sendConfig struct {
	provider, to string
	mode         connMode
	size         int
	lim          limits
	progress     io.Writer
	inPlace      bool
	info         io.Writer // connection lines
}

func sendMain(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("send", sendUsage, stderr)
	to := fs.String("to", "", "the receiver's address, host:port (required)")
	provider := providerFlag(fs)
	mode := modeFlag(fs)
	size := byteSize(1024)
	fs.Var(&size, "size", "`bytes` per message, e.g. 64, 4KiB, 1MiB (16 or more carry a send time)")
	var lim limits
	lim.register(fs, "stop after this many messages (0: no limit)", "stop after this long (0: no limit; 10s when -count is not given either)")
	asJSON := fs.Bool("json", false, "print the summary as JSON instead of a table")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if *to == "" {
		return usageError(fs, "-to is required")
	}
	if code, ok := checkSize(fs, size); !ok {
		return code
	}
	if code, ok := lim.check(fs); !ok {
		return code
	}
	ctx, stop := interruptible()
	defer stop()
	progress, inPlace := outputs(stdout, stderr, *asJSON)
	res, err := runSend(ctx, sendConfig{
		provider: *provider, to: *to, mode: *mode, size: int(size), lim: lim.orDefault(),
		progress: progress, inPlace: inPlace, info: stderr,
	})
	return report(stdout, stderr, "send", *asJSON, res, err, printSend)
}

// dial connects, giving up on Ctrl-C and after connectTimeout.
func dial(ctx context.Context, provider, to string, opts ...netio.Option) (*netio.Conn, error) {
	dctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	c, err := netio.DialContext(dctx, provider, to, opts...)
	if err != nil && ctx.Err() != nil {
		return nil, errors.New("interrupted while connecting")
	}
	return c, err
}

func runSend(ctx context.Context, cfg sendConfig) (*sendResult, error) {
	c, err := dial(ctx, cfg.provider, cfg.to, cfg.mode.options()...)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(cfg.info, "connected to %s from %s (provider %s, %s)\n", c.RemoteAddr(), c.LocalAddr(), c.RemoteAddr().Network(), netio.Mode(cfg.mode))
	res := &sendResult{
		Provider:    c.RemoteAddr().Network(),
		Mode:        netio.Mode(cfg.mode).String(),
		Local:       c.LocalAddr().String(),
		Remote:      c.RemoteAddr().String(),
		MessageSize: cfg.size,
		Timestamped: cfg.size >= stampSize,
	}

	// The receiver talks back only to ask for a stop and to echo the end
	// of the stream.
	var stopAsked atomic.Bool
	echoed := make(chan error, 1) // nil: the echo came; otherwise why it will not
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		buf := make([]byte, 64)
		for {
			n, err := readAny(c, &buf)
			if err == nil && n == 0 {
				echoed <- nil
				return
			}
			if err != nil {
				echoed <- err
				return
			}
			stopAsked.Store(true)
		}
	}()
	defer wg.Wait()
	defer c.Close() // ends the reader (deferred calls run in reverse)

	msg := make([]byte, cfg.size)
	m := startProgress(cfg.progress, cfg.inPlace, "send", streamRate)
	start := time.Now()
	var end time.Time
	if cfg.lim.duration > 0 {
		end = start.Add(cfg.lim.duration)
	}
	// A receiver that stops reading fails the run instead of hanging it.
	unguard := guardProgress(c, func() int64 { return m.n.Load() }, hangGuard)
	var n int64
	var werr error
	for {
		now := time.Now()
		if cfg.lim.count > 0 && n >= cfg.lim.count {
			res.Ended = "count reached"
			break
		}
		if !end.IsZero() && !now.Before(end) {
			res.Ended = "duration reached"
			break
		}
		if stopAsked.Load() {
			res.Ended = "the receiver asked to stop"
			break
		}
		if ctx.Err() != nil {
			res.Ended = "interrupted"
			break
		}
		if res.Timestamped {
			binary.LittleEndian.PutUint64(msg, uint64(now.UnixNano()))
			binary.LittleEndian.PutUint64(msg[8:], uint64(n))
		}
		if _, err := c.Write(msg); err != nil {
			werr = err
			break
		}
		n++
		m.addMessage(len(msg))
	}
	elapsed := time.Since(start)
	unguard()
	m.stop()
	defer func() {
		st := c.Stats()
		res.Pages = st.PagesSent
		if cfg.mode.ht() {
			res.Flushes = &flushCounts{Full: st.FlushesFull, Paused: st.FlushesIdle, Explicit: st.FlushesExplicit, Timer: st.FlushesTimer}
		}
	}()
	res.Messages, res.Bytes = n, n*int64(cfg.size)
	res.Seconds = elapsed.Seconds()
	res.MessagesPerSecond = perSecond(n, elapsed)
	res.GbitPerSecond = gbit(res.Bytes, elapsed)
	if werr != nil {
		res.Ended = "write failed"
		return res, fmt.Errorf("write: %w (after %d messages)", werr, n)
	}

	// End the stream and wait for the receiver to confirm it has read it.
	c.SetWriteDeadline(time.Now().Add(closeWait))
	if err := writeNow(c, nil); err != nil {
		return res, fmt.Errorf("ending the stream: %w", err)
	}
	c.SetReadDeadline(time.Now().Add(closeWait))
	switch err := <-echoed; {
	case err == nil:
		res.Confirmed = true
	case errors.Is(err, os.ErrDeadlineExceeded):
		return res, fmt.Errorf("the receiver did not confirm the end of the stream within %v", closeWait)
	default:
		return res, fmt.Errorf("the receiver closed without confirming the end of the stream (%v): it may not have read every message", err)
	}
	return res, nil
}

// guardProgress ends a Write that has made no progress for limit, by
// moving the write deadline to now, until stop is called. Renewing a
// deadline from the writing loop would do the same, but a write deadline
// takes every HighThroughput Write off its fast path (netio checks
// deadlines only on the slow one): 'send -mode ht -size 64' went from 5.3M
// to 8.2M messages/s on a 2-vCPU VM without it.
func guardProgress(c *netio.Conn, progress func() int64, limit time.Duration) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(min(time.Second, limit))
		defer tick.Stop()
		last, since := progress(), time.Now()
		for {
			select {
			case <-done:
				return
			case now := <-tick.C:
				if p := progress(); p != last {
					last, since = p, now
				} else if now.Sub(since) >= limit {
					c.SetWriteDeadline(now)
					return
				}
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
	}
}

// flushCounts are netio's Stats.Flushes*: why pages were sent.
type flushCounts struct {
	Full     uint64 `json:"full"`     // the page was full
	Paused   uint64 `json:"paused"`   // the writer paused
	Explicit uint64 `json:"explicit"` // Flush or Close
	Timer    uint64 `json:"timer"`    // the page waited FlushInterval
}

// writeNow writes msg and sends it at once: in HighThroughput mode it
// flushes its page (a control message of the protocol, or a ping, must
// not wait for the page to fill or for the pause to be noticed).
func writeNow(c *netio.Conn, msg []byte) error {
	if _, err := c.Write(msg); err != nil {
		return err
	}
	return c.Flush() // nothing to do in LowLatency mode
}

func printSend(w io.Writer, r *sendResult) {
	fmt.Fprintf(w, "netio send: provider %s, %s mode, %s -> %s\n\n", r.Provider, r.Mode, r.Local, r.Remote)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "sent\t%d messages of %s (%s) in %.3f s\n", r.Messages, sizeString(r.MessageSize), bytesString(r.Bytes), r.Seconds)
	fmt.Fprintf(tw, "rate\t%.0f msg/s, %.3f Gbit/s (as written; the receiver reports what arrived)\n", r.MessagesPerSecond, r.GbitPerSecond)
	if r.Mode == netio.HighThroughput.String() {
		fmt.Fprintf(tw, "pages\t%d sent, %s", r.Pages, perPage(r.Messages, r.Pages))
		if f := r.Flushes; f != nil {
			fmt.Fprintf(tw, "; sent when full %d, writer paused %d, Flush %d, timer %d", f.Full, f.Paused, f.Explicit, f.Timer)
		}
		fmt.Fprintln(tw)
	}
	confirmed := "the receiver confirmed the end of the stream"
	if !r.Confirmed {
		confirmed = "not confirmed by the receiver"
	}
	fmt.Fprintf(tw, "ended\t%s; %s\n", r.Ended, confirmed)
	tw.Flush()
}

const recvUsage = `usage: netio recv -listen host:port [flags]

Listens (port 0 picks a free port; the address is printed on stderr),
accepts one sender ('netio send' or any netio program), and reads its
messages, showing messages/s and Gbit/s of payload as they arrive. It stops
when the sender ends the stream or closes, after -count messages, after
-duration from the sender connecting, or on Ctrl-C, and prints a summary.

-mode ht receives netio's HighThroughput mode, in which the sender batches
messages into 1 MiB pages; 'netio send' must use the same -mode. The
summary then also counts the pages.

Messages from 'netio send' of 16 bytes or more carry their send time: the
summary gives the one-way latency from the sender's clock at Write to the
receiver's clock at ReadMessage. On one host that is one clock; across
hosts it is only as good as the synchronization of their clocks: their
offset adds to (or subtracts from) every sample. Under full load it
includes the time messages queue for netio's window, and in -mode ht the
time they wait in their page; 'netio ping' measures round trips, which need
no clock but the sender's.
`

// recvResult is what netio recv prints; -json prints it as it is.
type recvResult struct {
	// Provider is the libfabric provider used.
	Provider string `json:"provider"`
	// Mode is netio's mode: "low-latency" or "high-throughput".
	Mode string `json:"mode"`
	// Local and Remote are the connection's addresses.
	Local  string `json:"local"`
	Remote string `json:"remote"`
	// Messages and Bytes count what was read (payload only).
	Messages int64 `json:"messages"`
	Bytes    int64 `json:"bytes"`
	// Seconds is the time from the sender connecting to the last message.
	Seconds           float64 `json:"seconds"`
	MessagesPerSecond float64 `json:"messages_per_second"`
	GbitPerSecond     float64 `json:"gbit_per_second"`
	// Pages counts the libfabric messages that carried data: pages in
	// HighThroughput mode, message fragments in LowLatency mode.
	Pages uint64 `json:"pages"`
	// Latency is the one-way latency, or null when the messages carried no
	// send time.
	Latency *oneWayResult `json:"latency"`
	// Ended says why receiving stopped.
	Ended string `json:"ended"`
}

// oneWayResult is a one-way latency summary.
type oneWayResult struct {
	Samples      int64   `json:"samples"`
	MinMicros    float64 `json:"min_us"`
	MedianMicros float64 `json:"median_us"`
	P99Micros    float64 `json:"p99_us"`
	MaxMicros    float64 `json:"max_us"`
	// Clocks says what the numbers are worth: one host's clock, or two
	// clocks that must be synchronized.
	Clocks string `json:"clocks"`
}

type recvConfig struct {
	provider, listen string
	mode             connMode
	lim              limits
	progress         io.Writer
	inPlace          bool
	info             io.Writer // the listening address, connection lines
}

func recvMain(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("recv", recvUsage, stderr)
	listen := fs.String("listen", "", "address to listen on, host:port (required; port 0 picks a free one)")
	provider := providerFlag(fs)
	mode := modeFlag(fs)
	var lim limits
	lim.register(fs, "stop after this many messages (0: until the sender stops)", "stop this long after the sender connected (0: until the sender stops)")
	asJSON := fs.Bool("json", false, "print the summary as JSON instead of a table")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if *listen == "" {
		return usageError(fs, "-listen is required")
	}
	if code, ok := lim.check(fs); !ok {
		return code
	}
	ctx, stop := interruptible()
	defer stop()
	progress, inPlace := outputs(stdout, stderr, *asJSON)
	res, err := runRecv(ctx, recvConfig{
		provider: *provider, listen: *listen, mode: *mode, lim: lim,
		progress: progress, inPlace: inPlace, info: stderr,
	})
	return report(stdout, stderr, "recv", *asJSON, res, err, printRecv)
}

// acceptOne listens on cfg.listen, says where on info, and accepts one
// connection; Ctrl-C gives up.
func acceptOne(ctx context.Context, provider, listen string, info io.Writer, opts ...netio.Option) (*netio.Conn, error) {
	ln, err := netio.Listen(provider, listen, opts...)
	if err != nil {
		return nil, err
	}
	defer ln.Close()
	fmt.Fprintf(info, "listening on %s (provider %s)\n", ln.Addr(), ln.Addr().Network())
	stop := whenDone(ctx, func() { ln.Close() })
	c, err := ln.AcceptConn()
	stop()
	if err != nil && ctx.Err() != nil {
		return nil, errors.New("interrupted before a peer connected")
	}
	return c, err
}

func runRecv(ctx context.Context, cfg recvConfig) (*recvResult, error) {
	c, err := acceptOne(ctx, cfg.provider, cfg.listen, cfg.info, cfg.mode.options()...)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	start := time.Now()
	fmt.Fprintf(cfg.info, "sender %s connected (%s)\n", c.RemoteAddr(), netio.Mode(cfg.mode))
	res := &recvResult{
		Provider: c.LocalAddr().Network(),
		Mode:     netio.Mode(cfg.mode).String(),
		Local:    c.LocalAddr().String(),
		Remote:   c.RemoteAddr().String(),
	}
	var end time.Time
	if cfg.lim.duration > 0 {
		end = start.Add(cfg.lim.duration)
		c.SetReadDeadline(end)
	}
	unwatch := whenDone(ctx, func() { c.SetReadDeadline(time.Now()) })
	defer unwatch()

	m := startProgress(cfg.progress, cfg.inPlace, "recv", streamRate)
	buf := make([]byte, 64<<10)
	lat := newHist()
	stamped := false // decided by the first message
	var last time.Time
	var runErr error
	endOfStream, peerClosed := false, false
	for {
		if cfg.lim.count > 0 && res.Messages >= cfg.lim.count {
			res.Ended = "count reached"
			break
		}
		n, err := readAny(c, &buf)
		now := time.Now()
		if err != nil {
			switch {
			case errors.Is(err, io.EOF):
				res.Ended = "the sender closed the connection"
				peerClosed = true
			case errors.Is(err, os.ErrDeadlineExceeded) && ctx.Err() != nil:
				res.Ended = "interrupted"
			case errors.Is(err, os.ErrDeadlineExceeded) && !end.IsZero() && !now.Before(end):
				res.Ended = "duration reached"
			default:
				res.Ended = "read failed"
				runErr = fmt.Errorf("read: %w (after %d messages)", err, res.Messages)
			}
			break
		}
		if n == 0 {
			res.Ended = "the sender ended the stream"
			endOfStream = true
			break
		}
		if res.Messages == 0 && n >= stampSize {
			ts := time.Unix(0, int64(binary.LittleEndian.Uint64(buf)))
			stamped = binary.LittleEndian.Uint64(buf[8:]) == 0 && ts.After(now.Add(-plausibleSkew)) && ts.Before(now.Add(plausibleSkew))
		}
		if stamped && n >= stampSize {
			if seq := binary.LittleEndian.Uint64(buf[8:]); seq != uint64(res.Messages) {
				res.Ended = "read failed"
				runErr = fmt.Errorf("message %d arrived with sequence number %d: lost, repeated or reordered", res.Messages, seq)
				break
			}
			lat.add(time.Duration(now.UnixNano() - int64(binary.LittleEndian.Uint64(buf))))
		}
		res.Messages++
		res.Bytes += int64(n)
		last = now
		m.addMessage(n)
	}
	m.stop()
	res.Pages = c.Stats().PagesReceived
	if res.Messages > 0 {
		d := last.Sub(start)
		res.Seconds = d.Seconds()
		res.MessagesPerSecond = perSecond(res.Messages, d)
		res.GbitPerSecond = gbit(res.Bytes, d)
	}
	if lat.n > 0 {
		res.Latency = &oneWayResult{
			Samples:      lat.n,
			MinMicros:    micros(lat.min),
			MedianMicros: micros(lat.percentile(50)),
			P99Micros:    micros(lat.percentile(99)),
			MaxMicros:    micros(lat.max),
			Clocks:       clocksNote(c.LocalAddr(), c.RemoteAddr()),
		}
	}
	if runErr == nil && !peerClosed {
		unwatch() // from here on a deadline is ours alone
		endRecv(c, buf, endOfStream)
	}
	return res, runErr
}

// endRecv ends a receive in order. After the sender's end of stream it
// echoes it; when the receiver stops first it asks the sender to stop,
// drops what is still in flight up to the end of the stream, and echoes
// that. Then it waits for the sender to close, so that the echo is out
// before this process may exit. Each wait is bounded by closeWait; what
// was counted is not affected by how this goes.
func endRecv(c *netio.Conn, buf []byte, endOfStream bool) {
	c.SetDeadline(time.Now().Add(closeWait))
	if !endOfStream {
		if err := writeNow(c, stopRequest); err != nil {
			return
		}
		for {
			n, err := readAny(c, &buf)
			if err != nil {
				return
			}
			if n == 0 {
				break
			}
		}
	}
	if err := writeNow(c, nil); err != nil {
		return
	}
	for {
		if _, err := readAny(c, &buf); err != nil {
			return
		}
	}
}

// readAny reads one message into *buf, growing it for a larger message.
func readAny(c *netio.Conn, buf *[]byte) (int, error) {
	for {
		n, err := c.ReadMessage(*buf)
		if !errors.Is(err, io.ErrShortBuffer) {
			return n, err
		}
		size, err := c.MessageLen()
		if err != nil {
			return 0, err
		}
		*buf = make([]byte, size)
	}
}

// clocksNote says what a one-way latency between these addresses is worth.
func clocksNote(local, remote net.Addr) string {
	l, lerr := netip.ParseAddrPort(local.String())
	r, rerr := netip.ParseAddrPort(remote.String())
	if lerr == nil && rerr == nil && (r.Addr().IsLoopback() || l.Addr() == r.Addr()) {
		return "one host, one clock"
	}
	return "sender's clock to receiver's: valid on one host, across hosts only as far as their clocks are synchronized"
}

func printRecv(w io.Writer, r *recvResult) {
	fmt.Fprintf(w, "netio recv: provider %s, %s mode, %s -> %s\n\n", r.Provider, r.Mode, r.Remote, r.Local)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "received\t%d messages (%s) in %.3f s\n", r.Messages, bytesString(r.Bytes), r.Seconds)
	fmt.Fprintf(tw, "rate\t%.0f msg/s, %.3f Gbit/s of payload\n", r.MessagesPerSecond, r.GbitPerSecond)
	if r.Mode == netio.HighThroughput.String() {
		fmt.Fprintf(tw, "pages\t%d received, %s\n", r.Pages, perPage(r.Messages, r.Pages))
	}
	if l := r.Latency; l != nil {
		fmt.Fprintf(tw, "latency\tmedian %.1f µs, p99 %.1f µs (one-way, %d messages; %s)\n", l.MedianMicros, l.P99Micros, l.Samples, l.Clocks)
	} else {
		fmt.Fprintf(tw, "latency\tnone: the messages carried no send time (netio send stamps messages of %d bytes or more)\n", stampSize)
	}
	fmt.Fprintf(tw, "ended\t%s\n", r.Ended)
	tw.Flush()
}

// perPage says how many messages a page carried on average.
func perPage(messages int64, pages uint64) string {
	if pages == 0 {
		return "no messages per page"
	}
	return fmt.Sprintf("%.1f messages per page on average", float64(messages)/float64(pages))
}

// bytesString is n in B, KiB, MiB or GiB.
func bytesString(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.2f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
