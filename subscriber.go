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
)

// Subscription receives the messages a publisher publishes under a set of
// tags. Subscribe returns it once the publisher has acknowledged the tags:
// every message published after that reaches it (under Block), each
// carrying its tag's sequence number.
//
// A process's subscriptions to one publisher (one address and mode) share
// one connection. When that connection is lost, it is made again with
// backoff and every tag subscribed again, without C closing; what was
// missed in between shows as a jump of the sequence numbers and in Stats.
type Subscription struct {
	// C delivers the subscription's messages, each tag's in sequence
	// order. Release each when done with its bytes. C is closed by Close,
	// or by an error that a new connection cannot mend (Err says which).
	C <-chan Message

	c      chan Message
	sc     *subConn
	policy Policy
	arena  arena
	stats  subStats

	sendMu    sync.Mutex    // held by the dispatcher while it sends on c; closing c takes it
	done      chan struct{} // closed when the subscription ends: a blocked send gives up
	ending    atomic.Bool   // set just before done is closed
	closeOnce sync.Once
	err       error // why C closed; written before done is closed

	tags map[uint64]struct{} // guarded by sc.mu
}

type subStats struct {
	received, dropped, gaps, missed, reconnects, restarts atomic.Uint64
}

// SubscriptionStats are a Subscription's counters.
type SubscriptionStats struct {
	Received   uint64 // messages delivered on C
	Dropped    uint64 // messages the policy dropped because C was full
	Gaps       uint64 // jumps in a tag's sequence: messages lost on the way
	Missed     uint64 // messages those jumps skipped (known when the publisher did not restart)
	Reconnects uint64 // times the connection to the publisher was made again
	Restarts   uint64 // of those, times the publisher had restarted: its sequences began again
}

// Subscribe dials the publisher at address (or shares this process's
// connection to it), subscribes to tags and returns once the publisher has
// acknowledged them, bounded by ctx and Config.ConnectTimeout. Options:
// WithMode (LowLatency: sent at once, packed behind sends in flight;
// HighThroughput: pages),
// WithPolicy, WithSubscriptionBuffer, and the sizes of the connection.
func Subscribe(ctx context.Context, network, address string, tags []uint64, opts ...Option) (*Subscription, error) {
	a, err := parseArgs("subscribe", network, address, "127.0.0.1", opts)
	if err != nil {
		return nil, err
	}
	sc, err := joinSubConn(ctx, a)
	if err != nil {
		return nil, err
	}
	s := &Subscription{c: make(chan Message, a.cfg.SubscriptionBuffer), sc: sc, policy: a.cfg.Policy,
		done: make(chan struct{}), tags: map[uint64]struct{}{}}
	s.C = s.c
	sc.reqMu.Lock()
	fresh := sc.add(s, tags)
	err = sc.request(ctx, kindSubscribe, fresh, sc.policyOf)
	sc.reqMu.Unlock()
	if err != nil {
		s.finish(err)
		return nil, a.opError(err)
	}
	return s, nil
}

// Unsubscribe stops the delivery of tags. Messages of them already on C
// stay there.
func (s *Subscription) Unsubscribe(tags ...uint64) error {
	s.sc.reqMu.Lock()
	defer s.sc.reqMu.Unlock()
	gone := s.sc.drop(s, tags)
	ctx, cancel := context.WithTimeout(context.Background(), s.sc.cfg.ConnectTimeout)
	defer cancel()
	return s.sc.request(ctx, kindUnsubscribe, gone, nil)
}

// Close ends the subscription and closes C. When it was the last of its
// connection, the connection is closed too.
func (s *Subscription) Close() error {
	if !s.finish(net.ErrClosed) {
		return s.sc.opError("close", net.ErrClosed)
	}
	return nil
}

// finish ends the subscription for err and reports whether it was the
// first end. Any goroutine but the dispatcher.
func (s *Subscription) finish(err error) bool {
	first := false
	s.closeOnce.Do(func() {
		first = true
		s.err = err
		s.ending.Store(true)
		close(s.done)
		s.sc.reqMu.Lock()
		gone, last := s.sc.remove(s)
		s.sendMu.Lock()
		close(s.c)
		s.sendMu.Unlock()
		if !last && len(gone) > 0 {
			ctx, cancel := context.WithTimeout(context.Background(), s.sc.cfg.ConnectTimeout)
			s.sc.request(ctx, kindUnsubscribe, gone, nil)
			cancel()
		}
		s.sc.reqMu.Unlock()
		if last {
			s.sc.close()
		}
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
		Missed: st.missed.Load(), Reconnects: st.reconnects.Load(), Restarts: st.restarts.Load()}
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
// subscriptions there, and the goroutine that reads it (the dispatcher).
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
	// broken is closed when the connection failed for good (failAll), with
	// brokenErr: a request waiting for a reconnection gives up then, and
	// lets go of reqMu, which the subscriptions' ends need.
	broken     chan struct{}
	brokenErr  error
	brokenOnce sync.Once
	mu         sync.RWMutex         // tags and subs: the dispatcher reads them a batch at a time
	tags       map[uint64]*tagState // what the subscriptions want
	subs       int                  // subscriptions sharing the connection
	closed     bool

	cur      atomic.Pointer[subLink] // the link now
	upMu     sync.Mutex
	upGen    chan struct{} // closed when a reconnect has resubscribed; replaced
	ackMu    sync.Mutex    // never held across a wait: the reactor takes it
	acks     map[uint32]*awaitedAck
	nextID   uint32
	closing  chan struct{}
	exited   chan struct{} // the dispatcher returned
	ackedInc atomic.Uint64 // the incarnation of the newest ack, from the reactor
}

// tagState is one tag a connection receives.
type tagState struct {
	subs []*Subscription // replaced under subConn.mu, never changed in place
	// joining are the subs that joined while the connection already
	// received the tag (replaced under subConn.mu): a gap the dispatcher
	// finds before they settle is not theirs. A Block subscription that
	// joins a tag taken under a drop policy upgrades it (upgrading, under
	// subConn.mu): until the message the upgrade's ack names, the tag may
	// still lose messages, so the joiners get none of those and settle
	// there, and their stream has no gap. Any other joiner settles at its
	// first message.
	joining   []*Subscription
	upgrading bool
	// awaiting is a tag new to the connection, until its ack (under
	// subConn.mu): messages of it before the ack come from the tag's
	// previous subscription on this connection, whose unsubscribe is on
	// its way, maybe under a drop policy; they are nobody's.
	awaiting bool
	ackNext  atomic.Uint64 // the acknowledgement's next sequence number + 1; 0 before it
	next     uint64        // dispatcher only: the sequence number expected next
	known    bool          // dispatcher only: next is known
}

// awaitedAck is a subscribe or unsubscribe request waiting for its acks.
type awaitedAck struct {
	want, got int
	refused   bool // the publisher refused part of the request; set before done is closed
	states    map[uint64]*tagState
	done      chan struct{}
}

// subLink is a subscriber's link to a publisher.
type subLink struct {
	sc     *subConn
	l      *link
	recv   receiver
	closed atomic.Bool
	stats  connStats
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
	key := a.provider + "\x00" + a.host + "\x00" + a.port + "\x00" + a.cfg.Mode.String() + "\x00" + string(a.cfg.Key)
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

func dialSubConn(ctx context.Context, key string, a *args) (*subConn, error) {
	sc := &subConn{key: key, args: a, cfg: a.cfg, tags: map[uint64]*tagState{}, acks: map[uint32]*awaitedAck{},
		upGen: make(chan struct{}), closing: make(chan struct{}), exited: make(chan struct{}), broken: make(chan struct{})}
	sl, err := sc.dial(ctx)
	if err != nil {
		return nil, err
	}
	sc.cur.Store(sl)
	go sc.run()
	return sc, nil
}

// dial makes a new link to the publisher.
func (sc *subConn) dial(ctx context.Context) (*subLink, error) {
	cfg := &sc.cfg
	f := taggedPages(cfg.Mode == LowLatency)
	lc := linkConfig{mode: cfg.Mode, role: roleSubscriber, ctlPayload: ctlPayloadMax, framing: f,
		rxWindow: cfg.Window, rxBufSize: bufferFor(f, cfg.BufferSize), txWindow: minWindow, txBufSize: minBufferSize,
		maxMessage: cfg.MaxMessageSize, linger: cfg.Linger, key: cfg.Key, beat: beatConfigOf(cfg)}
	sl := &subLink{sc: sc}
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
// receive yet: they must be subscribed at the publisher.
func (sc *subConn) add(s *Subscription, tags []uint64) (fresh []uint64) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	for _, tag := range tags {
		if _, dup := s.tags[tag]; dup {
			continue
		}
		s.tags[tag] = struct{}{}
		st := sc.tags[tag]
		if st == nil {
			st = &tagState{awaiting: true}
			sc.tags[tag] = st
			fresh = append(fresh, tag)
		} else {
			if s.policy == Block && sc.policyOfLocked(tag) != Block {
				fresh = append(fresh, tag) // lossless now: tell the publisher
				st.ackNext.Store(0)        // its ack says from where
				st.upgrading = true
			}
			st.joining = append(append([]*Subscription(nil), st.joining...), s)
		}
		st.subs = append(append([]*Subscription(nil), st.subs...), s)
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

// settle ends the joining of st's newcomers once they are past the point
// from which their gaps count: seq is the message just dispatched.
func (sc *subConn) settle(st *tagState, seq uint64) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if st.upgrading {
		if !st.pastAck(seq) {
			return
		}
		st.upgrading = false
	}
	st.joining = nil
}

// arrived ends the awaiting of a tag new to the connection: its ack came.
func (sc *subConn) arrived(st *tagState) {
	sc.mu.Lock()
	st.awaiting = false
	sc.mu.Unlock()
}

// pastAck reports whether seq comes at or after the point the newest
// acknowledgement of the tag gave: false before the ack arrived, as the
// publisher sends it before the messages that follow it.
func (st *tagState) pastAck(seq uint64) bool {
	a := st.ackNext.Load()
	return a != 0 && seq >= a-1
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
		sc.upMu.Lock()
		gen := sc.upGen
		sc.upMu.Unlock()
		sl := sc.cur.Load()
		err := sl.request(ctx, kind, tags, policy)
		if err == nil || ctx.Err() != nil || permanent(err) {
			return err
		}
		select {
		case <-gen:
			if kind == kindSubscribe {
				return nil // resubscribed with everything else
			}
		case <-sc.closing:
			return net.ErrClosed
		case <-sc.broken:
			return sc.brokenErr
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
// tag's acknowledgement.
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
	pr := &awaitedAck{want: len(tags), states: map[uint64]*tagState{}, done: make(chan struct{})}
	sc.mu.RLock()
	for _, tag := range tags {
		if st := sc.tags[tag]; st != nil && kind == kindSubscribe {
			pr.states[tag] = st
		}
	}
	sc.mu.RUnlock()
	sc.ackMu.Lock()
	sc.nextID++
	id := sc.nextID
	sc.acks[id] = pr
	sc.ackMu.Unlock()
	defer func() {
		sc.ackMu.Lock()
		delete(sc.acks, id)
		sc.ackMu.Unlock()
	}()
	for p, group := range byPolicy {
		for len(group) > 0 {
			n := min(len(group), tagsPerRequest)
			r := request{id: id, policy: p, tags: group[:n]}
			payload := r.marshal()
			var sendErr error
			if err := sl.l.eng.r.Call(func() { sendErr = sl.l.sendOwnerControl(kind, payload) }); err != nil {
				return errLinkDown
			}
			if sendErr != nil {
				return sendErr
			}
			group = group[n:]
		}
	}
	select {
	case <-pr.done:
		if pr.refused {
			return errTooManyTags
		}
		return nil
	case <-sl.l.life.done:
		return errLinkDown
	case <-ctx.Done():
		return ctx.Err()
	}
}

// onAck records an acknowledgement; on the reactor, before any message of
// its tags is handed to the dispatcher (the publisher sends it first).
func (sc *subConn) onAck(a ack) {
	sc.ackedInc.Store(a.incarnation)
	sc.ackMu.Lock()
	defer sc.ackMu.Unlock()
	pr := sc.acks[a.id]
	if pr == nil {
		return // a request that gave up
	}
	if a.refused {
		if pr.want > 0 {
			pr.want, pr.refused = 0, true
			close(pr.done)
		}
		return
	}
	for i, tag := range a.tags {
		if st := pr.states[tag]; st != nil {
			st.ackNext.Store(a.next[i] + 1)
		}
	}
	if pr.got += len(a.tags); pr.got >= pr.want && pr.want > 0 {
		pr.want = 0
		close(pr.done)
	}
}

// dispatchBatch is how many messages the dispatcher takes per read.
const dispatchBatch = 64

// run is the dispatcher: it reads the connection's messages and hands
// copies to the subscriptions of their tags, and makes the connection
// again when it is lost.
func (sc *subConn) run() {
	defer close(sc.exited)
	var recs [dispatchBatch]record
	var states [dispatchBatch]*tagState
	var subs, joins [dispatchBatch][]*Subscription
	var ups, waits [dispatchBatch]bool
	for {
		sl := sc.cur.Load()
		n, err := sl.recv.nextRecords(recs[:])
		if err != nil {
			if !sc.reconnect(sl, err) {
				return
			}
			continue
		}
		sc.mu.RLock()
		for i := 0; i < n; i++ {
			if st := sc.tags[recs[i].tag]; st != nil {
				states[i], subs[i], joins[i], ups[i], waits[i] = st, st.subs, st.joining, st.upgrading, st.awaiting
			} else {
				states[i], subs[i], joins[i], ups[i], waits[i] = nil, nil, nil, false, false
			}
		}
		sc.mu.RUnlock()
		for i := 0; i < n; i++ {
			st := states[i]
			if st == nil {
				continue // unsubscribed, still on its way
			}
			r := &recs[i]
			if waits[i] {
				if !st.pastAck(r.seq) {
					continue // from before the tag was subscribed again
				}
				sc.arrived(st)
			}
			gap := st.observe(r.seq)
			early := ups[i] && !st.pastAck(r.seq)
			for _, s := range subs[i] {
				joining := slices.Contains(joins[i], s)
				if joining && early {
					continue // published before its Subscribe returned, maybe with gaps
				}
				if gap > 0 && !joining {
					s.stats.gaps.Add(1)
					s.stats.missed.Add(gap)
				}
				s.deliver(s.arena.message(r.b, r.tag, r.seq))
			}
			if len(joins[i]) > 0 {
				sc.settle(st, r.seq)
			}
			states[i], subs[i], joins[i] = nil, nil, nil
		}
		clear(recs[:n])
	}
}

// observe checks seq against the tag's sequence and returns how many
// messages it skipped. Dispatcher only.
func (st *tagState) observe(seq uint64) (skipped uint64) {
	if !st.known {
		st.known = true
		if a := st.ackNext.Load(); a != 0 && seq > a-1 {
			skipped = seq - (a - 1)
		}
	} else if seq > st.next {
		skipped = seq - st.next
	}
	st.next = seq + 1
	return skipped
}

// reconnectBackoff is the first and the longest wait before dialling a
// publisher again.
const (
	reconnectFirst = 10 * time.Millisecond
	reconnectMax   = 500 * time.Millisecond
)

// reconnect replaces a lost link, subscribes every tag again and accounts
// for what was missed. It returns false when the connection is over: it
// was closed, or the publisher refuses it for good (the subscriptions then
// end with that error).
func (sc *subConn) reconnect(old *subLink, cause error) bool {
	old.closeLink()
	select {
	case <-sc.closing:
		return false
	default:
	}
	if permanent(cause) {
		sc.failAll(cause)
		return false
	}
	wait := reconnectFirst
	for {
		select {
		case <-sc.closing:
			return false
		case <-time.After(wait):
		}
		wait = min(2*wait, reconnectMax)
		ctx, cancel := context.WithTimeout(context.Background(), sc.cfg.ConnectTimeout)
		go func() { // closing the connection ends a dial in progress
			select {
			case <-sc.closing:
				cancel()
			case <-ctx.Done():
			}
		}()
		sl, err := sc.dial(ctx)
		if err == nil {
			sc.cur.Store(sl)
			if err = sc.resubscribe(ctx, sl); err != nil {
				sl.closeLink()
			}
		}
		cancel()
		if err == nil {
			return true
		}
		if permanent(err) {
			sc.failAll(err)
			return false
		}
	}
}

// resubscribe subscribes everything again on a new link and reconciles the
// sequences with what the publisher says comes next.
func (sc *subConn) resubscribe(ctx context.Context, sl *subLink) error {
	sc.mu.RLock()
	tags := make([]uint64, 0, len(sc.tags))
	last := map[uint64]uint64{}
	for tag, st := range sc.tags {
		tags = append(tags, tag)
		if st.known {
			last[tag] = st.next
		}
		st.ackNext.Store(0)
	}
	sc.mu.RUnlock()
	prevInc := sc.ackedInc.Load()
	if err := sl.request(ctx, kindSubscribe, tags, sc.policyOf); err != nil {
		return err
	}
	restarted := sc.ackedInc.Load() != prevInc
	sc.mu.RLock()
	counted := map[*Subscription]bool{}
	for tag, st := range sc.tags {
		for _, s := range st.subs {
			if !counted[s] {
				counted[s] = true
				s.stats.reconnects.Add(1)
				if restarted {
					s.stats.restarts.Add(1)
				}
			}
		}
		next, seen := last[tag]
		a := st.ackNext.Load()
		if a == 0 {
			continue
		}
		if seen && !restarted && a-1 > next {
			for _, s := range st.subs {
				s.stats.gaps.Add(1)
				s.stats.missed.Add(a - 1 - next)
			}
		}
		st.known, st.next = true, a-1
	}
	sc.mu.RUnlock()
	sc.upMu.Lock()
	close(sc.upGen)
	sc.upGen = make(chan struct{})
	sc.upMu.Unlock()
	return nil
}

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

// failAll ends every subscription of the connection with err.
func (sc *subConn) failAll(err error) {
	sc.brokenOnce.Do(func() {
		sc.brokenErr = err
		close(sc.broken)
	})
	sc.mu.RLock()
	var all []*Subscription
	seen := map[*Subscription]bool{}
	for _, st := range sc.tags {
		for _, s := range st.subs {
			if !seen[s] {
				seen[s] = true
				all = append(all, s)
			}
		}
	}
	sc.mu.RUnlock()
	for _, s := range all {
		go s.finish(sc.opError("subscribe", err)) // finish may close sc, which waits for the dispatcher
	}
}

// close ends the connection: the link and the dispatcher.
func (sc *subConn) close() {
	close(sc.closing)
	if sl := sc.cur.Load(); sl != nil {
		sl.closed.Store(true)
		sl.l.rx.wake.wake() // the dispatcher's read sees the close
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
		case <-l.life.released:
		case <-t.C:
		}
	}
}

func (sl *subLink) sized(l *link) error {
	r := &sl.recv
	r.frames = l.cfg.framing.reader()
	r.pos.max = l.sizes.maxRecv
	r.spares.limit = 4 * l.rx.bufSize
	return nil
}

func (sl *subLink) up(*link)          {}
func (sl *subLink) setupFailed(*link) {}
func (sl *subLink) ended(*link)       {} // the dispatcher's read returns the error
func (sl *subLink) released(*link)    {}

func (sl *subLink) control(_ *link, kind uint8, payload []byte) error {
	if kind != kindAck {
		return fmt.Errorf("%w: unknown message kind %d", ErrProtocol, kind)
	}
	a, err := parseAck(payload)
	if err != nil {
		return err
	}
	sl.sc.onAck(a)
	return nil
}

func (sl *subLink) opError(op string, err error) error { return sl.sc.opError(op, err) }

func (sl *subLink) stopWaiting(w *atomic.Bool) {
	if !w.Swap(false) {
		sl.l.eng.wakesInFlight.Add(-1)
	}
}
