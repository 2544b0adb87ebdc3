package main

import (
	"bytes"
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
//   - The sender greets the receiver with sendHello; the receiver answers
//     with recvHello, before any data. So a sender that reached a netio
//     pong (which echoes the greeting) or another program (which does not
//     answer) says so and fails instead of streaming into the void. netio
//     ping greets with pingHello, which recv answers the same way and then
//     refuses. A plain netio program that sends no greeting is read all
//     the same.
//   - Data messages go from the sender to the receiver. One of 16 bytes or
//     more starts with the time the sender wrote it (time.Now().UnixNano(),
//     little endian) and its sequence number from 0, for one-way latency
//     and to catch a lost or reordered message.
//   - An empty message from the sender ends the stream. The receiver
//     answers it, once it has read everything before it, with an
//     acknowledgment carrying how many messages it counted and how many it
//     read in all (endAck), and closes when the sender does. The sender
//     compares them with how many it wrote: "confirmed" means the receiver
//     counted every one.
//   - stopRequest from the receiver asks the sender to stop: the receiver
//     has its -count, its -duration is up or it was interrupted. The
//     sender then ends the stream as above; the receiver reads but does
//     not count what was still in flight, and its acknowledgment says so.
//
// Each side waits for the other to close before exiting, so that its last
// message is not lost in netio's buffers. A peer that simply closes, as
// any netio program may, ends a run too.
//
// Both sides use the same -mode. In HighThroughput mode every control
// message (a greeting, the end of the stream, its acknowledgment, a stop
// request) is followed by Flush, so that it goes out at once instead of
// waiting for its page to fill or for the writer's pause to be noticed.

// stampSize is the smallest message that carries a send time and a
// sequence number.
const stampSize = 16

// The protocol's greetings and control messages. None of them is a
// message netio send writes as data: zeros, or a send time and a sequence
// number.
var (
	sendHello   = []byte("netio send/2\n")
	pingHello   = []byte("netio ping/2\n")
	recvHello   = []byte("netio recv/2\n")
	stopRequest = []byte("netio recv/2 stop\n")
)

// endAckTag starts the receiver's acknowledgment of the end of the stream,
// followed by the messages it counted and those it read in all, two
// little-endian uint64s.
const endAckTag = "netio recv/2 end\n"

// endAck is the acknowledgment of the end of a stream.
func endAck(counted, read int64) []byte {
	b := append([]byte(endAckTag), make([]byte, 16)...)
	binary.LittleEndian.PutUint64(b[len(endAckTag):], uint64(counted))
	binary.LittleEndian.PutUint64(b[len(endAckTag)+8:], uint64(read))
	return b
}

// parseEndAck reads an acknowledgment; ok is false for any other message.
func parseEndAck(b []byte) (counted, read int64, ok bool) {
	if len(b) != len(endAckTag)+16 || string(b[:len(endAckTag)]) != endAckTag {
		return 0, 0, false
	}
	counted = int64(binary.LittleEndian.Uint64(b[len(endAckTag):]))
	read = int64(binary.LittleEndian.Uint64(b[len(endAckTag)+8:]))
	return counted, read, true
}

// plausibleSkew bounds how far a send time may be from the receiver's
// clock for the messages to be taken as timestamped by netio send.
const plausibleSkew = time.Hour

const sendUsage = `usage: netio send -to host:port [flags]

Connects to a 'netio recv' and writes messages of -size bytes as fast as
Write allows, showing the rate it writes at on stderr, until -count
messages are written or -duration is up (10s when neither is given),
Ctrl-C, or the receiver asks it to stop. It then ends the stream, waits for
the receiver to acknowledge it with the number of messages it read, and
prints a summary: "confirmed" when the receiver counted every message
sent. Messages of 16 bytes or more carry their send time, from which the
receiver measures one-way latency.

A peer that is not a 'netio recv' (a 'netio pong', say) is found out
before any data is sent, and the run fails. Exit status: 0 done, 1 failed,
2 bad command line, 130 interrupted by Ctrl-C (after the summary).

-mode ht sends in netio's HighThroughput mode: each Write copies the
message into a 1 MiB page, and pages go out when full or when the writer
pauses; small messages then cost a copy each and a fabric operation per page.
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
	// Messages and Bytes count what Write took: ReceiverCounted says what
	// the receiver counted.
	Messages int64 `json:"messages"`
	Bytes    int64 `json:"bytes"`
	// Seconds is the time from the first Write to the last one returning.
	Seconds           float64 `json:"seconds"`
	MessagesPerSecond float64 `json:"messages_per_second"`
	GbitPerSecond     float64 `json:"gbit_per_second"`
	// Pages counts the pages sent (HighThroughput mode only).
	Pages *uint64 `json:"pages,omitempty"`
	// Fragments counts the libfabric messages sent (LowLatency mode only):
	// one per message sent alone, one for all the messages written while
	// earlier sends were going out, more for a message larger than the
	// peer's receive buffers.
	Fragments *uint64 `json:"fragments,omitempty"`
	// Flushes counts the pages sent (HighThroughput mode) by what sent
	// them; null in LowLatency mode.
	Flushes *flushCounts `json:"flushes"`
	// Timestamped says the messages carried their send time.
	Timestamped bool `json:"timestamped"`
	// Ended says why sending stopped.
	Ended string `json:"ended"`
	// ReceiverCounted and ReceiverRead are what the receiver acknowledged
	// at the end of the stream: the messages it counted, and those it read
	// in all (more when it stopped first and dropped the rest); null
	// without an acknowledgment.
	ReceiverCounted *int64 `json:"receiver_counted"`
	ReceiverRead    *int64 `json:"receiver_read"`
	// Confirmed says the receiver acknowledged every message: it counted
	// as many as were written.
	Confirmed bool `json:"confirmed"`
}

type sendConfig struct {
	provider, to string
	key          *connFlags
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
	key := connFlag(fs)
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
	warnProvider(stderr, *provider)
	ctx, stop := interruptible(stderr, "send")
	defer stop()
	progress, inPlace := progressTo(stderr)
	res, err := runSend(ctx, sendConfig{
		provider: *provider, to: *to, key: key, mode: *mode, size: int(size), lim: lim.orDefault(),
		progress: progress, inPlace: inPlace, info: stderr,
	})
	return report(ctx, stdout, stderr, "send", *asJSON, res, err, printSend)
}

// dial connects, giving up on Ctrl-C and after connectTimeout.
func dial(ctx context.Context, provider, to string, opts ...netio.Option) (*netio.Conn, error) {
	dctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	c, err := netio.DialContext(dctx, provider, to, opts...)
	if err != nil && ctx.Err() != nil {
		return nil, fmt.Errorf("%w while connecting", errInterrupted)
	}
	return c, err
}

// Why greet got no answer.
var (
	errNoAnswer     = fmt.Errorf("the peer did not answer the greeting within %v", helloWait)
	errClosedSilent = errors.New("the peer closed the connection without answering the greeting")
)

// greet writes hello and returns the peer's answer, waiting at most
// helloWait for it; Ctrl-C gives up.
func greet(ctx context.Context, c *netio.Conn, hello []byte) ([]byte, error) {
	c.SetDeadline(time.Now().Add(helloWait))
	defer c.SetDeadline(time.Time{})
	stop := whenDone(ctx, func() { c.SetDeadline(time.Now()) })
	defer stop()
	buf := make([]byte, 64)
	err := writeNow(c, hello)
	n := 0
	if err == nil {
		n, err = readAny(c, &buf)
	}
	switch {
	case err == nil:
		return buf[:n], nil
	case ctx.Err() != nil:
		return nil, fmt.Errorf("%w while waiting for the peer to answer the greeting", errInterrupted)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil, errNoAnswer
	case errors.Is(err, io.EOF):
		return nil, errClosedSilent
	}
	return nil, err
}

func runSend(ctx context.Context, cfg sendConfig) (*sendResult, error) {
	c, err := dial(ctx, cfg.provider, cfg.to, append(cfg.mode.options(), cfg.key.options()...)...)
	if err != nil {
		return nil, err
	}
	defer closeConn(ctx, c)
	fmt.Fprintf(cfg.info, "connected to %s from %s (provider %s, %s)\n", c.RemoteAddr(), c.LocalAddr(), c.RemoteAddr().Network(), netio.Mode(cfg.mode))
	switch reply, err := greet(ctx, c, sendHello); {
	case errors.Is(err, errNoAnswer) || errors.Is(err, errClosedSilent):
		return nil, fmt.Errorf("%w: is it a netio recv?", err)
	case err != nil:
		return nil, err
	case bytes.Equal(reply, sendHello):
		return nil, errors.New("the peer echoed the greeting: it is a netio pong or another echo server, and netio send streams to a netio recv")
	case !bytes.Equal(reply, recvHello):
		return nil, fmt.Errorf("the peer answered the greeting with a %d-byte message that netio recv does not send: is it a netio recv?", len(reply))
	}
	res := &sendResult{
		Provider:    c.RemoteAddr().Network(),
		Mode:        netio.Mode(cfg.mode).String(),
		Local:       c.LocalAddr().String(),
		Remote:      c.RemoteAddr().String(),
		MessageSize: cfg.size,
		Timestamped: cfg.size >= stampSize,
	}
	defer func() {
		st := c.Stats()
		if cfg.mode.ht() {
			res.Pages = &st.PagesSent
			res.Flushes = &flushCounts{Full: st.FlushesFull, Paused: st.FlushesIdle, Explicit: st.FlushesExplicit, Timer: st.FlushesTimer}
		} else {
			res.Fragments = &st.PagesSent
		}
	}()
	return res, sendStream(ctx, c, cfg, res)
}

// ackResult is what the sender's reader got in the end: the receiver's
// acknowledgment, or why there is none.
type ackResult struct {
	counted, read int64
	err           error
}

// sendStream writes the stream, ends it and checks the receiver's
// acknowledgment, filling res.
func sendStream(ctx context.Context, c *netio.Conn, cfg sendConfig, res *sendResult) error {
	// The receiver talks back only to ask for a stop and to acknowledge
	// the end of the stream.
	var stopAsked, readerDone atomic.Bool
	acked := make(chan ackResult, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer readerDone.Store(true)
		buf := make([]byte, 64)
		for {
			n, err := readAny(c, &buf)
			if err != nil {
				acked <- ackResult{err: err}
				return
			}
			if counted, read, ok := parseEndAck(buf[:n]); ok {
				acked <- ackResult{counted: counted, read: read}
				return
			}
			if !bytes.Equal(buf[:n], stopRequest) {
				acked <- ackResult{err: fmt.Errorf("the receiver sent a %d-byte message that netio recv does not send", n)}
				return
			}
			stopAsked.Store(true)
		}
	}()
	defer func() {
		c.SetReadDeadline(time.Now()) // ends the reader if it is still reading
		wg.Wait()
	}()

	msg := make([]byte, cfg.size)
	m := startProgress(cfg.progress, cfg.inPlace, "send", streamRate)
	start := time.Now()
	var end time.Time
	if cfg.lim.duration > 0 {
		end = start.Add(cfg.lim.duration)
	}
	// A receiver that stops reading fails the run instead of hanging it,
	// and Ctrl-C ends a Write blocked on it at once.
	unguard := guardProgress(c, func() int64 { return m.n.Load() }, hangGuard)
	unwatch := whenDone(ctx, func() { c.SetWriteDeadline(time.Now()) })
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
		if readerDone.Load() {
			res.Ended = "the receiver ended the run"
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
	unwatch()
	unguard()
	m.stop()
	res.Messages, res.Bytes = n, n*int64(cfg.size)
	res.Seconds = elapsed.Seconds()
	res.MessagesPerSecond = perSecond(n, elapsed)
	res.GbitPerSecond = gbit(res.Bytes, elapsed)
	switch {
	case werr != nil && ctx.Err() != nil:
		res.Ended = "interrupted" // Ctrl-C ended a blocked Write
	case werr != nil:
		res.Ended = "write failed"
		return fmt.Errorf("write: %w (after %d messages)", werr, n)
	}

	// End the stream and wait for the receiver's acknowledgment.
	c.SetDeadline(endBy(ctx))
	stop := whenDone(ctx, func() { c.SetDeadline(endBy(ctx)) })
	defer stop()
	if !readerDone.Load() {
		if err := writeNow(c, nil); err != nil {
			return fmt.Errorf("ending the stream: %w", err)
		}
	}
	a := <-acked
	switch {
	case a.err == nil:
	case errors.Is(a.err, os.ErrDeadlineExceeded):
		return fmt.Errorf("the receiver did not acknowledge the end of the stream within %v", endWait(ctx))
	case errors.Is(a.err, io.EOF):
		return errors.New("the receiver closed without acknowledging the end of the stream: it may not have read every message")
	default:
		return a.err
	}
	res.ReceiverCounted, res.ReceiverRead = &a.counted, &a.read
	res.Confirmed = a.counted == n
	if a.read != n {
		return fmt.Errorf("the receiver read %d of the %d messages written", a.read, n)
	}
	return nil
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
	fmt.Fprintf(tw, "sent\t%d messages of %s (%s) in %s\n", r.Messages, sizeString(r.MessageSize), bytesString(r.Bytes), durString(seconds(r.Seconds)))
	fmt.Fprintf(tw, "rate\t%.0f msg/s, %.3f Gbit/s (as written; the receiver reports what arrived)\n", r.MessagesPerSecond, r.GbitPerSecond)
	if r.Pages != nil {
		fmt.Fprintf(tw, "pages\t%d sent, %s", *r.Pages, perPage(r.Messages, *r.Pages))
		if f := r.Flushes; f != nil {
			fmt.Fprintf(tw, "; sent when full %d, writer paused %d, Flush %d, timer %d", f.Full, f.Paused, f.Explicit, f.Timer)
		}
		fmt.Fprintln(tw)
	}
	fmt.Fprintf(tw, "ended\t%s\n", r.Ended)
	fmt.Fprintf(tw, "receiver\t%s\n", receiverLine(r))
	tw.Flush()
}

// receiverLine says what the receiver acknowledged.
func receiverLine(r *sendResult) string {
	switch {
	case r.ReceiverCounted == nil:
		return "no acknowledgment: not confirmed that the receiver read the messages"
	case r.Confirmed:
		return fmt.Sprintf("confirmed: it counted all %d messages", r.Messages)
	case *r.ReceiverRead == r.Messages:
		return fmt.Sprintf("counted %d of the %d messages: it stopped first and dropped the other %d", *r.ReceiverCounted, r.Messages, r.Messages-*r.ReceiverCounted)
	}
	return fmt.Sprintf("counted %d and read %d of the %d messages written: not confirmed", *r.ReceiverCounted, *r.ReceiverRead, r.Messages)
}

const recvUsage = `usage: netio recv -listen host:port [flags]

Listens (port 0 picks a free port; the address is printed on stderr),
accepts one sender ('netio send' or any netio program), and reads its
messages, showing messages/s and Gbit/s of payload on stderr as they
arrive. It stops when the sender ends the stream or closes, after -count
messages, after -duration from the sender connecting, or on Ctrl-C, and
prints a summary. It acknowledges the end of the stream to 'netio send'
with the number of messages it read; what arrives after it stopped first
is read but not counted. Exit status: 0 done, 1 failed, 2 bad command
line, 130 interrupted by Ctrl-C (after the summary).

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
	// Messages and Bytes count what was read (payload only) until the
	// receiver stopped.
	Messages int64 `json:"messages"`
	Bytes    int64 `json:"bytes"`
	// Dropped counts the messages that were still in flight when the
	// receiver stopped first: read, not counted.
	Dropped int64 `json:"dropped"`
	// Seconds is the time from the sender connecting to the last message.
	Seconds           float64 `json:"seconds"`
	MessagesPerSecond float64 `json:"messages_per_second"`
	GbitPerSecond     float64 `json:"gbit_per_second"`
	// Pages counts the pages received until the receiver stopped
	// (HighThroughput mode only).
	Pages *uint64 `json:"pages,omitempty"`
	// Fragments counts the libfabric messages received until the
	// receiver stopped (LowLatency mode only): one per message sent alone,
	// fewer for messages packed together, more for a message larger than a
	// receive buffer.
	Fragments *uint64 `json:"fragments,omitempty"`
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
	key              *connFlags
	mode             connMode
	lim              limits
	progress         io.Writer
	inPlace          bool
	info             io.Writer // the listening address, connection lines
	extra            []netio.Option
}

func recvMain(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("recv", recvUsage, stderr)
	listen := fs.String("listen", "", "address to listen on, host:port (required; port 0 picks a free one)")
	provider := providerFlag(fs)
	key := connFlag(fs)
	mode := modeFlag(fs)
	var lim limits
	lim.register(fs, "stop after this many messages (0: until the sender stops)", "stop this long after the sender connected (0: until the sender stops)")
	asJSON := fs.Bool("json", false, "print the summary as JSON instead of a table")
	obs := registerObserve(fs)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if *listen == "" {
		return usageError(fs, "-listen is required")
	}
	if code, ok := lim.check(fs); !ok {
		return code
	}
	warnProvider(stderr, *provider)
	extra, stopObs, err := obs.start(stderr)
	if err != nil {
		return failed(stderr, "recv", err)
	}
	defer stopObs()
	ctx, stop := interruptible(stderr, "recv")
	defer stop()
	progress, inPlace := progressTo(stderr)
	res, err := runRecv(ctx, recvConfig{
		provider: *provider, listen: *listen, key: key, mode: *mode, lim: lim,
		progress: progress, inPlace: inPlace, info: stderr, extra: extra,
	})
	return report(ctx, stdout, stderr, "recv", *asJSON, res, err, printRecv)
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
		return nil, fmt.Errorf("%w before a peer connected", errInterrupted)
	}
	return c, err
}

// errPeerIsPing is recv's error for a netio ping.
var errPeerIsPing = errors.New("the peer is a netio ping, which needs a netio pong: netio recv reads the stream of a netio send")

func runRecv(ctx context.Context, cfg recvConfig) (*recvResult, error) {
	opts := append(cfg.mode.options(), cfg.key.options()...)
	c, err := acceptOne(ctx, cfg.provider, cfg.listen, cfg.info, append(opts, cfg.extra...)...)
	if err != nil {
		return nil, err
	}
	defer closeConn(ctx, c)
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
	first := true    // the next message is the first: maybe a greeting
	stamped := false // decided by the first data message
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
		if first {
			first = false
			if hello := buf[:n]; bytes.Equal(hello, sendHello) || bytes.Equal(hello, pingHello) {
				// A ping may take the answer and close before the write
				// returns: the peer is known to be a ping either way.
				if err := writeNow(c, recvHello); err != nil && !bytes.Equal(hello, pingHello) {
					res.Ended = "read failed"
					runErr = fmt.Errorf("answering the greeting: %w", err)
					break
				}
				if bytes.Equal(hello, pingHello) {
					m.stop()
					unwatch()
					waitClose(ctx, c, buf) // until the ping has the answer
					return nil, errPeerIsPing
				}
				continue
			}
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
	// Pages up to here: ending may add the peer's close.
	st := c.Stats()
	if cfg.mode.ht() {
		res.Pages = &st.PagesReceived
	} else {
		res.Fragments = &st.PagesReceived
	}
	if runErr == nil && !peerClosed {
		unwatch() // from here on a deadline is ours alone
		res.Dropped = endRecv(ctx, c, buf, endOfStream, res.Messages)
	}
	return res, runErr
}

// endRecv ends a receive in order and returns how many messages it dropped.
// After the sender's end of stream it acknowledges it; when the receiver
// stops first it asks the sender to stop, reads what is still in flight up
// to the end of the stream without counting it, and acknowledges that.
// Then it waits for the sender to close, so that the acknowledgment is out
// before this process may exit. It all takes at most closeWait (a second
// after Ctrl-C); what was counted is not affected by how this goes.
func endRecv(ctx context.Context, c *netio.Conn, buf []byte, endOfStream bool, counted int64) (dropped int64) {
	c.SetDeadline(endBy(ctx))
	stop := whenDone(ctx, func() { c.SetDeadline(endBy(ctx)) })
	defer stop()
	if !endOfStream {
		if err := writeNow(c, stopRequest); err != nil {
			return dropped
		}
		for {
			n, err := readAny(c, &buf)
			if err != nil {
				return dropped
			}
			if n == 0 {
				break
			}
			dropped++
		}
	}
	if err := writeNow(c, endAck(counted, counted+dropped)); err != nil {
		return dropped
	}
	waitClose(ctx, c, buf)
	return dropped
}

// waitClose reads until the peer closes, at most until endBy.
func waitClose(ctx context.Context, c *netio.Conn, buf []byte) {
	c.SetReadDeadline(endBy(ctx))
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
	fmt.Fprintf(tw, "received\t%d messages (%s) in %s\n", r.Messages, bytesString(r.Bytes), durString(seconds(r.Seconds)))
	fmt.Fprintf(tw, "rate\t%.0f msg/s, %.3f Gbit/s of payload\n", r.MessagesPerSecond, r.GbitPerSecond)
	if r.Pages != nil {
		fmt.Fprintf(tw, "pages\t%d received, %s\n", *r.Pages, perPage(r.Messages, *r.Pages))
	}
	if l := r.Latency; l != nil {
		fmt.Fprintf(tw, "latency\tmedian %s, p99 %s (one-way, %d messages; %s)\n", durString(microsDur(l.MedianMicros)), durString(microsDur(l.P99Micros)), l.Samples, l.Clocks)
	} else {
		fmt.Fprintf(tw, "latency\tnone: the messages carried no send time (netio send stamps messages of %d bytes or more)\n", stampSize)
	}
	ended := r.Ended
	if r.Dropped > 0 {
		ended += fmt.Sprintf("; %d more messages in flight were read and dropped", r.Dropped)
	}
	fmt.Fprintf(tw, "ended\t%s\n", ended)
	tw.Flush()
}

// perPage says how many messages a page carried on average, or how many
// pages a message took when messages are larger than a page.
func perPage(messages int64, pages uint64) string {
	switch {
	case pages == 0:
		return "no messages per page"
	case messages == 0:
		return "no messages"
	case uint64(messages) < pages:
		return fmt.Sprintf("%.1f pages per message on average", float64(pages)/float64(messages))
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
