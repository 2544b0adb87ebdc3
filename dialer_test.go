package netio_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/netio-go/netio"
)

// A Dialer and a ListenConfig apply their Config: a HighThroughput pair
// connects, and a Dialer in the other mode is rejected by that listener.
func TestDialerListenConfig(t *testing.T) {
	ht := netio.Config{Mode: netio.HighThroughput, Window: 4}
	lc := netio.ListenConfig{Config: ht}
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()

	d := netio.Dialer{Config: ht}
	c, err := d.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := ln.AcceptConn()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := c.Write([]byte("paged")); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	got, err := s.AppendMessage(nil)
	if err != nil || string(got) != "paged" {
		t.Fatalf("read %q, %v", got, err)
	}

	var zero netio.Dialer
	if c, err := zero.DialContext(context.Background(), "tcp", ln.Addr().String()); err == nil {
		c.Close()
		t.Fatal("a zero Dialer (LowLatency) connected to a HighThroughput ListenConfig's listener")
	} else if !errors.Is(err, netio.ErrRejected) {
		t.Fatalf("zero Dialer: %v, want ErrRejected", err)
	}
}

// Their Config is checked like WithConfig's.
func TestDialerListenConfigInvalid(t *testing.T) {
	bad := netio.Config{Window: 2}
	_, err := (&netio.ListenConfig{Config: bad}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	opErr(t, err, "listen")
	if !errors.Is(err, netio.ErrInvalidConfig) {
		t.Errorf("ListenConfig with a window of 2: %v, want ErrInvalidConfig", err)
	}
	_, err = (&netio.Dialer{Config: bad}).Dial("tcp", "127.0.0.1:1")
	opErr(t, err, "dial")
	if !errors.Is(err, netio.ErrInvalidConfig) {
		t.Errorf("Dialer with a window of 2: %v, want ErrInvalidConfig", err)
	}
}

// An ended context fails Listen and Dial at once.
func TestDialerListenConfigContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var lc netio.ListenConfig
	if ln, err := lc.Listen(ctx, "tcp", "127.0.0.1:0"); err == nil {
		ln.Close()
		t.Fatal("Listen with a canceled context succeeded")
	} else if opErr(t, err, "listen"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Listen: %v, want context.Canceled", err)
	}
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var d netio.Dialer
	if c, err := d.DialContext(ctx, "tcp", ln.Addr().String()); err == nil {
		c.Close()
		t.Fatal("DialContext with a canceled context succeeded")
	} else if opErr(t, err, "dial"); !errors.Is(err, context.Canceled) {
		t.Fatalf("DialContext: %v, want context.Canceled", err)
	}
}

func TestAcceptContext(t *testing.T) {
	ln, err := netio.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()

	// Canceled while it waits.
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		c, err := ln.AcceptContext(ctx)
		if c != nil {
			c.Close()
		}
		errc <- err
	}()
	waitBlocked(t, 1, "netio.(*Listener).AcceptContext")
	cancel()
	select {
	case err := <-errc:
		if opErr(t, err, "accept"); !errors.Is(err, context.Canceled) {
			t.Fatalf("AcceptContext: %v, want context.Canceled", err)
		}
	case <-time.After(hangTimeout):
		t.Fatal("AcceptContext did not return when its context was canceled")
	}

	// A deadline: a time-out, as net.Error says.
	dctx, dcancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer dcancel()
	_, err = ln.AcceptContext(dctx)
	var ne net.Error
	if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("AcceptContext past its deadline: %v, want context.DeadlineExceeded and Timeout()", err)
	}

	// The listener is still open: a dial is accepted. An ended context
	// leaves the connection queued for the next accept.
	c, err := netio.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := ln.AcceptContext(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("AcceptContext with a canceled context: %v", err)
	}
	actx, acancel := context.WithTimeout(context.Background(), hangTimeout)
	defer acancel()
	s, err := ln.AcceptContext(actx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := c.Write([]byte("hi")); err != nil {
		t.Fatal(err)
	}
	if got, err := s.AppendMessage(nil); err != nil || string(got) != "hi" {
		t.Fatalf("read %q, %v", got, err)
	}

	// Close ends a waiting AcceptContext with net.ErrClosed.
	go func() {
		_, err := ln.AcceptContext(actx)
		errc <- err
	}()
	waitBlocked(t, 1, "netio.(*Listener).AcceptContext")
	ln.Close()
	if err := <-errc; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("AcceptContext after Close: %v, want net.ErrClosed", err)
	}
}
