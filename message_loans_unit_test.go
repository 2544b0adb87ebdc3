package netio

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/netio-go/netio/internal/page"
	"github.com/netio-go/netio/internal/wire"
)

func TestLendingBits(t *testing.T) {
	var l lending
	per := messagesPerBuffer(4096)
	if want := (4096-wire.HeaderSize)/page.PrefixSize + 1; per != want {
		t.Fatalf("messages per 4 KiB page: %d, want %d", per, want)
	}
	l.start(2, per)
	panics := func(f func()) (p bool) {
		defer func() { p = recover() == releasedTwice }()
		f()
		return false
	}
	// Every number a page can hand out, in both buffers.
	g0, g1 := l.gen(0), l.gen(1)
	for n := per - 1; n >= 0; n-- {
		l.release(1, g1, uint32(n))
		if !panics(func() { l.release(1, g1, uint32(n)) }) {
			t.Fatalf("message %d released twice without a panic", n)
		}
	}
	// Buffer 0's messages are untouched by buffer 1's.
	for n := 0; n < per; n++ {
		l.release(0, g0, uint32(n))
	}
	// Back to the fabric: a new generation with every bit clear.
	l.left(0, int32(per))
	l.recycle(0)
	g := l.gen(0)
	if g == g0 {
		t.Fatal("a recycled buffer kept its generation")
	}
	for n := 0; n < per; n++ {
		if !panics(func() { l.release(0, g0, uint32(n)) }) {
			t.Fatalf("a release of message %d from before the buffer was recycled passed", n)
		}
		l.release(0, g, uint32(n))
	}
}

// BenchmarkLending is what tracking costs per message, recycling the
// buffer every 1,024 messages.
func BenchmarkLending(b *testing.B) {
	var l lending
	l.start(8, messagesPerBuffer(1<<20))
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		n := int32(i & 1023)
		g := l.gen(3)
		l.release(3, g, uint32(n))
		if n == 1023 {
			l.left(3, 1024)
			l.recycle(3)
		}
	}
}

// TestLendingCount checks that a buffer goes back exactly once, when the
// reader has left it and its last message is released, whatever the order:
// Releases fill the words of the bits, and the reader's leaving fills its
// last word and counts the words not yet full.
func TestLendingCount(t *testing.T) {
	per := messagesPerBuffer(4096)
	for _, n := range []int{0, 1, 2, 63, 64, 65, 127, 128, 129, 200, per} {
		// before: how many messages are released before the reader leaves.
		for _, before := range []int{0, 1, n / 2, n - 1, n} {
			if before < 0 || before > n {
				continue
			}
			var l lending
			l.start(2, per)
			var refs atomic.Int32
			back := 0
			gen := l.gen(1)
			release := func(i int) {
				if l.release(1, gen, uint32(i)) && refs.Add(-1) == 0 {
					back++
				}
			}
			// Released from the end, so that the words a release fills
			// before the reader leaves are not only the first ones.
			for i := n - 1; i >= n-before; i-- {
				release(i)
			}
			if back != 0 {
				t.Fatalf("%d messages, %d released before leaving: went back while the reader was in it", n, before)
			}
			if h := l.left(1, int32(n)); h == 0 || refs.Add(h) == 0 {
				back++
			}
			for i := n - before - 1; i >= 0; i-- {
				if back != 0 {
					t.Fatalf("%d messages, %d released before leaving: went back with message %d out", n, before, i)
				}
				release(i)
			}
			if back != 1 {
				t.Fatalf("%d messages, %d released before leaving: went back %d times, want once", n, before, back)
			}
			l.recycle(1)
			if g := l.gen(1); g == gen {
				t.Fatal("a recycled buffer kept its generation")
			}
			// Every bit clear again: only the 64th release of a word fills it.
			full := 0
			for i := 0; i < per; i++ {
				if l.release(1, l.gen(1), uint32(i)) {
					if i%64 != 63 {
						t.Fatalf("%d messages: the word of message %d full after recycling", n, i)
					}
					full++
				}
			}
			if full != per/64 {
				t.Fatalf("%d messages: %d words filled after recycling, want %d", n, full, per/64)
			}
		}
	}
}

// TestLendingConcurrentRelease releases a visit's messages from several
// goroutines while the reader leaves: the buffer goes back exactly once.
func TestLendingConcurrentRelease(t *testing.T) {
	per := messagesPerBuffer(4096)
	for round := 0; round < 50; round++ {
		var l lending
		l.start(1, per)
		var refs, back atomic.Int32
		n := 100 + round
		gen := l.gen(0)
		var wg sync.WaitGroup
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := g; i < n; i += 4 {
					if l.release(0, gen, uint32(i)) && refs.Add(-1) == 0 {
						back.Add(1)
					}
				}
			}()
		}
		if h := l.left(0, int32(n)); h == 0 || refs.Add(h) == 0 {
			back.Add(1)
		}
		wg.Wait()
		if b := back.Load(); b != 1 {
			t.Fatalf("%d messages: went back %d times, want once", n, b)
		}
	}
}
