package netio_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/netio-go/netio"
)

// Helpers shared by the tests: waiting for events (eventually,
// waitBlocked), connected pairs and listeners, echoes, publishers and
// subscriptions, child processes.

// hangTimeout bounds the waits of these tests. It is a guard against a
// hang, not a measure of speed: what a test waits for takes microseconds
// to milliseconds on an idle machine, and a loaded one gets this long.
// Speed is measured by the benchmarks.
const hangTimeout = 20 * time.Second

// waitBlocked waits until n goroutines are blocked (parked: on a channel, a
// lock, the network poller) with fn, a function of netio's API such as
// "netio.(*Conn).Read", on their stack. Tests use it where they used to
// sleep "to let the Read block first": a slow machine cannot outrun it.
func waitBlocked(t testing.TB, n int, fn string) {
	t.Helper()
	deadline := time.Now().Add(hangTimeout)
	buf := make([]byte, 1<<20)
	for {
		k := runtime.Stack(buf, true)
		for k == len(buf) {
			buf = make([]byte, 2*len(buf))
			k = runtime.Stack(buf, true)
		}
		if countBlocked(buf[:k], fn) >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines not blocked in %s within %v:\n%s", n, fn, hangTimeout, buf[:k])
		}
		time.Sleep(time.Millisecond) // polling pace
	}
}

// countBlocked counts the goroutines of a runtime.Stack dump that are
// parked with fn( on their stack.
func countBlocked(dump []byte, fn string) int {
	n := 0
	for _, g := range bytes.Split(dump, []byte("\n\n")) {
		header, stack, _ := bytes.Cut(g, []byte("\n"))
		_, state, ok := bytes.Cut(header, []byte(" ["))
		if !ok {
			continue
		}
		switch {
		case bytes.HasPrefix(state, []byte("running")),
			bytes.HasPrefix(state, []byte("runnable")),
			bytes.HasPrefix(state, []byte("syscall")):
			continue
		}
		if bytes.Contains(stack, []byte(fn+"(")) {
			n++
		}
	}
	return n
}

// reactorAsleep reports whether the process's reactor is asleep in
// epoll_wait: it has nothing to do, and has told every poller so.
func reactorAsleep() bool {
	st := netio.ReactorStats()
	return st.Sleeps > st.Wakeups
}

// eventually polls cond until it holds, failing the test after
// hangTimeout.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(hangTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, hangTimeout)
		}
		time.Sleep(100 * time.Microsecond) // polling pace
	}
}

// stallContext returns a context that is cancelled once progress has not
// been called for hangTimeout: a guard against a hang for a long run (a
// million messages), which a deadline for the whole run is not: that
// fails a run that is only slow on a loaded machine.
func stallContext(t testing.TB) (ctx context.Context, progress func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var n atomic.Uint64
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(hangTimeout / 4)
		defer tick.Stop()
		last, since := n.Load(), time.Now()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-tick.C:
				if v := n.Load(); v != last {
					last, since = v, now
				} else if now.Sub(since) >= hangTimeout {
					cancel()
					return
				}
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return ctx, func() { n.Add(1) }
}

// pair returns a connected client and server.
func pair(t testing.TB, opts ...netio.Option) (client, server *netio.Conn) {
	t.Helper()
	ln, err := netio.Listen(testNetwork, "127.0.0.1:0", opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type res struct {
		c   *netio.Conn
		err error
	}
	ch := make(chan res, 1)
	go func() {
		c, err := ln.AcceptConn()
		ch <- res{c, err}
	}()
	client, err = netio.Dial(testNetwork, ln.Addr().String(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	r := <-ch
	if r.err != nil {
		client.Close()
		t.Fatal(r.err)
	}
	t.Cleanup(func() { client.Close(); r.c.Close() })
	return client, r.c
}

// acceptOne accepts one connection within timeout.
func acceptOne(t testing.TB, ln *netio.Listener, timeout time.Duration) *netio.Conn {
	t.Helper()
	type res struct {
		c   *netio.Conn
		err error
	}
	ch := make(chan res, 1)
	go func() {
		c, err := ln.AcceptConn()
		ch <- res{c, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("Accept: %v", r.err)
		}
		t.Cleanup(func() { r.c.Close() })
		return r.c
	case <-time.After(timeout):
		ln.Close() // unblocks the goroutine
		if r := <-ch; r.c != nil {
			r.c.Close()
		}
		t.Fatalf("Accept: nothing in %v", timeout)
		return nil
	}
}

// dialAccept dials ln and accepts the connection.
func dialAccept(t testing.TB, ln *netio.Listener, opts ...netio.Option) (client, server *netio.Conn) {
	t.Helper()
	c, err := netio.Dial("tcp", ln.Addr().String(), opts...)
	if err != nil {
		t.Fatalf("Dial %s: %v", ln.Addr(), err)
	}
	t.Cleanup(func() { c.Close() })
	return c, acceptOne(t, ln, hangTimeout)
}

// echo sends msg from a to b, which sends it back; both must arrive intact.
func echo(t testing.TB, a, b *netio.Conn, msg []byte) {
	t.Helper()
	a.SetDeadline(time.Now().Add(hangTimeout))
	b.SetDeadline(time.Now().Add(hangTimeout))
	defer a.SetDeadline(time.Time{})
	defer b.SetDeadline(time.Time{})
	if _, err := a.Write(msg); err != nil {
		t.Fatalf("echo: Write: %v", err)
	}
	got, err := b.AppendMessage(nil)
	if err != nil {
		t.Fatalf("echo: far side: %v; want %q", err, trunc(msg))
	}
	if !bytes.Equal(msg, got) { // cmp.Diff takes seconds over 300 KB under -race: only to explain
		t.Fatalf("echo: far side got (-want +got):\n%s", cmp.Diff(msg, got))
	}
	if _, err := b.Write(got); err != nil {
		t.Fatalf("echo: Write back: %v", err)
	}
	back, err := a.AppendMessage(nil)
	if err != nil {
		t.Fatalf("echo: got back %v; want %q", err, trunc(msg))
	}
	if !bytes.Equal(msg, back) {
		t.Fatalf("echo: got back (-want +got):\n%s", cmp.Diff(msg, back))
	}
}

func trunc(b []byte) []byte {
	if len(b) > 40 {
		return b[:40]
	}
	return b
}

func freePort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// rssBytes is the resident set size of this process.
func rssBytes(t testing.TB) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip("no /proc/self/status:", err)
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("VmRSS:")); ok {
			kb, err := strconv.ParseInt(string(bytes.TrimSpace(bytes.TrimSuffix(bytes.TrimSpace(v), []byte("kB")))), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Skip("no VmRSS")
	return 0
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func modes() []netio.Mode { return []netio.Mode{netio.LowLatency, netio.HighThroughput} }

// opErr checks that err is a *net.OpError of op and returns it.
func opErr(t *testing.T, err error, op string) *net.OpError {
	t.Helper()
	var oe *net.OpError
	if !errors.As(err, &oe) || oe.Op != op {
		t.Fatalf("error %v (%T), want a *net.OpError of op %q", err, err, op)
	}
	return oe
}

// listenT listens on loopback and closes the listener at the end of t.
func listenT(t *testing.T, opts ...netio.Option) *netio.Listener {
	t.Helper()
	ln, err := netio.Listen("tcp", "127.0.0.1:0", opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

func listenPublisher(t testing.TB, opts ...netio.Option) *netio.Publisher {
	t.Helper()
	p, err := netio.ListenPublisher(testNetwork, "127.0.0.1:0", opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func subscribe(t testing.TB, p *netio.Publisher, tags []uint64, opts ...netio.Option) *netio.Subscription {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangTimeout)
	defer cancel()
	s, err := netio.Subscribe(ctx, testNetwork, p.Addr().String(), tags, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// payload is message i of tag: its bytes say which, so a reader can check
// what it got.
func payload(tag uint64, i int, size int) []byte {
	b := make([]byte, max(size, 16))
	binary.LittleEndian.PutUint64(b, tag)
	binary.LittleEndian.PutUint64(b[8:], uint64(i))
	return b
}

// receive reads n messages from s and checks that each tag's come in
// sequence, from 0 or from where the map given left off, with the bytes
// published. It returns how many of each tag it read in all.
func receive(t testing.TB, s *netio.Subscription, n int, from ...map[uint64]int) map[uint64]int {
	t.Helper()
	got := map[uint64]int{}
	for _, f := range from {
		for tag, k := range f {
			got[tag] = k
		}
	}
	timeout := time.NewTimer(hangTimeout)
	defer timeout.Stop()
	for i := 0; i < n; i++ {
		select {
		case m, ok := <-s.C:
			if !ok {
				t.Fatalf("C closed after %d of %d messages: %v", i, n, s.Err())
			}
			b := m.Bytes()
			want := got[m.Tag()]
			if m.Seq() != uint64(want) || binary.LittleEndian.Uint64(b) != m.Tag() || binary.LittleEndian.Uint64(b[8:]) != uint64(want) {
				t.Fatalf("message %d: tag %d seq %d holds (%d, %d), want seq %d", i, m.Tag(), m.Seq(), binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:]), want)
			}
			got[m.Tag()]++
			m.Release()
		case <-timeout.C:
			t.Fatalf("%d of %d messages after %v", i, n, hangTimeout)
		}
	}
	return got
}

// roundTrips makes n round trips on c, whose peer echoes.
func roundTrips(t *testing.T, c *netio.Conn, n int) {
	t.Helper()
	c.SetDeadline(time.Now().Add(hangTimeout))
	defer c.SetDeadline(time.Time{})
	msg, buf := make([]byte, 64), make([]byte, 64)
	for i := range n {
		if _, err := c.Write(msg); err != nil {
			t.Fatalf("round trip %d: %v", i, err)
		}
		if _, err := c.ReadMessage(buf); err != nil {
			t.Fatalf("round trip %d: %v", i, err)
		}
	}
}

func echoMessages(c *netio.Conn) {
	buf := make([]byte, 1<<16)
	for {
		n, err := c.ReadMessage(buf)
		if err != nil {
			return
		}
		if _, err := c.Write(buf[:n]); err != nil {
			return
		}
	}
}

// Tests that need a second process (one that is killed, stopped, or short
// of descriptors) re-execute the test binary with an environment variable
// that makes one Test function play the child.

// child is a running child process and its stdout, line by line.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
}

// startChildCmd starts cmd, a child that reports on stdout line by line and
// ends when its stdin closes; it is killed at the end of the test.
func startChildCmd(t testing.TB, cmd *exec.Cmd) *child {
	t.Helper()
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, stdin: stdin, lines: make(chan string, 1024)}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Signal(syscall.SIGCONT)
		cmd.Process.Kill()
		cmd.Wait()
	})
	return c
}

// waitFor returns the child's first line that starts with prefix.
func (c *child) waitFor(t testing.TB, prefix string) string {
	t.Helper()
	timeout := time.NewTimer(5 * hangTimeout)
	defer timeout.Stop()
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				t.Fatalf("child exited before a line starting %q", prefix)
			}
			if strings.HasPrefix(l, prefix) {
				return l
			}
		case <-timeout.C:
			t.Fatalf("no line starting %q from the child", prefix)
		}
	}
}

// stillServes checks that ln accepts a new connection and echoes over it.
func stillServes(t *testing.T, ln *netio.Listener, opts ...netio.Option) {
	t.Helper()
	client, server := dialAccept(t, ln, opts...)
	defer client.Close()
	defer server.Close()
	echo(t, client, server, []byte("still here"))
}
