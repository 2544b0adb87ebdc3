package netio

import "testing"

func TestLendingBits(t *testing.T) {
	var l lending
	per := messagesPerBuffer(plainPages.reader(), 4096)
	if want := (4096-headerSize)/prefixSize + 1; per != want {
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
	l.start(8, messagesPerBuffer(plainPages.reader(), 1<<20))
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
