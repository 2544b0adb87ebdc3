package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"text/tabwriter"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/netio-go/netio"
)

// netio ping writes a message and waits for netio pong to echo it. It
// first greets the peer with pingHello, which an echo server sends back and
// netio recv answers with recvHello, so that a ping that reached the wrong
// kind of peer says so at once. pong echoes every message, the empty one
// too: ping ends a run with an empty message and closes once it has come
// back, and pong, having echoed it, waits for that close. So neither exits
// while its last message may still be in netio's buffers (netio's Close
// does not wait for them).

const pingUsage = `usage: netio ping -to host:port [flags]

Measures round trips to a 'netio pong' (or any netio echo server): writes a
message of -size bytes, waits for it to come back, and again, until -count
round trips, -duration (10s when neither is given) or Ctrl-C. Prints min,
median, p90, p99 and max and a histogram. Percentiles are exact to within
1%. A peer that does not echo (a 'netio recv', say) is found out before
the first round trip, and the run fails. Exit status: 0 done, 1 failed,
2 bad command line, 130 interrupted by Ctrl-C (after the summary).
`

// pingResult is what netio ping prints; -json prints it as it is.
type pingResult struct {
	// Provider is the libfabric provider used.
	Provider string `json:"provider"`
	// Local and Remote are the connection's addresses.
	Local  string `json:"local"`
	Remote string `json:"remote"`
	// MessageSize is the size of a ping, in bytes.
	MessageSize int `json:"message_size"`
	// Pings is the number of round trips measured.
	Pings int64 `json:"pings"`
	// Seconds is how long they took in all.
	Seconds float64 `json:"seconds"`
	// Round-trip statistics, in µs.
	MinMicros    float64 `json:"min_us"`
	MedianMicros float64 `json:"median_us"`
	P90Micros    float64 `json:"p90_us"`
	P99Micros    float64 `json:"p99_us"`
	MaxMicros    float64 `json:"max_us"`
	// Histogram counts the round trips in log-spaced buckets.
	Histogram []histRow `json:"histogram"`
	// Ended says why the run stopped.
	Ended string `json:"ended"`
}

type pingConfig struct {
	provider, to string
	key          *connFlags
	size         int
	lim          limits
	progress     io.Writer
	inPlace      bool
	info         io.Writer
}

func pingMain(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("ping", pingUsage, stderr)
	to := fs.String("to", "", "the pong's address, host:port (required)")
	provider := providerFlag(fs)
	key := connFlag(fs)
	size := byteSize(64)
	fs.Var(&size, "size", "`bytes` per ping, e.g. 64, 4KiB, 1MiB")
	var lim limits
	lim.register(fs, "stop after this many round trips (0: no limit)", "stop after this long (0: no limit; 10s when -count is not given either)")
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
	ctx, stop := interruptible(stderr, "ping")
	defer stop()
	progress, inPlace := progressTo(stderr)
	res, err := runPing(ctx, pingConfig{
		provider: *provider, to: *to, key: key, size: int(size), lim: lim.orDefault(),
		progress: progress, inPlace: inPlace, info: stderr,
	})
	if res != nil && res.Pings == 0 {
		// Nothing to summarize.
		res = nil
		if err == nil && ctx.Err() == nil {
			err = errors.New("no round trip completed")
		}
	}
	return report(ctx, stdout, stderr, "ping", *asJSON, res, err, printPing)
}

func runPing(ctx context.Context, cfg pingConfig) (*pingResult, error) {
	c, err := dial(ctx, cfg.provider, cfg.to, cfg.key.options()...)
	if err != nil {
		return nil, err
	}
	defer closeConn(ctx, c)
	fmt.Fprintf(cfg.info, "connected to %s from %s (provider %s)\n", c.RemoteAddr(), c.LocalAddr(), c.RemoteAddr().Network())
	switch reply, err := greet(ctx, c, pingHello); {
	case errors.Is(err, errNoAnswer) || errors.Is(err, errClosedSilent):
		return nil, fmt.Errorf("%w: is it a netio pong (or another echo server)?", err)
	case err != nil:
		return nil, err
	case bytes.Equal(reply, recvHello):
		return nil, errors.New("the peer is a netio recv, which reads the stream of a netio send: netio ping needs a netio pong (or another echo server)")
	case !bytes.Equal(reply, pingHello):
		return nil, fmt.Errorf("the peer answered the greeting with a %d-byte message instead of echoing it: is it a netio pong?", len(reply))
	}
	res := &pingResult{
		Provider:    c.RemoteAddr().Network(),
		Local:       c.LocalAddr().String(),
		Remote:      c.RemoteAddr().String(),
		MessageSize: cfg.size,
	}
	// Ctrl-C ends a blocked Write or ReadMessage at once.
	unwatch := whenDone(ctx, func() { c.SetDeadline(time.Now()) })
	defer unwatch()

	h := newHist()
	m := startProgress(cfg.progress, cfg.inPlace, "round trip", func(n, _ int64, d time.Duration) string {
		return durString(d/time.Duration(n)) + " per round trip"
	})
	ping := make([]byte, cfg.size)
	pong := make([]byte, cfg.size)
	var seq [8]byte
	start := time.Now()
	var end, guarded time.Time
	if cfg.lim.duration > 0 {
		end = start.Add(cfg.lim.duration)
	}
	var runErr error
	for {
		now := time.Now()
		if cfg.lim.count > 0 && h.n >= cfg.lim.count {
			res.Ended = "count reached"
			break
		}
		if !end.IsZero() && !now.Before(end) {
			res.Ended = "duration reached"
			break
		}
		if now.Sub(guarded) > time.Second {
			// A pong that stops answering fails the run instead of
			// hanging it. Set before looking at ctx: Ctrl-C moves the
			// deadlines to now.
			c.SetDeadline(now.Add(hangGuard))
			guarded = now
		}
		if ctx.Err() != nil {
			res.Ended = "interrupted"
			break
		}
		// A sequence number makes a lost, repeated or stale pong visible.
		binary.LittleEndian.PutUint64(seq[:], uint64(h.n))
		copy(ping, seq[:])
		t := time.Now()
		if _, err := c.Write(ping); err != nil {
			if ctx.Err() != nil {
				res.Ended = "interrupted"
			} else {
				runErr = fmt.Errorf("write: %w (after %d round trips)", err, h.n)
			}
			break
		}
		n, err := c.ReadMessage(pong)
		rtt := time.Since(t)
		if err != nil {
			if ctx.Err() != nil {
				res.Ended = "interrupted"
			} else {
				runErr = fmt.Errorf("read: %w (after %d round trips)", err, h.n)
			}
			break
		}
		if !bytes.Equal(pong[:n], ping) {
			runErr = fmt.Errorf("the reply to ping %d is not its echo", h.n)
			break
		}
		h.add(rtt)
		m.add(1)
	}
	elapsed := time.Since(start)
	m.stop()
	res.Pings = h.n
	res.Seconds = elapsed.Seconds()
	res.MinMicros = micros(h.min)
	res.MedianMicros = micros(h.percentile(50))
	res.P90Micros = micros(h.percentile(90))
	res.P99Micros = micros(h.percentile(99))
	res.MaxMicros = micros(h.max)
	res.Histogram = h.rows()
	if runErr != nil {
		res.Ended = "failed"
		return res, runErr
	}
	// End the run: the empty message comes back once the pong has echoed
	// everything before it (a ping cut short by Ctrl-C may still come
	// first). Its results are in hand, so how this goes does not matter,
	// and after Ctrl-C it is given a second at most.
	unwatch()
	c.SetDeadline(endBy(ctx))
	stop := whenDone(ctx, func() { c.SetDeadline(endBy(ctx)) })
	defer stop()
	if _, err := c.Write(nil); err == nil {
		for {
			n, err := readAny(c, &pong)
			if err != nil || n == 0 {
				break
			}
		}
	}
	return res, nil
}

func printPing(w io.Writer, r *pingResult) {
	fmt.Fprintf(w, "netio ping: provider %s, %s -> %s, %s messages\n\n", r.Provider, r.Local, r.Remote, sizeString(r.MessageSize))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "round trips\t%d in %s (%s)\n", r.Pings, durString(seconds(r.Seconds)), r.Ended)
	fmt.Fprintf(tw, "rtt\tmin %s, median %s, p90 %s, p99 %s, max %s\n",
		durString(microsDur(r.MinMicros)), durString(microsDur(r.MedianMicros)), durString(microsDur(r.P90Micros)),
		durString(microsDur(r.P99Micros)), durString(microsDur(r.MaxMicros)))
	tw.Flush()
	fmt.Fprintln(w)
	printHist(w, "round trip", r.Histogram, 40)
}

const pongUsage = `usage: netio pong -listen host:port [flags]

Listens (port 0 picks a free port; the address is printed on stderr) and
echoes every message of each connection back until its peer closes, for
'netio ping' or any netio program. Serves -count connections at a time and
then exits (0: until Ctrl-C), printing one line per connection. Exit
status: 0 done, 1 a connection failed, 2 bad command line, 130 interrupted
by Ctrl-C.
`

// pongResult is what netio pong prints with -json.
type pongResult struct {
	// Provider is the libfabric provider used.
	Provider string `json:"provider"`
	// Address is where pong listened.
	Address string `json:"address"`
	// Connections are the connections served, in the order they ended.
	Connections []pongConn `json:"connections"`
}

// pongConn is one connection pong served.
type pongConn struct {
	Remote string `json:"remote"`
	// Peer names the kind of peer, from its greeting: "netio ping",
	// "netio send", or "" for another program.
	Peer     string  `json:"peer"`
	Messages int64   `json:"messages"`
	Seconds  float64 `json:"seconds"`
	Ended    string  `json:"ended"`
	Error    string  `json:"error,omitempty"`
}

type pongConfig struct {
	provider, listen string
	key              *connFlags
	count            int
	line             io.Writer // a line per connection; nil for none
	info             io.Writer
}

func pongMain(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("pong", pongUsage, stderr)
	listen := fs.String("listen", "", "address to listen on, host:port (required; port 0 picks a free one)")
	provider := providerFlag(fs)
	key := connFlag(fs)
	count := fs.Int("count", 1, "exit after serving this many connections (0: until Ctrl-C)")
	asJSON := fs.Bool("json", false, "print the connections as JSON when done instead of a line each")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if *listen == "" {
		return usageError(fs, "-listen is required")
	}
	if *count < 0 {
		return usageError(fs, "-count must not be negative")
	}
	warnProvider(stderr, *provider)
	ctx, stop := interruptible(stderr, "pong")
	defer stop()
	cfg := pongConfig{provider: *provider, listen: *listen, key: key, count: *count, info: stderr}
	if !*asJSON {
		cfg.line = stdout
	}
	res, err := runPong(ctx, cfg)
	if !*asJSON {
		res = nil // the lines were the output
	}
	return report(ctx, stdout, stderr, "pong", *asJSON, res, err, nil)
}

// runPong serves cfg.count connections, each in a goroutine of its own; its
// error is the first connection's that failed.
func runPong(ctx context.Context, cfg pongConfig) (*pongResult, error) {
	ln, err := netio.Listen(cfg.provider, cfg.listen, cfg.key.options()...)
	if err != nil {
		return nil, err
	}
	defer ln.Close()
	res := &pongResult{Provider: ln.Addr().Network(), Address: ln.Addr().String()}
	fmt.Fprintf(cfg.info, "listening on %s (provider %s)\n", ln.Addr(), ln.Addr().Network())

	var mu sync.Mutex // guards active, interrupted, res.Connections and cfg.line
	active := map[*netio.Conn]bool{}
	interrupted := false
	unwatch := whenDone(ctx, func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		interrupted = true
		for c := range active {
			c.SetDeadline(time.Now())
		}
	})
	defer unwatch()

	var g errgroup.Group
	var acceptErr error
	for served := 0; cfg.count == 0 || served < cfg.count; served++ {
		c, err := ln.AcceptConn()
		if err != nil {
			if ctx.Err() == nil {
				acceptErr = fmt.Errorf("accept: %w", err)
			}
			break
		}
		fmt.Fprintf(cfg.info, "%s connected\n", c.RemoteAddr())
		mu.Lock()
		active[c] = true
		if interrupted {
			c.SetDeadline(time.Now())
		}
		mu.Unlock()
		g.Go(func() error {
			pc := echo(ctx, c)
			closeConn(ctx, c)
			mu.Lock()
			defer mu.Unlock()
			delete(active, c)
			res.Connections = append(res.Connections, pc)
			if cfg.line != nil {
				line := fmt.Sprintf("%s: echoed %d messages in %s, %s", pc.Remote, pc.Messages, durString(seconds(pc.Seconds)), pc.Ended)
				if pc.Peer == "netio send" {
					line += " (it was a netio send, which streams to a netio recv)"
				}
				fmt.Fprintln(cfg.line, line)
			}
			if pc.Error != "" {
				return fmt.Errorf("%s: %s", pc.Remote, pc.Error)
			}
			return nil
		})
	}
	ln.Close() // served enough: refuse the next ones
	err = g.Wait()
	if acceptErr != nil {
		err = acceptErr
	}
	return res, err
}

// echo writes every message of c back until the peer closes. A first
// message that is a netio ping's or send's greeting is echoed too, but not
// counted.
func echo(ctx context.Context, c *netio.Conn) pongConn {
	pc := pongConn{Remote: c.RemoteAddr().String()}
	start := time.Now()
	buf := make([]byte, 64<<10)
	first := true
	ending := false // the empty message was echoed: the peer is done
	for {
		n, err := readAny(c, &buf)
		if err != nil {
			switch {
			case errors.Is(err, io.EOF):
				pc.Ended = "the peer closed"
			case ending:
				// The peer may exit before its close reaches us.
				pc.Ended = "the peer ended the run"
			case errors.Is(err, os.ErrDeadlineExceeded) && ctx.Err() != nil:
				pc.Ended = "interrupted"
			default:
				pc.Ended = "failed"
				pc.Error = fmt.Sprintf("read: %v (after %d messages)", oneLine(err.Error()), pc.Messages)
			}
			break
		}
		if _, err := c.Write(buf[:n]); err != nil {
			switch {
			case ending:
				pc.Ended = "the peer ended the run"
			case ctx.Err() != nil:
				pc.Ended = "interrupted"
			default:
				pc.Ended = "failed"
				pc.Error = fmt.Sprintf("write: %v (after %d messages)", oneLine(err.Error()), pc.Messages)
			}
			break
		}
		if first {
			first = false
			switch {
			case bytes.Equal(buf[:n], pingHello):
				pc.Peer = "netio ping"
				continue
			case bytes.Equal(buf[:n], sendHello):
				pc.Peer = "netio send"
				continue
			}
		}
		if n == 0 {
			ending = true
			c.SetReadDeadline(endBy(ctx))
			continue
		}
		pc.Messages++
	}
	pc.Seconds = time.Since(start).Seconds()
	return pc
}
