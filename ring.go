package netio

import "sync/atomic"

// spscRing is a single-producer, single-consumer ring of buffer indices:
// how the reactor hands received buffers to the reading goroutine and how
// that goroutine hands them back. One atomic store publishes an entry; no
// lock is taken on either side.
type spscRing struct {
	head  atomic.Uint64 // next index the producer writes; written by the producer only
	_     [56]byte      // keep the consumer's counter off the producer's cache line
	tail  atomic.Uint64 // next index the consumer reads; written by the consumer only
	_     [56]byte
	mask  uint64
	slots []uint32
}

func newSPSCRing(capacity int) *spscRing {
	n := 1
	for n < capacity {
		n <<= 1
	}
	return &spscRing{mask: uint64(n - 1), slots: make([]uint32, n)}
}

// push appends v; it reports false when the ring is full.
func (r *spscRing) push(v uint32) bool {
	h := r.head.Load()
	if h-r.tail.Load() > r.mask {
		return false
	}
	r.slots[h&r.mask] = v
	r.head.Store(h + 1)
	return true
}

// peek returns the oldest entry without removing it.
func (r *spscRing) peek() (uint32, bool) {
	t := r.tail.Load()
	if t == r.head.Load() {
		return 0, false
	}
	return r.slots[t&r.mask], true
}

// pop removes the oldest entry.
func (r *spscRing) pop() (uint32, bool) {
	t := r.tail.Load()
	if t == r.head.Load() {
		return 0, false
	}
	v := r.slots[t&r.mask]
	r.tail.Store(t + 1)
	return v, true
}

// len is the number of entries; exact for the consumer, a lower bound for others.
func (r *spscRing) len() int { return int(r.head.Load() - r.tail.Load()) }
