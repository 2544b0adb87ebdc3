package netio_test

import (
	"testing"
	"time"

	"github.com/netio-go/netio"
)

// TestIdleConnectionCPU: a connection nobody uses must let the reactor
// sleep. A process holding idle connections should use next to no CPU:
// its reactor wakes only for what is due, the heartbeats. The test waits
// for the reactor to fall asleep (however long the machine takes to get
// there), keeps the pair silent for a while, and counts the reactor's
// wake-ups over that time; a reactor that polls, or a timer that fires
// for nothing, wakes hundreds of times.
func TestIdleConnectionCPU(t *testing.T) {
	c, s := pair(t)
	echo(t, c, s, []byte("one message, then silence"))
	eventually(t, "the reactor asleep after the echo", reactorAsleep)
	const window = 300 * time.Millisecond
	before, t0, w0 := netio.ReactorStats(), processCPU(), time.Now()
	time.Sleep(window) // silence on purpose: the pair stays idle for a while
	after, used, wall := netio.ReactorStats(), processCPU()-t0, time.Since(w0)
	woke := after.Wakeups - before.Wakeups
	t.Logf("idle pair: %d wake-ups, %v of CPU in %v", woke, used, wall.Round(time.Millisecond))
	// Each end sends a heartbeat an interval; a slow machine makes the
	// window longer and lets more fall due. A few more wake-ups are what
	// earlier tests leave closing (linger).
	due := 2 * (uint64(wall/netio.DefaultHeartbeatInterval) + 1)
	if woke > 4*due {
		t.Errorf("an idle connection pair woke the reactor %d times in %v, for %d heartbeats due; the reactor should be asleep in epoll_wait", woke, wall.Round(time.Millisecond), due)
	}
}
