// Package ring is the lock-free hand-over of buffer indices between the
// reactor and one user goroutine.
package ring

import "sync/atomic"

// SPSC is a single-producer, single-consumer ring of buffer indices:
// how the reactor hands received buffers to the reading goroutine and how
// that goroutine hands them back. One atomic store publishes an entry; no
// lock is taken on either side.
type SPSC struct {
	head  atomic.Uint64 // next index the producer writes; written by the producer only
	_     [56]byte      // keep the consumer's counter off the producer's cache line
	tail  atomic.Uint64 // next index the consumer reads; written by the consumer only
	_     [56]byte
	mask  uint64
	slots []uint32
}

// New returns a ring of at least capacity entries (a power of two).
func New(capacity int) *SPSC {
	n := 1
	for n < capacity {
		n <<= 1
	}
	return &SPSC{mask: uint64(n - 1), slots: make([]uint32, n)}
}

// Push appends v; it reports false when the ring is full.
func (r *SPSC) Push(v uint32) bool {
	h := r.head.Load()
	if h-r.tail.Load() > r.mask {
		return false
	}
	r.slots[h&r.mask] = v
	r.head.Store(h + 1)
	return true
}

// Peek returns the oldest entry without removing it.
func (r *SPSC) Peek() (uint32, bool) {
	t := r.tail.Load()
	if t == r.head.Load() {
		return 0, false
	}
	return r.slots[t&r.mask], true
}

// Pop removes the oldest entry.
func (r *SPSC) Pop() (uint32, bool) {
	t := r.tail.Load()
	if t == r.head.Load() {
		return 0, false
	}
	v := r.slots[t&r.mask]
	r.tail.Store(t + 1)
	return v, true
}

// Len is the number of entries; exact for the consumer, a lower bound for others.
func (r *SPSC) Len() int { return int(r.head.Load() - r.tail.Load()) }
