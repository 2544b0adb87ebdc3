package turn

import (
	"sync"
	"testing"
	"time"
)

func TestTurnExcludes(t *testing.T) {
	var tn Turn
	var inside, most int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				if !tn.Lock(nil) {
					t.Error("lock without a done channel gave up")
					return
				}
				mu.Lock()
				inside++
				most = max(most, inside)
				mu.Unlock()
				mu.Lock()
				inside--
				mu.Unlock()
				tn.Unlock()
			}
		}()
	}
	wg.Wait()
	if most != 1 {
		t.Fatalf("%d holders at once", most)
	}
	if s := tn.state.Load(); s != 0 || tn.line.Load() != nil && len(tn.line.Load().queue) != 0 {
		t.Fatalf("after all: state %d, waiters left", s)
	}
}

// A waiter whose context ends leaves the line without the turn, and the
// turn still goes round.
func TestTurnGiveUp(t *testing.T) {
	var tn Turn
	tn.Lock(nil)
	done := make(chan struct{})
	gaveUp := make(chan bool)
	go func() { gaveUp <- tn.Lock(done) }()
	waitQueued(t, &tn, 1)
	close(done)
	if <-gaveUp {
		t.Fatal("a waiter whose done closed got the turn")
	}
	tn.Unlock()
	if !tn.Lock(nil) {
		t.Fatal("the turn did not come back")
	}
	tn.Unlock()
	if s := tn.state.Load(); s != 0 {
		t.Fatalf("state %d after all", s)
	}
}

// A turn given back while others wait goes to the first of them, not to a
// holder that asks again at once.
func TestTurnHandsOverInOrder(t *testing.T) {
	var tn Turn
	tn.Lock(nil)
	got := make(chan int, 3)
	for i := 1; i <= 2; i++ {
		go func() {
			tn.Lock(nil)
			got <- i
			tn.Unlock()
		}()
		waitQueued(t, &tn, i)
	}
	tn.Unlock()
	tn.Lock(nil) // in line behind the two
	got <- 0
	tn.Unlock()
	if a, b, c := <-got, <-got, <-got; a != 1 || b != 2 || c != 0 {
		t.Fatalf("served %d, %d, %d; want the waiters 1 and 2, then the holder that asked again (0)", a, b, c)
	}
}

// waitQueued polls until n goroutines wait in line: the turn has no event
// for a waiter joining it.
func waitQueued(t *testing.T, tn *Turn, n int) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Microsecond) { // polling pace
		tl := tn.waitLine()
		tl.mu.Lock()
		k := len(tl.queue)
		tl.mu.Unlock()
		if k == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d waiters in line, want %d", k, n)
		}
	}
}
