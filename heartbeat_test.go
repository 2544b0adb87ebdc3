package netio_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/netio-go/netio"
)

// The heartbeat tests stop a peer's progress (a child process stopped with
// SIGSTOP, whose kernel goes on acknowledging TCP) and check that the
// other side notices within the heartbeat timeout, which the transport
// alone would not for 15 minutes.

// A short heartbeat, so that the tests take seconds: the timeout is ten
// intervals, far from the edge on a loaded machine.
const (
	testBeatInterval = 100 * time.Millisecond
	testBeatTimeout  = time.Second
)

func beatOpts() []netio.Option {
	return []netio.Option{netio.WithHeartbeatInterval(testBeatInterval), netio.WithHeartbeatTimeout(testBeatTimeout)}
}

const hbRoleEnv = "NETIO_HB_ROLE" // role of a heartbeat test's child

// TestHeartbeatChild is the child processes' entry point; as a test of its
// own it does nothing.
func TestHeartbeatChild(t *testing.T) {
	switch os.Getenv(hbRoleEnv) {
	case "dial-noread":
		// Dials, says hello and never reads: its reactor alone answers.
		c, err := netio.Dial("tcp", os.Getenv(childAddrEnv), append(beatOpts(), netio.WithWindow(4), netio.WithBufferSize(4096))...)
		if err != nil {
			childFatal("Dial: %v", err)
		}
		if _, err := c.Write([]byte(childHello)); err != nil {
			childFatal("Write: %v", err)
		}
		childBlock()
	case "sub":
		heartbeatSubscriber()
	default:
		t.Skip("run by the heartbeat tests")
	}
}

// startHeartbeatChild runs this test binary as a heartbeat child of role,
// with env added.
func startHeartbeatChild(t *testing.T, role string, env ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHeartbeatChild$", "-test.count=1")
	cmd.Env = append(append(os.Environ(), hbRoleEnv+"="+role), env...)
	return startChildCmd(t, cmd)
}

// checkPeerTimeout checks that err is the end of a connection by the
// heartbeat: a *net.OpError for op that matches ErrPeerTimeout and
// ETIMEDOUT, says Timeout(), and is neither a deadline nor a close.
func checkPeerTimeout(t *testing.T, what, op string, err error) {
	t.Helper()
	var oe *net.OpError
	switch {
	case err == nil:
		t.Fatalf("%s: no error", what)
	case !errors.As(err, &oe) || oe.Op != op:
		t.Fatalf("%s: %T %v; want a *net.OpError with Op %q", what, err, err, op)
	case !errors.Is(err, netio.ErrPeerTimeout) || !errors.Is(err, syscall.ETIMEDOUT):
		t.Fatalf("%s: %v; want ErrPeerTimeout (and ETIMEDOUT)", what, err)
	case !oe.Timeout():
		t.Fatalf("%s: %v: Timeout() is false", what, err)
	case errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, net.ErrClosed):
		t.Fatalf("%s: %v is a deadline or a close", what, err)
	case !strings.Contains(err.Error(), "not heard for "+testBeatTimeout.String()):
		t.Fatalf("%s: %q does not say how long the peer was silent", what, err)
	}
}

// A peer that stops (SIGSTOP: its kernel still acknowledges TCP, nothing
// reads) ends the connection for a Read and a Write blocked on it, with
// ErrPeerTimeout, once the heartbeat timeout has passed.
func TestHeartbeatStoppedPeer(t *testing.T) {
	ln, err := netio.Listen("tcp", "127.0.0.1:0", beatOpts()...)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	peer := startHeartbeatChild(t, "dial-noread", childAddrEnv+"="+ln.Addr().String())
	c := acceptOne(t, ln, hangTimeout)
	defer c.Close()
	buf := make([]byte, 100)
	c.SetReadDeadline(time.Now().Add(hangTimeout))
	if n, err := c.ReadMessage(buf); err != nil || string(buf[:n]) != childHello {
		t.Fatalf("ReadMessage from the child: %q, %v", buf[:n], err)
	}
	c.SetReadDeadline(time.Time{})
	rerr, werr := make(chan error, 1), make(chan error, 1)
	go func() {
		_, err := c.Read(buf)
		rerr <- err
	}()
	go func() {
		msg := make([]byte, 1000)
		for {
			if _, err := c.Write(msg); err != nil {
				werr <- err
				return
			}
		}
	}()
	// The child reads nothing: the window fills and Write blocks, while
	// the child's reactor keeps the connection alive.
	waitBlocked(t, 1, "netio.(*Conn).Read")
	waitBlocked(t, 1, "netio.(*Conn).Write")
	if err := peer.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	for _, w := range []struct {
		op string
		ch chan error
	}{{"read", rerr}, {"write", werr}} {
		select {
		case err := <-w.ch:
			t.Logf("blocked %s returned %v, %v after the peer stopped", w.op, err, time.Since(stopped).Round(time.Millisecond))
			checkPeerTimeout(t, "blocked "+w.op+" on a stopped peer", w.op, err)
		case <-time.After(hangTimeout):
			c.Close()
			t.Fatalf("%s still blocked %v after the peer stopped", w.op, hangTimeout)
		}
	}
	if _, err := c.Write([]byte("x")); !errors.Is(err, netio.ErrPeerTimeout) {
		t.Fatalf("Write after the peer timed out: %v; want ErrPeerTimeout", err)
	}
}

// A reader that does not read is alive: with one side's window full (or
// both sides'), the connection outlives many heartbeat timeouts, and
// everything written arrives once the readers read.
func TestHeartbeatSlowReaderAlive(t *testing.T) {
	for _, writing := range []string{"dialer", "acceptor", "both"} {
		for _, mode := range []netio.Mode{netio.LowLatency, netio.HighThroughput} {
			t.Run(fmt.Sprintf("%v/%s-writes", mode, writing), func(t *testing.T) {
				t.Parallel() // they wait
				// The test's usual 1 s timeout: with 200 ms, a reactor thread that a loaded
				// machine (two busy loops beside make test) did not run for 200 ms failed it.
				opts := append([]netio.Option{netio.WithMode(mode), netio.WithWindow(4), netio.WithBufferSize(4096)}, beatOpts()...)
				ln, err := netio.Listen("tcp", "127.0.0.1:0", opts...)
				if err != nil {
					t.Fatal(err)
				}
				defer ln.Close()
				dialer, err := netio.Dial("tcp", ln.Addr().String(), opts...)
				if err != nil {
					t.Fatal(err)
				}
				defer dialer.Close()
				acceptor := acceptOne(t, ln, hangTimeout)
				writers, readers := []*netio.Conn{dialer}, []*netio.Conn{acceptor}
				switch writing {
				case "acceptor":
					writers, readers = readers, writers
				case "both":
					writers, readers = []*netio.Conn{dialer, acceptor}, []*netio.Conn{acceptor, dialer}
				}
				const msgs = 200
				var wg sync.WaitGroup
				errs := make(chan error, 4) // a writer's and a reader's each
				for _, w := range writers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						msg := make([]byte, 1000)
						for i := 0; i < msgs; i++ {
							msg[0] = byte(i)
							if _, err := w.Write(msg); err != nil {
								errs <- err
								return
							}
						}
						errs <- w.Flush()
					}()
				}
				waitBlocked(t, len(writers), "netio.(*Conn).Write")
				// Three heartbeat timeouts (thirty intervals) with nobody reading:
				// the reactors alone must keep both ends alive.
				time.Sleep(3 * testBeatTimeout) // silence on purpose: nothing to wait for
				var rg sync.WaitGroup
				for _, r := range readers {
					rg.Add(1)
					go func() {
						defer rg.Done()
						r.SetReadDeadline(time.Now().Add(hangTimeout))
						for i := 0; i < msgs; i++ {
							m, err := r.NextMessage()
							if err != nil {
								errs <- fmt.Errorf("read %d: %w", i, err)
								return
							}
							if len(m.Bytes()) != 1000 || m.Bytes()[0] != byte(i) {
								errs <- fmt.Errorf("message %d: %d bytes starting %d", i, len(m.Bytes()), m.Bytes()[0])
								m.Release()
								return
							}
							m.Release()
						}
					}()
				}
				rg.Wait()
				wg.Wait()
				close(errs)
				for err := range errs {
					if err != nil {
						t.Fatal(err)
					}
				}
			})
		}
	}
}

// A dialer that does not check sends no heartbeats unless asked: an
// accepting side that writes from the start, to a dialer that does not
// read, asks at once, before its window fills (afterwards it could not
// send a bare heartbeat until the dialer sends something).
func TestHeartbeatUncheckingDialer(t *testing.T) {
	ln, err := netio.Listen("tcp", "127.0.0.1:0", append(beatOpts(), netio.WithWindow(4), netio.WithBufferSize(4096))...)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan error, 1)
	const msgs = 100
	go func() {
		c, err := ln.AcceptConn()
		if err != nil {
			accepted <- err
			return
		}
		defer c.Close()
		msg := make([]byte, 1000)
		for i := 0; i < msgs; i++ { // at once: the window fills before the first heartbeat is due
			if _, err := c.Write(msg); err != nil {
				accepted <- fmt.Errorf("write %d: %w", i, err)
				return
			}
		}
		accepted <- nil
		c.SetReadDeadline(time.Now().Add(hangTimeout))
		c.Read(msg) // until the dialer closes
	}()
	d, err := netio.Dial("tcp", ln.Addr().String(), netio.WithHeartbeatTimeout(-1), netio.WithWindow(4), netio.WithBufferSize(4096))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	waitBlocked(t, 1, "netio.(*Conn).Write")
	time.Sleep(3 * testBeatTimeout) // nobody reads
	d.SetReadDeadline(time.Now().Add(hangTimeout))
	for i := 0; i < msgs; i++ {
		if _, err := d.AppendMessage(nil); err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
	}
	if err := <-accepted; err != nil {
		t.Fatal(err)
	}
}

// A side with a short timeout connected to one with the defaults, which
// sends a heartbeat only every second: it asks for more in its own, and an
// idle connection lives on.
func TestHeartbeatPeerAsksForMore(t *testing.T) {
	for _, shortSide := range []string{"dialer", "listener"} {
		t.Run(shortSide, func(t *testing.T) {
			// Its own heartbeats come seldom enough that the credits the
			// other side returns for them (one message per half window of
			// 16) would not keep it alive either.
			short := []netio.Option{netio.WithHeartbeatInterval(200 * time.Millisecond), netio.WithHeartbeatTimeout(600 * time.Millisecond)}
			var lnOpts, dialOpts []netio.Option
			if shortSide == "dialer" {
				dialOpts = short
			} else {
				lnOpts = short
			}
			ln, err := netio.Listen("tcp", "127.0.0.1:0", lnOpts...)
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			d, err := netio.Dial("tcp", ln.Addr().String(), dialOpts...)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			s := acceptOne(t, ln, hangTimeout)
			defer s.Close()
			// Idle for five of the short timeouts, and more than the
			// default side's interval of a second.
			time.Sleep(3 * time.Second) // idle on purpose: nothing to wait for
			for _, c := range [][2]*netio.Conn{{d, s}, {s, d}} {
				if _, err := c[0].Write([]byte("still there?")); err != nil {
					t.Fatalf("Write after an idle spell: %v", err)
				}
				if err := c[0].Flush(); err != nil {
					t.Fatal(err)
				}
				c[1].SetReadDeadline(time.Now().Add(hangTimeout))
				buf := make([]byte, 64)
				if n, err := c[1].ReadMessage(buf); err != nil || string(buf[:n]) != "still there?" {
					t.Fatalf("ReadMessage after an idle spell: %q, %v", buf[:n], err)
				}
			}
		})
	}
}

func TestHeartbeatConfig(t *testing.T) {
	for name, opts := range map[string][]netio.Option{
		"interval too short":          {netio.WithHeartbeatInterval(time.Millisecond)},
		"negative interval":           {netio.WithHeartbeatInterval(-time.Second)},
		"timeout under two intervals": {netio.WithHeartbeatInterval(time.Second), netio.WithHeartbeatTimeout(1500 * time.Millisecond)},
		"timeout under the minimum":   {netio.WithHeartbeatTimeout(15 * time.Millisecond)},
	} {
		_, err := netio.Listen("tcp", "127.0.0.1:0", opts...)
		if !errors.Is(err, netio.ErrInvalidConfig) {
			t.Errorf("%s: Listen returned %v; want ErrInvalidConfig", name, err)
		}
	}
	for name, opts := range map[string][]netio.Option{
		"defaults":                  nil,
		"short timeout alone":       {netio.WithHeartbeatTimeout(100 * time.Millisecond)},
		"off":                       {netio.WithHeartbeatTimeout(-1)},
		"off with a long interval":  {netio.WithHeartbeatTimeout(-1), netio.WithHeartbeatInterval(time.Hour)},
		"interval and timeout both": {netio.WithHeartbeatInterval(time.Second), netio.WithHeartbeatTimeout(2 * time.Second)},
	} {
		ln, err := netio.Listen("tcp", "127.0.0.1:0", opts...)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		ln.Close()
	}
}

// heartbeatSubscriber is a child that subscribes to tag 0 and reads it.
// When its connection was made again and a message came after, it reports
// "BACK gaps missed reconnects", then reads on until its parent goes.
func heartbeatSubscriber() {
	ctx, cancel := context.WithTimeout(context.Background(), hangTimeout)
	mode, _ := netio.ParseMode(os.Getenv(psModeEnv))
	s, err := netio.Subscribe(ctx, testNetwork, os.Getenv(psAddrEnv), []uint64{0}, append(beatOpts(), netio.WithMode(mode))...)
	cancel()
	if err != nil {
		childFatal("subscribe: %v", err)
	}
	fmt.Println("READY")
	parentGone := make(chan struct{})
	go func() { io.Copy(io.Discard, os.Stdin); close(parentGone) }()
	reported := false
	for {
		select {
		case m, ok := <-s.C:
			if !ok {
				childFatal("C closed: %v", s.Err())
			}
			m.Release()
			if st := s.Stats(); !reported && st.Reconnects > 0 {
				reported = true
				fmt.Println("BACK", st.Gaps, st.Missed, st.Reconnects)
			}
		case <-parentGone:
			os.Exit(0)
		}
	}
}

// A subscriber process that stops is dropped by the publisher once the
// heartbeat timeout passes, while a subscriber beside it loses nothing
// (its Publish waits no longer than that); when the stopped one runs
// again, it subscribes again by itself and reports the gap.
func TestHeartbeatStoppedSubscriber(t *testing.T) {
	for _, mode := range []netio.Mode{netio.HighThroughput, netio.LowLatency} {
		t.Run(mode.String(), func(t *testing.T) {
			p := listenPublisher(t, beatOpts()...)
			sleeper := startHeartbeatChild(t, "sub", psAddrEnv+"="+p.Addr().String(), psModeEnv+"="+mode.String())
			sleeper.waitFor(t, "READY")
			steady := subscribe(t, p, []uint64{0}, append(beatOpts(), netio.WithMode(mode))...)
			waitSubscribers(t, p, 2)

			stop := make(chan struct{})
			published := make(chan int, 1)
			go func() {
				buf := make([]byte, 64)
				i := 0
				defer func() { published <- i }()
				ctx, progress := stallContext(t)
				for ; ; i++ {
					progress()
					select {
					case <-stop:
						p.Flush()
						return
					default:
					}
					if err := p.Publish(ctx, 0, psMessage(buf, 0, uint64(i))); err != nil {
						t.Errorf("publish %d: %v", i, err)
						return
					}
					if i%64 == 0 {
						p.Flush()
						time.Sleep(time.Millisecond) // a steady stream, not a flood
					}
				}
			}()
			got := make(chan error, 1)
			var received int
			go func() { // the steady subscriber checks every message as it comes
				for m := range steady.C {
					b := m.Bytes()
					if m.Seq() != uint64(received) || !bytes.Equal(b, psMessage(make([]byte, 64), 0, uint64(received))) {
						got <- fmt.Errorf("steady subscriber: message %d has seq %d", received, m.Seq())
						m.Release()
						return
					}
					received++
					m.Release()
				}
				got <- nil
			}()
			waitPublished(t, p, 1000)
			if err := sleeper.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the stopped subscriber timed out", func() bool { return p.Stats().TimedOut == 1 })
			waitSubscribers(t, p, 1)
			// Messages the stopped one misses for good.
			waitPublished(t, p, p.Stats().Published+1000)
			if err := sleeper.cmd.Process.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			back := sleeper.waitFor(t, "BACK")
			var gaps, missed, reconnects uint64
			if _, err := fmt.Sscanf(back, "BACK %d %d %d", &gaps, &missed, &reconnects); err != nil {
				t.Fatalf("%q: %v", back, err)
			}
			t.Logf("the subscriber that was stopped: %s; publisher %+v", back, p.Stats())
			if gaps == 0 || missed == 0 || reconnects == 0 {
				t.Errorf("the subscriber that was stopped reports %d gaps, %d missed, %d reconnects: want the gap seen", gaps, missed, reconnects)
			}
			waitSubscribers(t, p, 2)
			close(stop)
			n := <-published
			eventually(t, "the steady subscriber has everything", func() bool {
				st := steady.Stats()
				return st.Received >= uint64(n)
			})
			steady.Close()
			if err := <-got; err != nil {
				t.Fatal(err)
			}
			if st := steady.Stats(); st.Gaps != 0 || st.Reconnects != 0 || st.Received != uint64(n) {
				t.Fatalf("steady subscriber %+v; want all %d messages, no gap and no reconnect", st, n)
			}
		})
	}
}

// waitPublished waits until p has published n messages.
func waitPublished(t *testing.T, p *netio.Publisher, n uint64) {
	t.Helper()
	eventually(t, "published "+strconv.FormatUint(n, 10), func() bool { return p.Stats().Published >= n })
}

// Heartbeats are background work for the reactor: an idle connection that
// beats every 10 ms wakes it for each beat, and it sleeps again without a
// spin of polling, so that a process with many idle connections does not
// poll for a spin after every beat of theirs. Any other wake-up is followed
// by at least one spin round, so without this no wake-up would be clean.
// Counted per wake-up, not per spin round, so that how many rounds fit in a
// spin on this machine does not matter; a few wake-ups may be for other
// work of the process.
func TestHeartbeatsStartNoSpin(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("the reactor spins only with GOMAXPROCS >= 2")
	}
	if testOnRDM {
		t.Skip("an RDM endpoint's heartbeats count as work: its peers' doorbells rely on the spin after them")
	}
	pair(t, netio.WithHeartbeatInterval(10*time.Millisecond), netio.WithHeartbeatTimeout(time.Second))
	const wakes = 30
	clean := 0
	for range wakes {
		eventually(t, "the reactor asleep", reactorAsleep)
		before := netio.ReactorStats()
		eventually(t, "a wake-up and sleep again", func() bool {
			st := netio.ReactorStats()
			return st.Sleeps > before.Sleeps && st.Sleeps > st.Wakeups
		})
		if netio.ReactorStats().Spins == before.Spins {
			clean++
		}
	}
	if clean < wakes/2 {
		t.Errorf("%d of %d wake-ups of an idle connection's heartbeats went to sleep without a spin; want most", clean, wakes)
	}
}
