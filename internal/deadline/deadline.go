// Package deadline keeps deadlines in time order: a binary min-heap of
// entries the owners keep, so that adding, moving and removing one costs
// O(log n) and nothing is allocated once the heap has grown. A single
// timer armed for the earliest entry then serves any number of them.
//
// Not safe for concurrent use: one goroutine (or thread) owns a Queue and
// its entries.
package deadline

import "time"

// Entry is one deadline, kept by its owner and queued with Queue.Set.
// Value is the owner's: what to do when it is due.
type Entry[T any] struct {
	Value T
	at    time.Time
	// index is the 1-based position in the heap; 0: not queued; taken:
	// popped by PopDue and not yet claimed with Take.
	index int
}

const taken = -1

// At is when the entry is, or was last, due.
func (e *Entry[T]) At() time.Time { return e.at }

// Queued reports whether the entry waits in a queue.
func (e *Entry[T]) Queued() bool { return e.index > 0 }

// Take reports whether the entry is still due as PopDue returned it, and
// claims it: false if it was set again or removed since.
func (e *Entry[T]) Take() bool {
	if e.index != taken {
		return false
	}
	e.index = 0
	return true
}

// Queue is a set of entries ordered by their time. The zero value is
// empty and ready.
type Queue[T any] struct {
	heap []*Entry[T]
}

// Len is the number of entries queued.
func (q *Queue[T]) Len() int { return len(q.heap) }

// Next is the earliest entry's time; false if the queue is empty.
func (q *Queue[T]) Next() (time.Time, bool) {
	if len(q.heap) == 0 {
		return time.Time{}, false
	}
	return q.heap[0].at, true
}

// Set queues e for at, or moves it there if it is queued already.
func (q *Queue[T]) Set(e *Entry[T], at time.Time) {
	if e.index <= 0 {
		e.at = at
		q.heap = append(q.heap, e)
		e.index = len(q.heap)
		q.up(e.index - 1)
		return
	}
	earlier := at.Before(e.at)
	e.at = at
	if earlier {
		q.up(e.index - 1)
	} else {
		q.down(e.index - 1)
	}
}

// Remove takes e out of the queue; an entry popped and not yet taken is
// no longer due. Removing an entry not queued does nothing.
func (q *Queue[T]) Remove(e *Entry[T]) {
	if e.index == taken {
		e.index = 0
		return
	}
	if e.index <= 0 {
		return
	}
	i, last := e.index-1, len(q.heap)-1
	e.index = 0
	if i != last {
		moved := q.heap[last]
		q.heap[i], moved.index = moved, i+1
		q.heap[last] = nil
		q.heap = q.heap[:last]
		if !q.up(i) {
			q.down(i)
		}
		return
	}
	q.heap[last] = nil
	q.heap = q.heap[:last]
}

// PopDue takes every entry due at now (at or before it) out of the queue,
// earliest first, and appends them to due. Each stays claimable with Take
// until it is set again or removed, so that what runs one entry may cancel
// or move another of the same batch.
func (q *Queue[T]) PopDue(now time.Time, due []*Entry[T]) []*Entry[T] {
	for len(q.heap) > 0 && !q.heap[0].at.After(now) {
		e := q.heap[0]
		last := len(q.heap) - 1
		q.heap[0], q.heap[last] = q.heap[last], nil
		q.heap = q.heap[:last]
		if last > 0 {
			q.heap[0].index = 1
			q.down(0)
		}
		e.index = taken
		due = append(due, e)
	}
	return due
}

// up moves the entry at i towards the root while it is earlier than its
// parent, and reports whether it moved.
func (q *Queue[T]) up(i int) bool {
	h := q.heap
	e := h[i]
	start := i
	for i > 0 {
		p := (i - 1) / 2
		if !e.at.Before(h[p].at) {
			break
		}
		h[i] = h[p]
		h[i].index = i + 1
		i = p
	}
	h[i], e.index = e, i+1
	return i != start
}

// down moves the entry at i towards the leaves while a child is earlier.
func (q *Queue[T]) down(i int) {
	h := q.heap
	n := len(h)
	e := h[i]
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if r := c + 1; r < n && h[r].at.Before(h[c].at) {
			c = r
		}
		if !h[c].at.Before(e.at) {
			break
		}
		h[i] = h[c]
		h[i].index = i + 1
		i = c
	}
	h[i], e.index = e, i+1
}
