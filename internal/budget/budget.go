// Package budget bounds the memory a process registers with the fabric:
// every connection's receive, send and control buffers are registered
// (pinned on verbs), and a peer that fills its window makes them resident.
// A per-connection limit bounds one connection; a Budget bounds them all,
// so that many connections, each within its limits, cannot take the
// machine's memory.
package budget

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// ErrLimit is a reservation above the limit. netio exports it as
// ErrMemoryLimit.
var ErrLimit = errors.New("netio: registered memory limit reached")

// Budget is registered memory shared by a process's connections. Its zero
// value has the default limit: half the machine's physical memory, as
// sysinfo(2) reports it. Any goroutine.
type Budget struct {
	bytes     atomic.Int64 // registered now
	limit     atomic.Int64 // 0 until the default is computed
	limitOnce sync.Once
}

// Limit is the most bytes the budget lets be registered.
func (b *Budget) Limit() int64 {
	b.limitOnce.Do(func() {
		if b.limit.Load() == 0 {
			b.limit.CompareAndSwap(0, defaultLimit())
		}
	})
	return b.limit.Load()
}

// SetLimit sets the limit to n, unless n is negative, and returns the
// previous one. Reservations already made stand.
func (b *Budget) SetLimit(n int64) int64 {
	old := b.Limit()
	if n >= 0 {
		b.limit.Store(n)
	}
	return old
}

// Used is how many bytes are registered now.
func (b *Budget) Used() int64 { return b.bytes.Load() }

// defaultLimit is half the machine's memory: registered buffers become
// resident as peers fill them, and the process needs memory besides.
func defaultLimit() int64 {
	if total := totalRAM(); total > 0 {
		return int64(total / 2)
	}
	return 4 << 30
}

// Reserve takes n bytes of the budget, or fails with ErrLimit and takes
// nothing.
func (b *Budget) Reserve(n int) error {
	limit := b.Limit()
	for {
		cur := b.bytes.Load()
		if cur+int64(n) > limit {
			return fmt.Errorf("%w: %d bytes more would make %d, above the process's limit of %d (SetMaxRegisteredMemory)",
				ErrLimit, n, cur+int64(n), limit)
		}
		if b.bytes.CompareAndSwap(cur, cur+int64(n)) {
			return nil
		}
	}
}

// Affordable reports whether n bytes more fit now: a check before work,
// not a reservation.
func (b *Budget) Affordable(n int) bool { return b.bytes.Load()+int64(n) <= b.Limit() }

// Release gives back n bytes that Reserve took.
func (b *Budget) Release(n int) { b.bytes.Add(-int64(n)) }
