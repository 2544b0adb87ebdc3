package netio

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/netio-go/netio/internal/wire"
)

// The dispatcher is a subscriber connection's one goroutine: it reads the
// link's messages and hands copies to the subscriptions of their tags,
// keeps each tag's sequence (internal/tagseq) from the messages and the
// publisher's acknowledgements and farewell, and when the link is lost
// makes a new one and subscribes every tag again. It alone reports a
// subscription's gaps and connection events, in the order they happen.

// dispatchBatch is how many messages the dispatcher takes per read.
const dispatchBatch = 64

// run is the dispatcher.
func (sc *subConn) run() {
	defer close(sc.exited)
	var recs [dispatchBatch]record
	var states [dispatchBatch]*tagState
	var subs, joins [dispatchBatch][]*Subscription
	var early [dispatchBatch]upgradeView
	for {
		sl := sc.cur.Load()
		n, err := sl.recv.nextRecords(recs[:])
		// Acknowledgements that came before these messages: the reactor
		// handed them over before it handed over the messages' buffer.
		sc.takeAcks()
		if err != nil {
			if !sc.relinkAfter(sl, err) {
				sc.cur.Load().closeLink()
				return
			}
			continue
		}
		sc.mu.RLock()
		for i := 0; i < n; i++ {
			if st := sc.tags[recs[i].tag]; st != nil {
				states[i], subs[i], joins[i] = st, st.subs, st.joining
				early[i] = upgradeView{st.upgrading, st.upgradeAcked, st.upgradeAt}
			} else {
				states[i], subs[i], joins[i] = nil, nil, nil
			}
		}
		sc.mu.RUnlock()
		for i := 0; i < n; i++ {
			st := states[i]
			if st == nil {
				continue // unsubscribed, still on its way
			}
			r := &recs[i]
			ok, first, gap := st.seq.Take(r.seq)
			if !ok {
				continue // from before the tag was subscribed again
			}
			isEarly := early[i].before(r.seq)
			for _, s := range subs[i] {
				joining := slices.Contains(joins[i], s)
				if joining && isEarly {
					continue // published before its Subscribe returned, maybe with gaps
				}
				if gap > 0 && !joining {
					s.missed(r.tag, first, gap)
				}
				s.deliver(s.arena.message(r.b, r.tag, r.seq))
			}
			if len(joins[i]) > 0 && !isEarly {
				sc.settle(st)
			}
			states[i], subs[i], joins[i] = nil, nil, nil
		}
		clear(recs[:n])
	}
}

// upgradeView is what the dispatcher saw of a tag's upgrade.
type upgradeView struct {
	upgrading, acked bool
	at               uint64
}

// before reports whether seq comes before the point from which an
// upgraded tag is lossless: the joiners get nothing before it.
func (u upgradeView) before(seq uint64) bool { return u.upgrading && (!u.acked || seq < u.at) }

// settle ends the joining of st's newcomers: they are past the point
// from which their gaps count.
func (sc *subConn) settle(st *tagState) {
	sc.mu.Lock()
	st.upgrading = false
	st.joining = nil
	sc.mu.Unlock()
}

// takeAcks applies the acknowledgements the reactor handed over, oldest
// first. Dispatcher only.
func (sc *subConn) takeAcks() {
	list := sc.acks.Swap(nil)
	if list == nil {
		return
	}
	var notes []*ackNote
	for n := list; n != nil; n = n.next {
		notes = append(notes, n)
	}
	for i := len(notes) - 1; i >= 0; i-- {
		n := notes[i]
		sc.incarnation = n.incarnation
		for j, t := range n.targets {
			t.st.seq.OnAck(n.nexts[j])
			if t.gen != 0 {
				sc.mu.Lock()
				if t.st.upgradeGen == t.gen {
					t.st.upgradeAcked, t.st.upgradeAt = true, n.nexts[j]
				}
				sc.mu.Unlock()
			}
		}
	}
}

// relinkAfter accounts for the end of link old (cause) and makes a new
// one: it returns false when the connection is over, closed or given up
// (the subscriptions then end with why).
func (sc *subConn) relinkAfter(old *subLink, cause error) bool {
	old.closeLink()
	bye := old.bye // written on the reactor before the link ended
	if bye != nil {
		sc.applyFarewell(bye)
		switch bye.Reason {
		case wire.FarewellSlow:
			cause = fmt.Errorf("%w (the publisher's window stayed full: read faster, or use a drop policy)", ErrSlowSubscriber)
		case wire.FarewellClosed:
			cause = ErrPublisherClosed
		}
	}
	if sc.ctx.Err() != nil {
		return false
	}
	sc.emitAll(Event{Kind: EventDisconnected, Err: cause})
	if permanent(cause) {
		sc.failAll(cause)
		return false
	}
	// What the old publisher sent after the last message received is
	// known if it said where every tag ended.
	known := bye != nil && !bye.Partial
	lost := time.Now()
	wait := reconnectFirst
	for tries := 1; ; tries++ {
		t := time.NewTimer(wait)
		select {
		case <-sc.ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
		wait = min(2*wait, reconnectMax)
		ctx, cancel := context.WithTimeout(sc.ctx, sc.cfg.ConnectTimeout)
		sl, err := sc.dial(ctx)
		if err == nil {
			sc.cur.Store(sl)
			if err = sc.resubscribe(ctx, sl, known); err != nil {
				sl.closeLink()
			}
		}
		cancel()
		switch {
		case err == nil:
			return true
		case sc.ctx.Err() != nil:
			return false
		case permanent(err):
			sc.failAll(err)
			return false
		}
		if n := sc.cfg.MaxReconnects; n > 0 && tries >= n || sc.cfg.MaxReconnectTime > 0 && time.Since(lost) >= sc.cfg.MaxReconnectTime {
			sc.failAll(fmt.Errorf("gave up reconnecting after %d tries in %v (%w): %w", tries, time.Since(lost).Round(time.Millisecond), cause, err))
			return false
		}
	}
}

// applyFarewell counts, at the end of a link's data, what the publisher's
// farewell says was not sent.
func (sc *subConn) applyFarewell(f *wire.Farewell) {
	sc.mu.RLock()
	defer sc.mu.RUnlock()
	for _, e := range f.Finals {
		st := sc.tags[e.Tag]
		if st == nil {
			continue
		}
		if first, n := st.seq.Final(e.Next); n > 0 {
			for _, s := range st.subs {
				if !slices.Contains(st.joining, s) {
					s.missed(e.Tag, first, n)
				}
			}
		}
	}
}

// resubscribe subscribes every tag again on a new link and reconciles the
// sequences with what the publisher says comes next. known says whether
// the old publisher said where all its sequences ended: if this one is a
// new one, what the old one published after that is lost in a number
// nobody knows otherwise.
func (sc *subConn) resubscribe(ctx context.Context, sl *subLink, known bool) error {
	sc.mu.RLock()
	tags := make([]uint64, 0, len(sc.tags))
	for tag, st := range sc.tags {
		tags = append(tags, tag)
		st.seq.ExpectAck()
	}
	sc.mu.RUnlock()
	prev := sc.incarnation
	// With no tags the request still learns who the publisher is.
	if err := sl.request(ctx, wire.KindSubscribe, tags, sc.policyOf); err != nil {
		return err
	}
	sc.takeAcks()
	restarted := prev != 0 && sc.incarnation != prev
	all := sc.subscriptions()
	for _, s := range all {
		s.stats.reconnects.Add(1)
		s.events.emit(Event{Kind: EventReconnected})
		if restarted {
			s.stats.restarts.Add(1)
			if !known {
				s.stats.lossUnknown.Add(1)
			}
			s.events.emit(Event{Kind: EventPublisherRestarted, LossUnknown: !known})
		}
	}
	sc.mu.Lock()
	for _, tag := range tags {
		st := sc.tags[tag]
		if st == nil {
			continue // unsubscribed meanwhile
		}
		if first, n := st.seq.Relinked(restarted); n > 0 {
			for _, s := range st.subs {
				s.missed(tag, first, n)
			}
		}
		// The new link carries nothing from before its acknowledgement,
		// which made the tag lossless if any subscription wants it so.
		st.joining, st.upgrading = nil, false
	}
	close(sc.relink)
	sc.relink = make(chan struct{})
	sc.mu.Unlock()
	return nil
}

// emitAll reports e to every subscription of the connection.
func (sc *subConn) emitAll(e Event) {
	for _, s := range sc.subscriptions() {
		s.events.emit(e)
	}
}

// failAll ends every subscription of the connection with err. Dispatcher
// only.
func (sc *subConn) failAll(err error) {
	sc.brokenMu.Do(func() {
		sc.brokenE = err
		close(sc.broken)
	})
	for _, s := range sc.subscriptions() {
		s.finish(sc.opError("subscribe", err), true)
	}
}
