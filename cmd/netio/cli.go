package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/netio-go/netio"
)

// What the subcommands share: flag parsing that reports a bad command line
// as one line, the -count/-duration limits, Ctrl-C, and output.

const (
	// closeWait bounds ending a run in order: waiting for the peer to
	// acknowledge the end of the stream, to finish what it had in flight
	// after a stop request, or to close its side.
	closeWait = 5 * time.Second
	// interruptGrace is what a run has, after Ctrl-C, to end in order:
	// then it gives up on its peer and prints its summary.
	interruptGrace = time.Second
	// failsafeWait is when a run that Ctrl-C did not end is ended anyway.
	failsafeWait = 5 * time.Second
	// helloWait bounds waiting for the peer's answer to the greeting with
	// which send and ping find out what kind of peer they reached.
	helloWait = 5 * time.Second
	// defaultRun is how long send and ping run when neither -count nor
	// -duration is given.
	defaultRun = 10 * time.Second
)

// newFlagSet returns the flag set of "netio <cmd>"; usage is printed by -h
// above the flags.
func newFlagSet(cmd, usage string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("netio "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage+"\nflags:\n")
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args. A bad command line is reported as one line
// naming the command (the flag package would add the whole usage) and
// gives exitUsage; -h prints the usage and gives exitOK. ok says whether to
// go on.
func parseFlags(fs *flag.FlagSet, args []string) (code int, ok bool) {
	stderr := fs.Output()
	fs.SetOutput(new(bytes.Buffer)) // what flag prints on its own
	err := fs.Parse(args)
	fs.SetOutput(stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.Usage()
		return exitOK, false
	case err != nil:
		return usageError(fs, "%v", err), false
	case fs.NArg() > 0:
		return usageError(fs, "unexpected argument %q", fs.Arg(0)), false
	}
	return exitOK, true
}

// usageError reports a bad command line in one line and returns exitUsage.
func usageError(fs *flag.FlagSet, format string, args ...any) int {
	fmt.Fprintf(fs.Output(), "%s: %s (see '%s -h')\n", fs.Name(), fmt.Sprintf(format, args...), fs.Name())
	return exitUsage
}

// failed reports a failed run in one line and returns exitError.
func failed(stderr io.Writer, cmd string, err error) int {
	fmt.Fprintf(stderr, "netio: %s: %s\n", cmd, oneLine(err.Error()))
	return exitError
}

// oneLine keeps an error message on one line whatever libfabric put in it.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// limits are the -count and -duration flags of a run: it stops at
// whichever is reached first; zero means no limit.
type limits struct {
	count    int64
	duration time.Duration
}

func (l *limits) register(fs *flag.FlagSet, countHelp, durationHelp string) {
	fs.Int64Var(&l.count, "count", 0, countHelp)
	fs.DurationVar(&l.duration, "duration", 0, durationHelp)
}

func (l *limits) check(fs *flag.FlagSet) (int, bool) {
	if l.count < 0 {
		return usageError(fs, "-count must not be negative"), false
	}
	if l.duration < 0 {
		return usageError(fs, "-duration must not be negative"), false
	}
	return exitOK, true
}

// orDefault gives a run without limits the default length.
func (l limits) orDefault() limits {
	if l.count == 0 && l.duration == 0 {
		l.duration = defaultRun
	}
	return l
}

// byteSize is a flag holding a size in bytes: 1024, 4KiB, 4k, 1MiB, 1M.
type byteSize int

func (b *byteSize) String() string { return strconv.Itoa(int(*b)) }

func (b *byteSize) Set(s string) error {
	num := strings.TrimRight(s, "KMGiBbkmg")
	unit := strings.ToLower(strings.TrimSuffix(strings.TrimSuffix(s[len(num):], "B"), "b"))
	mult := 1
	switch unit {
	case "":
	case "k", "ki":
		mult = 1 << 10
	case "m", "mi":
		mult = 1 << 20
	case "g", "gi":
		mult = 1 << 30
	default:
		return errors.New("want bytes, e.g. 64, 4KiB or 1MiB")
	}
	n, err := strconv.Atoi(num)
	if err != nil || n < 0 || n > (1<<40)/mult {
		return errors.New("want bytes, e.g. 64, 4KiB or 1MiB")
	}
	*b = byteSize(n * mult)
	return nil
}

// checkSize validates a message size flag: at least one byte (an empty
// message ends a stream), at most what a netio connection carries.
func checkSize(fs *flag.FlagSet, size byteSize) (int, bool) {
	if size < 1 || size > netio.DefaultMaxMessageSize {
		return usageError(fs, "-size must be between 1 B and %s", sizeString(netio.DefaultMaxMessageSize)), false
	}
	return exitOK, true
}

// errInterrupted is wrapped by the error of a run that Ctrl-C ended before
// it had anything to report ("interrupted while connecting").
var errInterrupted = errors.New("interrupted")

// interruption is the cause of a run's context once a signal cancelled it.
type interruption struct {
	sig os.Signal
	at  time.Time
}

func (i *interruption) Error() string { return "interrupted by " + i.sig.String() }

// interruptedBy returns what interrupted ctx, or nil.
func interruptedBy(ctx context.Context) *interruption {
	var i *interruption
	if errors.As(context.Cause(ctx), &i) {
		return i
	}
	return nil
}

// signalCode is the exit code of a run that sig interrupted: 128 plus the
// signal's number, as a shell reports a process the signal killed (130 for
// SIGINT, 143 for SIGTERM).
func signalCode(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return exitInterrupted
}

// exit ends the process; a variable so that nothing else calls os.Exit.
var exit = os.Exit

// interruptible returns a context that SIGINT or SIGTERM cancels, with an
// *interruption as its cause, so that Ctrl-C ends a run in order with its
// summary: every command stops what it does at once and gives ending in
// order at most interruptGrace. The first signal is acknowledged on stderr
// at once. A second one exits at once with a line on stderr, and so does a
// run that has not ended failsafeWait after the first. stop releases the
// signals.
func interruptible(stderr io.Writer, cmd string) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var first os.Signal
		var failsafe <-chan time.Time
		for {
			select {
			case s := <-sig:
				if first == nil {
					first = s
					fmt.Fprintf(stderr, "netio: %s: interrupted: stopping (Ctrl-C again exits at once)\n", cmd)
					cancel(&interruption{sig: s, at: time.Now()})
					failsafe = time.After(failsafeWait)
					continue
				}
				fmt.Fprintf(stderr, "netio: %s: interrupted again: exiting at once, without a summary\n", cmd)
				exit(signalCode(s))
			case <-failsafe:
				fmt.Fprintf(stderr, "netio: %s: interrupted, and still running %v later: exiting without a summary\n", cmd, failsafeWait)
				exit(signalCode(first))
			case <-done:
				return
			}
		}
	}()
	return ctx, func() {
		signal.Stop(sig)
		close(done)
		wg.Wait()
		cancel(nil)
	}
}

// endBy is the deadline of ending a run in order (the end of the stream
// and its acknowledgment, waiting for the peer to close): closeWait from
// now, but no later than interruptGrace after an interrupt.
func endBy(ctx context.Context) time.Time {
	t := time.Now().Add(closeWait)
	if ctx.Err() != nil {
		at := time.Now()
		if i := interruptedBy(ctx); i != nil {
			at = i.at
		}
		if g := at.Add(interruptGrace); g.Before(t) {
			t = g
		}
	}
	return t
}

// endWait is how long endBy gives ending in order, for messages.
func endWait(ctx context.Context) time.Duration {
	if ctx.Err() != nil {
		return interruptGrace
	}
	return closeWait
}

// closeConn closes c. netio's Close waits up to its linger time for what
// was written to be delivered; after an interrupt the peer may not be
// reading and the process is about to exit, so it is not waited for.
func closeConn(ctx context.Context, c *netio.Conn) {
	if ctx.Err() != nil {
		go c.Close()
		return
	}
	c.Close()
}

// whenDone runs f if ctx ends before the returned stop is called; stop
// returns once f, if it started, has finished.
func whenDone(ctx context.Context, f func()) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-ctx.Done():
			f()
		case <-done:
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(done) })
		wg.Wait()
	}
}

// progressTo returns where progress goes, stderr, so that stdout carries
// only the result (a table or JSON) and '> file' captures that alone; and
// whether it is a terminal, where progress rewrites one line.
func progressTo(stderr io.Writer) (progress io.Writer, inPlace bool) {
	return stderr, isTerminal(stderr)
}

// providerFlag adds -provider.
func providerFlag(fs *flag.FlagSet) *string {
	return fs.String("provider", "", "libfabric provider; empty means netio's default ($NETIO_PROVIDER or "+netio.DefaultNetwork+")")
}

// connMode is the -mode flag: which of netio's modes a connection uses.
// Both ends must use the same one (a listener rejects the other).
type connMode netio.Mode

func (m *connMode) String() string {
	if m == nil || netio.Mode(*m) == netio.LowLatency {
		return "ll"
	}
	return "ht"
}

func (m *connMode) Set(s string) error {
	switch s {
	case "ll", "low-latency":
		*m = connMode(netio.LowLatency)
	case "ht", "high-throughput":
		*m = connMode(netio.HighThroughput)
	default:
		return errors.New("want ll (low latency: a Write is sent at once, or packed with those queued behind a send in flight) or ht (high throughput: messages batched into pages)")
	}
	return nil
}

// options are the netio options of the mode.
func (m connMode) options() []netio.Option {
	return []netio.Option{netio.WithMode(netio.Mode(m))}
}

// ht reports whether the mode is HighThroughput.
func (m connMode) ht() bool { return netio.Mode(m) == netio.HighThroughput }

// modeFlag adds -mode, LowLatency unless set.
func modeFlag(fs *flag.FlagSet) *connMode {
	m := new(connMode)
	fs.Var(m, "mode", "netio's mode, `ll|ht`: ll is low latency (a Write is sent at once, or packed with the Writes queued behind a send in flight), ht high throughput (messages are copied into 1 MiB pages that go out when full or when the writer pauses); both sides must use the same (default ll)")
	return m
}

// report prints a command's summary, if it has one (a table, or JSON with
// -json), on stdout, and turns how the run ended into the exit code and a
// line on stderr: exitError and the error for a failed run, 128 plus the
// signal (130 for Ctrl-C) and "interrupted" for an interrupted one.
func report[R any](ctx context.Context, stdout, stderr io.Writer, cmd string, asJSON bool, res *R, err error, print func(io.Writer, *R)) int {
	if res != nil {
		if asJSON {
			if err := printJSON(stdout, res); err != nil {
				return failed(stderr, cmd, err)
			}
		} else {
			print(stdout, res)
		}
	}
	if i := interruptedBy(ctx); i != nil {
		msg := "interrupted"
		switch {
		case errors.Is(err, errInterrupted):
			msg = err.Error()
		case err != nil:
			msg += "; " + err.Error()
		}
		fmt.Fprintf(stderr, "netio: %s: %s\n", cmd, oneLine(msg))
		return signalCode(i.sig)
	}
	if err != nil {
		return failed(stderr, cmd, err)
	}
	return exitOK
}

// printJSON writes v indented.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// gbit is the payload rate of bytes over d.
func gbit(bytes int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(bytes) * 8 / d.Seconds() / 1e9
}

// perSecond is n over d.
func perSecond(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}
