package ring

import (
	"runtime"
	"sync"
	"testing"
)

// A ring holds what it was made for, rounded up to a power of two, in
// order, and refuses more.
func TestFIFOAndFull(t *testing.T) {
	r := New(5)
	for i := range 8 {
		if !r.Push(uint32(i)) {
			t.Fatalf("push %d of a ring of 8 refused", i)
		}
	}
	if r.Push(8) {
		t.Fatal("a full ring took a ninth entry")
	}
	if v, ok := r.Peek(); !ok || v != 0 || r.Len() != 8 {
		t.Fatalf("peek: %d, %v, len %d; want 0, true, 8", v, ok, r.Len())
	}
	for i := range 8 {
		if v, ok := r.Pop(); !ok || v != uint32(i) {
			t.Fatalf("pop %d: %d, %v", i, v, ok)
		}
	}
	if _, ok := r.Pop(); ok || r.Len() != 0 {
		t.Fatal("an empty ring gave an entry")
	}
}

// One producer and one consumer on their own goroutines: every entry
// arrives once, in order (run with -race).
func TestProducerConsumer(t *testing.T) {
	const n = 20000
	r := New(16)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := uint32(0); i < n; {
			if r.Push(i) {
				i++
			} else {
				runtime.Gosched()
			}
		}
	}()
	for want := uint32(0); want < n; {
		if v, ok := r.Pop(); ok {
			if v != want {
				t.Fatalf("got %d, want %d", v, want)
			}
			want++
		} else {
			runtime.Gosched()
		}
	}
	wg.Wait()
}
