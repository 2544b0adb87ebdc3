package netio

import (
	"slices"
	"sync/atomic"

	"github.com/netio-go/netio/internal/wire"
)

// The publisher's tag table is changed by the subscribers' workers: one
// goroutine per subscriber link at a time, started when the link has work
// (a request, its end) and gone when it has none. A worker may wait (for a
// tag's turn, which a Publish holds across a wait for a slow subscriber;
// for the link's send gate) where the reactor never may: the reactor only
// hands it work, through a lock-free list, and never takes the table's
// lock or a tag's turn.
//
// A subscribe request takes the turns of its tags (in tag order, so that
// two workers never wait for each other), adds the subscriber, reads each
// tag's next sequence number, and has the reactor queue the
// acknowledgement before it gives the turns back: no message of those
// tags can be written to the link before the acknowledgement that
// announces it, and the link sends its owner's control messages before
// the data written after them.

// workItem is one piece of a link's work.
type workItem struct {
	next *workItem
	kind uint8 // wire.KindSubscribe, wire.KindUnsubscribe, or one of the work kinds
	req  wire.Request
	slot uint32 // a request's receive buffer, held until it is handled
	err  error  // workLeft: why
}

const (
	workJoined = iota + 100 // the link came up
	workLeft                // the subscriber went away
	workCut                 // cut loose as slow
)

// post hands it to the link's worker, starting one if none runs. Any
// goroutine, including the reactor: it never waits. Work posted after the
// publisher stopped its workers is dropped: Close and Shutdown deal with
// every link themselves.
func (pl *pubLink) post(it *workItem) {
	for {
		old := pl.inbox.Load()
		it.next = old
		if pl.inbox.CompareAndSwap(old, it) {
			break
		}
	}
	if !pl.working.Swap(true) {
		if pl.p.workers.start() {
			go pl.work()
		} else {
			pl.working.Store(false)
		}
	}
}

// work is the link's worker: it does what was posted, in order, until
// there is nothing left.
func (pl *pubLink) work() {
	defer pl.p.workers.done()
	for {
		list := pl.inbox.Swap(nil)
		if list == nil {
			pl.working.Store(false)
			// Work posted between the Swap and the Store found the
			// worker running and started none.
			if pl.inbox.Load() == nil || pl.working.Swap(true) {
				return
			}
			continue
		}
		var items []*workItem
		for it := list; it != nil; it = it.next {
			items = append(items, it)
		}
		for i := len(items) - 1; i >= 0; i-- {
			pl.do(items[i])
		}
	}
}

func (pl *pubLink) do(it *workItem) {
	p := pl.p
	switch it.kind {
	case wire.KindSubscribe, wire.KindUnsubscribe:
		if p.state.Load() == pubOpen {
			pl.apply(it.kind, it.req, it.slot)
		}
		pl.pending.Add(-1)
	case workJoined:
		p.events.emit(Event{Kind: EventSubscriberJoined, Remote: &pl.remote})
	case workLeft:
		pl.leaveAll()
		pl.closeToWriters()
		p.eng.r.SubmitFunc(func() {
			pl.leaveList()
			pl.l.close()
		})
		p.events.emit(Event{Kind: EventSubscriberLeft, Remote: &pl.remote, Err: it.err})
	case workCut:
		finals := pl.leaveAll()
		pl.closeToWriters()
		p.eng.r.SubmitFunc(func() {
			pl.leaveList()
			pl.finals, pl.reason = finals, wire.FarewellSlow
			pl.l.farewell = pl.farewell
			pl.l.closeNow()
		})
		p.events.emit(Event{Kind: EventSubscriberLeft, Remote: &pl.remote, Err: ErrSlowSubscriber})
	}
}

// closeToWriters waits until no writer is inside the link's send side and
// closes it: the link may let go of its memory then.
func (pl *pubLink) closeToWriters() {
	pl.send.gate.Lock()
	pl.closed.Store(true)
	pl.send.gate.Stop()
	pl.send.gate.Unlock()
}

// apply puts a request into the table and acknowledges it. A subscription
// that would take the subscriber past MaxTags is refused whole.
func (pl *pubLink) apply(kind uint8, r wire.Request, slot uint32) {
	p := pl.p
	tags := slices.Clone(r.Tags)
	slices.Sort(tags)
	tags = slices.Compact(tags) // a tag named twice would wait for its own turn
	a := wire.Ack{ID: r.ID, Incarnation: p.incarnation}
	if kind == wire.KindSubscribe && pl.newTags(tags) > p.cfg.MaxTags-len(pl.tags) {
		p.stats.tagsRefused.Add(1)
		a.Refused = true
		p.eng.r.Call(func() { pl.sendAck(&a, slot) })
		return
	}
	a.Tags, a.Next = tags, make([]uint64, len(tags))
	held := make([]*tagEntry, 0, len(tags))
	for i, tag := range tags {
		if kind == wire.KindSubscribe {
			e := p.lockEntry(tag, true)
			e.subs = withSub(e.subs, pl, Policy(r.Policy))
			a.Next[i] = e.next
			held = append(held, e)
		} else if e := p.lockEntry(tag, false); e != nil {
			p.leave(e, tag, pl)
			e.turn.Unlock()
		}
	}
	pl.tagsMu.Lock()
	for _, tag := range tags {
		if kind == wire.KindSubscribe {
			pl.tags[tag] = Policy(r.Policy)
		} else {
			delete(pl.tags, tag)
		}
	}
	pl.tagsMu.Unlock()
	p.eng.r.Call(func() { pl.sendAck(&a, slot) })
	for _, e := range held {
		e.turn.Unlock()
	}
}

// newTags counts the tags the subscriber does not hold yet.
func (pl *pubLink) newTags(tags []uint64) int {
	n := 0
	for _, tag := range tags {
		if _, ok := pl.tags[tag]; !ok {
			n++
		}
	}
	return n
}

// leaveAll takes the link out of every tag it holds and returns where
// each tag's sequence stood: the first message it will not get.
func (pl *pubLink) leaveAll() []wire.FinalSeq {
	pl.tagsMu.Lock()
	tags := make([]uint64, 0, len(pl.tags))
	for tag := range pl.tags {
		tags = append(tags, tag)
	}
	clear(pl.tags)
	pl.tagsMu.Unlock()
	slices.Sort(tags)
	finals := make([]wire.FinalSeq, 0, len(tags))
	for _, tag := range tags {
		if e := pl.p.lockEntry(tag, false); e != nil {
			finals = append(finals, wire.FinalSeq{Tag: tag, Next: e.next})
			pl.p.leave(e, tag, pl)
			e.turn.Unlock()
		}
	}
	return finals
}

// lockEntry returns tag's entry with its turn held, made if create and
// there is none; nil if there is none and not create.
func (p *Publisher) lockEntry(tag uint64, create bool) *tagEntry {
	for {
		p.tableMu.RLock()
		e := p.tags[tag]
		p.tableMu.RUnlock()
		if e == nil {
			if !create {
				return nil
			}
			p.tableMu.Lock()
			if e = p.tags[tag]; e == nil {
				e = &tagEntry{}
				p.tags[tag] = e
			}
			p.tableMu.Unlock()
		}
		e.turn.Lock(nil)
		if !e.dead {
			return e
		}
		e.turn.Unlock()
	}
}

// leave takes pl out of e, the entry of tag, whose turn is held; the last
// subscriber's leaving takes the entry out of the table.
func (p *Publisher) leave(e *tagEntry, tag uint64, pl *pubLink) {
	subs := make([]tagSub, 0, len(e.subs))
	for _, s := range e.subs {
		if s.pl != pl {
			subs = append(subs, s)
		}
	}
	if len(subs) > 0 {
		e.subs = subs
		return
	}
	e.subs, e.dead = nil, true
	p.tableMu.Lock()
	if p.tags[tag] == e {
		delete(p.tags, tag) // nobody saw its sequence: it may start again
	}
	p.tableMu.Unlock()
}

// withSub is subs with pl under policy, in place of any earlier entry of
// pl: a copy, since a Publish may be walking subs.
func withSub(subs []tagSub, pl *pubLink, policy Policy) []tagSub {
	out := make([]tagSub, 0, len(subs)+1)
	for _, s := range subs {
		if s.pl != pl {
			out = append(out, s)
		}
	}
	return append(out, tagSub{pl: pl, policy: policy})
}

// sendAck answers a request, in as many messages as its tags need, and
// posts the request's buffer again. On the reactor.
func (pl *pubLink) sendAck(a *wire.Ack, slot uint32) {
	defer pl.l.releaseControl(slot)
	for first := true; first || len(a.Tags) > 0; first = false {
		n := min(len(a.Tags), wire.TagsPerAck)
		part := wire.Ack{ID: a.ID, Refused: a.Refused, Incarnation: a.Incarnation, Tags: a.Tags[:n], Next: a.Next[:n]}
		if err := pl.l.sendOwnerControl(wire.KindAck, part.Marshal()); err != nil {
			return
		}
		a.Tags, a.Next = a.Tags[n:], a.Next[n:]
	}
}

// workerCount counts a publisher's running workers, and stops them from
// starting once the publisher closes. Lock-free: the reactor starts
// workers.
type workerCount struct {
	n    atomic.Int64 // running workers, with workersStopped once stopped
	idle chan struct{}
}

const workersStopped = 1 << 62

func newWorkerCount() workerCount { return workerCount{idle: make(chan struct{})} }

// start counts a worker in, unless stopped.
func (w *workerCount) start() bool {
	for {
		n := w.n.Load()
		if n&workersStopped != 0 {
			return false
		}
		if w.n.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// done counts a worker out.
func (w *workerCount) done() {
	if w.n.Add(-1) == workersStopped {
		close(w.idle)
	}
}

// stop lets no worker start any more and waits for the running ones.
// Once.
func (w *workerCount) stop() {
	if w.n.Or(workersStopped) == 0 {
		close(w.idle)
	}
	<-w.idle
}
