package netio_test

import (
	"bytes"
	"runtime"
	"testing"
	"time"

	"github.com/netio-go/netio"
)

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
		time.Sleep(time.Millisecond)
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
		time.Sleep(100 * time.Microsecond)
	}
}
