package netio

import (
	"encoding/binary"
	"errors"
	"io"
	"os/exec"
	"regexp"
	"runtime"
	"sync"
	"testing"

	"github.com/netio-go/netio/internal/page"
	"github.com/netio-go/netio/internal/wire"
)

// fillPage writes a page of messages of size bytes into buf (a whole
// receive buffer, header included), message i starting with first+i; it
// returns how many it wrote.
func fillPage(buf []byte, size int, first uint64) int {
	off, n := wire.HeaderSize, 0
	for off+page.PrefixSize+size <= len(buf) {
		binary.LittleEndian.PutUint64(buf[off:], uint64(size))
		binary.LittleEndian.PutUint64(buf[off+page.PrefixSize:], first+uint64(n))
		off += page.PrefixSize + size
		n++
	}
	wire.PutHeader(buf, wire.Header{Kind: wire.KindPage, FragLen: uint32(off - wire.HeaderSize)})
	return n
}

// refill hands back to the reader, as received again, the buffers it has
// given back: the reactor's part, for the read-path benchmarks.
func refill(c *Conn) {
	q := &c.link.rx
	for {
		slot, ok := q.free.Pop()
		if !ok {
			return
		}
		q.ready.Push(slot)
	}
}

// readingPages returns a Conn whose window of 1 MiB pages of 64-byte
// messages has arrived, and the messages per page.
func readingPages(b *testing.B, size int) (*Conn, int) {
	const window, bufSize = 8, 1<<20 + wire.HeaderSize + page.PrefixSize
	c := newReadingConn(b, window, bufSize, 1<<20)
	q := &c.link.rx
	per := 0
	for i := range window {
		per = fillPage(q.mem[i*bufSize:(i+1)*bufSize], size, 0)
		q.ready.Push(uint32(i))
	}
	return c, per
}

// BenchmarkReadPath is the reading goroutine's own cost per 64-byte
// message, without a fabric, a reactor or a writer competing for the CPU:
// the received pages are handed back to the reader as soon as it gives
// them back.
func BenchmarkReadPath(b *testing.B) {
	b.Run("NextMessage", func(b *testing.B) {
		c, per := readingPages(b, 64)
		b.ReportAllocs()
		for i := range b.N {
			m, err := c.NextMessage()
			if err != nil {
				b.Fatal(err)
			}
			m.Release()
			if i%per == per-1 {
				refill(c)
			}
		}
	})
	b.Run("Next", func(b *testing.B) {
		c, per := readingPages(b, 64)
		b.ReportAllocs()
		for i := range b.N {
			if _, err := c.Next(); err != nil {
				b.Fatal(err)
			}
			if i%per == per-1 {
				refill(c)
			}
		}
	})
	b.Run("NextBatch", func(b *testing.B) {
		c, _ := readingPages(b, 64)
		batch := make([][]byte, 256)
		b.ReportAllocs()
		for n := 0; n < b.N; {
			k, err := c.NextBatch(batch[:min(len(batch), b.N-n)])
			if err != nil {
				b.Fatal(err)
			}
			n += k
			refill(c)
		}
	})
}

// BenchmarkWritePath is the writing goroutine's own cost per 64-byte
// message: its pages count as sent as soon as the send buffers are full.
func BenchmarkWritePath(b *testing.B) {
	const pageCap, slots = 1 << 20, 4
	drain := func(c *Conn) {
		q := &c.link.tx
		if h := q.head.Load(); h-q.done.Load() >= slots-1 {
			q.done.Store(h)
		}
	}
	b.Run("Write", func(b *testing.B) {
		c := newWritingConn(b, pageCap, slots, 1<<20)
		msg := make([]byte, 64)
		b.ReportAllocs()
		for i := range b.N {
			if _, err := c.Write(msg); err != nil {
				b.Fatal(err)
			}
			if i&1023 == 0 {
				drain(c)
			}
		}
	})
	b.Run("WriteBatch", func(b *testing.B) {
		c := newWritingConn(b, pageCap, slots, 1<<20)
		batch := make([][]byte, 256)
		for i := range batch {
			batch[i] = make([]byte, 64)
		}
		b.ReportAllocs()
		for n := 0; n < b.N; n += len(batch) {
			if _, err := c.WriteBatch(batch[:min(len(batch), b.N-n)]); err != nil {
				b.Fatal(err)
			}
			drain(c)
		}
	})
}

// TestFastReadConcurrent has several goroutines take messages from the
// same pages at once, the lock-free path and the locked ones mixed (Next
// and ReadMessage take the lock between NextMessages): every message comes
// out once per arrival of its page, each Message's bytes are its own, the
// counts add up, and every page goes back once its messages are released.
// The pages are written once, before the readers start, and arrive again
// as they are given back (the fabric, not Go code, writes the receive
// buffers of a live connection).
func TestFastReadConcurrent(t *testing.T) {
	const window, size, pages = 4, 24, 200
	bufSize := wire.HeaderSize + 40*(page.PrefixSize+size) // 40 messages a page
	c := newReadingConn(t, window, bufSize, 1<<20)
	q := &c.link.rx
	per := 0
	for i := range window {
		per = fillPage(q.mem[i*bufSize:(i+1)*bufSize], size, uint64(i*40))
		q.ready.Push(uint32(i))
	}
	// The reactor's part: each page given back arrives again, until pages
	// have arrived; then the stream ends once every page is back.
	var arrivals [window]int
	for i := range arrivals {
		arrivals[i] = 1
	}
	fed := make(chan struct{})
	go func() {
		defer close(fed)
		for sent := window; sent < pages; {
			slot, ok := q.free.Pop()
			if !ok {
				runtime.Gosched()
				continue
			}
			arrivals[slot]++
			q.ready.Push(slot)
			q.wake.Ring()
			sent++
		}
		for q.free.Len() < window {
			runtime.Gosched()
		}
		c.link.fail(io.EOF)
		q.wake.Ring()
	}()
	var (
		mu   sync.Mutex
		seen = make(map[uint64]int)
		wg   sync.WaitGroup
	)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, size)
			for i := 0; ; i++ {
				var v uint64
				var err error
				switch {
				case g == 3 && i%7 == 0:
					var b []byte
					if b, err = c.Next(); err == nil {
						v = binary.LittleEndian.Uint64(b)
					}
				case g == 2 && i%5 == 0:
					var n int
					if n, err = c.ReadMessage(buf); err == nil {
						v = binary.LittleEndian.Uint64(buf[:n])
					}
				default:
					var m Message
					if m, err = c.NextMessage(); err == nil {
						if m.Len() != size {
							t.Errorf("message of %d bytes, want %d", m.Len(), size)
						}
						v = binary.LittleEndian.Uint64(m.Bytes())
						m.Release()
					}
				}
				if err != nil {
					if !errors.Is(err, io.EOF) {
						t.Errorf("reader %d: %v", g, err)
					}
					return
				}
				mu.Lock()
				seen[v]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	<-fed
	total := 0
	for v := range uint64(window * per) {
		want := arrivals[v/uint64(per)]
		total += want
		if seen[v] != want {
			t.Errorf("message %d read %d times, its page arrived %d times", v, seen[v], want)
		}
	}
	if len(seen) != window*per {
		t.Errorf("%d distinct messages read, want %d", len(seen), window*per)
	}
	if st := c.Stats(); st.MessagesReceived != uint64(total) {
		t.Errorf("Stats().MessagesReceived = %d, want %d", st.MessagesReceived, total)
	}
	if n := q.free.Len(); n != window {
		t.Errorf("%d buffers given back at the end, want all %d", n, window)
	}
}

// TestFastReadLeavesPage: the page whose last message NextMessage took
// without the lock goes back to the reactor as soon as its messages are
// released, with no further read, as it does when the lock is taken.
func TestFastReadLeavesPage(t *testing.T) {
	const size = 24
	bufSize := wire.HeaderSize + 10*(page.PrefixSize+size)
	c := newReadingConn(t, 2, bufSize, 1<<20)
	q := &c.link.rx
	per := fillPage(q.mem[:bufSize], size, 0)
	q.ready.Push(0)
	var held []Message
	for i := range per {
		m, err := c.NextMessage()
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if v := binary.LittleEndian.Uint64(m.Bytes()); v != uint64(i) {
			t.Fatalf("message %d carries %d", i, v)
		}
		held = append(held, m)
	}
	if !c.recv.fast.on() {
		t.Fatal("the lock-free path never opened")
	}
	for i, m := range held {
		if q.free.Len() != 0 {
			t.Fatalf("the page went back with %d of its %d messages held", per-i, per)
		}
		m.Release()
	}
	if q.free.Len() != 1 {
		t.Errorf("%d buffers back after every message was released, want 1", q.free.Len())
	}
	if st := c.Stats(); st.MessagesReceived != uint64(per) || st.BytesReceived != uint64(per*size) {
		t.Errorf("Stats: %d messages, %d bytes; want %d, %d", st.MessagesReceived, st.BytesReceived, per, per*size)
	}
}

// TestFastReadSetup: the word's fields fit buffers up to a few MiB; larger
// ones leave too few bits for the epoch and keep to the lock.
func TestFastReadSetup(t *testing.T) {
	for _, tc := range []struct {
		bufSize int
		on      bool
	}{
		{4 << 10, true},
		{1<<20 + wire.HeaderSize + page.PrefixSize, true},
		{MaxBufferSize, false},
	} {
		var f fastRead
		per := messagesPerBuffer(tc.bufSize)
		if got := f.setup(tc.bufSize, per, 1<<20); got != tc.on || f.on() != tc.on {
			t.Errorf("buffers of %d bytes: setup %v, on %v; want %v", tc.bufSize, got, f.on(), tc.on)
		}
		if tc.on && (uint64(tc.bufSize) > f.offMask || uint64(per) > f.idxMask || 63-f.epochShift < minEpochBits) {
			t.Errorf("buffers of %d bytes: offset mask %#x, index mask %#x, epoch at bit %d: too small for %d messages and %d bits of epoch", tc.bufSize, f.offMask, f.idxMask, f.epochShift, per, minEpochBits)
		}
	}
}

// TestConnMethodsInlined: the compiler inlines Conn.NextMessage into its
// caller. Out of line, its frame copied the 80-byte Message once more,
// and the copy stalled on store forwarding: BenchmarkReadPath/NextMessage
// took 1.5 times as long (docs/decisions/2026-11-27-next-message-inlined.md).
// Any statement added to it passes the inliner's budget. The other read and
// write methods are held to the same: each is one call, its check inside.
func TestConnMethodsInlined(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the compiler")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH")
	}
	out, err := exec.Command(goTool, "build", "-gcflags=-m", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, m := range []string{"NextMessage", "Next", "NextBatch", "Read", "Write", "WriteBatch"} {
		if !regexp.MustCompile(`(?m)can inline \(\*Conn\)\.` + m + `$`).Match(out) {
			t.Errorf("(*Conn).%s is not inlined (go build -gcflags=-m=2 says why)", m)
		}
	}
}
