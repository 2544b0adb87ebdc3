package netio_test

import (
	"testing"
	"time"
)

// TestIdleConnectionCPU: a connection nobody uses must let the reactor
// sleep. A process holding idle connections should use next to no CPU. The
// test waits for the reactor to fall asleep (however long the machine takes
// to get there), then measures; a busy machine lends a busy-polling reactor
// less CPU, but still far more than the quarter of a core allowed.
func TestIdleConnectionCPU(t *testing.T) {
	c, s := pair(t)
	echo(t, c, s, []byte("one message, then silence"))
	eventually(t, "the reactor asleep after the echo", reactorAsleep)
	const window = 300 * time.Millisecond
	t0, w0 := processCPU(), time.Now()
	time.Sleep(window)
	used, wall := processCPU()-t0, time.Since(w0)
	t.Logf("idle pair: %v of CPU in %v", used, wall.Round(time.Millisecond))
	if used > wall/4 {
		t.Errorf("an idle connection pair used %v of CPU in %v (%.0f%% of a core); the reactor should be asleep in epoll_wait", used, wall.Round(time.Millisecond), 100*used.Seconds()/wall.Seconds())
	}
}
