package netio

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// The process's registered memory: every connection's receive, send and
// control buffers are registered with the fabric (pinned on verbs), and a
// peer that fills its window makes them resident. Config bounds one
// connection (MaxConnMemory); this bounds them all, so that many
// connections, each within its limits, cannot take the machine's memory.
var registered struct {
	bytes     atomic.Int64 // registered now
	limit     atomic.Int64 // 0 until the default is computed
	limitOnce sync.Once
}

// SetMaxRegisteredMemory sets the most memory, in bytes, that the
// process's connections may register together, and returns the previous
// limit. A connection whose buffers would go past it is not made: Dial
// fails with ErrMemoryLimit, and a Listener or Publisher rejects the
// request at the handshake (ErrRejected at the dialer) before allocating
// anything. Connections already made are not affected. A negative n
// changes nothing, so SetMaxRegisteredMemory(-1) reads the limit.
//
// The default is half the machine's physical memory (as sysinfo(2)
// reports it): registered buffers become resident as peers fill them, and
// the process needs memory besides. With the LowLatency defaults a
// connection registers 8 MiB, so 4 GiB holds 512 of them.
func SetMaxRegisteredMemory(n int64) int64 {
	old := maxRegistered()
	if n >= 0 {
		registered.limit.Store(n)
	}
	return old
}

// RegisteredMemory returns how many bytes the process's connections have
// registered now.
func RegisteredMemory() int64 { return registered.bytes.Load() }

// maxRegistered is the limit, computed on first use.
func maxRegistered() int64 {
	registered.limitOnce.Do(func() {
		if registered.limit.Load() == 0 {
			registered.limit.CompareAndSwap(0, defaultMaxRegistered())
		}
	})
	return registered.limit.Load()
}

// defaultMaxRegistered is half the physical memory, or 4 GiB where
// sysinfo does not say.
func defaultMaxRegistered() int64 {
	if total := totalRAM(); total > 0 {
		return int64(total / 2)
	}
	return 4 << 30
}

// reserveRegistered takes n bytes of the budget, or fails with an error
// wrapping ErrMemoryLimit. Any goroutine.
func reserveRegistered(n int) error {
	limit := maxRegistered()
	for {
		cur := registered.bytes.Load()
		if cur+int64(n) > limit {
			return fmt.Errorf("%w: %d bytes more would make %d, above the process's limit of %d (SetMaxRegisteredMemory)",
				ErrMemoryLimit, n, cur+int64(n), limit)
		}
		if registered.bytes.CompareAndSwap(cur, cur+int64(n)) {
			return nil
		}
	}
}

// affordable reports whether n more bytes fit the budget now, for an
// admission check that must not reserve yet.
func affordable(n int) bool {
	return registered.bytes.Load()+int64(n) <= maxRegistered()
}

// releaseRegistered gives n bytes back.
func releaseRegistered(n int) { registered.bytes.Add(-int64(n)) }
