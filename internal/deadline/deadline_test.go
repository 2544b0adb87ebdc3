package deadline

import (
	"slices"
	"testing"
	"time"
)

var t0 = time.Unix(1000, 0)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func values(due []*Entry[int]) []int {
	var v []int
	for _, e := range due {
		if e.Take() {
			v = append(v, e.Value)
		}
	}
	return v
}

func TestPopDueInTimeOrder(t *testing.T) {
	var q Queue[int]
	es := make([]Entry[int], 6)
	for i, ms := range []int{50, 10, 30, 20, 60, 40} {
		es[i].Value = ms
		q.Set(&es[i], at(ms))
	}
	if next, ok := q.Next(); !ok || !next.Equal(at(10)) {
		t.Fatalf("Next = %v, %v; want 10 ms", next, ok)
	}
	if got := values(q.PopDue(at(35), nil)); !slices.Equal(got, []int{10, 20, 30}) {
		t.Fatalf("due at 35 ms: %v", got)
	}
	if got := values(q.PopDue(at(40), nil)); !slices.Equal(got, []int{40}) {
		t.Fatalf("due at 40 ms (inclusive): %v", got)
	}
	if q.Len() != 2 {
		t.Fatalf("Len = %d, want 2", q.Len())
	}
}

func TestSetMovesRemoveCancels(t *testing.T) {
	var q Queue[int]
	a, b, c := &Entry[int]{Value: 1}, &Entry[int]{Value: 2}, &Entry[int]{Value: 3}
	q.Set(a, at(10))
	q.Set(b, at(20))
	q.Set(c, at(30))
	q.Set(c, at(5))  // earlier
	q.Set(a, at(40)) // later
	q.Remove(b)
	q.Remove(b) // twice: nothing
	if b.Queued() {
		t.Fatal("removed entry still queued")
	}
	if got := values(q.PopDue(at(100), nil)); !slices.Equal(got, []int{3, 1}) {
		t.Fatalf("due: %v, want [3 1]", got)
	}
	if q.Len() != 0 {
		t.Fatalf("Len = %d after popping all", q.Len())
	}
}

func TestPoppedEntryCancelledOrMovedIsNotTaken(t *testing.T) {
	var q Queue[int]
	a, b, c := &Entry[int]{Value: 1}, &Entry[int]{Value: 2}, &Entry[int]{Value: 3}
	q.Set(a, at(1))
	q.Set(b, at(2))
	q.Set(c, at(3))
	due := q.PopDue(at(3), nil)
	if len(due) != 3 {
		t.Fatalf("popped %d, want 3", len(due))
	}
	q.Remove(b)       // cancelled by what ran a
	q.Set(c, at(100)) // moved by what ran a
	if got := values(due); !slices.Equal(got, []int{1}) {
		t.Fatalf("taken: %v, want [1]", got)
	}
	if !c.Queued() || b.Queued() || a.Queued() {
		t.Fatalf("queued: a %v b %v c %v, want only c", a.Queued(), b.Queued(), c.Queued())
	}
	if a.Take() {
		t.Fatal("an entry was taken twice")
	}
}

func TestEmptyAndAllocs(t *testing.T) {
	var q Queue[int]
	if _, ok := q.Next(); ok {
		t.Fatal("Next on an empty queue")
	}
	es := make([]Entry[int], 64)
	due := make([]*Entry[int], 0, 64)
	for i := range es {
		q.Set(&es[i], at(i))
	}
	due = q.PopDue(at(1000), due[:0])
	allocs := testing.AllocsPerRun(100, func() {
		for i := range es {
			q.Set(&es[i], at(64-i))
		}
		q.Remove(&es[3])
		due = q.PopDue(at(1000), due[:0])
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per round, want 0", allocs)
	}
}

// FuzzQueue runs operations on a Queue and on a plain list side by side.
func FuzzQueue(f *testing.F) {
	f.Add([]byte{0, 1, 5, 0, 2, 3, 1, 1, 2, 4, 0, 3, 9, 2, 0})
	f.Add([]byte{0, 0, 1, 0, 1, 1, 0, 2, 1, 2, 7, 0, 3, 0, 0, 2, 255})
	f.Fuzz(func(t *testing.T, ops []byte) {
		const n = 8
		var q Queue[int]
		es := make([]Entry[int], n)
		model := map[int]time.Time{} // queued entries and their times
		for i := range es {
			es[i].Value = i
		}
		now := 0
		for len(ops) >= 3 {
			op, i, v := ops[0]%3, int(ops[1])%n, int(ops[2])
			ops = ops[3:]
			switch op {
			case 0:
				q.Set(&es[i], at(now+v))
				model[i] = at(now + v)
			case 1:
				q.Remove(&es[i])
				delete(model, i)
			case 2:
				now += v % 32
				var want []int
				for k, w := range model {
					if !w.After(at(now)) {
						want = append(want, k)
					}
				}
				due := q.PopDue(at(now), nil)
				for j := 1; j < len(due); j++ {
					if due[j].At().Before(due[j-1].At()) {
						t.Fatalf("popped out of order: %v before %v", due[j-1].At(), due[j].At())
					}
				}
				got := values(due)
				slices.Sort(got)
				slices.Sort(want)
				if !slices.Equal(got, want) {
					t.Fatalf("due at %d: %v, want %v", now, got, want)
				}
				for _, k := range want {
					delete(model, k)
				}
			}
			if q.Len() != len(model) {
				t.Fatalf("Len = %d, model has %d", q.Len(), len(model))
			}
			for k := range es {
				if _, ok := model[k]; ok != es[k].Queued() {
					t.Fatalf("entry %d queued %v, model says %v", k, es[k].Queued(), ok)
				}
			}
			if next, ok := q.Next(); ok {
				for _, w := range model {
					if w.Before(next) {
						t.Fatalf("Next = %v, but %v is queued", next, w)
					}
				}
			}
		}
	})
}
