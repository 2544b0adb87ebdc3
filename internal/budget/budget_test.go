package budget

import (
	"errors"
	"sync"
	"testing"
)

func TestReserveWithinLimit(t *testing.T) {
	var b Budget
	if old := b.SetLimit(100); old <= 0 {
		t.Fatalf("default limit %d, want a positive one", old)
	}
	if got := b.SetLimit(-1); got != 100 {
		t.Fatalf("SetLimit(-1) read %d, want 100", got)
	}
	if err := b.Reserve(60); err != nil {
		t.Fatal(err)
	}
	if b.Affordable(41) || !b.Affordable(40) {
		t.Fatalf("with 60 of 100 used: Affordable(41) %v, Affordable(40) %v", b.Affordable(41), b.Affordable(40))
	}
	if err := b.Reserve(41); !errors.Is(err, ErrLimit) || b.Used() != 60 {
		t.Fatalf("Reserve past the limit: %v, %d used; want ErrLimit, 60", err, b.Used())
	}
	b.Release(60)
	if err := b.Reserve(100); err != nil || b.Used() != 100 {
		t.Fatalf("Reserve of the whole limit after a release: %v, %d used", err, b.Used())
	}
}

// Concurrent reservations never take the budget past its limit.
func TestReserveConcurrent(t *testing.T) {
	var b Budget
	b.SetLimit(1000)
	var wg sync.WaitGroup
	var mu sync.Mutex
	taken := 0
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				if b.Reserve(7) == nil {
					mu.Lock()
					taken += 7
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if taken != int(b.Used()) || taken > 1000 || taken < 1000-6 {
		t.Fatalf("took %d, budget says %d used of 1000", taken, b.Used())
	}
}
