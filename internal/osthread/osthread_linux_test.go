package osthread

import (
	"runtime"
	"sync"
	"testing"
)

// Two goroutines locked to their threads at the same time see two ids,
// and an id stays the same while its goroutine stays locked.
func TestIDIsTheThreads(t *testing.T) {
	type seen struct{ first, again int }
	ids := make(chan seen, 2)
	var locked sync.WaitGroup
	release := make(chan struct{})
	for range 2 {
		locked.Add(1)
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			s := seen{first: ID()}
			locked.Done()
			<-release // until both hold a thread
			s.again = ID()
			ids <- s
		}()
	}
	locked.Wait()
	close(release)
	a, b := <-ids, <-ids
	for _, s := range []seen{a, b} {
		if s.first <= 0 || s.first != s.again {
			t.Errorf("ids %d then %d on one locked thread", s.first, s.again)
		}
	}
	if a.first == b.first {
		t.Errorf("two goroutines locked at the same time both on thread %d", a.first)
	}
}
