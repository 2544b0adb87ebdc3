package netio

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/netio-go/netio/ofi"
	"github.com/netio-go/netio/reactor"
)

// Publisher sends messages by tag to every subscriber of the tag. Subscribers
// dial it (Subscribe) and name their tags in-band; it needs no connection
// to them of its own, so they may sit behind a firewall.
//
// Each subscriber's connection is a link of its own, in the mode the
// subscriber chose: HighThroughput links carry pages of tagged records that
// go out when full or flushed, LowLatency links one send per message. Every
// message carries a sequence number per tag, counted by the publisher, so a
// subscriber sees any loss as a gap.
//
// Memory: per HighThroughput subscriber, Config.Window send pages of
// Config.BufferSize (8 × 1 MiB with the defaults), per LowLatency one 16 ×
// 256 KiB; in either case 4 receive buffers of 4 KiB for the subscriber's
// requests, and 4 control buffers of 4 KiB.
type Publisher struct {
	ac          *acceptor
	eng         *engine
	raw         Config // the options as given: each link takes its mode's defaults
	cfg         Config
	incarnation uint64

	pubMu   sync.Mutex   // serialises Publish: a tag's messages reach each subscriber in sequence order
	tableMu sync.RWMutex // Publish reads the table; the reactor changes it with TryLock, never waiting
	tags    map[uint64]*tagEntry

	links     atomic.Pointer[[]*pubLink] // connected subscribers; replaced by the reactor
	closed    atomic.Bool
	closeOnce sync.Once
	stats     pubStats

	// Reactor only.
	work        []*pubLink // links whose requests or retirement wait for a lock
	tick        *reactor.Timer
	ticking     bool
	stopTicking bool // closed: the timer goes once the work is done
}

// tagEntry is one tag of the table.
type tagEntry struct {
	next uint64   // sequence number of the tag's next message
	subs []tagSub // replaced, never changed in place: Publish walks a snapshot
}

type tagSub struct {
	pl     *pubLink
	policy Policy
}

// pubStats are the publisher's own counters.
type pubStats struct {
	published     atomic.Uint64
	unsubscribed  atomic.Uint64
	deliveredGone atomic.Uint64 // Delivered of the subscribers that left
	dropped       atomic.Uint64
	tagsRefused   atomic.Uint64
	subscribers   atomic.Int64
	timedOut      atomic.Uint64
}

// PublisherStats are a Publisher's counters since it started.
type PublisherStats struct {
	Published    uint64 // Publish calls to a tag with subscribers
	Unsubscribed uint64 // Publish calls to a tag without any: a lookup, nothing sent
	Delivered    uint64 // messages handed to subscribers' links, summed over subscribers
	Dropped      uint64 // messages a subscriber under a drop policy did not get: its link was full
	Subscribers  int    // subscriber connections now
	TimedOut     uint64 // subscribers dropped because they went silent (ErrPeerTimeout)
	Tags         int    // tags with at least one subscriber now
	// TagsRefused counts subscribe requests refused because they would
	// have taken a subscriber past Config.MaxTags.
	TagsRefused uint64
	// Listener counts the subscribers' connection set-up: accepted,
	// rejected at the handshake and why, failed.
	Listener ListenerStats
}

// tickEvery is how soon the reactor tries again a table change or a
// retirement that found a lock taken.
const tickEvery = 200 * time.Microsecond

// ListenPublisher listens for subscribers on address (host:port; port 0
// picks a free one) over the provider named by network. Subscribers choose
// their mode; the options size every subscriber's link.
func ListenPublisher(network, address string, opts ...Option) (*Publisher, error) {
	var raw Config
	for _, o := range opts {
		if err := o(&raw); err != nil {
			break // listen reports it
		}
	}
	// Subscribers choose their mode, and each mode has its own defaults:
	// the links of either must fit MaxConnMemory.
	opts = append(opts[:len(opts):len(opts)], func(c *Config) error {
		for _, m := range []Mode{LowLatency, HighThroughput} {
			x := *c
			x.Mode = m
			x.setDefaults()
			if err := checkConnMemory(x.BufferSize, x.Window); err != nil {
				return fmt.Errorf("%w (for a %v subscriber)", err, m)
			}
		}
		return nil
	})
	var p *Publisher
	_, _, err := listen("listen", network, address, opts, roleSubscriber, func(ac *acceptor, cfg Config) acceptorOwner {
		ac.anyMode = true
		p = &Publisher{ac: ac, eng: ac.eng, raw: raw, cfg: cfg, tags: map[uint64]*tagEntry{}}
		return p
	})
	if err != nil {
		return nil, err
	}
	var b [8]byte
	rand.Read(b[:])
	p.incarnation = binary.LittleEndian.Uint64(b[:])
	p.links.Store(&[]*pubLink{})
	if err := p.eng.r.Call(func() { p.tick, err = p.eng.r.NewTimer(p.onTick) }); err == nil && p.tick != nil {
		return p, nil
	}
	p.Close()
	return nil, p.opError("listen", errors.Join(err, net.ErrClosed))
}

// linkConfig is how a link to a subscriber in mode m is sized: sends as the
// options say for m, receives just the subscriber's small requests.
func (p *Publisher) linkConfig(m Mode) linkConfig {
	c := p.raw
	c.Mode = m
	c.setDefaults()
	f := publishing{taggedPages(m == LowLatency)}
	return linkConfig{mode: m, role: rolePublisher, ctlPayload: ctlPayloadMax, framing: f,
		rxWindow: minWindow, rxBufSize: minBufferSize, txWindow: c.Window, txBufSize: bufferFor(f, c.BufferSize),
		maxMessage: c.MaxMessageSize, linger: c.Linger, key: p.cfg.Key, beat: beatConfigOf(&c)}
}

// publishing is the framing of a link to a subscriber: tagged pages go
// out, and nothing comes in but the subscriber's requests, which are the
// link's control messages. Data from a subscriber would go to a reader
// that does not exist, its buffers never posted again: it breaks the
// protocol instead.
type publishing struct{ pages }

func (publishing) checker(uint64) frameCheck { return refuseData{} }

// refuseData is the frame check of a link that takes no data.
type refuseData struct{}

func (refuseData) check(h header) error {
	return fmt.Errorf("%w: a subscriber sent data (kind %d); a publisher takes only requests", ErrProtocol, h.kind)
}

// admit accepts a subscriber whose buffers the process can afford; on the
// reactor.
func (p *Publisher) admit(req *ofi.Info, h hello) []byte {
	lc := p.linkConfig(h.mode)
	if !p.ac.affords(&lc, h) {
		return rejectLimitData
	}
	p.ac.accept(req, h, func(eng *engine) (*link, error) {
		pl := &pubLink{p: p, tags: map[uint64]Policy{}}
		l, err := newLink(eng, pl, &pl.stats, lc, p.ac.network)
		if err != nil {
			return nil, err
		}
		pl.l = l
		pl.send = sender{half: half{side: pl, closed: &pl.closed, stats: &pl.stats, l: l}, q: &l.tx, gate: newSendGate()}
		return l, nil
	})
	return nil
}

// Publish sends msg to every subscriber of tag, as the next message of the
// tag's sequence. For a tag without subscribers it costs a lookup and
// sends nothing. A subscriber under Block that has fallen behind makes
// Publish wait, bounded by ctx; one under a drop policy never does (what
// its link cannot take is dropped and counted). The error is the first of
// ctx's, ErrMessageTooLarge, or net.ErrClosed after Close; a subscriber
// that went away is not an error.
func (p *Publisher) Publish(ctx context.Context, tag uint64, msg []byte) error {
	if p.closed.Load() {
		return p.opError("publish", net.ErrClosed)
	}
	p.pubMu.Lock()
	p.tableMu.RLock()
	e := p.tags[tag]
	if e == nil {
		p.tableMu.RUnlock()
		p.pubMu.Unlock()
		p.stats.unsubscribed.Add(1)
		return nil
	}
	seq := e.next
	e.next++ // only Publish writes it, under pubMu; the reactor reads it under tableMu
	subs := e.subs
	p.tableMu.RUnlock()
	p.stats.published.Add(1)
	var first error
	for _, s := range subs {
		if err := s.pl.publish(ctx, tag, seq, msg, s.policy); err != nil && first == nil {
			first = err
		}
	}
	p.pubMu.Unlock()
	return first
}

// Flush sends every subscriber's open page now (HighThroughput
// subscribers), without waiting for it to fill.
func (p *Publisher) Flush() error {
	if p.closed.Load() {
		return p.opError("flush", net.ErrClosed)
	}
	for _, pl := range *p.links.Load() {
		pl.send.flush() // a subscriber that went away is not an error
	}
	return nil
}

// Stats returns the publisher's counters. Any goroutine, also after Close.
func (p *Publisher) Stats() PublisherStats {
	s := PublisherStats{
		Published:    p.stats.published.Load(),
		Unsubscribed: p.stats.unsubscribed.Load(),
		Dropped:      p.stats.dropped.Load(),
		Subscribers:  int(p.stats.subscribers.Load()),
		TimedOut:     p.stats.timedOut.Load(),
		Delivered:    p.stats.deliveredGone.Load(),
		TagsRefused:  p.stats.tagsRefused.Load(),
		Listener:     p.ac.stats.snapshot(),
	}
	for _, pl := range *p.links.Load() {
		s.Delivered += pl.send.delivered()
	}
	p.tableMu.RLock()
	s.Tags = len(p.tags)
	p.tableMu.RUnlock()
	return s
}

// Addr returns the address subscribers dial.
func (p *Publisher) Addr() net.Addr { return &p.ac.addr }

// Close stops listening and closes every subscriber's link, sending what
// was published first (bounded by Config.Linger, once for all of them).
// Subscribers see the end and try to reconnect.
func (p *Publisher) Close() error {
	first := false
	p.closeOnce.Do(func() { first = true; p.closed.Store(true) })
	if !first {
		return p.opError("close", net.ErrClosed)
	}
	links := *p.links.Load()
	// A Publish waiting for a slow subscriber holds that link's send gate:
	// the closed flag and a wake make it give up first.
	for _, pl := range links {
		pl.closed.Store(true)
		pl.l.tx.wake.wake()
	}
	var waits []<-chan struct{}
	for _, pl := range links {
		pl.send.sealForClose()
		waits = append(waits, pl.l.life.released)
	}
	p.eng.r.Call(func() {
		p.ac.close()
		for _, pl := range links {
			p.retire(pl)
		}
	})
	awaitReleased(waits, p.cfg.Linger)
	p.eng.r.Call(func() {
		p.stopTicking = true
		p.process() // closes the timer once no retirement waits any more
	})
	p.eng.release()
	return nil
}

func (p *Publisher) opError(op string, err error) error {
	return &net.OpError{Op: op, Net: p.ac.network, Addr: &p.ac.addr, Err: err}
}

// retire takes pl out of the table and closes it; on the reactor.
func (p *Publisher) retire(pl *pubLink) {
	pl.retiring = true
	p.schedule(pl)
}

// schedule queues pl's waiting work and tries it now.
func (p *Publisher) schedule(pl *pubLink) {
	if !pl.queued {
		pl.queued = true
		p.work = append(p.work, pl)
	}
	p.process()
}

func (p *Publisher) onTick() {
	p.ticking = false
	if p.tick != nil {
		p.process()
	}
}

// process applies the requests and retirements that wait, as far as the
// locks allow without waiting; what is left is tried again on the next
// tick.
func (p *Publisher) process() {
	kept := p.work[:0]
	for _, pl := range p.work {
		if !pl.progress() {
			kept = append(kept, pl)
			continue
		}
		pl.queued = false
	}
	clear(p.work[len(kept):])
	p.work = kept
	switch {
	case p.tick == nil:
	case len(p.work) > 0 && !p.ticking:
		p.ticking = true
		p.tick.StartOnce(tickEvery)
	case len(p.work) == 0 && p.stopTicking:
		p.tick.Close()
		p.tick = nil
	}
}

// setLinks replaces the list of connected subscribers; on the reactor.
func (p *Publisher) setLinks(add, remove *pubLink) {
	old := *p.links.Load()
	next := make([]*pubLink, 0, len(old)+1)
	for _, pl := range old {
		if pl != remove {
			next = append(next, pl)
		}
	}
	if add != nil {
		next = append(next, add)
	}
	p.links.Store(&next)
	p.stats.subscribers.Store(int64(len(next)))
}

// pubLink is the publisher's link to one subscriber.
type pubLink struct {
	p      *Publisher
	l      *link
	send   sender
	frames *pageWriter // send.frames: takes each record's tag and sequence number
	closed atomic.Bool // retired: Publish skips it
	stats  connStats

	// Reactor only.
	tags     map[uint64]Policy // what the subscriber has in the table
	pending  []pendingRequest  // requests waiting for the table lock
	retiring bool
	letGo    bool // out of the gate's reach and closed
	queued   bool // in p.work
}

type pendingRequest struct {
	kind uint8
	req  request
}

// maxPendingRequests bounds the requests a subscriber may have waiting.
const maxPendingRequests = 64

func (pl *pubLink) sized(l *link) error {
	s := &pl.send
	s.frames = l.cfg.framing.writer(l.tx.bufSize - headerSize)
	pl.frames = s.frames.(*pageWriter)
	s.maxSend = l.sizes.maxSend
	s.appendMax = s.maxSend
	if s.pack = s.frames.packs(); s.pack {
		l.packed = s
	}
	if s.lazy = s.frames.lazy(); s.lazy {
		var err error
		if s.watch, err = newPageWatch(s, l, &pl.p.cfg); err != nil {
			return err
		}
	}
	return nil
}

func (pl *pubLink) up(l *link) {
	pl.p.ac.setUp(l)
	pl.p.setLinks(pl, nil)
	if pl.p.closed.Load() {
		pl.p.retire(pl) // came up while the publisher closed
	}
}

func (pl *pubLink) setupFailed(l *link) {
	pl.p.ac.setupFailed(l)
	l.finishClose()
}

// ended is the subscriber gone: out of the table, and closed.
func (pl *pubLink) ended(l *link) {
	if errors.Is(l.life.err, ErrPeerTimeout) {
		pl.p.stats.timedOut.Add(1)
	}
	pl.p.retire(pl)
}

func (pl *pubLink) control(_ *link, kind uint8, payload []byte) error {
	if kind != kindSubscribe && kind != kindUnsubscribe {
		return fmt.Errorf("%w: unknown message kind %d", ErrProtocol, kind)
	}
	req, err := parseRequest(payload)
	if err != nil {
		return err
	}
	if len(pl.pending) >= maxPendingRequests {
		return fmt.Errorf("%w: more than %d subscription requests waiting", ErrProtocol, maxPendingRequests)
	}
	pl.pending = append(pl.pending, pendingRequest{kind: kind, req: req})
	pl.p.schedule(pl)
	return nil
}

func (pl *pubLink) released(*link) {
	if pl.send.watch != nil {
		pl.send.watch.close()
	}
	pl.p.ac.released()
}

// progress does what pl waits for as far as it can without waiting, and
// reports whether it is all done. On the reactor.
func (pl *pubLink) progress() bool {
	p := pl.p
	if len(pl.pending) > 0 || pl.retiring && len(pl.tags) > 0 {
		if !p.tableMu.TryLock() {
			return false
		}
		var acks []ack
		if !pl.retiring {
			for _, r := range pl.pending {
				acks = append(acks, pl.apply(r))
			}
		}
		if pl.retiring {
			for tag := range pl.tags {
				pl.leave(tag)
			}
		}
		p.tableMu.Unlock()
		clear(pl.pending)
		pl.pending = pl.pending[:0]
		for i := range acks {
			pl.sendAck(&acks[i])
		}
	}
	if !pl.retiring {
		return true
	}
	// Nobody may be inside the send side when the link lets go of its
	// memory: the reactor's CAS on the gate, then the closed flag every
	// writer checks inside it.
	if !pl.letGo {
		if !pl.send.gate.tryReactor() {
			return false
		}
		pl.closed.Store(true)
		pl.send.gate.unlock()
		pl.letGo = true
		// Counted before it leaves the list, so that Delivered never goes
		// down (a Stats between the two may count it twice for a moment).
		p.stats.deliveredGone.Add(pl.send.delivered())
		p.setLinks(nil, pl)
		pl.l.close()
	}
	return true
}

// apply puts a request into the table; under tableMu. A subscription that
// would take the subscriber past MaxTags is refused whole.
func (pl *pubLink) apply(r pendingRequest) ack {
	if r.kind == kindSubscribe && pl.newTags(r.req.tags) > pl.p.cfg.MaxTags-len(pl.tags) {
		pl.p.stats.tagsRefused.Add(1)
		return ack{id: r.req.id, refused: true, incarnation: pl.p.incarnation}
	}
	a := ack{id: r.req.id, incarnation: pl.p.incarnation, tags: r.req.tags, next: make([]uint64, len(r.req.tags))}
	for i, tag := range r.req.tags {
		if r.kind == kindSubscribe {
			a.next[i] = pl.join(tag, r.req.policy)
		} else {
			pl.leave(tag)
		}
	}
	return a
}

// newTags counts the tags the subscriber does not hold yet (a tag named
// twice, which netio's subscribers never do, twice).
func (pl *pubLink) newTags(tags []uint64) int {
	n := 0
	for _, tag := range tags {
		if _, ok := pl.tags[tag]; !ok {
			n++
		}
	}
	return n
}

// join adds pl to tag's subscribers and returns the tag's next sequence
// number; under tableMu.
func (pl *pubLink) join(tag uint64, policy Policy) uint64 {
	p := pl.p
	e := p.tags[tag]
	if e == nil {
		e = &tagEntry{}
		p.tags[tag] = e
	}
	subs := make([]tagSub, 0, len(e.subs)+1)
	for _, s := range e.subs {
		if s.pl != pl {
			subs = append(subs, s)
		}
	}
	e.subs = append(subs, tagSub{pl: pl, policy: policy})
	pl.tags[tag] = policy
	return e.next
}

// leave takes pl out of tag's subscribers; under tableMu.
func (pl *pubLink) leave(tag uint64) {
	p := pl.p
	delete(pl.tags, tag)
	e := p.tags[tag]
	if e == nil {
		return
	}
	subs := make([]tagSub, 0, len(e.subs))
	for _, s := range e.subs {
		if s.pl != pl {
			subs = append(subs, s)
		}
	}
	if len(subs) == 0 {
		delete(p.tags, tag) // nobody saw its sequence: it may start again
		return
	}
	e.subs = subs
}

// sendAck answers a request, in as many messages as its tags need.
func (pl *pubLink) sendAck(a *ack) {
	for first := true; first || len(a.tags) > 0; first = false {
		n := min(len(a.tags), tagsPerAck)
		part := ack{id: a.id, refused: a.refused, incarnation: a.incarnation, tags: a.tags[:n], next: a.next[:n]}
		if err := pl.l.sendOwnerControl(kindAck, part.marshal()); err != nil {
			return
		}
		a.tags, a.next = a.tags[n:], a.next[n:]
	}
}

// publish writes one tagged message to the subscriber.
func (pl *pubLink) publish(ctx context.Context, tag, seq uint64, msg []byte, policy Policy) error {
	s := &pl.send
	s.gate.lock()
	pl.frames.setRecord(tag, seq)
	if s.open && s.unhindered(len(msg)) && s.frames.appendWhole(msg) {
		s.msgs++
		s.bytes += uint64(len(msg))
		s.unlock()
		return nil
	}
	if pl.closed.Load() {
		s.unlock()
		return nil
	}
	_, err := s.writeLocked(ctx, msg, policy != Block)
	s.unlock()
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrWouldBlock):
		pl.p.stats.dropped.Add(1)
		return nil
	case errors.Is(err, ErrMessageTooLarge), ctx.Err() != nil:
		return err
	}
	return nil // the subscriber went away
}

func (pl *pubLink) opError(op string, err error) error {
	return pl.p.opError("publish", err)
}

func (pl *pubLink) stopWaiting(w *atomic.Bool) {
	if !w.Swap(false) {
		pl.p.eng.wakesInFlight.Add(-1)
	}
}
