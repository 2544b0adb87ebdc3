package netio_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/nettest"

	"github.com/netio-go/netio"
)

// TestNetConn runs the x/net conformance suite for net.Conn over a netio
// connection pair on the tcp provider.
func TestNetConn(t *testing.T) {
	// The suite closes one end while the other is not reading; netio's
	// Close waits up to Linger to deliver what was written, so a short one
	// keeps the suite fast.
	linger := netio.WithLinger(100 * time.Millisecond)
	nettest.TestConn(t, func() (c1, c2 net.Conn, stop func(), err error) {
		ln, err := netio.Listen(testNetwork, "127.0.0.1:0", linger)
		if err != nil {
			return nil, nil, nil, err
		}
		defer ln.Close()
		done := make(chan net.Conn, 1)
		go func() {
			c, _ := ln.Accept()
			done <- c
		}()
		c1, err = netio.Dial(testNetwork, ln.Addr().String(), linger)
		if err != nil {
			return nil, nil, nil, err
		}
		c2 = <-done
		if c2 == nil {
			c1.Close()
			return nil, nil, nil, io.ErrUnexpectedEOF
		}
		return c1, c2, func() { c1.Close(); c2.Close() }, nil
	})
}

// TestHTTP serves net/http on a netio Listener and fetches from it with an
// http.Client whose transport dials through netio.
func TestHTTP(t *testing.T) {
	ln, err := netio.Listen(testNetwork, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &httptest.Server{
		Listener: ln,
		Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			w.Header().Set("X-Netio", "yes")
			io.WriteString(w, "echo: "+string(body)+" "+strings.Repeat("z", 100000))
		})},
	}
	srv.Start()
	defer srv.Close()
	// The listener's address is not a host:port on every provider (shm's
	// is "fi_shm://..."), so the URL names a host the transport ignores.
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return netio.DialContext(ctx, testNetwork, ln.Addr().String())
	}}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	for i := 0; i < 20; i++ {
		resp, err := client.Post("http://netio.test/x", "text/plain", strings.NewReader("ping"))
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 || resp.Header.Get("X-Netio") != "yes" || !strings.HasPrefix(string(b), "echo: ping ") || len(b) != len("echo: ping ")+100000 {
			t.Fatalf("response %d %q... (%d bytes)", resp.StatusCode, b[:min(len(b), 20)], len(b))
		}
	}
}
