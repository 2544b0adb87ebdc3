package netio_test

import (
	"context"
	"errors"
	"io"
	"math"
	"net"
	"testing"
	"time"

	"github.com/netio-go/netio"
)

// readCtx is one of the reads that take a context.
type readCtx struct {
	name, fn string // fn: the method, as a stack shows it
	read     func(c *netio.Conn, ctx context.Context) (string, error)
}

var readCtxs = []readCtx{
	{"ReadMessageContext", "netio.(*Conn).ReadMessageContext", func(c *netio.Conn, ctx context.Context) (string, error) {
		buf := make([]byte, 64)
		n, err := c.ReadMessageContext(ctx, buf)
		return string(buf[:n]), err
	}},
	{"NextMessageContext", "netio.(*Conn).NextMessageContext", func(c *netio.Conn, ctx context.Context) (string, error) {
		m, err := c.NextMessageContext(ctx)
		if err != nil {
			return "", err
		}
		defer m.Release()
		return string(m.Bytes()), nil
	}},
}

// A read blocked for a message returns when its context is canceled, with
// the context's error in a *net.OpError, and the connection goes on.
func TestReadContextCancel(t *testing.T) {
	for _, mode := range modes() {
		for _, rc := range readCtxs {
			t.Run(mode.String()+"/"+rc.name, func(t *testing.T) {
				c, s := pair(t, netio.WithMode(mode))
				ctx, cancel := context.WithCancel(context.Background())
				type res struct {
					msg string
					err error
				}
				done := make(chan res, 1)
				go func() {
					msg, err := rc.read(s, ctx)
					done <- res{msg, err}
				}()
				waitBlocked(t, 1, rc.fn)
				cancel()
				var r res
				select {
				case r = <-done:
				case <-time.After(hangTimeout):
					t.Fatal("the read did not return when its context was canceled")
				}
				if opErr(t, r.err, "read"); !errors.Is(r.err, context.Canceled) {
					t.Fatalf("%s: %q, %v; want context.Canceled", rc.name, r.msg, r.err)
				}
				// Nothing was lost or broken: the next message reads.
				c.Write([]byte("after"))
				c.Flush()
				rctx, rcancel := context.WithTimeout(context.Background(), hangTimeout)
				defer rcancel()
				if msg, err := rc.read(s, rctx); err != nil || msg != "after" {
					t.Fatalf("read after the cancel: %q, %v", msg, err)
				}
			})
		}
	}
}

// A context's deadline is a time-out, as net.Error tells; an ended context
// fails a read at once even when a message waits, which stays for the
// next read.
func TestReadContextDeadline(t *testing.T) {
	for _, rc := range readCtxs {
		t.Run(rc.name, func(t *testing.T) {
			c, s := pair(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
			defer cancel()
			_, err := rc.read(s, ctx)
			var ne net.Error
			if opErr(t, err, "read"); !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
				t.Fatalf("read past the context's deadline: %v; want context.DeadlineExceeded, Timeout()", err)
			}
			if _, err := c.Write([]byte("waiting")); err != nil {
				t.Fatal(err)
			}
			if _, err := s.MessageLen(); err != nil { // the message is there
				t.Fatal(err)
			}
			if _, err := rc.read(s, ctx); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("read with an ended context and a message waiting: %v", err)
			}
			if msg, err := rc.read(s, context.Background()); err != nil || msg != "waiting" {
				t.Fatalf("read after: %q, %v", msg, err)
			}
		})
	}
}

// Close and the peer's close end a read with a context as they end any
// read.
func TestReadContextClose(t *testing.T) {
	for _, rc := range readCtxs {
		t.Run(rc.name, func(t *testing.T) {
			c, s := pair(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			errc := make(chan error, 1)
			go func() { _, err := rc.read(s, ctx); errc <- err }()
			waitBlocked(t, 1, rc.fn)
			s.Close()
			if err := <-errc; !errors.Is(err, net.ErrClosed) {
				t.Fatalf("after Close: %v, want net.ErrClosed", err)
			}
			if _, err := rc.read(c, ctx); !errors.Is(err, io.EOF) {
				t.Fatalf("read from a closed peer: %v, want io.EOF", err)
			}
		})
	}
}

// A context that cannot end costs the reads nothing: a round trip with
// ReadMessageContext and NextMessageContext given context.Background()
// allocates no more than one with ReadMessage and NextMessage (nothing,
// without the race detector). Each read parks (no polling), which is where
// a context's wake-up would be registered.
func TestReadContextBackgroundAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts under the race detector are not the program's (make test runs this test without -race too)")
	}
	c, s := pair(t, netio.WithPollFor(-1))
	go func() {
		buf := make([]byte, 64)
		for {
			n, err := s.ReadMessage(buf)
			if err != nil {
				return
			}
			if _, err := s.Write(buf[:n]); err != nil {
				return
			}
		}
	}()
	msg := []byte("ping")
	buf := make([]byte, 64)
	var failed error
	roundTrips := func(ctx context.Context) func() {
		return func() {
			var m netio.Message
			var err error
			c.Write(msg)
			if ctx == nil {
				m, err = c.NextMessage()
			} else {
				m, err = c.NextMessageContext(ctx)
			}
			if err != nil {
				failed = err
				return
			}
			m.Release()
			c.Write(msg)
			if ctx == nil {
				_, err = c.ReadMessage(buf)
			} else {
				_, err = c.ReadMessageContext(ctx, buf)
			}
			if err != nil {
				failed = err
			}
		}
	}
	plain, withCtx := roundTrips(nil), roundTrips(context.Background())
	plain() // warm up
	withCtx()
	// AllocsPerRun counts the whole process's allocations, so a background
	// one (the runtime's, the race detector's, the echo goroutine's) can
	// land in any run, the more so on a loaded machine where round trips
	// are slow; an allocation on the context path shows in every run. The
	// fewest of five runs of each, taken in turns so that a busy spell
	// falls on both.
	base, allocs := math.Inf(1), math.Inf(1)
	for i := 0; i < 5; i++ {
		base = min(base, testing.AllocsPerRun(200, plain))
		allocs = min(allocs, testing.AllocsPerRun(200, withCtx))
	}
	if allocs > base {
		t.Errorf("%v allocations per round trip with context.Background(), %v without a context", allocs, base)
	}
	if failed != nil {
		t.Fatal(failed)
	}
}
