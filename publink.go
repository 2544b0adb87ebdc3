package netio

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/netio-go/netio/internal/page"
	"github.com/netio-go/netio/internal/wire"
)

// pubLink is the publisher's link to one subscriber. Its methods run on
// three sides: the publishing goroutines (offer, publishWaiting, inside the
// send gate), the link's worker (pubtable.go: the subscriber's requests
// and its end), and the reactor (the linkOwner methods).
type pubLink struct {
	p      *Publisher
	l      *link
	send   sender
	closed atomic.Bool // no more writes: retired, cut loose or closed
	loose  atomic.Bool // cut loose as slow
	// stranded counts messages a Publish could not give the subscriber
	// because Shutdown or Close stopped the writers: they are missing at
	// the subscriber, and Shutdown counts them with what was not sent.
	stranded atomic.Uint64
	// flushWanted: a Flush found a writer inside the gate, which flushes
	// on its way out instead (Flush never waits for a subscriber).
	flushWanted atomic.Bool
	stats       connStats
	remote      Addr

	// Inside the send gate: when a writer found the window full, and how
	// many sends had completed then (any progress since starts the
	// clock again).
	fullSince time.Time
	fullDone  uint64

	// The worker's (pubtable.go).
	inbox   atomic.Pointer[workItem]
	working atomic.Bool
	pending atomic.Int32      // requests in inbox
	tagsMu  sync.Mutex        // tags, for Close and Shutdown
	tags    map[uint64]Policy // what the subscriber has in the table

	// Reactor only.
	finals  []wire.FinalSeq // what the farewell tells
	reason  uint8           // wire.FarewellClosed or wire.FarewellSlow
	counted bool            // the unposted messages were counted already
	gone    bool            // out of p.links
}

// maxPendingRequests bounds the requests a subscriber may have waiting.
const maxPendingRequests = 64

// offer results.
const (
	offered       = iota // taken, dropped under a drop policy, or the subscriber is gone
	offerLater           // another writer had the gate, or a Block subscriber has no room: publishWaiting
	offerTooLarge        // above the subscriber's message limit
	offerStranded        // the publisher is closing: the subscriber misses it
)

// stopped is the outcome of a write to a link closed to writers: nothing
// for a subscriber that left or was cut loose, but one that Shutdown or
// Close stopped misses the message.
func (pl *pubLink) stopped() int {
	if pl.loose.Load() || pl.l.life.Ended() || pl.p.state.Load() == pubOpen {
		return offered
	}
	pl.stranded.Add(1)
	return offerStranded
}

// offer writes one tagged message to the subscriber if it can without
// waiting. Any publishing goroutine, under the tag's turn.
func (pl *pubLink) offer(tag, seq uint64, msg []byte, policy Policy) int {
	s := &pl.send
	if !s.gate.LockFree() && !s.gate.TryLockPastReactor() {
		return offerLater // another publish or a Flush is inside
	}
	pl.send.frames.SetRecord(tag, seq)
	if s.open && s.unhindered(len(msg)) && s.frames.AppendWhole(msg) {
		s.msgs++
		s.bytes += uint64(len(msg))
		pl.unlock()
		return offered
	}
	if pl.closed.Load() {
		pl.unlock()
		return pl.stopped()
	}
	_, err := s.writeLocked(context.Background(), msg, true)
	if policy == Block && errors.Is(err, ErrWouldBlock) {
		pl.noteFull()
		pl.unlock()
		return offerLater
	}
	pl.unlock()
	return pl.written(err)
}

// written accounts for a write's outcome.
func (pl *pubLink) written(err error) int {
	switch {
	case err == nil:
	case errors.Is(err, ErrWouldBlock):
		pl.p.stats.dropped.Add(1)
	case errors.Is(err, ErrMessageTooLarge):
		pl.p.stats.undelivered.Add(1)
		return offerTooLarge
	}
	return offered // or the subscriber went away
}

// noteFull starts the slow-subscriber clock when a writer finds the window
// full, unless it runs already and no send completed since. Inside the
// gate.
func (pl *pubLink) noteFull() {
	if d := pl.l.tx.done.Load(); pl.fullSince.IsZero() || d != pl.fullDone {
		pl.fullSince, pl.fullDone = time.Now(), d
	}
}

// publishWaiting writes a message that offer could not, waiting for the
// gate and, under Block, for room: bounded by ctx and by the publisher's
// slow-subscriber limit, at which the subscriber is cut loose. It reports
// false when ctx ended first: the subscriber missed the message.
func (pl *pubLink) publishWaiting(ctx context.Context, tag, seq uint64, msg []byte, policy Policy) bool {
	s := &pl.send
	if !s.gate.LockUntil(ctx.Done()) {
		if policy != Block {
			pl.p.stats.dropped.Add(1)
			return true
		}
		return false
	}
	pl.send.frames.SetRecord(tag, seq)
	if pl.closed.Load() {
		pl.unlock()
		return pl.stopped() != offerStranded
	}
	if policy != Block {
		_, err := s.writeLocked(context.Background(), msg, true)
		pl.unlock()
		pl.written(err)
		return true
	}
	var limit time.Duration
	if pl.p.cfg.SlowSubscriberLimit > 0 {
		limit = pl.p.cfg.SlowSubscriberLimit
		pl.noteFull()
		pl.l.tx.wake.SetDeadline(pl.fullSince.Add(limit))
	}
	_, err := s.writeLocked(ctx, msg, false)
	if limit > 0 {
		pl.l.tx.wake.SetDeadline(time.Time{})
	}
	switch {
	case err == nil:
	case errors.Is(err, os.ErrDeadlineExceeded), ctx.Err() != nil && s.failed != nil:
		// Full for longer than the limit; or part of a message went
		// before ctx ended, and the stream cannot go on.
		pl.loose.Store(true)
		pl.closed.Store(true)
		s.gate.Stop()
		pl.unlock()
		pl.cut()
		return true
	case ctx.Err() != nil:
		pl.unlock()
		return false
	case pl.closed.Load():
		pl.unlock()
		return pl.stopped() != offerStranded
	default:
		pl.unlock()
		pl.written(err)
		return true
	}
	pl.unlock()
	return true
}

// unlock leaves the send gate, flushing if a Flush asked meanwhile.
func (pl *pubLink) unlock() {
	pl.send.unlock()
	if pl.flushWanted.Load() {
		pl.flush()
	}
}

// flush sends the open page now, unless a writer is inside the gate: that
// one flushes as it leaves. A writer that waits for room holds no open
// page, so nothing waits for a subscriber that stopped reading.
func (pl *pubLink) flush() {
	s := &pl.send
	for {
		if s.gate.TryLock() {
			pl.flushWanted.Store(false)
			if s.writable(0) == nil && s.open {
				s.publish(flushExplicit)
			}
			s.unlock()
			return
		}
		pl.flushWanted.Store(true)
		if s.gate.Occupied() {
			return // the writer inside sees the flag as it leaves
		}
	}
}

// cut lets go of a subscriber that held the others back: it is told why,
// and counts what it missed. Outside the gate.
func (pl *pubLink) cut() {
	pl.p.stats.cutSlow.Add(1)
	logEvent(pl.p.cfg.Logger, slog.LevelWarn, "netio: slow subscriber cut loose", slog.String("network", pl.p.ac.network),
		slog.String("publisher", pl.p.ac.addr.String()), slog.String("subscriber", pl.remote.String()))
	pl.post(&workItem{kind: workCut})
}

// drain sends what was written to the subscriber and waits until it has
// gone out, or until ctx ends, which makes a writer inside the gate give
// up. It leaves the link closed to writers, and reports whether
// everything went.
func (pl *pubLink) drain(ctx context.Context) bool {
	s := &pl.send
	if !s.gate.LockUntil(ctx.Done()) {
		pl.closed.Store(true)
		pl.l.tx.wake.Ring()
		s.gate.Lock()
	}
	defer s.unlock()
	pl.closed.Store(true)
	if s.open && !pl.l.life.Ended() {
		s.publish(flushExplicit)
	}
	q := &pl.l.tx
	stop := context.AfterFunc(ctx, q.wake.Ring)
	defer stop()
	for {
		q.waiting.Store(true)
		if q.done.Load() == q.head.Load() || pl.l.life.Ended() {
			pl.stopWaiting(&q.waiting)
			return true
		}
		if ctx.Err() != nil {
			pl.stopWaiting(&q.waiting)
			return false
		}
		q.wake.Wait()
		pl.stopWaiting(&q.waiting)
	}
}

// unposted counts the messages written to the link that were not handed
// to the provider: they will never reach the subscriber. A message begun
// in a page that went and continued in one that did not counts too. On
// the reactor.
func (pl *pubLink) unposted() uint64 {
	l := pl.l
	if l.tx.mem == nil {
		return 0
	}
	var n uint64
	head := l.tx.head.Load()
	for i := l.txPosted; i < head; i++ {
		b := l.tx.buf(i)[:l.tx.lens[i%uint64(l.tx.slots)]]
		h := wire.ReadHeader(b)
		if i == l.txPosted && h.MsgLen > 0 {
			n++
		}
		n += page.CountRecords(b[wire.HeaderSize:wire.HeaderSize+int(h.FragLen)], h.MsgLen, page.TaggedPrefixSize)
	}
	return n
}

// sayGoodbye closes the link, telling the subscriber where its tags'
// sequences end: at once (now), dropping what was not sent, or after
// sending what was written, for up to Config.Linger. On the reactor.
func (pl *pubLink) sayGoodbye(finals []wire.FinalSeq, now bool) {
	pl.leaveList()
	pl.finals, pl.reason = finals, wire.FarewellClosed
	pl.l.farewell = pl.farewell
	if now {
		pl.l.closeNow()
	} else {
		pl.l.close()
	}
}

// farewell is the link's last word (link.farewell). On the reactor.
func (pl *pubLink) farewell(dropping bool) []byte {
	if dropping && !pl.counted {
		pl.p.stats.undelivered.Add(pl.unposted())
	}
	pl.counted = true
	f := wire.Farewell{Reason: pl.reason, Incarnation: pl.p.incarnation, Finals: pl.finals}
	if len(f.Finals) > wire.TagsPerFarewell {
		f.Finals, f.Partial = f.Finals[:wire.TagsPerFarewell], true
	}
	return f.Marshal()
}

// leaveList takes the link out of the publisher's list, once. On the
// reactor.
func (pl *pubLink) leaveList() {
	if pl.gone {
		return
	}
	pl.gone = true
	// Counted before it leaves the list, so that Delivered never goes
	// down (a Stats between the two may count it twice for a moment).
	pl.p.stats.deliveredGone.Add(pl.send.delivered())
	pl.p.setLinks(nil, pl)
}

func (pl *pubLink) sized(l *link) error {
	s := &pl.send
	s.frames = l.cfg.framing.Writer(l.tx.bufSize - wire.HeaderSize)
	s.maxSend = l.sizes.maxSend
	s.appendMax = s.maxSend
	if s.pack = s.frames.Packs(); s.pack {
		l.packed = s
	}
	if s.lazy = s.frames.Lazy(); s.lazy {
		s.watch = newPageWatch(s, l, &pl.p.cfg)
	}
	pl.remote = l.remoteAddr()
	return nil
}

func (pl *pubLink) up(l *link) {
	p := pl.p
	p.ac.setUp(l)
	p.setLinks(pl, nil)
	if p.state.Load() != pubOpen {
		// Came up while the publisher closed: it is in no tag.
		pl.closed.Store(true)
		pl.sayGoodbye(nil, true)
		return
	}
	pl.post(&workItem{kind: workJoined})
}

func (pl *pubLink) setupFailed(l *link) {
	pl.p.ac.setupFailed(l)
	l.finishClose()
}

// ended is the subscriber gone: out of the table, and closed.
func (pl *pubLink) ended(l *link) {
	if errors.Is(l.life.Err(), ErrPeerTimeout) {
		pl.p.stats.timedOut.Add(1)
	}
	pl.send.gate.Stop()
	pl.post(&workItem{kind: workLeft, err: l.life.Err()})
	logEnded(pl.p.cfg.Logger, pl.p.ac.network, pl.p.ac.addr, pl.remote, l.life.Err())
}

func (pl *pubLink) control(_ *link, kind uint8, payload []byte) error {
	if kind != wire.KindSubscribe && kind != wire.KindUnsubscribe {
		return fmt.Errorf("%w: unknown message kind %d", ErrProtocol, kind)
	}
	req, err := wire.ParseRequest(payload)
	if err != nil {
		return err
	}
	if pl.pending.Add(1) > maxPendingRequests {
		return fmt.Errorf("%w: more than %d subscription requests waiting", ErrProtocol, maxPendingRequests)
	}
	// Its buffer is posted again once the worker has handled it: the
	// subscriber's credits, not the worker's speed, bound the requests
	// waiting.
	pl.post(&workItem{kind: kind, req: req, slot: pl.l.holdControl()})
	return nil
}

func (pl *pubLink) released(*link) {
	if pl.send.watch != nil {
		pl.send.watch.close()
	}
	pl.p.ac.released()
}

func (pl *pubLink) opError(op string, err error) error {
	return pl.p.opError("publish", err)
}

func (pl *pubLink) stopWaiting(w *atomic.Bool) {
	if !w.Swap(false) {
		pl.p.eng.wakesInFlight.Add(-1)
	}
}
