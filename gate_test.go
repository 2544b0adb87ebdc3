package netio

import (
	"sync"
	"sync/atomic"
	"testing"
)

// Writers and a reactor stand-in take turns through the gate: nobody is
// ever inside with someone else (the race detector sees the plain counter),
// every writer gets in, and the reactor's attempts never wait.
func TestSendGateExclusion(t *testing.T) {
	g := newSendGate()
	inside, total := 0, 0
	var wg sync.WaitGroup
	const writers, rounds = 4, 2000
	for i := 0; i < writers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < rounds; j++ {
				g.lock()
				inside++
				if inside != 1 {
					panic("two inside the gate")
				}
				total++
				inside--
				g.unlock()
			}
		}()
	}
	stop := make(chan struct{})
	reactorDone := make(chan int)
	go func() {
		entered := 0
		for {
			select {
			case <-stop:
				reactorDone <- entered
				return
			default:
			}
			if g.tryReactor() {
				inside++
				if inside != 1 {
					panic("the reactor inside with a writer")
				}
				inside--
				entered++
				g.unlock()
			}
		}
	}()
	wg.Wait()
	close(stop)
	<-reactorDone
	if total != writers*rounds {
		t.Fatalf("%d writes went through, want %d", total, writers*rounds)
	}
}

func TestSendGateTry(t *testing.T) {
	g := newSendGate()
	if !g.tryLock() {
		t.Fatal("tryLock on a free gate")
	}
	if g.tryLock() || g.tryReactor() {
		t.Fatal("a second entry while a writer is inside")
	}
	entered := make(chan struct{})
	go func() { g.lock(); close(entered); g.unlock() }()
	g.unlock() // the parked writer must get in
	<-entered
	if !g.tryReactor() {
		t.Fatal("tryReactor on a free gate")
	}
	g.unlock()
}

// The flags tell a writer to look before it writes; they never keep anyone
// out, outlive the holders, and only the deadline's can be cleared.
func TestSendGateFlags(t *testing.T) {
	g := newSendGate()
	var deadline atomic.Int64
	if !g.lock() {
		t.Fatal("a plain gate's lock reports a flag")
	}
	g.unlock()
	g.setDeadline(&deadline, 123)
	if deadline.Load() != 123 {
		t.Fatalf("deadline %d, want 123", deadline.Load())
	}
	if g.lock() {
		t.Fatal("lock with a deadline set reports no flag")
	}
	if g.tryLock() || g.tryReactor() {
		t.Fatal("a second entry while a flagged writer is inside")
	}
	g.unlock()
	if !g.tryReactor() {
		t.Fatal("the reactor kept out of a flagged gate")
	}
	g.unlock()
	if !g.tryLock() {
		t.Fatal("tryLock kept out of a flagged gate")
	}
	g.unlock()
	g.setDeadline(&deadline, 0)
	if !g.lock() {
		t.Fatal("lock after the deadline was cleared reports a flag")
	}
	g.unlock()
	g.stop()
	g.setDeadline(&deadline, 0)
	if g.lock() {
		t.Fatal("lock on a stopped gate reports no flag")
	}
	g.unlock()
}

// Exclusion holds, and no parked writer is forgotten, while the flags
// change under the writers.
func TestSendGateExclusionFlagged(t *testing.T) {
	g := newSendGate()
	var deadline atomic.Int64
	inside, total := 0, 0
	var wg sync.WaitGroup
	const writers, rounds = 4, 2000
	for i := 0; i < writers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < rounds; j++ {
				g.lock()
				inside++
				if inside != 1 {
					panic("two inside the gate")
				}
				total++
				inside--
				g.unlock()
			}
		}()
	}
	stop := make(chan struct{})
	flipped := make(chan struct{})
	go func() {
		defer close(flipped)
		for i := int64(1); ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			g.setDeadline(&deadline, i%2)
		}
	}()
	wg.Wait()
	close(stop)
	<-flipped
	if total != writers*rounds {
		t.Fatalf("%d writes went through, want %d", total, writers*rounds)
	}
}
