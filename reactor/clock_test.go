//go:build linux

package reactor

import (
	"sync/atomic"
	"testing"
	"time"
)

// clockSource checks the order a peer's doorbell relies on: when the loop
// sleeps, its last round read the clock a full Spin after the last work,
// and then polled every source.
type clockSource struct {
	r        *Reactor
	work     atomic.Bool   // another goroutine posts work
	workedAt time.Duration // the round clock of the last work found
	polled   uint64        // the round of the last Poll
	sleeps   chan string   // at each sleep: "" if the order held, else what broke it
}

func (s *clockSource) Poll() bool {
	s.polled = s.r.Round()
	if s.work.Swap(false) {
		s.workedAt = s.r.Now()
		return true
	}
	return false
}

func (s *clockSource) TryWait() bool {
	var broke string
	switch {
	case s.polled != s.r.Round():
		broke = "the last round did not poll after its clock"
	case s.r.Now()-s.workedAt < s.r.Spin():
		broke = "asleep less than a spin after the last work, by the round clock"
	}
	select {
	case s.sleeps <- broke:
	default:
	}
	return true
}

func TestSleepAfterFullSpinAndLastPoll(t *testing.T) {
	const spin = 2 * time.Millisecond
	r := newReactor(t, &Config{Spin: spin})
	s := &clockSource{r: r, sleeps: make(chan string, 64)}
	if err := r.AddPoller(s); err != nil {
		t.Fatal(err)
	}
	if r.Spin() != spin {
		t.Fatalf("Spin() = %v, want %v", r.Spin(), spin)
	}
	for range 5 {
		before := r.Stats().Sleeps
		s.work.Store(true)
		r.Submit(funcTask(func() {})) // wake it to find the work
		asleep(t, r, before)
		for drained := false; !drained; {
			select {
			case broke := <-s.sleeps:
				if broke != "" {
					t.Fatal(broke)
				}
			default:
				drained = true
			}
		}
	}
}
