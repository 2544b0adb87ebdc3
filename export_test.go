package netio

import (
	"time"

	"github.com/netio-go/netio/internal/wire"
	"github.com/netio-go/netio/reactor"
)

// ReactorStats returns the counters of the process's reactor, for
// benchmarks that report thread wakes per operation.
func ReactorStats() reactor.Stats {
	engines.mu.Lock()
	defer engines.mu.Unlock()
	if engines.e == nil {
		return reactor.Stats{}
	}
	return engines.e.r.Stats()
}

// ReaderParks is how many times a Read parked in the netpoller.
func ReaderParks() uint64 {
	engines.mu.Lock()
	defer engines.mu.Unlock()
	if engines.e == nil {
		return 0
	}
	return engines.e.parks.Load()
}

// ProtocolLevel is the version byte of netio's hello, for tests that
// write hellos by hand.
const ProtocolLevel = wire.ProtocolLevel

// Lends reports whether a Write of n bytes on c goes from the caller's
// memory (send_from_slice.go).
func Lends(c *Conn, n int) bool { return c.send.lends(n) }

// DoorbellName is the abstract socket name of the doorbell of the shm
// endpoint at addr (rdm_doorbell.go).
func DoorbellName(addr string) string { return bellPrefix + addr }

// SetIdlePoll sets the reactor's IdlePoll, before the process's first
// connection.
func SetIdlePoll(d time.Duration) { engineIdlePoll = d }
