package sendgate

import (
	"sync"
	"sync/atomic"
	"testing"
)

// Writers and a reactor stand-in take turns through the gate: nobody is
// ever inside with someone else (the race detector sees the plain counter),
// every writer gets in, and the reactor's attempts never wait.
func TestSendGateExclusion(t *testing.T) {
	g := New()
	inside, total := 0, 0
	var wg sync.WaitGroup
	const writers, rounds = 4, 2000
	for i := 0; i < writers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < rounds; j++ {
				g.Lock()
				inside++
				if inside != 1 {
					panic("two inside the gate")
				}
				total++
				inside--
				g.Unlock()
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
			if g.TryReactor() {
				inside++
				if inside != 1 {
					panic("the reactor inside with a writer")
				}
				inside--
				entered++
				g.Unlock()
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
	g := New()
	if !g.TryLock() {
		t.Fatal("tryLock on a free gate")
	}
	if g.TryLock() || g.TryReactor() {
		t.Fatal("a second entry while a writer is inside")
	}
	entered := make(chan struct{})
	go func() { g.Lock(); close(entered); g.Unlock() }()
	g.Unlock() // the parked writer must get in
	<-entered
	if !g.TryReactor() {
		t.Fatal("tryReactor on a free gate")
	}
	g.Unlock()
}

// A writer that will not wait for another writer waits out the reactor,
// which holds the gate only to seal a page.
func TestSendGateTryPastReactor(t *testing.T) {
	g := New()
	if !g.TryLock() {
		t.Fatal("tryLock on a free gate")
	}
	if g.TryLockPastReactor() {
		t.Fatal("entered while a writer is inside")
	}
	g.Unlock()
	if !g.TryReactor() {
		t.Fatal("tryReactor on a free gate")
	}
	entered := make(chan bool)
	go func() { entered <- g.TryLockPastReactor() }()
	g.Unlock() // the reactor's seal is over: the writer gets in
	if !<-entered {
		t.Fatal("gave up on a gate the reactor held")
	}
	if g.TryReactor() {
		t.Fatal("the reactor entered with the writer inside")
	}
	g.Unlock()
}

// The flags tell a writer to look before it writes; they never keep anyone
// out, outlive the holders, and only the deadline's can be cleared.
func TestSendGateFlags(t *testing.T) {
	g := New()
	var deadline atomic.Int64
	if !g.Lock() {
		t.Fatal("a plain gate's lock reports a flag")
	}
	g.Unlock()
	g.SetDeadline(&deadline, 123)
	if deadline.Load() != 123 {
		t.Fatalf("deadline %d, want 123", deadline.Load())
	}
	if g.Lock() {
		t.Fatal("lock with a deadline set reports no flag")
	}
	if g.TryLock() || g.TryReactor() {
		t.Fatal("a second entry while a flagged writer is inside")
	}
	g.Unlock()
	if !g.TryReactor() {
		t.Fatal("the reactor kept out of a flagged gate")
	}
	g.Unlock()
	if !g.TryLock() {
		t.Fatal("tryLock kept out of a flagged gate")
	}
	g.Unlock()
	g.SetDeadline(&deadline, 0)
	if !g.Lock() {
		t.Fatal("lock after the deadline was cleared reports a flag")
	}
	g.Unlock()
	g.Stop()
	g.SetDeadline(&deadline, 0)
	if g.Lock() {
		t.Fatal("lock on a stopped gate reports no flag")
	}
	g.Unlock()
}

// Exclusion holds, and no parked writer is forgotten, while the flags
// change under the writers.
func TestSendGateExclusionFlagged(t *testing.T) {
	g := New()
	var deadline atomic.Int64
	inside, total := 0, 0
	var wg sync.WaitGroup
	const writers, rounds = 4, 2000
	for i := 0; i < writers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < rounds; j++ {
				g.Lock()
				inside++
				if inside != 1 {
					panic("two inside the gate")
				}
				total++
				inside--
				g.Unlock()
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
			g.SetDeadline(&deadline, i%2)
		}
	}()
	wg.Wait()
	close(stop)
	<-flipped
	if total != writers*rounds {
		t.Fatalf("%d writes went through, want %d", total, writers*rounds)
	}
}
