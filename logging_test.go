package netio_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/netio-go/netio"
)

// chanHandler hands every record to a channel, for a test to wait on.
type chanHandler chan slog.Record

func (h chanHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h chanHandler) Handle(_ context.Context, r slog.Record) error {
	h <- r.Clone()
	return nil
}
func (h chanHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h chanHandler) WithGroup(string) slog.Handler      { return h }

// nextRecord waits for the next record and returns its message and its
// attributes.
func nextRecord(t *testing.T, h chanHandler) (string, map[string]string) {
	t.Helper()
	select {
	case r := <-h:
		attrs := map[string]string{}
		r.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
		return r.Message, attrs
	case <-time.After(hangTimeout):
		t.Fatal("no log record")
		return "", nil
	}
}

// A listener with a Logger logs the requests it turns away, and a
// connection with one logs its failure; without one nothing is logged.
func TestLogger(t *testing.T) {
	h := make(chanHandler, 16)
	ln, err := netio.Listen("tcp", "127.0.0.1:0", netio.WithKey(keyA), netio.WithLogger(slog.New(h)))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, err = netio.Dial("tcp", ln.Addr().String(), netio.WithKey(keyB))
	wantRejected(t, "Dial", err)
	msg, attrs := nextRecord(t, h)
	if msg != "netio: connection request rejected" || attrs["reason"] != "wrong key" || attrs["listener"] != ln.Addr().String() {
		t.Fatalf("logged %q %v, want the rejection of a wrong key by %v", msg, attrs, ln.Addr())
	}

	// The listener's peer closes; the dialler's Logger hears that its
	// connection ended.
	dh := make(chanHandler, 16)
	c, s := dialAccept(t, ln, netio.WithKey(keyA), netio.WithLogger(slog.New(dh)))
	s.Close()
	if _, err := c.NextMessage(); err == nil {
		t.Fatal("NextMessage after the peer closed: no error")
	}
	msg, attrs = nextRecord(t, dh)
	if msg != "netio: peer closed the connection" || attrs["err"] != "EOF" || attrs["remote"] != c.RemoteAddr().String() {
		t.Fatalf("logged %q %v, want the end of the connection to %v", msg, attrs, c.RemoteAddr())
	}
	c.Close()
	select {
	case r := <-h:
		t.Fatalf("the listener logged %q for a connection that ended normally", r.Message)
	default:
	}
}
