package netio_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/ofi"
	"github.com/netio-go/netio/reactor"
)

// rdmNetworks are the reliable-datagram providers the RDM tests run on,
// with the address each listens on.
var rdmNetworks = []struct{ network, listen string }{
	{"shm", ""},
	{"tcp;ofi_rxm", "127.0.0.1:0"},
}

// forEachRDMNetwork runs f on every RDM provider, skipping those this
// machine's libfabric lacks.
func forEachRDMNetwork(t *testing.T, f func(t *testing.T, network, listen string)) {
	for _, n := range rdmNetworks {
		t.Run(n.network, func(t *testing.T) { f(t, n.network, n.listen) })
	}
}

// rdmListen listens on network, or skips when the provider is absent.
func rdmListen(t testing.TB, network, address string, opts ...netio.Option) *netio.Listener {
	t.Helper()
	if os.Getenv("NETIO_PROFILE") != "" {
		// The profile makes tcp's connected endpoints fail where verbs
		// would, and counts what they lock; it does not model
		// reliable-datagram providers, whose endpoints it would only
		// charge against the locked-memory limit.
		t.Skip("NETIO_PROFILE: reliable-datagram providers are not profiled")
	}
	ln, err := netio.Listen(network, address, opts...)
	if errors.Is(err, ofi.ENODATA) {
		t.Skipf("provider %s: %v", network, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// rdmPair returns a connection dialed over network to a listener of its
// own, and its accepted end.
func rdmPair(t testing.TB, network, listen string, opts ...netio.Option) (client, server *netio.Conn, ln *netio.Listener) {
	t.Helper()
	ln = rdmListen(t, network, listen, opts...)
	client, err := netio.Dial(network, ln.Addr().String(), opts...)
	if err != nil {
		t.Fatalf("Dial %s: %v", ln.Addr(), err)
	}
	t.Cleanup(func() { client.Close() })
	return client, acceptOne(t, ln, hangTimeout), ln
}

func TestRDMDialListen(t *testing.T) {
	forEachRDMNetwork(t, func(t *testing.T, network, listen string) {
		c, s, ln := rdmPair(t, network, listen)
		addr := ln.Addr().String()
		if !strings.Contains(addr, "://") {
			t.Fatalf("listener address %q is not the provider's", addr)
		}
		if ln.Addr().Network() != network || c.RemoteAddr().String() != addr {
			t.Errorf("listener %s %s, dialer's remote %s", ln.Addr().Network(), addr, c.RemoteAddr())
		}
		if s.RemoteAddr().String() != c.LocalAddr().String() {
			t.Errorf("server sees %s, client is %s", s.RemoteAddr(), c.LocalAddr())
		}
		for _, size := range []int{0, 1, 64, 1000, 4096, 60000, 1 << 20} {
			msg := bytes.Repeat([]byte{byte(size)}, size)
			echo(t, c, s, msg)
			echo(t, s, c, msg)
		}
	})
}

// Many messages in both directions at once: the credit window cycles many
// times over, and every message arrives whole and in order.
func TestRDMManyMessages(t *testing.T) {
	forEachRDMNetwork(t, func(t *testing.T, network, listen string) {
		c, s, _ := rdmPair(t, network, listen, netio.WithWindow(16))
		const n = 5000
		errs := make(chan error, 2)
		send := func(w *netio.Conn, seed byte) {
			for i := 0; i < n; i++ {
				msg := bytes.Repeat([]byte{seed + byte(i)}, 1+i%300)
				if _, err := w.Write(msg); err != nil {
					errs <- fmt.Errorf("write %d: %w", i, err)
					return
				}
			}
			errs <- w.Flush()
		}
		recv := func(r *netio.Conn, seed byte) error {
			r.SetReadDeadline(time.Now().Add(hangTimeout))
			buf := make([]byte, 1024)
			for i := 0; i < n; i++ {
				k, err := r.ReadMessage(buf)
				if err != nil {
					return fmt.Errorf("read %d: %w", i, err)
				}
				if want := bytes.Repeat([]byte{seed + byte(i)}, 1+i%300); !bytes.Equal(buf[:k], want) {
					return fmt.Errorf("message %d: %d bytes, want %d of %d", i, k, len(want), want[0])
				}
			}
			return nil
		}
		go send(c, 1)
		go send(s, 2)
		if err := recv(s, 1); err != nil {
			t.Fatal(err)
		}
		if err := recv(c, 2); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
	})
}

// Close sends what was written, then FIN: the peer reads it all, then
// io.EOF, and reads io.EOF again after that. Close waits (up to Linger)
// for what was written to go, which may need the reader's credits: it
// runs beside the reader.
func TestRDMCloseEOF(t *testing.T) {
	forEachRDMNetwork(t, func(t *testing.T, network, listen string) {
		for _, closer := range []string{"dialer", "listener"} {
			t.Run(closer, func(t *testing.T) {
				c, s, _ := rdmPair(t, network, listen)
				a, b := c, s
				if closer == "listener" {
					a, b = s, c
				}
				for i := 0; i < 100; i++ {
					if _, err := a.Write([]byte(fmt.Sprint(i))); err != nil {
						t.Fatal(err)
					}
				}
				closed := make(chan error, 1)
				go func() { closed <- a.Close() }()
				b.SetReadDeadline(time.Now().Add(hangTimeout))
				buf := make([]byte, 64)
				for i := 0; i < 100; i++ {
					k, err := b.ReadMessage(buf)
					if err != nil || string(buf[:k]) != fmt.Sprint(i) {
						t.Fatalf("message %d: %q %v", i, buf[:k], err)
					}
				}
				for range 2 {
					if _, err := b.ReadMessage(buf); err != io.EOF {
						t.Fatalf("after the peer's close: %v, want io.EOF", err)
					}
				}
				if err := <-closed; err != nil {
					t.Fatal(err)
				}
				if _, err := a.ReadMessage(buf); !errors.Is(err, net.ErrClosed) {
					t.Fatalf("read after own close: %v, want net.ErrClosed", err)
				}
			})
		}
	})
}

// A read deadline passes on an RDM connection as on any: the read returns
// os.ErrDeadlineExceeded and the connection stays usable.
func TestRDMDeadline(t *testing.T) {
	forEachRDMNetwork(t, func(t *testing.T, network, listen string) {
		c, s, _ := rdmPair(t, network, listen)
		c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		if _, err := c.ReadMessage(make([]byte, 8)); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("read past its deadline: %v", err)
		}
		c.SetReadDeadline(time.Time{})
		echo(t, s, c, []byte("still here"))
	})
}

// Two connections on one Listener (one endpoint) keep their messages apart.
func TestRDMTwoConnsOneListener(t *testing.T) {
	forEachRDMNetwork(t, func(t *testing.T, network, listen string) {
		ln := rdmListen(t, network, listen)
		var clients, servers [2]*netio.Conn
		for i := range clients {
			c, err := netio.Dial(network, ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			clients[i] = c
			servers[i] = acceptOne(t, ln, hangTimeout)
		}
		if servers[0].LocalAddr().String() != servers[1].LocalAddr().String() {
			t.Errorf("accepted on %s and %s, want one endpoint", servers[0].LocalAddr(), servers[1].LocalAddr())
		}
		for round := 0; round < 50; round++ {
			for i, c := range clients {
				if _, err := c.Write([]byte(fmt.Sprintf("conn %d message %d", i, round))); err != nil {
					t.Fatal(err)
				}
			}
		}
		for i, s := range servers {
			s.SetReadDeadline(time.Now().Add(hangTimeout))
			for round := 0; round < 50; round++ {
				m, err := s.AppendMessage(nil)
				if want := fmt.Sprintf("conn %d message %d", i, round); err != nil || string(m) != want {
					t.Fatalf("server %d: %q %v, want %q", i, m, err, want)
				}
			}
		}
		// One ends; the other goes on.
		clients[0].Close()
		if _, err := servers[0].ReadMessage(make([]byte, 64)); err != io.EOF {
			t.Fatalf("after its peer closed: %v", err)
		}
		echo(t, clients[1], servers[1], []byte("the other one"))
	})
}

// A dialer without the listener's key is turned away, as on tcp.
func TestRDMWrongKey(t *testing.T) {
	forEachRDMNetwork(t, func(t *testing.T, network, listen string) {
		ln := rdmListen(t, network, listen, netio.WithKey([]byte("0123456789abcdef0123456789abcdef")))
		_, err := netio.Dial(network, ln.Addr().String(), netio.WithKey([]byte("fedcba9876543210fedcba9876543210")))
		if !errors.Is(err, netio.ErrRejected) {
			t.Fatalf("Dial with another key: %v, want ErrRejected", err)
		}
		eventually(t, "the rejection counted", func() bool { return ln.Stats().RejectedAuth == 1 })
	})
}

// BenchmarkRDMRoundTrip64 is a 64-byte round trip between two Conns of
// this process, on tcp (MSG), shm and tcp;ofi_rxm (RDM), in one run.
func BenchmarkRDMRoundTrip64(b *testing.B) {
	for _, n := range []struct{ network, listen string }{{"tcp", "127.0.0.1:0"}, {"shm", ""}, {"tcp;ofi_rxm", "127.0.0.1:0"}} {
		b.Run(n.network, func(b *testing.B) {
			var c, s *netio.Conn
			if n.network == "tcp" {
				c, s = pair(b)
			} else {
				c, s, _ = rdmPair(b, n.network, n.listen)
			}
			go echoMessages(s)
			pingPong(b, c, c.ReadMessage)
		})
	}
}

// HighThroughput mode runs on RDM endpoints too: pages of many messages,
// boundaries kept.
func TestRDMHighThroughput(t *testing.T) {
	forEachRDMNetwork(t, func(t *testing.T, network, listen string) {
		c, s, _ := rdmPair(t, network, listen, netio.WithMode(netio.HighThroughput))
		const n = 2000
		go func() {
			for i := 0; i < n; i++ {
				c.Write(bytes.Repeat([]byte{byte(i)}, 1+i%700))
			}
			c.Flush()
		}()
		s.SetReadDeadline(time.Now().Add(hangTimeout))
		for i := 0; i < n; i++ {
			m, err := s.AppendMessage(nil)
			if want := bytes.Repeat([]byte{byte(i)}, 1+i%700); err != nil || !bytes.Equal(m, want) {
				t.Fatalf("message %d: %d bytes, %v", i, len(m), err)
			}
		}
		echo(t, s, c, []byte("back"))
	})
}

// An idle pair on an RDM endpoint lets the reactor sleep: on its queue's
// descriptor (tcp;ofi_rxm), waking for heartbeats only, or, where the
// queue has none (shm), on the reactor's idle timer, once per IdlePoll.
// A reactor kept awake by a descriptor nobody re-arms wakes thousands of
// times in the window.
func TestRDMIdleReactorSleeps(t *testing.T) {
	forEachRDMNetwork(t, func(t *testing.T, network, listen string) {
		c, s, _ := rdmPair(t, network, listen)
		echo(t, c, s, []byte("one message, then silence"))
		eventually(t, "the reactor asleep after the echo", reactorAsleep)
		const window = 300 * time.Millisecond
		before, w0 := netio.ReactorStats(), time.Now()
		time.Sleep(window) // silence on purpose: the pair stays idle for a while
		woke, wall := netio.ReactorStats().Wakeups-before.Wakeups, time.Since(w0)
		due := 2 * (uint64(wall/netio.DefaultHeartbeatInterval) + 1)
		if network == "shm" {
			due += uint64(wall/reactor.DefaultIdlePoll) + 1
		}
		t.Logf("%s: idle pair woke the reactor %d times in %v", network, woke, wall.Round(time.Millisecond))
		if woke > 4*due {
			t.Errorf("an idle %s pair woke the reactor %d times in %v, for %d wake-ups due", network, woke, wall.Round(time.Millisecond), due)
		}
	})
}

// TestRDMKillDialer: a dialer on shm dies with SIGKILL. shm tells the
// survivor nothing (docs/rdm.md), so heartbeats must: a Read blocked on
// the accepted connection ends with ErrPeerTimeout once the peer has been
// silent for the heartbeat timeout, and Write fails after it.
func TestRDMKillDialer(t *testing.T) {
	const network = "shm"
	if os.Getenv(childEnv) == "dial" {
		c, err := netio.Dial(network, os.Getenv(childAddrEnv))
		if err != nil {
			childFatal("Dial: %v", err)
		}
		if _, err := c.Write([]byte(childHello)); err != nil {
			childFatal("Write: %v", err)
		}
		childBlock()
		return
	}
	// Long enough that a child starved on a loaded machine is not taken
	// for dead before it is killed.
	const timeout = 3 * time.Second
	ln := rdmListen(t, network, "", netio.WithHeartbeatTimeout(timeout))
	cmd, _ := startChild(t, "TestRDMKillDialer", "dial", ln.Addr().String())
	s := acceptOne(t, ln, hangTimeout)
	defer s.Close()
	s.SetReadDeadline(time.Now().Add(hangTimeout))
	buf := make([]byte, 100)
	if n, err := s.ReadMessage(buf); err != nil || string(buf[:n]) != childHello {
		t.Fatalf("ReadMessage from the child: %q, %v", buf[:n], err)
	}
	s.SetReadDeadline(time.Time{})
	readDone := make(chan error, 1)
	go func() {
		_, err := s.Read(buf)
		readDone <- err
	}()
	waitBlocked(t, 1, "netio.(*Conn).Read")
	killed := time.Now()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var err error
	select {
	case err = <-readDone:
	case <-time.After(hangTimeout):
		s.Close()
		<-readDone
		t.Fatalf("Read still blocked %v after the shm peer was killed", hangTimeout)
	}
	t.Logf("Read returned %v %v after the kill (heartbeat timeout %v)", err, time.Since(killed).Round(time.Millisecond), timeout)
	if !errors.Is(err, netio.ErrPeerTimeout) {
		t.Fatalf("Read after the shm peer was killed: %v, want ErrPeerTimeout", err)
	}
	var oe *net.OpError
	if !errors.As(err, &oe) || oe.Op != "read" {
		t.Fatalf("Read after the peer was killed: %T %v; want a *net.OpError with Op \"read\"", err, err)
	}
	if _, err := s.Write([]byte("anyone there?")); err == nil || errors.Is(err, net.ErrClosed) {
		t.Fatalf("Write after the shm peer was killed: %v; want an error other than net.ErrClosed", err)
	}
}
