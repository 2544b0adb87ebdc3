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
	"sync"
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
			st := c.Stats()
			if st.MessagesSent != count || st.FlushesFull == 0 || st.PagesSent < 3000*150/4096 {
				t.Errorf("sender stats %+v: want %d messages in full pages", st, count)
			}
		})
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
	t.Run("idle", func(t *testing.T) {
		c, s := pair(t, ht)
		c.Write([]byte("one small message"))
		s.SetReadDeadline(time.Now().Add(5 * time.Second))
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
		c, s := pair(t, ht, netio.WithNoIdleFlush(), netio.WithFlushInterval(50*time.Millisecond))
		c.Write([]byte("waits for the timer"))
		b := make([]byte, 100)
		// Nothing may arrive before the flush interval.
		s.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
		if _, err := s.ReadMessage(b); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("message arrived before the flush interval: %v", err)
		}
		s.SetReadDeadline(time.Now().Add(5 * time.Second))
		if n, err := s.ReadMessage(b); err != nil || string(b[:n]) != "waits for the timer" {
			t.Fatalf("ReadMessage: %q, %v", b[:n], err)
		}
		if st := c.Stats(); st.FlushesTimer != 1 || st.FlushesIdle != 0 {
			t.Fatalf("stats %+v: want one timer flush", st)
		}
	})
	t.Run("explicit", func(t *testing.T) {
		c, s := pair(t, ht, netio.WithNoIdleFlush())
		c.Write([]byte("flushed"))
		if err := c.Flush(); err != nil {
			t.Fatal(err)
		}
		s.SetReadDeadline(time.Now().Add(5 * time.Second))
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
func TestBufferedBackPressure(t *testing.T) {
	c, s := pair(t, ht, netio.WithBufferSize(4096), netio.WithWindow(4))
	msg := make([]byte, 1000)
	// Fill until TryWrite refuses, again after the reactor has had time to
	// post and complete what it could, until nothing more fits.
	sent := 0
	for settled := false; !settled; {
		settled = true
		for ; sent < 1000; sent++ {
			_, err := c.TryWrite(msg)
			if errors.Is(err, netio.ErrWouldBlock) {
				break
			}
			if err != nil {
				t.Fatalf("TryWrite: %v", err)
			}
			settled = false
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The pool bounds what one connection holds: 4 pages at the receiver
	// and 4 send buffers, 4 messages a page.
	if sent > 8*4 {
		t.Fatalf("TryWrite took %d KB before blocking: the page pool does not bound it", sent)
	}
	c.SetWriteDeadline(time.Now().Add(30 * time.Millisecond))
	if _, err := c.Write(msg); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Write with the peer not reading: %v, want deadline exceeded", err)
	}
	c.SetWriteDeadline(time.Time{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if _, err := c.WriteContext(ctx, msg); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WriteContext with the peer not reading: %v", err)
	}
	if st := c.Stats(); st.CreditWait < 50*time.Millisecond {
		t.Fatalf("CreditWait %v, want the time Write and WriteContext waited", st.CreditWait)
	}
	// Reading frees pages, and writing goes on.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		b := make([]byte, 1000)
		for i := 0; i < sent+1; i++ {
			if _, err := s.ReadMessage(b); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	if _, err := c.Write(msg); err != nil {
		t.Fatal(err)
	}
	c.Flush()
	wg.Wait()
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
