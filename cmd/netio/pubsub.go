package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/netio-go/netio"
)

// netio pub and netio sub are netio's publish/subscribe from the shell:
// pub is a netio.Publisher that publishes the lines of its standard input
// (or a generated load) under one tag, sub a netio.Subscription to one or
// more tags that prints what arrives. There is no protocol of their own on
// top: any netio program may publish to a sub or subscribe to a pub.

// subPollEvery is how often pub looks at its subscribers (to wait for the
// first ones and to say when one comes or goes) and sub at its counters
// (drops, reconnections).
const subPollEvery = 20 * time.Millisecond

const pubUsage = `usage: netio pub -listen host:port -tag T [flags]

Listens for subscribers (port 0 picks a free port; the address is printed on
stderr) and publishes each line of standard input, without its newline, as
one message under tag T, to every subscriber of T ('netio sub' or any netio
program calling netio.Subscribe). With -count, -duration or -rate it
publishes generated messages of -size bytes instead ("message <n> " filled
with dots), as fast as the subscribers take them or at -rate messages/s.

It waits for -subscribers subscribers (default 1) to have subscribed before
it publishes the first message: a message published while nobody subscribes
its tag reaches nobody, as in any publish/subscribe. It stops at the end of
its input, after -count messages or -duration, or on Ctrl-C, shuts down
(giving subscribers up to 5 s to take what was published, and telling each
where the sequences ended) and prints a summary: messages published,
subscribers, messages dropped for subscribers under a drop policy, and
messages that did not reach a subscriber. A subscriber under the default
policy (block) that falls behind makes pub wait, for up to -slow-limit: one
whose window stays full longer is cut loose (it reconnects, and counts what
it missed). Exit status: 0 done, 1 failed, 2 bad command line, 130
interrupted by Ctrl-C (after the summary).

Each subscriber chooses its own mode ('netio sub -mode'); the publisher
serves both on the same address, so pub's -mode only says which one it
expects in its summary.

  netio pub -listen 127.0.0.1:5000 -tag 7
  netio pub -listen 127.0.0.1:5000 -tag 7 -count 100000 -size 64
`

// pubResult is what netio pub prints; -json prints it as it is.
type pubResult struct {
	// Provider is the libfabric provider used.
	Provider string `json:"provider"`
	// Address is where the publisher listened.
	Address string `json:"address"`
	// Tag is the tag published under.
	Tag uint64 `json:"tag"`
	// Source is "stdin" or "generated".
	Source string `json:"source"`
	// MessageSize is the size of the generated messages (0 for stdin).
	MessageSize int `json:"message_size,omitempty"`
	// Published counts the messages published while the tag had
	// subscribers, Unsubscribed those published while it had none (they
	// reached nobody). Bytes is the payload of the published ones.
	Published    uint64 `json:"published"`
	Unsubscribed uint64 `json:"unsubscribed"`
	Bytes        int64  `json:"bytes"`
	// Delivered counts messages handed to subscribers' connections, summed
	// over the subscribers connected at the end (netio's
	// PublisherStats.Delivered: those that left are not in it).
	Delivered uint64 `json:"delivered"`
	// Dropped counts messages subscribers under a drop policy did not get:
	// their connection was full.
	Dropped uint64 `json:"dropped"`
	// CutSlow counts block subscribers cut loose because their window
	// stayed full longer than -slow-limit; Undelivered the messages that
	// did not reach a subscriber they were published to (summed over
	// subscribers: cut loose, or still unsent at the end).
	CutSlow     uint64 `json:"cut_slow"`
	Undelivered uint64 `json:"undelivered"`
	// Subscribers is the number of subscriber connections at the end,
	// MaxSubscribers the most at once.
	Subscribers    int `json:"subscribers"`
	MaxSubscribers int `json:"max_subscribers"`
	// Seconds is the time from the first Publish to the last one returning.
	Seconds           float64 `json:"seconds"`
	MessagesPerSecond float64 `json:"messages_per_second"`
	// Ended says why publishing stopped.
	Ended string `json:"ended"`
}

type pubConfig struct {
	provider, listen string
	key              *connFlags
	mode             connMode
	tag              uint64
	generated        bool
	size             int
	rate             float64
	lim              limits
	subscribers      int
	slowLimit        time.Duration
	input            io.Reader
	progress         io.Writer
	inPlace          bool
	info             io.Writer
}

// stdin is what pub reads; a variable so that tests running commands in
// this process can give it input.
var stdin io.Reader = os.Stdin

func pubMain(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("pub", pubUsage, stderr)
	listen := fs.String("listen", "", "address to listen on, host:port (required; port 0 picks a free one)")
	tag := fs.String("tag", "", "the tag to publish under, an unsigned integer (required)")
	provider := providerFlag(fs)
	key := connFlag(fs)
	mode := new(connMode)
	fs.Var(mode, "mode", "the mode subscribers are expected to use, `ll|ht` (each subscriber chooses its own with 'netio sub -mode'; the publisher serves both)")
	size := byteSize(64)
	fs.Var(&size, "size", "`bytes` per generated message (with -count, -duration or -rate)")
	rate := fs.Float64("rate", 0, "generated messages per second (0: as fast as the subscribers take them)")
	var lim limits
	lim.register(fs, "publish this many generated messages, then stop (0: no limit)", "publish generated messages for this long, then stop (0: no limit)")
	subs := fs.Int("subscribers", 1, "wait for this many subscribers before publishing the first message (0: at once)")
	asJSON := fs.Bool("json", false, "print the summary as JSON instead of a table")
	slowLimit := fs.Duration("slow-limit", netio.DefaultSlowSubscriberLimit, "how long a block subscriber whose window is full may hold the publisher before it is cut loose (0: for ever)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if *listen == "" {
		return usageError(fs, "-listen is required")
	}
	if *tag == "" {
		return usageError(fs, "-tag is required")
	}
	t, err := strconv.ParseUint(*tag, 0, 64)
	if err != nil {
		return usageError(fs, "-tag %q: want an unsigned integer", *tag)
	}
	if code, ok := checkSize(fs, size); !ok {
		return code
	}
	if code, ok := lim.check(fs); !ok {
		return code
	}
	if *rate < 0 {
		return usageError(fs, "-rate must not be negative")
	}
	if *subs < 0 {
		return usageError(fs, "-subscribers must not be negative")
	}
	generated := lim.count > 0 || lim.duration > 0 || *rate > 0
	warnProvider(stderr, *provider)
	ctx, stop := interruptible(stderr, "pub")
	defer stop()
	progress, inPlace := progressTo(stderr)
	res, err := runPub(ctx, pubConfig{
		provider: *provider, listen: *listen, key: key, mode: *mode, tag: t, generated: generated, size: int(size),
		rate: *rate, lim: lim, subscribers: *subs, slowLimit: *slowLimit, input: stdin, progress: progress, inPlace: inPlace, info: stderr,
	})
	return report(ctx, stdout, stderr, "pub", *asJSON, res, err, printPub)
}

// watchSubscribers says on info when subscribers come and go and when
// messages are dropped for them, and keeps the most seen at once, until
// stop.
func watchSubscribers(p *netio.Publisher, info io.Writer) (maxSeen func() int, stop func()) {
	var mu sync.Mutex
	most, last := 0, 0
	var dropped, cut uint64
	look := func() {
		st := p.Stats()
		n := st.Subscribers
		mu.Lock()
		defer mu.Unlock()
		if st.CutSlow > cut {
			fmt.Fprintf(info, "cut loose: %d block subscriber(s) whose window stayed full longer than the slow limit (%d in all)\n", st.CutSlow-cut, st.CutSlow)
			cut = st.CutSlow
		}
		if st.Dropped > dropped {
			fmt.Fprintf(info, "dropped: %d messages for subscribers under a drop policy whose connection was full (%d in all)\n", st.Dropped-dropped, st.Dropped)
			dropped = st.Dropped
		}
		if n != last {
			verb := "connected"
			if n < last {
				verb = "left"
			}
			fmt.Fprintf(info, "subscriber %s (%d now)\n", verb, n)
			last = n
		}
		most = max(most, n)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(subPollEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				look()
			}
		}
	}()
	return func() int {
			look()
			mu.Lock()
			defer mu.Unlock()
			return most
		}, func() {
			close(done)
			wg.Wait()
		}
}

// waitSubscribers waits until n subscribers are connected and the tag has
// been subscribed (the publisher's table has a tag: pub publishes one).
func waitSubscribers(ctx context.Context, p *netio.Publisher, n int) error {
	if n == 0 {
		return nil
	}
	t := time.NewTicker(subPollEvery)
	defer t.Stop()
	for {
		if st := p.Stats(); st.Subscribers >= n && st.Tags > 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w while waiting for subscribers", errInterrupted)
		case <-t.C:
		}
	}
}

func runPub(ctx context.Context, cfg pubConfig) (*pubResult, error) {
	opts := append(cfg.mode.options(), cfg.key.options()...)
	opts = append(opts, netio.WithSlowSubscriberLimit(cfg.slowLimit))
	p, err := netio.ListenPublisher(cfg.provider, cfg.listen, opts...)
	if err != nil {
		return nil, err
	}
	closed := false
	defer func() {
		if !closed {
			p.Close()
		}
	}()
	fmt.Fprintf(cfg.info, "listening on %s (provider %s)\n", p.Addr(), p.Addr().Network())
	maxSeen, stopWatch := watchSubscribers(p, cfg.info)
	defer stopWatch()
	res := &pubResult{Provider: p.Addr().Network(), Address: p.Addr().String(), Tag: cfg.tag, Source: "stdin"}
	if cfg.generated {
		res.Source, res.MessageSize = "generated", cfg.size
	}
	if cfg.subscribers > 0 {
		fmt.Fprintf(cfg.info, "waiting for %d subscriber(s) of tag %d\n", cfg.subscribers, cfg.tag)
	}
	if err := waitSubscribers(ctx, p, cfg.subscribers); err != nil {
		return nil, err
	}
	var m *meter
	if cfg.generated {
		m = startProgress(cfg.progress, cfg.inPlace, "pub", streamRate)
	} else {
		m = startProgress(nil, false, "pub", streamRate)
	}
	start := time.Now()
	var perr error
	if cfg.generated {
		res.Ended, perr = publishGenerated(ctx, p, cfg, m, start)
	} else {
		res.Ended, perr = publishLines(ctx, p, cfg, m)
	}
	elapsed := time.Since(start)
	m.stop()
	if ctx.Err() != nil {
		res.Ended = "interrupted"
		if errors.Is(perr, context.Canceled) {
			perr = nil // Ctrl-C ended a Publish waiting for a subscriber
		}
	}
	if perr == nil {
		perr = p.Flush()
	}
	st := p.Stats()
	res.Published, res.Unsubscribed, res.Delivered, res.Dropped = st.Published, st.Unsubscribed, st.Delivered, st.Dropped
	res.Subscribers, res.MaxSubscribers = st.Subscribers, maxSeen()
	res.Bytes = m.bytes.Load()
	res.Seconds = elapsed.Seconds()
	res.MessagesPerSecond = perSecond(m.n.Load(), elapsed)
	// Shutdown sends what was published and waits for the subscribers to
	// have it (up to 5 s); after Ctrl-C they are not waited for.
	closed = true
	if ctx.Err() != nil {
		go p.Close()
	} else {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := p.Shutdown(sctx); err != nil {
			fmt.Fprintf(cfg.info, "shut down: %v\n", unwrapOp(err))
		}
		cancel()
	}
	st = p.Stats()
	res.CutSlow, res.Undelivered = st.CutSlow, st.Undelivered
	if perr != nil {
		return res, fmt.Errorf("publish: %w", perr)
	}
	return res, nil
}

// genPayload is generated message n: "message <n> " filled with dots to
// size bytes (cut to size when shorter), so that a sub prints text.
func genPayload(buf []byte, n int64) []byte {
	buf = buf[:cap(buf)]
	k := copy(buf, "message "+strconv.FormatInt(n, 10)+" ")
	for i := k; i < len(buf); i++ {
		buf[i] = '.'
	}
	return buf
}

func publishGenerated(ctx context.Context, p *netio.Publisher, cfg pubConfig, m *meter, start time.Time) (string, error) {
	buf := make([]byte, cfg.size)
	var end time.Time
	if cfg.lim.duration > 0 {
		end = start.Add(cfg.lim.duration)
	}
	var interval time.Duration
	if cfg.rate > 0 {
		interval = time.Duration(float64(time.Second) / cfg.rate)
	}
	for n := int64(0); ; n++ {
		if cfg.lim.count > 0 && n >= cfg.lim.count {
			return "count reached", nil
		}
		now := time.Now()
		if !end.IsZero() && !now.Before(end) {
			return "duration reached", nil
		}
		if ctx.Err() != nil {
			return "interrupted", nil
		}
		if interval > 0 {
			// Message n is due at start + n/rate; sleep when ahead.
			if due := start.Add(time.Duration(n) * interval); due.After(now) {
				select {
				case <-time.After(due.Sub(now)):
				case <-ctx.Done():
					return "interrupted", nil
				}
			}
		}
		msg := genPayload(buf, n)
		if err := p.Publish(ctx, cfg.tag, msg); err != nil {
			return "publish failed", err
		}
		m.addMessage(len(msg))
	}
}

// publishLines publishes every line of the input. Lines are read in a
// goroutine of their own, so that Ctrl-C ends a run waiting for input; the
// subscribers' pages are flushed whenever the input has nothing more at
// hand, so that a line typed on a terminal goes out at once.
func publishLines(ctx context.Context, p *netio.Publisher, cfg pubConfig, m *meter) (string, error) {
	type line struct {
		b    []byte
		more bool // more input is already buffered
		err  error
	}
	lines := make(chan line, 64)
	go func() {
		r := bufio.NewReaderSize(cfg.input, 64<<10)
		for {
			b, err := r.ReadBytes('\n')
			if len(b) > 0 {
				b = []byte(strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r"))
				lines <- line{b: b, more: r.Buffered() > 0}
			}
			if err != nil {
				if errors.Is(err, io.EOF) {
					err = nil
				}
				lines <- line{err: err, more: false, b: nil}
				close(lines)
				return
			}
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return "interrupted", nil
		case l, ok := <-lines:
			if !ok {
				return "end of input", nil
			}
			if l.b == nil {
				if l.err != nil {
					return "reading input failed", fmt.Errorf("reading input: %w", l.err)
				}
				return "end of input", nil
			}
			if err := p.Publish(ctx, cfg.tag, l.b); err != nil {
				return "publish failed", err
			}
			m.addMessage(len(l.b))
			if !l.more && len(lines) == 0 {
				p.Flush()
			}
		}
	}
}

func printPub(w io.Writer, r *pubResult) {
	fmt.Fprintf(w, "netio pub: provider %s, %s, tag %d, %s\n\n", r.Provider, r.Address, r.Tag, r.Source)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	size := ""
	if r.MessageSize > 0 {
		size = " of " + sizeString(r.MessageSize)
	}
	fmt.Fprintf(tw, "published\t%d messages%s (%s) in %s, %.0f msg/s\n", r.Published, size, bytesString(r.Bytes), durString(seconds(r.Seconds)), r.MessagesPerSecond)
	if r.Unsubscribed > 0 {
		fmt.Fprintf(tw, "unheard\t%d messages published while nobody subscribed tag %d: they reached nobody\n", r.Unsubscribed, r.Tag)
	}
	fmt.Fprintf(tw, "subscribers\t%d at the end, at most %d at once\n", r.Subscribers, r.MaxSubscribers)
	fmt.Fprintf(tw, "dropped\t%d (for subscribers under a drop policy whose connection was full)\n", r.Dropped)
	if r.CutSlow > 0 || r.Undelivered > 0 {
		fmt.Fprintf(tw, "undelivered\t%d messages did not reach a subscriber; %d block subscriber(s) cut loose as slow\n", r.Undelivered, r.CutSlow)
	}
	fmt.Fprintf(tw, "ended\t%s\n", r.Ended)
	tw.Flush()
}

const subUsage = `usage: netio sub -to host:port -tag T[,T2...] [flags]

Subscribes to the tags at a 'netio pub' (or any netio.Publisher) and prints
each message that arrives on stdout, one line each: its tag, its sequence
number and its payload as text (quoted when it is not printable text), or
with -json one JSON object per message and the summary last. Gaps in a tag's
sequence numbers (messages lost, or dropped by the policy) and drops are
reported on stderr as they happen. It stops after -count messages or
-duration, or on Ctrl-C, and prints a summary: messages, rate from the first
message to the last, gaps, drops and reconnections. When the publisher is
not up yet it waits for it, saying so (-wait=false fails at once instead).
When the publisher goes away it connects again and carries on: what was
missed shows as a gap, and a publisher that restarted without saying where
its sequences ended (it crashed) is reported as a span whose loss is
unknown. A block subscriber that stops reading for longer than the
publisher allows is cut loose; it says so, and carries on the same way.
Exit status: 0 done, 1 failed, 2 bad command line, 130 interrupted by
Ctrl-C (after the summary).

-mode ht receives in netio's HighThroughput mode (the publisher batches the
messages into pages); -policy says what happens when sub falls behind:
block (the default) makes the publisher wait, drop-oldest and drop-newest
drop messages instead (the buffer of -buffer messages being full), which
shows as gaps.

  netio sub -to 127.0.0.1:5000 -tag 7
  netio sub -to 127.0.0.1:5000 -tag 7,8 -policy drop-newest -count 1000
`

// subResult is the summary of netio sub; -json prints it as it is.
type subResult struct {
	Provider string   `json:"provider"`
	Mode     string   `json:"mode"`
	Policy   string   `json:"policy"`
	Remote   string   `json:"remote"`
	Tags     []uint64 `json:"tags"`
	// Messages and Bytes count what was read.
	Messages int64 `json:"messages"`
	Bytes    int64 `json:"bytes"`
	// Seconds is the time from the first message to the last.
	Seconds           float64 `json:"seconds"`
	MessagesPerSecond float64 `json:"messages_per_second"`
	GbitPerSecond     float64 `json:"gbit_per_second"`
	// Skipped counts the messages the sequence numbers show missing, as
	// the reader saw them: lost on the way or dropped by the policy.
	Skipped uint64 `json:"skipped"`
	// The Subscription's counters.
	Gaps       uint64 `json:"gaps"`
	Missed     uint64 `json:"missed"`
	Dropped    uint64 `json:"dropped"`
	Reconnects uint64 `json:"reconnects"`
	Restarts   uint64 `json:"restarts"`
	// LossUnknown counts the spans whose loss nobody can count: the
	// publisher restarted without having said where its sequences ended.
	LossUnknown uint64 `json:"loss_unknown"`
	// Ended says why receiving stopped.
	Ended string `json:"ended"`
}

// subMessage is one message as sub -json prints it.
type subMessage struct {
	Tag     uint64 `json:"tag"`
	Seq     uint64 `json:"seq"`
	Payload string `json:"payload"`
}

// policyFlag is -policy.
type policyFlag netio.Policy

func (p *policyFlag) String() string { return netio.Policy(*p).String() }

func (p *policyFlag) Set(s string) error {
	for _, q := range []netio.Policy{netio.Block, netio.DropOldest, netio.DropNewest} {
		if s == q.String() {
			*p = policyFlag(q)
			return nil
		}
	}
	return errors.New("want block, drop-oldest or drop-newest")
}

// tagsFlag is -tag for sub: one or more tags, comma-separated.
type tagsFlag []uint64

func (t *tagsFlag) String() string {
	var s []string
	for _, v := range *t {
		s = append(s, strconv.FormatUint(v, 10))
	}
	return strings.Join(s, ",")
}

func (t *tagsFlag) Set(s string) error {
	*t = nil
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseUint(strings.TrimSpace(f), 0, 64)
		if err != nil {
			return fmt.Errorf("%q is not a tag: want unsigned integers, comma-separated", f)
		}
		*t = append(*t, v)
	}
	return nil
}

type subConfig struct {
	provider, to string
	key          *connFlags
	mode         connMode
	policy       netio.Policy
	buffer       int
	tags         []uint64
	lim          limits
	asJSON       bool
	wait         bool // wait for a publisher that is not up yet
	extra        []netio.Option
	out          io.Writer
	info         io.Writer // subscription lines, gaps, drops
}

func subMain(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("sub", subUsage, stderr)
	to := fs.String("to", "", "the publisher's address, host:port (required)")
	var tags tagsFlag
	fs.Var(&tags, "tag", "the tags to subscribe to, `T[,T2...]` (required)")
	provider := providerFlag(fs)
	key := connFlag(fs)
	mode := new(connMode)
	fs.Var(mode, "mode", "netio's mode, `ll|ht`: ll is low latency (a message is sent at once, or packed with those queued behind a send in flight), ht high throughput (the publisher batches messages into pages) (default ll)")
	policy := policyFlag(netio.Block)
	fs.Var(&policy, "policy", "what happens when sub falls behind, `block|drop-oldest|drop-newest`: block makes the publisher wait, the others drop")
	buffer := fs.Int("buffer", 0, "messages the subscription holds for the reader (0: netio's default, "+strconv.Itoa(netio.DefaultSubscriptionBuffer)+")")
	var lim limits
	lim.register(fs, "stop after this many messages (0: no limit)", "stop this long after subscribing (0: no limit)")
	asJSON := fs.Bool("json", false, "print each message as a JSON object, and the summary as JSON")
	wait := fs.Bool("wait", true, "wait for the publisher if it is not up yet (false: fail at once)")
	obs := registerObserve(fs)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if *to == "" {
		return usageError(fs, "-to is required")
	}
	if len(tags) == 0 {
		return usageError(fs, "-tag is required")
	}
	if *buffer < 0 {
		return usageError(fs, "-buffer must not be negative")
	}
	if code, ok := lim.check(fs); !ok {
		return code
	}
	warnProvider(stderr, *provider)
	extra, stopObs, err := obs.start(stderr)
	if err != nil {
		return failed(stderr, "sub", err)
	}
	defer stopObs()
	ctx, stop := interruptible(stderr, "sub")
	defer stop()
	out := bufio.NewWriterSize(stdout, 64<<10)
	res, err := runSub(ctx, subConfig{
		provider: *provider, to: *to, key: key, mode: *mode, policy: netio.Policy(policy), buffer: *buffer, tags: tags,
		lim: lim, asJSON: *asJSON, wait: *wait, out: out, info: stderr, extra: extra,
	})
	out.Flush()
	return report(ctx, stdout, stderr, "sub", *asJSON, res, err, printSub)
}

// subscribe subscribes, giving up on Ctrl-C and after connectTimeout; with
// cfg.wait, a publisher that is not up yet is waited for until Ctrl-C,
// with a message.
func subscribe(ctx context.Context, cfg subConfig) (*netio.Subscription, error) {
	opts := append(cfg.mode.options(), netio.WithPolicy(cfg.policy))
	opts = append(opts, cfg.key.options()...)
	opts = append(opts, cfg.extra...)
	if cfg.buffer > 0 {
		opts = append(opts, netio.WithSubscriptionBuffer(cfg.buffer))
	}
	sctx, cancel := context.WithTimeout(ctx, connectTimeout)
	s, err := netio.Subscribe(sctx, cfg.provider, cfg.to, cfg.tags, opts...)
	cancel()
	if err != nil && cfg.wait && ctx.Err() == nil && notUpYet(err) {
		fmt.Fprintf(cfg.info, "waiting for a publisher at %s (%v); Ctrl-C to stop\n", cfg.to, unwrapOp(err))
		s, err = netio.Subscribe(ctx, cfg.provider, cfg.to, cfg.tags, append(opts, netio.WithWaitForPublisher())...)
	}
	if err != nil && ctx.Err() != nil {
		return nil, fmt.Errorf("%w while subscribing", errInterrupted)
	}
	return s, err
}

// notUpYet reports whether a subscription failed because nobody publishes
// at the address yet (refused, timed out, at its limits), as opposed to a
// peer that is not a publisher or refuses us.
func notUpYet(err error) bool {
	return !errors.Is(err, netio.ErrRejected) && !errors.Is(err, netio.ErrProtocol) && !errors.Is(err, netio.ErrInvalidConfig) ||
		errors.Is(err, os.ErrDeadlineExceeded)
}

// unwrapOp is what a *net.OpError says, without the operation and address.
func unwrapOp(err error) error {
	var oe *net.OpError
	if errors.As(err, &oe) {
		return oe.Err
	}
	return err
}

// eventLine is how sub reports a subscription's event on stderr; "" for
// events it reports otherwise (gaps: from the sequence numbers).
func eventLine(ev netio.Event) string {
	switch ev.Kind {
	case netio.EventDisconnected:
		switch {
		case errors.Is(ev.Err, netio.ErrSlowSubscriber):
			return "cut loose by the publisher: this subscriber's window stayed full longer than the publisher allows (read faster, or use a drop policy); reconnecting"
		case errors.Is(ev.Err, netio.ErrPublisherClosed):
			return "the publisher closed; reconnecting"
		}
		return fmt.Sprintf("lost the publisher (%v); reconnecting", ev.Err)
	case netio.EventReconnected:
		return "reconnected to the publisher"
	case netio.EventPublisherRestarted:
		if ev.LossUnknown {
			return "the publisher restarted without saying where its sequences ended: how many messages were lost between its last message before and its first after is unknown; sequence numbers begin again"
		}
		return "the publisher restarted: sequence numbers begin again"
	}
	return ""
}

// counterWatch reports on info the drops a Subscription's policy makes, as
// its counters change.
type counterWatch struct {
	s    *netio.Subscription
	info io.Writer
	mu   sync.Mutex
	last netio.SubscriptionStats
}

func (w *counterWatch) look(policy netio.Policy) {
	st := w.s.Stats()
	w.mu.Lock()
	defer w.mu.Unlock()
	if d := st.Dropped - w.last.Dropped; d > 0 {
		fmt.Fprintf(w.info, "dropped: %d messages (%s: the subscription's buffer was full), %d in all\n", d, policy, st.Dropped)
	}
	w.last = st
}

func runSub(ctx context.Context, cfg subConfig) (*subResult, error) {
	s, err := subscribe(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer func() {
		if ctx.Err() != nil {
			go s.Close()
		} else {
			s.Close()
		}
	}()
	res := &subResult{Provider: cfg.provider, Mode: netio.Mode(cfg.mode).String(), Policy: cfg.policy.String(), Remote: cfg.to, Tags: cfg.tags}
	if res.Provider == "" {
		res.Provider = defaultProviderName()
	}
	fmt.Fprintf(cfg.info, "subscribed to tag %s at %s (provider %s, %s, %s)\n", (*tagsFlag)(&cfg.tags).String(), cfg.to, res.Provider, netio.Mode(cfg.mode), cfg.policy)

	w := &counterWatch{s: s, info: cfg.info}
	events := s.Events()
	tick := time.NewTicker(subPollEvery)
	defer tick.Stop()
	var deadline <-chan time.Time
	if cfg.lim.duration > 0 {
		t := time.NewTimer(cfg.lim.duration)
		defer t.Stop()
		deadline = t.C
	}
	next := map[uint64]uint64{} // per tag, the sequence number expected next
	takeEvent := func(ev netio.Event) {
		if l := eventLine(ev); l != "" {
			fmt.Fprintln(cfg.info, l)
		}
		if ev.Kind == netio.EventPublisherRestarted {
			clear(next) // the new publisher numbers from 0
		}
	}
	// takeEvents reports the events that came before a message: they were
	// sent before it.
	takeEvents := func() {
		for events != nil {
			select {
			case ev, ok := <-events:
				if !ok {
					events = nil
					return
				}
				takeEvent(ev)
			default:
				return
			}
		}
	}
	enc := json.NewEncoder(cfg.out)
	var first, last time.Time
	var runErr error
loop:
	for {
		if cfg.lim.count > 0 && res.Messages >= cfg.lim.count {
			res.Ended = "count reached"
			break
		}
		select {
		case <-ctx.Done():
			res.Ended = "interrupted"
			break loop
		case <-deadline:
			res.Ended = "duration reached"
			break loop
		case <-tick.C:
			w.look(cfg.policy)
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			takeEvent(ev)
		case m, ok := <-s.C:
			if !ok {
				res.Ended = "the subscription ended"
				runErr = s.Err()
				break loop
			}
			takeEvents()
			now := time.Now()
			if res.Messages == 0 {
				first = now
			}
			last = now
			tag, seq, b := m.Tag(), m.Seq(), m.Bytes()
			if want, seen := next[tag]; seen && seq > want {
				res.Skipped += seq - want
				fmt.Fprintf(cfg.info, "gap: tag %d: %d messages missing (seq %d to %d)\n", tag, seq-want, want, seq-1)
				w.look(cfg.policy)
			}
			next[tag] = seq + 1
			if cfg.asJSON {
				enc.Encode(subMessage{Tag: tag, Seq: seq, Payload: string(b)})
			} else {
				fmt.Fprintf(cfg.out, "%d\t%d\t%s\n", tag, seq, printable(b))
			}
			res.Messages++
			res.Bytes += int64(len(b))
			m.Release()
			if len(s.C) == 0 {
				if f, ok := cfg.out.(*bufio.Writer); ok {
					f.Flush()
				}
			}
		}
	}
	w.look(cfg.policy)
	if f, ok := cfg.out.(*bufio.Writer); ok {
		f.Flush()
	}
	if res.Messages > 1 {
		d := last.Sub(first)
		res.Seconds = d.Seconds()
		res.MessagesPerSecond = perSecond(res.Messages-1, d)
		res.GbitPerSecond = gbit(res.Bytes, d)
	}
	st := s.Stats()
	res.Gaps, res.Missed, res.Dropped, res.Reconnects, res.Restarts = st.Gaps, st.Missed, st.Dropped, st.Reconnects, st.Restarts
	res.LossUnknown = st.LossUnknown
	return res, runErr
}

// defaultProviderName is the provider netio picks for network "".
func defaultProviderName() string {
	if p := os.Getenv("NETIO_PROVIDER"); p != "" {
		return p
	}
	return netio.DefaultNetwork
}

// printable is b as text when it is printable UTF-8 (tabs allowed), and
// quoted otherwise.
func printable(b []byte) string {
	if utf8.Valid(b) {
		ok := true
		for _, r := range string(b) {
			if !unicode.IsPrint(r) && r != '\t' {
				ok = false
				break
			}
		}
		if ok {
			return string(b)
		}
	}
	return strconv.Quote(string(b))
}

func printSub(w io.Writer, r *subResult) {
	fmt.Fprintf(w, "netio sub: provider %s, %s mode, %s, tag %s at %s\n\n", r.Provider, r.Mode, r.Policy, (*tagsFlag)(&r.Tags).String(), r.Remote)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "received\t%d messages (%s) in %s\n", r.Messages, bytesString(r.Bytes), durString(seconds(r.Seconds)))
	fmt.Fprintf(tw, "rate\t%.0f msg/s, %.3f Gbit/s of payload (from the first message to the last)\n", r.MessagesPerSecond, r.GbitPerSecond)
	if r.LossUnknown > 0 {
		fmt.Fprintf(tw, "gaps\t%d messages known missing in the sequence numbers, and loss unknown across %d publisher restart(s); %d gaps on the way (%d messages), %d dropped by the policy\n", r.Skipped, r.LossUnknown, r.Gaps, r.Missed, r.Dropped)
	} else {
		fmt.Fprintf(tw, "gaps\t%d messages missing in the sequence numbers; %d gaps on the way (%d messages), %d dropped by the policy\n", r.Skipped, r.Gaps, r.Missed, r.Dropped)
	}
	fmt.Fprintf(tw, "reconnects\t%d (%d of them to a restarted publisher)\n", r.Reconnects, r.Restarts)
	fmt.Fprintf(tw, "ended\t%s\n", r.Ended)
	tw.Flush()
}
