package netio_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/netio-go/netio"
)

// checkDialError checks that a Dial failed with a *net.OpError, and failed
// promptly: not by running into a connect timeout (a Dial that waits for an
// answer that never comes ends with os.ErrDeadlineExceeded, which the tests
// that expect it check through checkDialErrorShape), and not after a hang.
func checkDialError(t *testing.T, err error, elapsed time.Duration) *net.OpError {
	t.Helper()
	oe := checkDialErrorShape(t, err, elapsed)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Dial ran into its timeout (%v, after %v); want a prompt failure", err, elapsed)
	}
	return oe
}

// checkDialErrorShape checks that a Dial failed with a *net.OpError, and
// within hangTimeout.
func checkDialErrorShape(t *testing.T, err error, elapsed time.Duration) *net.OpError {
	t.Helper()
	if err == nil {
		t.Fatal("Dial succeeded; want an error")
	}
	var oe *net.OpError
	if !errors.As(err, &oe) || oe.Op != "dial" {
		t.Fatalf("Dial error %T %v; want a *net.OpError with Op \"dial\"", err, err)
	}
	if elapsed >= hangTimeout {
		t.Fatalf("Dial took %v to fail: it hung", elapsed)
	}
	t.Logf("%v (after %v)", err, elapsed.Round(time.Microsecond))
	return oe
}

func TestDialRefused(t *testing.T) {
	addr := freePort(t)
	start := time.Now()
	c, err := netio.Dial("tcp", addr)
	if c != nil {
		c.Close()
	}
	checkDialError(t, err, time.Since(start))
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("Dial to a closed port: %v; want errors.Is(err, syscall.ECONNREFUSED)", err)
	}
}

// TestDialTimeout dials a plain TCP listener that never accepts: the TCP
// handshake completes in the kernel but nobody answers netio's request.
// Each case has one short deadline, the one under test, and a backstop of
// hangTimeout: a Dial that ignored the short one ends at the backstop, which
// the check tells apart however slow the machine. It does not give up
// before its deadline either.
func TestDialTimeout(t *testing.T) {
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	check := func(t *testing.T, err error, elapsed, want time.Duration) {
		t.Helper()
		checkDialErrorShape(t, err, elapsed)
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("Dial past its deadline: %v; want errors.Is(err, os.ErrDeadlineExceeded)", err)
		}
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Errorf("Dial past its deadline: %v; want a net.Error with Timeout() true", err)
		}
		if elapsed < want-5*time.Millisecond {
			t.Errorf("Dial gave up after %v; want not before its deadline, %v", elapsed, want)
		}
	}
	t.Run("context deadline", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		start := time.Now()
		c, err := netio.DialContext(ctx, "tcp", silent.Addr().String(), netio.WithConnectTimeout(hangTimeout))
		if c != nil {
			c.Close()
		}
		check(t, err, time.Since(start), 50*time.Millisecond)
	})
	t.Run("ConnectTimeout", func(t *testing.T) {
		backstop, cancel := context.WithTimeout(context.Background(), hangTimeout)
		defer cancel()
		start := time.Now()
		c, err := netio.DialContext(backstop, "tcp", silent.Addr().String(), netio.WithConnectTimeout(80*time.Millisecond))
		if c != nil {
			c.Close()
		}
		check(t, err, time.Since(start), 80*time.Millisecond)
	})
}

func TestDialCanceledContext(t *testing.T) {
	ln, err := netio.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan *netio.Conn, 16)
	go func() {
		defer close(accepted)
		for {
			c, err := ln.AcceptConn()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	const tries = 5
	for i := 0; i < tries; i++ {
		start := time.Now()
		c, err := netio.DialContext(ctx, "tcp", ln.Addr().String())
		if c != nil {
			c.Close()
			t.Fatalf("DialContext with a canceled context returned a connection")
		}
		checkDialError(t, err, time.Since(start))
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("DialContext with a canceled context: %v; want errors.Is(err, context.Canceled)", err)
		}
	}
	// The listener is unharmed. Attempts abandoned after the listener had
	// accepted them may show up in Accept (as with TCP): they must end
	// promptly, and the real connection must come through.
	c, err := netio.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	want := []byte("after canceled dials")
	if _, err := c.Write(want); err != nil {
		t.Fatal(err)
	}
	abandoned := 0
	for {
		var s *netio.Conn
		select {
		case s = <-accepted:
		case <-time.After(hangTimeout):
			t.Fatalf("the real connection was not accepted in %v (%d abandoned ones were)", hangTimeout, abandoned)
		}
		s.SetReadDeadline(time.Now().Add(hangTimeout))
		got, err := s.AppendMessage(nil)
		if err == nil && bytes.Equal(got, want) {
			echo(t, c, s, []byte("echo"))
			s.Close()
			break
		}
		s.Close()
		abandoned++
		if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("a connection from a canceled Dial was accepted and read %q, %v; want it to end with an error", got, err)
		}
		t.Logf("accepted connection of a canceled Dial ended with %v", err)
		if abandoned > tries {
			t.Fatalf("more connections accepted than dialed")
		}
	}
	if abandoned > 0 {
		t.Logf("%d of %d Dials with an already canceled context still reached the listener", abandoned, tries)
	}
}

func TestDialBadArguments(t *testing.T) {
	addr := freePort(t)
	t.Run("unknown provider", func(t *testing.T) {
		start := time.Now()
		c, err := netio.Dial("no-such-provider", addr)
		if c != nil {
			c.Close()
		}
		oe := checkDialError(t, err, time.Since(start))
		if oe.Net != "no-such-provider" {
			t.Errorf("OpError.Net = %q; want the provider asked for", oe.Net)
		}
		if !bytes.Contains([]byte(err.Error()), []byte("no-such-provider")) {
			t.Errorf("error %q does not name the unknown provider", err)
		}
	})
	for _, a := range []string{"no-port", "127.0.0.1", "127.0.0.1:99999", "127.0.0.1:-1", "127.0.0.1:port", "[::1:80", ""} {
		t.Run("address "+strconv.Quote(a), func(t *testing.T) {
			start := time.Now()
			c, err := netio.Dial("tcp", a)
			if c != nil {
				c.Close()
			}
			checkDialError(t, err, time.Since(start))
		})
	}
}
