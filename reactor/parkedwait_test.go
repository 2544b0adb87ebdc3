//go:build linux

package reactor

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// loopState is the scheduler's word for the loop goroutine ("IO wait",
// "syscall", "running", ...), from a dump of every goroutine's stack.
func loopState(t *testing.T) string {
	t.Helper()
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range strings.Split(string(buf), "\n\n") {
		if !strings.Contains(g, "reactor.(*Reactor).loop(") {
			continue
		}
		head, _, _ := strings.Cut(g, "\n")
		if _, state, ok := strings.Cut(head, "["); ok {
			state, _, _ = strings.Cut(state, "]")
			state, _, _ = strings.Cut(state, ",")
			return state
		}
	}
	t.Fatal("no reactor loop among the goroutines")
	return ""
}

// With one P, the loop sleeps parked in Go's network poller, not in
// epoll_wait(-1), so that the one P runs the goroutines it has woken; and
// whatever is ready wakes it as before: the doorbell, a registered
// descriptor, a timer. With two Ps it keeps to epoll_wait.
func TestParkedWait(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	r := newReactor(t, nil)
	if r.park == nil {
		t.Fatal("GOMAXPROCS=1 and no parked wait")
	}
	asleep := func() bool { return r.inWait.Load() && loopState(t) == "IO wait" }
	eventually(t, hangTimeout, "the loop parked in the network poller", asleep)

	// The doorbell.
	before := r.Stats()
	if err := r.Call(func() {}); err != nil {
		t.Fatal(err)
	}
	if st := r.Stats(); st.Wakeups == before.Wakeups || st.DoorbellWrites == before.DoorbellWrites {
		t.Errorf("Call to a parked loop: %+v -> %+v", before, st)
	}
	eventually(t, hangTimeout, "the loop parked again", asleep)

	// A registered descriptor.
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[1])
	readable := make(chan struct{}, 1)
	if err := r.Call(func() {
		if err := r.Register(p[0], unix.EPOLLIN, handlerFunc(func(uint32) {
			var b [1]byte
			unix.Read(p[0], b[:])
			r.Unregister(p[0])
			unix.Close(p[0])
			readable <- struct{}{}
		})); err != nil {
			t.Error(err)
		}
	}); err != nil {
		t.Fatal(err)
	}
	eventually(t, hangTimeout, "the loop parked again", asleep)
	unix.Write(p[1], []byte{1})
	waitFor(t, readable, "the pipe's handler")

	// A timer.
	fired := make(chan struct{}, 1)
	tm, err := r.NewTimer(func() { fired <- struct{}{} })
	if err != nil {
		t.Fatal(err)
	}
	defer tm.Close()
	eventually(t, hangTimeout, "the loop parked again", asleep)
	if err := tm.StartOnce(time.Millisecond); err != nil {
		t.Fatal(err)
	}
	waitFor(t, fired, "the timer")

	runtime.GOMAXPROCS(2)
	if r2 := newReactor(t, nil); r2.park != nil {
		t.Error("GOMAXPROCS=2 and a parked wait")
	}
}

// waitFor waits for a value on c, or fails the test after hangTimeout.
func waitFor(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(hangTimeout):
		t.Fatalf("%s: nothing within %v", what, hangTimeout)
	}
}
