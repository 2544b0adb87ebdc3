package netio_test

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/netio-go/netio"
)

func TestListenerCloseUnblocksAccept(t *testing.T) {
	ln, err := netio.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 2)
	for i := 0; i < 2; i++ {
		go func() {
			c, err := ln.Accept()
			if c != nil {
				c.Close()
			}
			errc <- err
		}()
	}
	waitBlocked(t, 2, "netio.(*Listener).Accept")
	if err := ln.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for i := 0; i < 2; i++ {
		select {
		case err := <-errc:
			if !errors.Is(err, net.ErrClosed) {
				t.Fatalf("Accept after Close: %v; want net.ErrClosed", err)
			}
		case <-time.After(hangTimeout):
			t.Fatalf("Accept still blocked %v after the Listener was closed", hangTimeout)
		}
	}
	if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept on a closed Listener: %v; want net.ErrClosed", err)
	}
	if err := ln.Close(); err == nil {
		t.Fatalf("second Close of a Listener returned nil; want an error")
	}
	// The port is free again: nothing listens there.
	start := time.Now()
	c, err := netio.Dial("tcp", ln.Addr().String())
	if c != nil {
		c.Close()
		t.Fatalf("Dial to a closed Listener succeeded")
	}
	checkDialError(t, err, time.Since(start))
}

func TestListenerAddr(t *testing.T) {
	ln, err := netio.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	a := ln.Addr()
	if a.Network() != "tcp" {
		t.Errorf("Addr().Network() = %q; want the provider, tcp", a.Network())
	}
	host, port, err := net.SplitHostPort(a.String())
	if err != nil || host != "127.0.0.1" || port == "0" {
		t.Fatalf("Addr().String() = %q; want 127.0.0.1 and the port chosen", a.String())
	}
	c, s := dialAccept(t, ln)
	if c.RemoteAddr().String() != a.String() {
		t.Errorf("dialer's RemoteAddr %v; want the listener's %v", c.RemoteAddr(), a)
	}
	if s.LocalAddr().String() != a.String() {
		t.Errorf("accepted LocalAddr %v; want the listener's %v", s.LocalAddr(), a)
	}
	if s.RemoteAddr().String() != c.LocalAddr().String() {
		t.Errorf("accepted RemoteAddr %v; want the dialer's LocalAddr %v", s.RemoteAddr(), c.LocalAddr())
	}
	echo(t, c, s, []byte("addr works"))
}

func TestListenerBacklog(t *testing.T) {
	ln, err := netio.Listen("tcp", "127.0.0.1:0", netio.WithBacklog(1))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	first, err := netio.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("first Dial, into an empty backlog of 1: %v", err)
	}
	defer first.Close()
	var rejected []error
	for i := 2; i <= 3; i++ {
		start := time.Now()
		c, err := netio.Dial("tcp", ln.Addr().String(), netio.WithConnectTimeout(hangTimeout))
		elapsed := time.Since(start)
		if c != nil {
			c.Close()
			t.Fatalf("Dial #%d with a full backlog of 1 succeeded; want it rejected", i)
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("Dial #%d with a full backlog hung until its timeout (%v); want a prompt rejection", i, elapsed)
		}
		checkDialError(t, err, elapsed)
		rejected = append(rejected, err)
	}
	s := acceptOne(t, ln, hangTimeout)
	echo(t, first, s, []byte("first"))
	// The backlog has room again.
	c, s2 := dialAccept(t, ln)
	echo(t, c, s2, []byte("after draining"))

	t.Run("ErrRejected", func(t *testing.T) {
		// netio.go: "ErrRejected is returned by Dial when the listener
		// refused the connection (its backlog was full, or it is closing)".
		for _, err := range rejected {
			if !errors.Is(err, netio.ErrRejected) {
				t.Errorf("Dial rejected by a full backlog returned %v; want errors.Is(err, netio.ErrRejected) as documented", err)
			}
		}
	})
}
