package netio_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/netio-go/netio"
)

// halfClose checks CloseWrite from w's side: what w wrote arrives, then r
// reads io.EOF; w cannot write any more, but r still can, many times
// its window, and w reads it all; r's Close then ends w's reading.
func halfClose(t *testing.T, w, r *netio.Conn) {
	t.Helper()
	before := [][]byte{[]byte("one"), {}, bytes.Repeat([]byte("b"), 300<<10), []byte("last")}
	wrote := make(chan error, 1)
	go func() { // more than the window: it waits for the reader
		for _, m := range before {
			if _, err := w.Write(m); err != nil {
				wrote <- err
				return
			}
		}
		wrote <- w.CloseWrite()
	}()
	r.SetReadDeadline(time.Now().Add(hangTimeout))
	w.SetReadDeadline(time.Now().Add(hangTimeout))
	for i, want := range before {
		got, err := r.AppendMessage(nil)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("message %d: %d bytes, %v; want %d bytes", i, len(got), err, len(want))
		}
	}
	if err := <-wrote; err != nil {
		t.Fatalf("writing, then CloseWrite: %v", err)
	}
	if err := w.CloseWrite(); err != nil {
		t.Fatalf("CloseWrite again: %v", err)
	}
	// Writes fail as on a TCP socket after shutdown(SHUT_WR).
	_, err := w.Write([]byte("too late"))
	if opErr(t, err, "write"); !errors.Is(err, syscall.EPIPE) {
		t.Fatalf("Write after CloseWrite: %v, want EPIPE", err)
	}
	if err := w.Flush(); !errors.Is(err, syscall.EPIPE) {
		t.Fatalf("Flush after CloseWrite: %v, want EPIPE", err)
	}
	if _, err := w.TryWrite([]byte("x")); !errors.Is(err, syscall.EPIPE) {
		t.Fatalf("TryWrite after CloseWrite: %v, want EPIPE", err)
	}
	for i := 0; i < 2; i++ { // and again: the stream stays ended
		if got, err := r.AppendMessage(nil); err != io.EOF {
			t.Fatalf("read %d after the peer's CloseWrite: %q, %v; want io.EOF", i, got, err)
		}
	}
	if _, err := r.Read(make([]byte, 8)); err != io.EOF {
		t.Fatalf("Read after the peer's CloseWrite: %v, want io.EOF", err)
	}
	if _, err := r.NextMessageContext(context.Background()); err != io.EOF {
		t.Fatalf("NextMessageContext after the peer's CloseWrite: %v, want io.EOF", err)
	}

	// The other direction still works, for many windows' worth of
	// messages (their credits come back from the half-closed side) and a
	// message larger than a buffer.
	const n = 2000
	errc := make(chan error, 1)
	go func() {
		for i := 0; i < n; i++ {
			if _, err := r.Write([]byte(fmt.Sprint("reply ", i))); err != nil {
				errc <- err
				return
			}
		}
		if _, err := r.Write(bytes.Repeat([]byte("L"), 3<<20)); err != nil {
			errc <- err
			return
		}
		errc <- r.Flush()
	}()
	buf := make([]byte, 64)
	for i := 0; i < n; i++ {
		k, err := w.ReadMessage(buf)
		if want := fmt.Sprint("reply ", i); err != nil || string(buf[:k]) != want {
			t.Fatalf("reply %d: %q, %v; want %q", i, buf[:k], err, want)
		}
	}
	if big, err := w.AppendMessage(nil); err != nil || len(big) != 3<<20 {
		t.Fatalf("large reply: %d bytes, %v", len(big), err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("writing to the half-closed side: %v", err)
	}
	// The peer closes in turn: w reads io.EOF, and Close frees both.
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := w.ReadMessage(buf); err != io.EOF {
		t.Fatalf("after the peer's Close: %v, want io.EOF", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.CloseWrite(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("CloseWrite after Close: %v, want net.ErrClosed", err)
	}
}

// CloseWrite from either side, in either mode, with the smallest window
// so that credits have to come back many times.
func TestCloseWrite(t *testing.T) {
	for _, mode := range modes() {
		for _, side := range []string{"client", "server"} {
			t.Run(mode.String()+"/"+side, func(t *testing.T) {
				c, s := pair(t, netio.WithMode(mode), netio.WithWindow(4), netio.WithBufferSize(64<<10))
				if side == "server" {
					c, s = s, c
				}
				halfClose(t, c, s)
			})
		}
	}
}

// A reader blocked when the peer closes its writing side wakes with
// io.EOF, and both sides closing their writing sides leaves both reading
// io.EOF with the connection still open.
func TestCloseWriteWakesReader(t *testing.T) {
	for _, mode := range modes() {
		t.Run(mode.String(), func(t *testing.T) {
			c, s := pair(t, netio.WithMode(mode))
			errc := make(chan error, 1)
			go func() { _, err := s.ReadMessage(make([]byte, 8)); errc <- err }()
			waitBlocked(t, 1, "netio.(*Conn).ReadMessage")
			if err := c.CloseWrite(); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-errc:
				if err != io.EOF {
					t.Fatalf("blocked read: %v, want io.EOF", err)
				}
			case <-time.After(hangTimeout):
				t.Fatal("a blocked read did not wake when the peer closed its writing side")
			}
			if err := s.CloseWrite(); err != nil {
				t.Fatal(err)
			}
			c.SetReadDeadline(time.Now().Add(hangTimeout))
			if _, err := c.ReadMessage(make([]byte, 8)); err != io.EOF {
				t.Fatalf("after both CloseWrites: %v, want io.EOF", err)
			}
		})
	}
}

// A message cut short by CloseWrite cannot happen: CloseWrite waits for
// a Write in progress, and a HighThroughput page left open goes out.
func TestCloseWriteSendsOpenPage(t *testing.T) {
	c, s := pair(t, netio.WithMode(netio.HighThroughput), netio.WithNoIdleFlush(), netio.WithFlushInterval(time.Hour))
	if _, err := c.Write([]byte("in the page")); err != nil {
		t.Fatal(err)
	}
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	s.SetReadDeadline(time.Now().Add(hangTimeout))
	if got, err := s.AppendMessage(nil); err != nil || string(got) != "in the page" {
		t.Fatalf("%q, %v", got, err)
	}
	if _, err := s.AppendMessage(nil); err != io.EOF {
		t.Fatalf("%v, want io.EOF", err)
	}
}
