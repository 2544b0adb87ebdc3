package netio

import (
	"sync"
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
