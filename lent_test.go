package netio_test

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/netio-go/netio"
)

// Large messages go from the writer's slice on LowLatency connections
// (HighThroughput ones copy them): what arrives is what the slice held
// when Write was called, though the writer scribbles over it as soon as
// Write returns, and small messages around them keep their order.
func TestLentWriteArrivesWhole(t *testing.T) {
	for _, m := range []netio.Mode{netio.LowLatency, netio.HighThroughput} {
		t.Run(m.String(), func(t *testing.T) {
			c, s := pair(t, netio.WithMode(m), netio.WithMaxMessageSize(4<<20))
			sizes := []int{1 << 20, 64, 300 << 10, 1<<20 - 1, 5, 3<<20 + 7, 700 << 10, 1 << 20}
			if m == netio.LowLatency && !netio.Lends(c, 1<<20) {
				t.Skip("this provider needs registered memory for sends: Write copies")
			}
			want := make([][]byte, len(sizes))
			lent := uint64(0)
			for _, n := range sizes {
				if netio.Lends(c, n) {
					lent++
				}
			}
			done := make(chan error, 1)
			go func() {
				buf := make([]byte, 4<<20)
				for i, n := range sizes {
					for j := range buf[:n] {
						buf[j] = byte(i*31 + j*7)
					}
					want[i] = bytes.Clone(buf[:n])
					if k, err := c.Write(buf[:n]); k != n || err != nil {
						done <- fmt.Errorf("Write %d of %d bytes: %d, %v", i, n, k, err)
						return
					}
					for j := range buf[:n] {
						buf[j] = 0xee // Write has returned: the slice is ours
					}
				}
				done <- c.Flush()
			}()
			got := make([]byte, 4<<20)
			s.SetReadDeadline(time.Now().Add(hangTimeout)) // a writer that failed sends no more
			for i, n := range sizes {
				k, err := s.ReadMessage(got)
				if err != nil {
					select {
					case werr := <-done:
						t.Fatalf("ReadMessage %d: %v; the writer: %v", i, err, werr)
					default:
						t.Fatalf("ReadMessage %d: %v", i, err)
					}
				}
				if k != n {
					t.Fatalf("message %d: %d bytes, want %d", i, k, n)
				}
				if !bytes.Equal(got[:k], want[i]) {
					t.Fatalf("message %d of %d bytes: content differs from what was written", i, n)
				}
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if st := c.Stats(); st.MessagesLent != lent || m == netio.LowLatency && lent < 4 || m == netio.HighThroughput && lent != 0 {
				t.Errorf("%d messages lent, want %d (of %d)", st.MessagesLent, lent, len(sizes))
			}
		})
	}
}

// A lent Write to a peer that reads nothing does not wait for the peer:
// its buffers are copied in when no credit comes, so Writes go on until
// the send buffers are full, and then end with the deadline, and a later
// one with Close, as any Write.
func TestLentWriteDeadlineAndClose(t *testing.T) {
	// Buffers that take a 1 MiB message whole: a Write that stops half-way
	// through a message would end the stream.
	c, _ := pair(t, netio.WithBufferSize(1<<20), netio.WithWindow(4), netio.WithLinger(200*time.Millisecond))
	if !netio.Lends(c, 1<<20) {
		t.Skip("this provider needs registered memory for sends: Write copies")
	}
	buf := make([]byte, 1<<20)
	// Without a deadline: once the peer's buffers are taken, a Write
	// returns by copying its message in, not by waiting for the reader.
	for i := 0; c.Stats().LentCopiedBack == 0; i++ {
		if i == 64 {
			t.Fatalf("64 Writes to a peer that reads nothing, none copied back: %+v", c.Stats())
		}
		if _, err := c.Write(buf); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.SetWriteDeadline(time.Now().Add(200 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	var err error
	for i := 0; i < 64 && err == nil; i++ {
		_, err = c.Write(buf)
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Write to a peer that reads nothing: %v, want the deadline once the send buffers are full", err)
	}
	c.SetWriteDeadline(time.Time{})
	errc := make(chan error, 1)
	go func() {
		var err error
		for err == nil {
			_, err = c.Write(buf)
		}
		errc <- err
	}()
	waitBlocked(t, 1, "netio.(*Conn).Write")
	c.Close()
	select {
	case err := <-errc:
		var oe *net.OpError
		if !errors.Is(err, net.ErrClosed) || !errors.As(err, &oe) {
			t.Fatalf("Write during Close: %v, want a *net.OpError with net.ErrClosed", err)
		}
	case <-time.After(hangTimeout):
		t.Fatal("Write still blocked after Close")
	}
}

// Writers of large and small messages on one connection: every message
// arrives whole and each writer's in order, whichever went from the
// writer's memory and whichever was copied.
func TestLentConcurrentWriters(t *testing.T) {
	c, s := pair(t)
	const writers, each = 4, 24
	errc := make(chan error, writers)
	for w := range writers {
		go func() {
			buf := make([]byte, 400<<10)
			for i := range each {
				n := 100
				if i%2 == 0 {
					n = len(buf) - w*1000
				}
				for j := range buf[:n] {
					buf[j] = byte(w + i + j)
				}
				buf[0], buf[1] = byte(w), byte(i)
				if _, err := c.Write(buf[:n]); err != nil {
					errc <- err
					return
				}
			}
			errc <- nil
		}()
	}
	s.SetReadDeadline(time.Now().Add(hangTimeout))
	next := make([]int, writers)
	got := make([]byte, 400<<10)
	for range writers * each {
		n, err := s.ReadMessage(got)
		if err != nil {
			t.Fatal(err)
		}
		w, i := int(got[0]), int(got[1])
		if w >= writers || i != next[w] {
			t.Fatalf("message %d of writer %d, want %d", i, w, next[w])
		}
		next[w]++
		for j := 2; j < n; j++ {
			if got[j] != byte(w+i+j) {
				t.Fatalf("writer %d's message %d (%d bytes) differs at byte %d", w, i, n, j)
			}
		}
	}
	for range writers {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	if st := c.Stats(); netio.Lends(c, 300<<10) && st.MessagesLent == 0 {
		t.Error("no message was lent")
	}
}

// A writer of large messages whose peer goes away gets an error instead of
// waiting for sends that will not complete, before its own Close.
func TestLentWritePeerGone(t *testing.T) {
	for range 3 {
		c, s := pair(t)
		errc := make(chan error, 1)
		go func() {
			buf := make([]byte, 1<<20)
			var err error
			for err == nil {
				_, err = c.Write(buf)
			}
			errc <- err
		}()
		got := make([]byte, 1<<20)
		for range 3 {
			if _, err := s.ReadMessage(got); err != nil {
				t.Fatal(err)
			}
		}
		s.Close()
		select {
		case err := <-errc:
			if !errors.Is(err, syscall.EPIPE) && !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("Write after the peer closed: %v, want EPIPE or ECONNRESET", err)
			}
		case <-time.After(hangTimeout):
			t.Fatal("Write still blocked after the peer closed")
		}
		c.Close()
	}
}
