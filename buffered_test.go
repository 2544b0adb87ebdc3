package netio_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/netio-go/netio"
)

var ht = netio.WithMode(netio.HighThroughput)

// message i of a test stream: its length varies and its bytes say who it is.
func testMessage(i, maxLen int) []byte {
	n := (i * 7919) % (maxLen + 1)
	m := make([]byte, max(n, 4))
	binary.LittleEndian.PutUint32(m, uint32(i))
	for j := 4; j < len(m); j++ {
		m[j] = byte(i + j)
	}
	return m
}

func TestBufferedManyMessages(t *testing.T) {
	for _, read := range []string{"ReadMessage", "NextMessage", "AppendMessage", "Next", "NextBatch"} {
		t.Run(read, func(t *testing.T) {
			// Small pages so that a few hundred messages fill many of them.
			c, s := pair(t, ht, netio.WithBufferSize(4096), netio.WithWindow(4))
			const count, maxLen = 3000, 300
			errc := make(chan error, 1)
			go func() {
				if read == "NextBatch" {
					// Batches of up to 10 messages in one call.
					var batch [][]byte
					for i := 0; i < count; i++ {
						batch = append(batch, testMessage(i, maxLen))
						if len(batch) == i%10+1 {
							if n, err := c.WriteBatch(batch); err != nil || n != len(batch) {
								errc <- fmt.Errorf("WriteBatch: %d of %d, %v", n, len(batch), err)
								return
							}
							batch = batch[:0]
						}
					}
					if _, err := c.WriteBatch(batch); err != nil {
						errc <- err
						return
					}
					errc <- c.Flush()
					return
				}
				for i := 0; i < count; i++ {
					if _, err := c.Write(testMessage(i, maxLen)); err != nil {
						errc <- err
						return
					}
				}
				errc <- c.Flush()
			}()
			buf := make([]byte, maxLen+4)
			var batch [][]byte // NextBatch: messages received, not yet checked
			batchBuf := make([][]byte, 7)
			for i := 0; i < count; i++ {
				want := testMessage(i, maxLen)
				var got []byte
				switch read {
				case "Next":
					var err error
					if got, err = s.Next(); err != nil {
						t.Fatalf("message %d: %v", i, err)
					}
				case "NextBatch":
					if len(batch) == 0 {
						n, err := s.NextBatch(batchBuf)
						if err != nil || n == 0 {
							t.Fatalf("message %d: NextBatch %d, %v", i, n, err)
						}
						batch = batchBuf[:n]
					}
					got, batch = batch[0], batch[1:]
				case "ReadMessage":
					n, err := s.ReadMessage(buf)
					if err != nil {
						t.Fatalf("message %d: %v", i, err)
					}
					got = buf[:n]
				case "AppendMessage":
					var err error
					if got, err = s.AppendMessage(buf[:0]); err != nil {
						t.Fatalf("message %d: %v", i, err)
					}
				case "NextMessage":
					m, err := s.NextMessage()
					if err != nil {
						t.Fatalf("message %d: %v", i, err)
					}
					got = append(buf[:0], m.Bytes()...)
					m.Release()
				}
				// bytes.Equal first: cmp.Diff on each of 15000
				// messages would make this test slow.
				if !bytes.Equal(got, want) {
					t.Fatalf("message %d (-want +got):\n%s", i, cmp.Diff(want, got))
				}
			}
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			// How many pages a pause of the writer sealed early depends on
			// how often the machine paused it; TestBufferedFullPages checks
			// that pages go out full when nothing else seals them.
			st := c.Stats()
			if st.MessagesSent != count || st.PagesSent < 3000*150/4096 {
				t.Errorf("sender stats %+v: want %d messages in pages", st, count)
			}
		})
	}
}

// Pages go out full: with no pause watch and a flush interval longer than
// the test, only a full page or Flush sends one, whatever the speed of the
// writer and the reactor.
func TestBufferedFullPages(t *testing.T) {
	c, s := pair(t, ht, netio.WithBufferSize(4096), netio.WithWindow(4), netio.WithNoIdleFlush(), netio.WithFlushInterval(time.Hour))
	const count, maxLen = 3000, 300
	errc := make(chan error, 1)
	total := 0
	for i := range count {
		total += len(testMessage(i, maxLen))
	}
	go func() {
		for i := range count {
			if _, err := c.Write(testMessage(i, maxLen)); err != nil {
				errc <- err
				return
			}
		}
		errc <- c.Flush()
	}()
	s.SetReadDeadline(time.Now().Add(hangTimeout))
	buf := make([]byte, maxLen+4)
	for i := range count {
		n, err := s.ReadMessage(buf)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if want := testMessage(i, maxLen); !bytes.Equal(buf[:n], want) {
			t.Fatalf("message %d: got %d bytes, want %d", i, n, len(want))
		}
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	st := c.Stats()
	if st.MessagesSent != count || st.FlushesIdle != 0 || st.FlushesTimer != 0 || st.FlushesExplicit != 1 {
		t.Errorf("sender stats %+v: want %d messages, one explicit flush, no idle or timer flush", st, count)
	}
	if st.PagesSent != st.FlushesFull+st.FlushesExplicit || st.FlushesFull < uint64(total/4096) {
		t.Errorf("sender stats %+v: want every page but the last sent full (%d payload bytes)", st, total)
	}
}

// Messages larger than a page are split across pages and joined again,
// whichever way they are read.
func TestBufferedLargeMessages(t *testing.T) {
	c, s := pair(t, ht, netio.WithBufferSize(4096), netio.WithWindow(4))
	sizes := []int{4096 - 16 - 8, 4096 - 16 - 7, 4096, 10000, 3, 100000, 0, 5000}
	msgs := make([][]byte, len(sizes))
	for i, n := range sizes {
		msgs[i] = bytes.Repeat([]byte{byte(i + 1)}, n)
	}
	errc := make(chan error, 1)
	go func() {
		for range 3 {
			for _, m := range msgs {
				if _, err := c.Write(m); err != nil {
					errc <- err
					return
				}
			}
		}
		errc <- c.Flush()
	}()
	for round := range 3 {
		for i, want := range msgs {
			var got []byte
			switch round {
			case 0:
				m, err := s.NextMessage()
				if err != nil {
					t.Fatal(err)
				}
				got = bytes.Clone(m.Bytes())
				m.Release()
			case 1:
				var err error
				if got, err = s.AppendMessage(nil); err != nil {
					t.Fatal(err)
				}
			case 2:
				got = make([]byte, len(want))
				if _, err := io.ReadFull(s, got); err != nil {
					t.Fatal(err)
				}
			}
			// bytes.Equal first: cmp compares 100 KB byte by byte.
			if !bytes.Equal(got, want) {
				t.Fatalf("round %d message %d: %d bytes, want %d (-want +got):\n%s", round, i, len(got), len(want), cmp.Diff(want, got))
			}
		}
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// Messages from NextMessage stay valid while later ones are read, and
// their pages come back once they are released: holding them all would
// stop the stream after Window pages.
func TestBufferedNextMessageHolds(t *testing.T) {
	c, s := pair(t, ht, netio.WithBufferSize(4096), netio.WithWindow(4))
	const count = 2000 // 2000 × 108 bytes: ~53 pages, far beyond the window of 4
	go func() {
		for i := range count {
			c.Write(testMessage(i, 100))
		}
		c.Flush()
	}()
	var held []netio.Message
	for i := range count {
		m, err := s.NextMessage()
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, m)
		if len(held) == 20 {
			for j, h := range held {
				if want := testMessage(i-19+j, 100); !bytes.Equal(h.Bytes(), want) {
					t.Fatalf("held message %d changed under us (-want +got):\n%s", i-19+j, cmp.Diff(want, h.Bytes()))
				}
				h.Release()
			}
			held = held[:0]
		}
	}
}

func TestBufferedFlushAndIdle(t *testing.T) {
	// A flush interval longer than the test where it is not the cause
	// under test: a slow machine may take longer than the default to get
	// to the idle flush or the Flush call, and the timer would send the
	// page first.
	noTimer := netio.WithFlushInterval(time.Hour)
	t.Run("idle", func(t *testing.T) {
		c, s := pair(t, ht, noTimer)
		c.Write([]byte("one small message"))
		s.SetReadDeadline(time.Now().Add(hangTimeout))
		b := make([]byte, 100)
		n, err := s.ReadMessage(b)
		if err != nil || string(b[:n]) != "one small message" {
			t.Fatalf("ReadMessage: %q, %v", b[:n], err)
		}
		if st := c.Stats(); st.FlushesIdle != 1 || st.FlushesTimer+st.FlushesFull+st.FlushesExplicit != 0 {
			t.Fatalf("stats %+v: want one idle flush", st)
		}
	})
	t.Run("timer", func(t *testing.T) {
		const interval = 50 * time.Millisecond
		c, s := pair(t, ht, netio.WithNoIdleFlush(), netio.WithFlushInterval(interval))
		start := time.Now()
		c.Write([]byte("waits for the timer"))
		b := make([]byte, 100)
		s.SetReadDeadline(time.Now().Add(hangTimeout))
		n, err := s.ReadMessage(b)
		// Nothing may arrive before the flush interval (however late it
		// comes on a slow machine).
		if el := time.Since(start); el < interval {
			t.Fatalf("message arrived %v after the Write, before the flush interval %v", el, interval)
		}
		if err != nil || string(b[:n]) != "waits for the timer" {
			t.Fatalf("ReadMessage: %q, %v", b[:n], err)
		}
		if st := c.Stats(); st.FlushesTimer != 1 || st.FlushesIdle != 0 {
			t.Fatalf("stats %+v: want one timer flush", st)
		}
	})
	t.Run("explicit", func(t *testing.T) {
		c, s := pair(t, ht, netio.WithNoIdleFlush(), noTimer)
		c.Write([]byte("flushed"))
		if err := c.Flush(); err != nil {
			t.Fatal(err)
		}
		s.SetReadDeadline(time.Now().Add(hangTimeout))
		b := make([]byte, 100)
		if n, err := s.ReadMessage(b); err != nil || string(b[:n]) != "flushed" {
			t.Fatalf("ReadMessage: %q, %v", b[:n], err)
		}
		if st := c.Stats(); st.FlushesExplicit != 1 {
			t.Fatalf("stats %+v: want one explicit flush", st)
		}
	})
}

// When every page is in flight and the reader does not read, Write blocks
// (bounded by the deadline or the context) and TryWrite says it would.
//
// Whether the reactor has posted and completed every page it could when
// TryWrite first refuses depends on the machine's speed, so nothing here
// assumes it has: a Write that finds room after all counts as one more
// message sent, and only the bound on what the connection holds, checked
// at the end, says when the filling should have stopped.
func TestBufferedBackPressure(t *testing.T) {
	c, s := pair(t, ht, netio.WithBufferSize(4096), netio.WithWindow(4))
	msg := make([]byte, 1000)
	// The pool bounds what one connection holds: 4 pages at the receiver
	// and 4 send buffers, 4 messages a page.
	const bound = 8 * 4
	sent := 0
	tooMany := func() {
		t.Helper()
		if sent > bound {
			t.Fatalf("%d KB taken before blocking: the page pool does not bound it", sent)
		}
	}
	for {
		_, err := c.TryWrite(msg)
		if errors.Is(err, netio.ErrWouldBlock) {
			break
		}
		if err != nil {
			t.Fatalf("TryWrite: %v", err)
		}
		sent++
		tooMany()
	}
	for {
		c.SetWriteDeadline(time.Now().Add(30 * time.Millisecond))
		_, err := c.Write(msg)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			break
		}
		if err != nil {
			t.Fatalf("Write with the peer not reading: %v, want deadline exceeded", err)
		}
		sent++
		tooMany()
	}
	c.SetWriteDeadline(time.Time{})
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
		_, err := c.WriteContext(ctx, msg)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			break
		}
		if err != nil {
			t.Fatalf("WriteContext with the peer not reading: %v", err)
		}
		sent++
		tooMany()
	}

	// Reading frees pages, and writing goes on. The Write blocks first;
	// the reader starts after the test saw it blocked, so CreditWait grows
	// by at least the time between the two.
	waited := c.Stats().CreditWait
	werr := make(chan error, 1)
	go func() {
		_, err := c.Write(msg)
		if err == nil {
			err = c.Flush()
		}
		werr <- err
	}()
	waitBlocked(t, 1, "netio.(*Conn).Write")
	seenBlocked := time.Now()
	s.SetReadDeadline(time.Now().Add(hangTimeout))
	blocked := time.Since(seenBlocked) // still blocked: nothing has read yet
	b := make([]byte, 1000)
	for i := 0; i < sent+1; i++ {
		if _, err := s.ReadMessage(b); err != nil {
			t.Fatalf("message %d of %d: %v", i, sent+1, err)
		}
	}
	if err := <-werr; err != nil {
		t.Fatal(err)
	}
	if w := c.Stats().CreditWait - waited; w < blocked {
		t.Fatalf("CreditWait grew by %v, want at least the %v the Write was seen waiting", w, blocked)
	}
}

func TestBufferedModeMismatch(t *testing.T) {
	ln, err := netio.Listen("tcp", "127.0.0.1:0", ht)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, err = netio.Dial("tcp", ln.Addr().String())
	if !errors.Is(err, netio.ErrRejected) {
		t.Fatalf("low-latency Dial to a high-throughput listener: %v, want ErrRejected", err)
	}
}

func TestBufferedCloseSendsPage(t *testing.T) {
	c, s := pair(t, ht, netio.WithNoIdleFlush())
	c.Write([]byte("before close"))
	c.Close()
	b, err := io.ReadAll(s)
	if err != nil || string(b) != "before close" {
		t.Fatalf("ReadAll after Close: %q, %v", b, err)
	}
	if _, err := c.Write(b); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Write after Close: %v", err)
	}
}
