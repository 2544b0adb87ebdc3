package netio

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/netio-go/netio/internal/tagseq"
	"github.com/netio-go/netio/internal/wire"
)

// Subscription receives the messages a publisher publishes under a set of
// tags. Subscribe returns it once the publisher has acknowledged the tags:
// every message published after that reaches it (under Block), each
// carrying its tag's sequence number.
//
// A process's subscriptions to one publisher (one address and mode) share
// one connection. When that connection is lost, it is made again with
// backoff and every tag subscribed again, without C closing; what was
// missed in between shows as a jump of the sequence numbers, in Stats and
// on Events.
type Subscription struct {
	// C delivers the subscription's messages, each tag's in sequence
	// order. Release each when done with its bytes. C is closed by Close,
	// or by an error that a new connection cannot mend, or when
	// reconnecting gave up (Err says which).
	C <-chan Message

	c      chan Message
	sc     *subConn
	policy Policy
	arena  arena
	stats  subStats
	events *eventQueue

	sendMu    sync.Mutex    // held by the dispatcher while it sends on c; closing c takes it
	done      chan struct{} // closed when the subscription ends: a blocked send gives up
	ending    atomic.Bool   // set just before done is closed
	closeOnce sync.Once
	err       error // why C closed; written before done is closed

	tags map[uint64]struct{} // guarded by sc.mu
}

type subStats struct {
	received, dropped, gaps, missed, reconnects, restarts, lossUnknown atomic.Uint64
}

// SubscriptionStats are a Subscription's counters.
type SubscriptionStats struct {
	Received uint64 // messages delivered on C
	Dropped  uint64 // messages the policy dropped because C was full
	Gaps     uint64 // jumps in a tag's sequence: messages lost on the way
	// Missed counts the messages those jumps skipped: lost while
	// reconnecting, cut loose as slow, when a Publish gave up, or left
	// unsent when the publisher closed (it says where each tag ended).
	Missed     uint64
	Reconnects uint64 // times the connection to the publisher was made again
	Restarts   uint64 // of those, times the publisher had restarted: its sequences began again
	// LossUnknown counts the spans whose loss nobody can count: the
	// publisher restarted without having said where its sequences ended
	// (it crashed, or lost its connection first), so what it published
	// after the last message received is lost in an unknown number; or
	// it said so for fewer tags than this connection holds.
	LossUnknown uint64
	// EventsDropped counts events Events could not hold.
	EventsDropped uint64
}

// Subscribe dials the publisher at address (host:port, or on a
// reliable-datagram provider the address its Addr prints), or shares this
// process's connection to it, subscribes to tags and returns once the
// publisher has acknowledged them, bounded by ctx and
// Config.ConnectTimeout. With no tags it returns once connected, and the
// subscription receives nothing until tags are added
// (Subscription.Subscribe). Options: WithMode
// (LowLatency: sent at once, packed behind sends in flight;
// HighThroughput: pages), WithPolicy,
// WithSubscriptionBuffer, WithWaitForPublisher (keep trying while the
// publisher is not up yet), WithMaxReconnects and WithMaxReconnectTime
// (give up reconnecting), WithEventBuffer, and the sizes of the
// connection. The subscriber proves it holds the publisher's key, by
// default the key in the per-user key file (Config.KeyFile).
func Subscribe(ctx context.Context, network, address string, tags []uint64, opts ...Option) (*Subscription, error) {
	a, err := dialArgs("subscribe", network, address, opts)
	if err != nil {
		return nil, err
	}
	sc, err := joinSubConn(ctx, a)
	if err != nil {
		return nil, err
	}
	s := &Subscription{c: make(chan Message, a.cfg.SubscriptionBuffer), sc: sc, policy: a.cfg.Policy,
		done: make(chan struct{}), tags: map[uint64]struct{}{}, events: newEventQueue(a.cfg.EventBuffer)}
	s.C = s.c
	sc.reqMu.Lock()
	fresh := sc.add(s, tags)
	err = sc.request(ctx, wire.KindSubscribe, fresh, sc.policyOf)
	sc.reqMu.Unlock()
	if err != nil {
		s.finish(err, false)
		return nil, a.opError(err)
	}
	tracked.subscriptions.add(s)
	return s, nil
}

// Subscribe adds tags to the subscription and returns once the publisher
// has acknowledged them, bounded by ctx: the messages published under them
// from then on arrive on C too. If it fails (net.ErrClosed after Close),
// the subscription is left as it was.
func (s *Subscription) Subscribe(ctx context.Context, tags ...uint64) error {
	sc := s.sc
	sc.reqMu.Lock()
	defer sc.reqMu.Unlock()
	if s.ending.Load() {
		return sc.opError("subscribe", net.ErrClosed)
	}
	var added []uint64
	sc.mu.RLock()
	for _, tag := range tags {
		if _, ok := s.tags[tag]; !ok {
			added = append(added, tag)
		}
	}
	sc.mu.RUnlock()
	fresh := sc.add(s, added)
	err := sc.request(ctx, wire.KindSubscribe, fresh, sc.policyOf)
	if err != nil {
		if gone := sc.drop(s, added); len(gone) > 0 {
			uctx, cancel := context.WithTimeout(context.Background(), sc.cfg.ConnectTimeout)
			sc.request(uctx, wire.KindUnsubscribe, gone, nil)
			cancel()
		}
		return sc.opError("subscribe", err)
	}
	return nil
}

// Unsubscribe stops the delivery of tags. Messages of them already on C
// stay there. After Close it returns net.ErrClosed.
func (s *Subscription) Unsubscribe(tags ...uint64) error {
	s.sc.reqMu.Lock()
	defer s.sc.reqMu.Unlock()
	if s.ending.Load() {
		return s.sc.opError("unsubscribe", net.ErrClosed)
	}
	gone := s.sc.drop(s, tags)
	ctx, cancel := context.WithTimeout(context.Background(), s.sc.cfg.ConnectTimeout)
	defer cancel()
	if err := s.sc.request(ctx, wire.KindUnsubscribe, gone, nil); err != nil {
		return s.sc.opError("unsubscribe", err)
	}
	return nil
}

// Close ends the subscription and closes C and Events. When it was the
// last of its connection, the connection is closed too. A second Close
// returns net.ErrClosed.
func (s *Subscription) Close() error {
	if !s.finish(net.ErrClosed, false) {
		return s.sc.opError("close", net.ErrClosed)
	}
	return nil
}

// finish ends the subscription for err and reports whether it was the
// first end. Any goroutine; the dispatcher says so (inDispatcher), as it
// must not wait for itself.
func (s *Subscription) finish(err error, inDispatcher bool) bool {
	first := false
	s.closeOnce.Do(func() {
		first = true
		s.err = err
		s.ending.Store(true)
		close(s.done)
		if !inDispatcher {
			s.sc.reqMu.Lock()
		}
		gone, last := s.sc.remove(s)
		s.sendMu.Lock()
		close(s.c)
		s.sendMu.Unlock()
		if !last && len(gone) > 0 && !inDispatcher {
			ctx, cancel := context.WithTimeout(context.Background(), s.sc.cfg.ConnectTimeout)
			s.sc.request(ctx, wire.KindUnsubscribe, gone, nil)
			cancel()
		}
		if !inDispatcher {
			s.sc.reqMu.Unlock()
		}
		if last {
			s.sc.close(inDispatcher)
		}
		s.events.close(&Event{Kind: EventClosed, Err: err})
	})
	return first
}

// Err returns why C was closed: nil while it is open, net.ErrClosed after
// Close, or the error that ended the connection for good.
func (s *Subscription) Err() error {
	select {
	case <-s.done:
		return s.err
	default:
		return nil
	}
}

// Stats returns the subscription's counters. Any goroutine.
func (s *Subscription) Stats() SubscriptionStats {
	st := &s.stats
	return SubscriptionStats{Received: st.received.Load(), Dropped: st.dropped.Load(), Gaps: st.gaps.Load(),
		Missed: st.missed.Load(), Reconnects: st.reconnects.Load(), Restarts: st.restarts.Load(),
		LossUnknown: st.lossUnknown.Load(), EventsDropped: s.events.dropped.Load()}
}

// Events returns the channel that reports what happens to the
// subscription: EventDisconnected (with the cause), EventReconnected,
// EventPublisherRestarted, EventGap and, last, EventClosed, after which
// the channel is closed. Events come in the order they happened; a gap is
// reported before the message that revealed it is delivered on C. The
// channel holds Config.EventBuffer events: one that finds it full is
// dropped and counted in Stats().EventsDropped, never waited for, so a
// subscription whose events nobody reads loses nothing else.
func (s *Subscription) Events() <-chan Event { return s.events.c }

// missed counts a gap of n messages from first of tag and reports it.
func (s *Subscription) missed(tag, first, n uint64) {
	s.stats.gaps.Add(1)
	s.stats.missed.Add(n)
	s.events.emit(Event{Kind: EventGap, Tag: tag, From: first, To: first + n - 1})
}

// deliver hands m to the reader as the policy says. Dispatcher only. The
// common case, room in C, is one non-blocking send: no select over done.
func (s *Subscription) deliver(m Message) {
	s.sendMu.Lock()
	if s.ending.Load() {
		s.sendMu.Unlock()
		m.Release()
		return
	}
	// Counted before the hand-over, so that a reader who holds a message
	// sees it in Stats; taken back if it is not handed over.
	s.stats.received.Add(1)
	select {
	case s.c <- m:
		s.sendMu.Unlock()
		return
	default:
	}
	s.deliverFull(m)
	s.sendMu.Unlock()
}

// deliverFull is deliver when C is full: the policy decides. Under sendMu,
// with m already counted as received.
func (s *Subscription) deliverFull(m Message) {
	switch s.policy {
	case Block:
		select {
		case s.c <- m:
		case <-s.done:
			s.stats.received.Add(^uint64(0))
			m.Release()
		}
	case DropNewest:
		s.stats.received.Add(^uint64(0))
		m.Release()
		s.stats.dropped.Add(1)
	case DropOldest:
		for {
			select {
			case s.c <- m:
				return
			default:
			}
			select {
			case old := <-s.c:
				old.Release()
				s.stats.received.Add(^uint64(0))
				s.stats.dropped.Add(1)
			default:
			}
		}
	}
}

// subConn is a process's connection to one publisher, shared by its
// subscriptions there, and the goroutine that reads it (the dispatcher,
// dispatch.go), which also makes the connection again when it is lost.
type subConn struct {
	key  string
	args *args
	cfg  Config

	// reqMu keeps the order of the requests that carry the table's changes
	// to the publisher the order of the changes (taken before mu): a tag
	// one subscription leaves while another joins it must reach the
	// publisher as unsubscribe then subscribe, never the other way round,
	// which left the joiner with a tag the publisher no longer sent.
	reqMu sync.Mutex
	// mu guards the membership: which subscriptions want which tags, read
	// by the dispatcher a batch at a time.
	mu     sync.RWMutex
	tags   map[uint64]*tagState
	all    []*Subscription // every subscription of the connection, replaced under mu
	subs   int             // references: subscriptions, and Subscribe calls joining
	closed bool
	relink chan struct{} // closed when a new link has every tag again; replaced under mu

	cur         atomic.Pointer[subLink] // the link now
	acks        atomic.Pointer[ackNote] // acknowledgements for the dispatcher, newest first
	incarnation uint64                  // the dispatcher's: the publisher's, from its acknowledgements
	nextID      atomic.Uint32
	ctx         context.Context // cancelled when the connection closes: ends dials and waits
	cancel      context.CancelFunc
	broken      chan struct{} // closed when the connection failed for good, with brokenErr
	brokenMu    sync.Once
	brokenE     error
	exited      chan struct{} // the dispatcher returned
	stopOnce    sync.Once
}

// tagState is one tag a connection receives.
type tagState struct {
	// Under subConn.mu, replaced, never changed in place: the
	// subscriptions of the tag, and those that joined it while the
	// connection already received it, whose gaps do not count until they
	// settle at their first message.
	subs    []*Subscription
	joining []*Subscription
	// upgrading (under subConn.mu): a Block subscription joined a tag
	// taken under a drop policy, and the publisher was asked to make it
	// lossless. Until the message its acknowledgement names (upgradeAt,
	// once upgradeAcked), the tag may still lose messages: the joiners
	// get none of those and settle there, so their stream has no gap.
	// upgradeGen tells the acknowledgement of the newest upgrade.
	upgrading    bool
	upgradeGen   uint32
	upgradeAcked bool
	upgradeAt    uint64

	seq tagseq.Seq // the dispatcher's
}

// subLink is a subscriber's link to a publisher.
type subLink struct {
	sc     *subConn
	l      *link
	recv   receiver
	closed atomic.Bool
	stats  connStats

	// Reactor only until the link ends; the dispatcher reads bye after.
	awaited map[uint32]*awaitedAck
	bye     *wire.Farewell
}

// awaitedAck is a request waiting for its acknowledgements; the reactor's.
type awaitedAck struct {
	want, got int
	refused   bool // the publisher refused part of the request; set before done is closed
	finished  bool
	targets   map[uint64]ackTarget // subscribe only
	done      chan struct{}
}

// ackTarget is the state an acknowledged tag updates, and the upgrade it
// completes (0: none).
type ackTarget struct {
	st  *tagState
	gen uint32
}

// ackNote is an acknowledgement handed from the reactor to the
// dispatcher.
type ackNote struct {
	next        *ackNote
	incarnation uint64
	targets     []ackTarget
	nexts       []uint64
}

var subConns struct {
	mu sync.Mutex
	m  map[string]*subConnEntry
}

type subConnEntry struct {
	sc    *subConn
	ready chan struct{} // closed once the first dial is over
	err   error
}

// joinSubConn returns the connection to a's publisher, dialling it if this
// process has none, with a reference for the caller.
func joinSubConn(ctx context.Context, a *args) (*subConn, error) {
	// The key is part of it: a subscription must not ride on a
	// connection that another one's key admitted.
	dest := a.host + "\x00" + a.port
	if isRDMProvider(a.provider) {
		dest = a.address // the publisher's printed address
	}
	key := a.provider + "\x00" + dest + "\x00" + a.cfg.Mode.String() + "\x00" + string(a.cfg.Key)
	for {
		subConns.mu.Lock()
		if subConns.m == nil {
			subConns.m = map[string]*subConnEntry{}
		}
		e := subConns.m[key]
		if e == nil {
			e = &subConnEntry{ready: make(chan struct{})}
			subConns.m[key] = e
			subConns.mu.Unlock()
			e.sc, e.err = dialSubConn(ctx, key, a)
			subConns.mu.Lock()
			if e.err != nil {
				delete(subConns.m, key)
			} else {
				e.sc.subs++ // the caller's
			}
			subConns.mu.Unlock()
			close(e.ready)
			return e.sc, e.err
		}
		subConns.mu.Unlock()
		select {
		case <-e.ready:
		case <-ctx.Done():
			return nil, a.opError(ctx.Err())
		}
		if e.err != nil {
			return nil, e.err
		}
		subConns.mu.Lock()
		sc := e.sc
		ok := subConns.m[key] == e && !sc.closed
		if ok {
			sc.mu.Lock()
			sc.subs++
			sc.mu.Unlock()
		}
		subConns.mu.Unlock()
		if ok {
			return sc, nil
		}
	}
}

// dialSubConn makes the connection; with Config.WaitForPublisher it keeps
// trying, with backoff, while the publisher is not up yet.
func dialSubConn(ctx context.Context, key string, a *args) (*subConn, error) {
	sc := &subConn{key: key, args: a, cfg: a.cfg, tags: map[uint64]*tagState{}, relink: make(chan struct{}),
		exited: make(chan struct{}), broken: make(chan struct{})}
	sc.ctx, sc.cancel = context.WithCancel(context.Background())
	wait := reconnectFirst
	for {
		sl, err := sc.dial(ctx)
		if err == nil {
			sc.cur.Store(sl)
			go sc.run()
			return sc, nil
		}
		if !a.cfg.WaitForPublisher || permanent(err) || ctx.Err() != nil {
			sc.cancel()
			return nil, err
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			sc.cancel()
			return nil, a.opError(ctx.Err())
		}
		wait = min(2*wait, reconnectMax)
	}
}

// dial makes a new link to the publisher.
func (sc *subConn) dial(ctx context.Context) (*subLink, error) {
	cfg := &sc.cfg
	lc := newLinkConfig(wire.RoleSubscriber, cfg)
	sl := &subLink{sc: sc, awaited: map[uint32]*awaitedAck{}}
	_, err := dialLink(ctx, sc.args, func(eng *engine) (*link, error) {
		l, err := newLink(eng, sl, &sl.stats, lc, sc.args.provider)
		if err != nil {
			return nil, err
		}
		sl.l = l
		sl.recv = receiver{half: half{side: sl, closed: &sl.closed, stats: &sl.stats, l: l}, q: &l.rx, slot: -1}
		return l, nil
	}, func(netip.AddrPort) {})
	if err != nil {
		return nil, err
	}
	return sl, nil
}

// add registers s for tags and returns those the connection did not
// receive yet, or must now receive losslessly: they must be subscribed at
// the publisher.
func (sc *subConn) add(s *Subscription, tags []uint64) (fresh []uint64) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if !slices.Contains(sc.all, s) {
		sc.all = append(slices.Clip(sc.all), s)
	}
	for _, tag := range tags {
		if _, dup := s.tags[tag]; dup {
			continue
		}
		s.tags[tag] = struct{}{}
		st := sc.tags[tag]
		if st == nil {
			st = &tagState{seq: tagseq.New()}
			sc.tags[tag] = st
			fresh = append(fresh, tag)
		} else {
			if s.policy == Block && sc.policyOfLocked(tag) != Block {
				fresh = append(fresh, tag) // lossless now: tell the publisher
				st.upgrading, st.upgradeAcked = true, false
				st.upgradeGen++
			}
			st.joining = append(slices.Clip(st.joining), s)
		}
		st.subs = append(slices.Clip(st.subs), s)
	}
	return fresh
}

// drop takes tags out of s and returns those no subscription wants any
// more.
func (sc *subConn) drop(s *Subscription, tags []uint64) (gone []uint64) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	for _, tag := range tags {
		if _, ok := s.tags[tag]; !ok {
			continue
		}
		delete(s.tags, tag)
		if sc.leaveLocked(s, tag) {
			gone = append(gone, tag)
		}
	}
	return gone
}

// remove takes s out of the connection: the tags no subscription wants any
// more, and whether it was the last subscription.
func (sc *subConn) remove(s *Subscription) (gone []uint64, last bool) {
	sc.mu.Lock()
	for tag := range s.tags {
		if sc.leaveLocked(s, tag) {
			gone = append(gone, tag)
		}
	}
	clear(s.tags)
	sc.all = without(sc.all, s)
	sc.mu.Unlock()
	subConns.mu.Lock()
	sc.mu.Lock()
	sc.subs--
	last = sc.subs == 0
	if last {
		sc.closed = true
		if e := subConns.m[sc.key]; e != nil && e.sc == sc {
			delete(subConns.m, sc.key)
		}
	}
	sc.mu.Unlock()
	subConns.mu.Unlock()
	return gone, last
}

func (sc *subConn) leaveLocked(s *Subscription, tag uint64) (gone bool) {
	st := sc.tags[tag]
	if st == nil {
		return false
	}
	subs := without(st.subs, s)
	if len(subs) == 0 {
		delete(sc.tags, tag)
		return true
	}
	st.subs = subs
	if slices.Contains(st.joining, s) {
		st.joining = without(st.joining, s)
	}
	return false
}

// without is a copy of subs without s: the dispatcher may be reading subs.
func without(subs []*Subscription, s *Subscription) []*Subscription {
	out := make([]*Subscription, 0, len(subs))
	for _, x := range subs {
		if x != s {
			out = append(out, x)
		}
	}
	return out
}

// subscriptions is every subscription of the connection now.
func (sc *subConn) subscriptions() []*Subscription {
	sc.mu.RLock()
	defer sc.mu.RUnlock()
	return sc.all
}

// policyOf is the policy the publisher applies to tag on this connection:
// Block if any subscription to it wants no loss.
func (sc *subConn) policyOf(tag uint64) Policy {
	sc.mu.RLock()
	defer sc.mu.RUnlock()
	return sc.policyOfLocked(tag)
}

func (sc *subConn) policyOfLocked(tag uint64) Policy {
	p := DropNewest
	if st := sc.tags[tag]; st != nil {
		for _, s := range st.subs {
			if s.policy == Block {
				return Block
			}
			p = s.policy
		}
	}
	return p
}

// request subscribes or unsubscribes tags at the publisher and waits for
// the acknowledgement. If the link breaks meanwhile, the dispatcher's
// reconnection subscribes everything the connection wants again, these
// tags included: request then waits for that.
func (sc *subConn) request(ctx context.Context, kind uint8, tags []uint64, policy func(uint64) Policy) error {
	if len(tags) == 0 {
		return nil
	}
	for {
		sc.mu.RLock()
		relinked := sc.relink
		sc.mu.RUnlock()
		sl := sc.cur.Load()
		err := sl.request(ctx, kind, tags, policy)
		if err == nil || ctx.Err() != nil || permanent(err) {
			return err
		}
		select {
		case <-relinked:
			if kind == wire.KindSubscribe {
				return nil // subscribed again with everything else
			}
		case <-sc.ctx.Done():
			return net.ErrClosed
		case <-sc.broken:
			return sc.brokenE
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// errLinkDown is a request cut short by the end of its link.
var errLinkDown = errors.New("netio: the connection to the publisher ended")

// errTooManyTags is a subscription the publisher refused: it would have
// taken this process's connection past the publisher's Config.MaxTags.
var errTooManyTags = fmt.Errorf("%w: the publisher's limit of tags per subscriber (Config.MaxTags) would be passed", ErrRejected)

// request sends a request over sl, grouped by policy, and waits for every
// tag's acknowledgement; with no tags, for the publisher's answer (which
// says who it is).
func (sl *subLink) request(ctx context.Context, kind uint8, tags []uint64, policy func(uint64) Policy) error {
	sc := sl.sc
	byPolicy := map[Policy][]uint64{}
	for _, tag := range tags {
		p := Block
		if policy != nil {
			p = policy(tag)
		}
		byPolicy[p] = append(byPolicy[p], tag)
	}
	if len(tags) == 0 {
		byPolicy[Block] = nil
	}
	pr := &awaitedAck{want: len(tags), targets: map[uint64]ackTarget{}, done: make(chan struct{})}
	if kind == wire.KindSubscribe {
		sc.mu.RLock()
		for _, tag := range tags {
			if st := sc.tags[tag]; st != nil {
				t := ackTarget{st: st}
				if st.upgrading && !st.upgradeAcked {
					t.gen = st.upgradeGen
				}
				pr.targets[tag] = t
			}
		}
		sc.mu.RUnlock()
	}
	id := sc.nextID.Add(1)
	l := sl.l
	defer l.eng.r.SubmitFunc(func() { delete(sl.awaited, id) })
	first := true
	for p, group := range byPolicy {
		for first || len(group) > 0 {
			n := min(len(group), wire.TagsPerRequest)
			r := wire.Request{ID: id, Policy: uint8(p), Tags: group[:n]}
			payload := r.Marshal()
			register := first
			var sendErr error
			if err := l.eng.r.Call(func() {
				if register {
					sl.awaited[id] = pr
				}
				sendErr = l.sendOwnerControl(kind, payload)
			}); err != nil {
				return errLinkDown
			}
			if sendErr != nil {
				return sendErr
			}
			first = false
			group = group[n:]
		}
	}
	select {
	case <-pr.done:
		if pr.refused {
			return errTooManyTags
		}
		return nil
	case <-l.life.Done():
		return errLinkDown
	case <-ctx.Done():
		return ctx.Err()
	}
}

// onAck records an acknowledgement for the dispatcher and the requester;
// on the reactor, before any message of its tags is handed to the
// dispatcher (the publisher sends it first).
func (sl *subLink) onAck(a wire.Ack) {
	pr := sl.awaited[a.ID]
	if pr == nil || pr.finished {
		return // a request that gave up
	}
	if a.Refused {
		pr.refused, pr.finished = true, true
		close(pr.done)
		return
	}
	note := &ackNote{incarnation: a.Incarnation, targets: make([]ackTarget, 0, len(a.Tags)), nexts: make([]uint64, 0, len(a.Tags))}
	for i, tag := range a.Tags {
		if t, ok := pr.targets[tag]; ok {
			note.targets = append(note.targets, t)
			note.nexts = append(note.nexts, a.Next[i])
		}
	}
	sl.sc.noteAck(note)
	if pr.got += len(a.Tags); pr.got >= pr.want {
		pr.finished = true
		close(pr.done)
	}
}

// noteAck hands an acknowledgement to the dispatcher. Lock-free: the
// reactor calls it.
func (sc *subConn) noteAck(n *ackNote) {
	for {
		old := sc.acks.Load()
		n.next = old
		if sc.acks.CompareAndSwap(old, n) {
			return
		}
	}
}

// reconnectBackoff is the first and the longest wait before dialling a
// publisher again.
const (
	reconnectFirst = 10 * time.Millisecond
	reconnectMax   = 500 * time.Millisecond
)

// permanent reports whether a connection error will not go away by
// dialling again: the peer is not a publisher, refuses the tags, or broke
// the protocol. A publisher at one of its limits (connections, memory)
// may have room later.
func permanent(err error) bool {
	if errors.Is(err, errAtLimit) {
		return false
	}
	return errors.Is(err, ErrRejected) || errors.Is(err, ErrProtocol) || errors.Is(err, ErrInvalidConfig)
}

// close ends the connection: the link and the dispatcher. The dispatcher
// itself (inDispatcher) only asks; it lets go of the link on its way out.
func (sc *subConn) close(inDispatcher bool) {
	sc.stopOnce.Do(func() {
		sc.cancel()
		if sl := sc.cur.Load(); sl != nil {
			sl.closed.Store(true)
			sl.l.rx.wake.Ring() // the dispatcher's read sees the close
		}
	})
	if inDispatcher {
		return
	}
	<-sc.exited
	if sl := sc.cur.Load(); sl != nil {
		sl.closeLink()
	}
}

func (sc *subConn) opError(op string, err error) error { return sc.args.opErrorAs(op, err) }

// closeLink closes sl and waits for it to let go, once.
func (sl *subLink) closeLink() {
	sl.closed.Store(true)
	l := sl.l
	if l.eng.r.SubmitFunc(l.close) == nil {
		t := time.NewTimer(sl.sc.cfg.Linger + time.Second)
		defer t.Stop()
		select {
		case <-l.life.Released():
		case <-t.C:
		}
	}
}

func (sl *subLink) sized(l *link) error {
	r := &sl.recv
	r.frames = l.cfg.framing.Reader()
	r.pos.Max = l.sizes.maxRecv
	r.spares.limit = 4 * l.rx.bufSize
	return nil
}

func (sl *subLink) up(*link)          {}
func (sl *subLink) setupFailed(*link) {}
func (sl *subLink) ended(*link)       {} // the dispatcher's read returns the error
func (sl *subLink) released(*link)    {}

func (sl *subLink) control(_ *link, kind uint8, payload []byte) error {
	switch kind {
	case wire.KindAck:
		a, err := wire.ParseAck(payload)
		if err != nil {
			return err
		}
		sl.onAck(a)
		return nil
	case wire.KindFin:
		f, err := wire.ParseFarewell(payload)
		if err != nil {
			return err
		}
		sl.bye = &f
		return nil
	}
	return fmt.Errorf("%w: unknown message kind %d", ErrProtocol, kind)
}

func (sl *subLink) opError(op string, err error) error { return sl.sc.opError(op, err) }

func (sl *subLink) stopWaiting(w *atomic.Bool) {
	if !w.Swap(false) {
		sl.l.eng.wakesInFlight.Add(-1)
	}
}
