package netio_test

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/netio-go/netio"
)

// fillWindow writes small messages to c, whose peer does not read, until a
// Write blocks past the write deadline; it returns that Write's error and
// how many messages went through.
func fillWindow(t *testing.T, c *netio.Conn, d time.Duration) (error, int, time.Duration) {
	t.Helper()
	start := time.Now()
	c.SetWriteDeadline(start.Add(d))
	msg := make([]byte, 100)
	for i := 0; i < 1000; i++ {
		if _, err := c.Write(msg); err != nil {
			return err, i, time.Since(start)
		}
	}
	t.Fatalf("1000 Writes to a peer that reads nothing, with a window of 4, all succeeded")
	return nil, 0, 0
}

// TestWriteDeadline: a Write blocked on flow control gives up at its
// deadline, not before. A Write that ignored it would end, failing the test,
// when a backstop closes the Conn after hangTimeout.
func TestWriteDeadline(t *testing.T) {
	c, _ := pair(t, netio.WithWindow(4), netio.WithBufferSize(4096), netio.WithLinger(200*time.Millisecond))
	backstop := time.AfterFunc(hangTimeout, func() { c.Close() })
	defer backstop.Stop()
	err, n, elapsed := fillWindow(t, c, 100*time.Millisecond)
	t.Logf("%d Writes went through; the next failed after %v: %v", n, elapsed, err)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("blocked Write past its deadline: %v; want errors.Is(err, os.ErrDeadlineExceeded)", err)
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("blocked Write past its deadline: %v; want a net.Error with Timeout() true", err)
	}
	// Messages queued behind a send in flight are packed: a 4 KiB buffer
	// holds 37 of these 100-byte ones with their length prefixes. At most
	// the peer's 4 buffers and our 4 are full when a Write must wait.
	if perBuffer := (4096 - 16) / (100 + 8); n > 8*perBuffer {
		t.Errorf("%d messages written to a peer with a window of 4 buffers of 4 KiB that reads nothing; flow control should block sooner", n)
	}
	if elapsed < 95*time.Millisecond {
		t.Errorf("Write gave up after %v; want not before its deadline, 100 ms", elapsed)
	}
	// Another Write fails at once while the deadline is in the past.
	if _, err := c.Write([]byte("x")); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("Write with a past deadline: %v; want os.ErrDeadlineExceeded", err)
	}
}

func TestCloseUnblocks(t *testing.T) {
	c, s := pair(t, netio.WithWindow(4), netio.WithBufferSize(4096), netio.WithLinger(200*time.Millisecond))
	// s reads nothing, so c's Writes block; c reads, and s sends nothing.
	c.SetWriteDeadline(time.Now().Add(hangTimeout)) // a backstop

	rerr := make(chan error, 1)
	werr := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 10))
		rerr <- err
	}()
	go func() {
		msg := make([]byte, 100)
		for {
			if _, err := c.Write(msg); err != nil {
				werr <- err
				return
			}
		}
	}()
	waitBlocked(t, 1, "netio.(*Conn).Read")
	waitBlocked(t, 1, "netio.(*Conn).Write")
	select {
	case err := <-werr:
		t.Fatalf("Write failed before Close: %v", err)
	case err := <-rerr:
		t.Fatalf("Read returned before Close: %v", err)
	default:
	}
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	for _, w := range []struct {
		op string
		ch chan error
	}{{"Read", rerr}, {"Write", werr}} {
		select {
		case err := <-w.ch:
			if !errors.Is(err, net.ErrClosed) {
				t.Errorf("blocked %s after Close: %v; want net.ErrClosed", w.op, err)
			}
		case <-time.After(hangTimeout):
			t.Fatalf("%s still blocked %v after Close", w.op, hangTimeout)
		}
	}
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(hangTimeout):
		t.Fatalf("Close itself blocked %v", hangTimeout)
	}
	if err := c.Close(); err == nil {
		t.Errorf("second Close returned nil; want an error")
	}
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Read after Close: %v; want net.ErrClosed", err)
	}
	if _, err := c.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Write after Close: %v; want net.ErrClosed", err)
	}
	// The peer read nothing for the whole Linger, so what c could not send
	// is lost: after what did arrive, the peer sees a reset, not a clean end.
	s.SetReadDeadline(time.Now().Add(hangTimeout))
	_, err := io.Copy(io.Discard, s)
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("peer reading after Close gave up lingering: %v; want ECONNRESET", err)
	}
}

// TestCloseDelivers: a program that writes, closes and exits loses nothing.
// Close returns only once the slow peer has taken every message.
func TestCloseDelivers(t *testing.T) {
	c, s := pair(t, netio.WithWindow(4), netio.WithBufferSize(4096))
	const n = 200
	written := make(chan error, 1)
	go func() {
		msg := make([]byte, 1000)
		for i := 0; i < n; i++ {
			if _, err := c.Write(msg); err != nil {
				written <- err
				return
			}
		}
		written <- c.Close()
	}()
	waitBlocked(t, 1, "netio.(*Conn).Write") // the writer is blocked on the window now
	s.SetReadDeadline(time.Now().Add(hangTimeout))
	got, buf := 0, make([]byte, 1000)
	for {
		_, err := s.ReadMessage(buf)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("after %d messages: %v", got, err)
		}
		got++
	}
	if err := <-written; err != nil {
		t.Fatalf("write or Close: %v", err)
	}
	if got != n {
		t.Fatalf("peer got %d of %d messages before io.EOF", got, n)
	}
}
