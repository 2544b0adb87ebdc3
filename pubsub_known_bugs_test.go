package netio_test

import (
	"context"
	"os"
	"testing"
	"time"
)

// knownBug skips a test that shows a bug reported and not yet fixed, unless
// NETIO_KNOWN_BUGS=1: then it runs, and fails until the bug is fixed.
func knownBug(t *testing.T, what string) {
	t.Helper()
	if os.Getenv("NETIO_KNOWN_BUGS") != "1" {
		t.Skip("known bug (NETIO_KNOWN_BUGS=1 runs it): " + what)
	}
}

// PublisherStats are "a Publisher's counters since it started", but
// Delivered is summed over the subscribers connected now: when a
// subscriber leaves, what was delivered to it disappears from the count,
// and the counter goes down.
func TestPublisherDeliveredKeepsLeftSubscribers(t *testing.T) {
	knownBug(t, "PublisherStats.Delivered forgets the subscribers that left")
	p := listenPublisher(t)
	s := subscribe(t, p, []uint64{1})
	ctx, cancel := context.WithTimeout(context.Background(), hangTimeout)
	defer cancel()
	for i := 0; i < 10; i++ {
		if err := p.Publish(ctx, 1, payload(1, i, 16)); err != nil {
			t.Fatal(err)
		}
	}
	receive(t, s, 10)
	if d := p.Stats().Delivered; d != 10 {
		t.Fatalf("Delivered %d with the subscriber connected, want 10", d)
	}
	s.Close()
	for deadline := time.Now().Add(hangTimeout); p.Stats().Subscribers > 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the subscriber did not leave")
		}
	}
	if d := p.Stats().Delivered; d != 10 {
		t.Errorf("Delivered %d after the subscriber left, want 10: a counter since the start does not go down", d)
	}
}
