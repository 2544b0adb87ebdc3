package netio_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/netio-go/netio"
)

// A nil Option is a configuration error of the call it is passed to, not
// a panic.
func TestNilOption(t *testing.T) {
	ctx := context.Background()
	calls := map[string]func() error{
		"Listen": func() error { _, err := netio.Listen("tcp", "127.0.0.1:0", nil); return err },
		"Dial": func() error {
			_, err := netio.Dial("tcp", "127.0.0.1:1", netio.WithMode(netio.LowLatency), nil)
			return err
		},
		"DialContext": func() error { _, err := netio.DialContext(ctx, "tcp", "127.0.0.1:1", nil); return err },
		"ListenPublisher": func() error {
			_, err := netio.ListenPublisher("tcp", "127.0.0.1:0", nil)
			return err
		},
		"Subscribe": func() error {
			_, err := netio.Subscribe(ctx, "tcp", "127.0.0.1:1", []uint64{1}, nil)
			return err
		},
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, netio.ErrInvalidConfig) {
			t.Errorf("%s with a nil Option: %v, want an error wrapping ErrInvalidConfig", name, err)
		}
	}
}

// Every call on a Conn that Dial or Accept did not make returns an error,
// as net's conns return EINVAL.
func TestZeroConn(t *testing.T) {
	var zero netio.Conn
	var nilConn *netio.Conn
	for name, c := range map[string]*netio.Conn{"zero Conn": &zero, "nil *Conn": nilConn} {
		buf := make([]byte, 8)
		ctx := context.Background()
		errs := map[string]error{}
		_, errs["Write"] = c.Write(buf)
		_, errs["WriteBatch"] = c.WriteBatch([][]byte{buf})
		_, errs["WriteContext"] = c.WriteContext(ctx, buf)
		_, errs["TryWrite"] = c.TryWrite(buf)
		errs["Flush"] = c.Flush()
		_, errs["Read"] = c.Read(buf)
		_, errs["ReadMessage"] = c.ReadMessage(buf)
		_, errs["ReadMessageContext"] = c.ReadMessageContext(ctx, buf)
		_, errs["AppendMessage"] = c.AppendMessage(nil)
		_, errs["MessageLen"] = c.MessageLen()
		_, errs["Next"] = c.Next()
		_, errs["NextBatch"] = c.NextBatch(make([][]byte, 2))
		_, errs["NextMessage"] = c.NextMessage()
		_, errs["NextMessageContext"] = c.NextMessageContext(ctx)
		errs["SetDeadline"] = c.SetDeadline(time.Now())
		errs["SetReadDeadline"] = c.SetReadDeadline(time.Now())
		errs["SetWriteDeadline"] = c.SetWriteDeadline(time.Now())
		errs["CloseWrite"] = c.CloseWrite()
		errs["Close"] = c.Close()
		for call, err := range errs {
			var op *net.OpError
			if !errors.As(err, &op) {
				t.Errorf("%s: %s returned %v, want a *net.OpError", name, call, err)
			}
		}
		if s := c.String(); s == "" {
			t.Errorf("%s: String is empty", name)
		}
	}
}

// After Close every call fails with an error wrapping net.ErrClosed, the
// deadline setters included, as on a net.Conn.
func TestCallsAfterClose(t *testing.T) {
	client, _ := pair(t)
	if err := client.Close(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 8)
	errs := map[string]error{}
	_, errs["Write"] = client.Write(buf)
	_, errs["Read"] = client.Read(buf)
	_, errs["NextMessage"] = client.NextMessage()
	errs["Flush"] = client.Flush()
	errs["SetDeadline"] = client.SetDeadline(time.Now())
	errs["SetReadDeadline"] = client.SetReadDeadline(time.Now())
	errs["SetWriteDeadline"] = client.SetWriteDeadline(time.Time{})
	errs["CloseWrite"] = client.CloseWrite()
	errs["Close"] = client.Close()
	for call, err := range errs {
		if !errors.Is(err, net.ErrClosed) {
			t.Errorf("%s after Close: %v, want an error wrapping net.ErrClosed", call, err)
		}
	}
}

// wantUsedAfterRelease calls bytes and checks that it panics with netio's
// message for a Message used after Release.
func wantUsedAfterRelease(t *testing.T, what string, bytes func() []byte) {
	t.Helper()
	defer func() {
		if r := recover(); r != "netio: Message used after Release" {
			t.Fatalf("%s: recovered %v, want the panic \"netio: Message used after Release\"", what, r)
		}
	}()
	b := bytes()
	t.Fatalf("%s: Bytes returned %q", what, b)
}

// Bytes after Release panics instead of returning bytes that another
// message may already have overwritten: for a message in a receive
// buffer, one joined in a spare buffer, and one of a subscription.
func TestBytesAfterRelease(t *testing.T) {
	for _, m := range modes() {
		t.Run(m.String(), func(t *testing.T) {
			client, server := pair(t, netio.WithMode(m))
			writeAll(t, client, "one", "two")
			m1, m2 := nextMessage(t, server), nextMessage(t, server)
			m1.Release()
			wantUsedAfterRelease(t, "Bytes after Release", m1.Bytes)
			if got := string(m2.Bytes()); got != "two" {
				t.Fatalf("message still held reads %q, want \"two\"", got)
			}
			m2.Release()
			wantUsedAfterRelease(t, "Bytes of a copy after Release", m2.Bytes)
		})
	}
	t.Run("joined", func(t *testing.T) {
		client, server := pair(t, netio.WithBufferSize(4096))
		big := bytes.Repeat([]byte("joined "), 2000) // over four buffers
		if _, err := client.Write(big); err != nil {
			t.Fatal(err)
		}
		m := nextMessage(t, server)
		m.Release()
		wantUsedAfterRelease(t, "Bytes of a joined message after Release", m.Bytes)
	})
	t.Run("subscription", func(t *testing.T) {
		p := listenPublisher(t)
		s := subscribe(t, p, []uint64{7})
		if err := p.Publish(context.Background(), 7, payload(7, 0, 32)); err != nil {
			t.Fatal(err)
		}
		p.Flush()
		select {
		case m := <-s.C:
			m.Release()
			wantUsedAfterRelease(t, "Bytes of a subscription's message after Release", m.Bytes)
		case <-time.After(hangTimeout):
			t.Fatal("no message")
		}
	})
}
