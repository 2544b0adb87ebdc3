package reactor

import "sync/atomic"

// cacheLine is the padding unit that keeps producer-written and
// consumer-written words on different cache lines.
const cacheLine = 64

// ring is Dmitry Vyukov's bounded queue, used with many producers and a
// single consumer (the reactor). Every cell carries a sequence number:
// seq == pos means the cell is free for the producer that claims position pos,
// seq == pos+1 means it holds the task written at pos, and the consumer hands
// it back to the next lap by storing pos+len(cells).
//
// A producer claims a position by CAS on tail, writes the task, then stores
// seq: the store publishes the write (it happens before the consumer's load of
// seq that observes it), so the plain task field is race-free.
type ring struct {
	_    [cacheLine]byte
	tail atomic.Uint64 // next position to claim (producers)
	_    [cacheLine - 8]byte
	head uint64 // next position to read (consumer only)
	mask uint64
	cell []cell
	_    [cacheLine]byte
}

type cell struct {
	seq atomic.Uint64
	t   Task
}

// init sizes the ring; size must be a power of two, at least 2.
func (q *ring) init(size int) {
	q.cell = make([]cell, size)
	q.mask = uint64(size - 1)
	for i := range q.cell {
		q.cell[i].seq.Store(uint64(i))
	}
}

// push appends t and reports whether there was room. Any goroutine.
func (q *ring) push(t Task) bool {
	pos := q.tail.Load()
	for {
		c := &q.cell[pos&q.mask]
		seq := c.seq.Load()
		switch d := int64(seq - pos); {
		case d == 0:
			if q.tail.CompareAndSwap(pos, pos+1) {
				c.t = t
				c.seq.Store(pos + 1)
				return true
			}
			pos = q.tail.Load()
		case d < 0:
			// The cell still holds the task of the previous lap: full.
			return false
		default:
			// Another producer claimed pos; catch up.
			pos = q.tail.Load()
		}
	}
}

// pop removes the oldest published task. Consumer only. It reports false when
// the ring is empty or when the oldest claimed position is not yet published
// (its producer is between the CAS and the seq store).
func (q *ring) pop() (Task, bool) {
	c := &q.cell[q.head&q.mask]
	if c.seq.Load() != q.head+1 {
		return nil, false
	}
	t := c.t
	c.t = nil // retain no pointer
	c.seq.Store(q.head + q.mask + 1)
	q.head++
	return t, true
}

// ready reports whether pop would return a task. Consumer only.
func (q *ring) ready() bool {
	return q.cell[q.head&q.mask].seq.Load() == q.head+1
}
