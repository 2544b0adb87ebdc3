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

	"github.com/netio-go/netio/internal/sendgate"
	"github.com/netio-go/netio/internal/turn"
	"github.com/netio-go/netio/internal/wire"
)

// Publisher sends messages by tag to every subscriber of the tag. Subscribers
// dial it (Subscribe) and name their tags in-band; it needs no connection
// to them of its own, so they may sit behind a firewall.
//
// Each subscriber's connection is a link of its own, in the mode the
// subscriber chose: HighThroughput links carry pages of tagged records that
// go out when full or flushed; LowLatency links send a message at once, or
// pack it with those queued behind the send in flight, as a Conn does. Every
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

	// The tag table. Publish looks a tag up under the read lock, then
	// takes the tag's turn; the subscribers' workers (pubtable.go) add and
	// delete entries under the write lock. The reactor never touches it.
	tableMu sync.RWMutex
	tags    map[uint64]*tagEntry

	links   atomic.Pointer[[]*pubLink] // connected subscribers; replaced by the reactor
	state   atomic.Int32               // pubOpen, pubShutting, pubClosed
	hard    context.Context            // cancelled by a Close during Shutdown: it stops waiting
	stop    context.CancelFunc         // cancels hard
	ended   chan struct{}              // closed when Close or Shutdown is over
	workers workerCount
	events  *eventQueue
	stats   pubStats
}

const (
	pubOpen     = iota
	pubShutting // Shutdown runs: no new Publish
	pubClosed
)

// tagEntry is one tag of the table.
type tagEntry struct {
	turn turn.Turn
	// Under turn: the sequence number of the tag's next message, the
	// subscribers (replaced, never changed in place), and whether the
	// entry left the table (a Publish that found it looks again).
	next uint64
	subs []tagSub
	dead bool
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
	cutSlow       atomic.Uint64
	undelivered   atomic.Uint64
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
	// CutSlow counts Block subscribers cut loose because their window
	// stayed full longer than Config.SlowSubscriberLimit
	// (ErrSlowSubscriber).
	CutSlow uint64
	// Undelivered counts messages that did not reach a subscriber they
	// were published to, summed over subscribers: those a Publish gave
	// up on when its context ended (a Block subscriber that had fallen
	// behind), and those still unsent when a subscriber was cut loose or
	// the publisher closed. Each shows as missed at its subscriber.
	Undelivered uint64
	// EventsDropped counts events Events could not hold.
	EventsDropped uint64
	// Listener counts the subscribers' connection set-up: accepted,
	// rejected at the handshake and why, failed.
	Listener ListenerStats
}

// ErrUndelivered is matched by the error of a Publish whose context ended
// before every live subscriber of the tag had the message, and by that of
// a Shutdown that ended before every subscriber had what was published.
// The error is an *UndeliveredError, which says how many.
var ErrUndelivered = errors.New("netio: not every subscriber got every message")

// UndeliveredError is what Publish and Shutdown report when their
// context ended before every subscriber had every message: Messages did
// not reach Subscribers subscribers (a Publish: one message each).
// Each subscriber counts what it missed in its Stats and events. It
// matches ErrUndelivered and the context's error.
type UndeliveredError struct {
	Messages    uint64
	Subscribers int
	Err         error // why the wait ended: the context's error
}

func (e *UndeliveredError) Error() string {
	return fmt.Sprintf("%v: %d message(s) did not reach %d subscriber(s): %v", ErrUndelivered, e.Messages, e.Subscribers, e.Err)
}

func (e *UndeliveredError) Unwrap() []error { return []error{ErrUndelivered, e.Err} }

// ListenPublisher listens for subscribers on address (host:port; port 0
// picks a free one) over the provider named by network. On a
// reliable-datagram provider Addr prints the provider's own address, which
// subscribers dial, and shm takes no address (""). Subscribers choose
// their mode; the options size every subscriber's link. Only subscribers
// that hold the publisher's key are admitted: by default the key in the
// per-user key file (Config.KeyFile), unless WithInsecure.
func ListenPublisher(network, address string, opts ...Option) (*Publisher, error) {
	var raw Config
	for _, o := range opts {
		if o == nil {
			break // listen reports it
		}
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
	_, _, err := listen("listen", network, address, opts, wire.RoleSubscriber, func(ac *acceptor, cfg Config) acceptorOwner {
		ac.anyMode = true
		p = &Publisher{ac: ac, eng: ac.eng, raw: raw, cfg: cfg, tags: map[uint64]*tagEntry{},
			ended: make(chan struct{}), workers: newWorkerCount(), events: newEventQueue(cfg.EventBuffer)}
		// Complete before the acceptor starts: a subscriber may be admitted
		// before listen returns.
		p.hard, p.stop = context.WithCancel(context.Background())
		var b [8]byte
		rand.Read(b[:])
		p.incarnation = binary.LittleEndian.Uint64(b[:])
		p.links.Store(&[]*pubLink{})
		return p
	})
	if err != nil {
		return nil, err
	}
	tracked.publishers.add(p)
	return p, nil
}

// linkConfig is how a link to a subscriber in mode m is sized: sends as the
// options say for m, receives just the subscriber's small requests.
func (p *Publisher) linkConfig(m Mode) linkConfig {
	c := p.raw
	c.Mode = m
	c.setDefaults()
	c.Key = p.cfg.Key
	return newLinkConfig(wire.RolePublisher, &c)
}

// admit accepts a subscriber whose buffers the process can afford; on the
// reactor.
func (p *Publisher) admit(req *peerRequest, h wire.Hello) []byte {
	lc := p.linkConfig(Mode(h.Mode))
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
		pl.send = sender{half: half{side: pl, closed: &pl.closed, stats: &pl.stats, l: l}, q: &l.tx, gate: sendgate.New()}
		return l, nil
	})
	return nil
}

// Publish sends msg to every subscriber of tag, as the next message of the
// tag's sequence. For a tag without subscribers it costs a lookup and
// sends nothing.
//
// A subscriber under Block that has fallen behind makes Publish wait for
// it, bounded by ctx and by Config.SlowSubscriberLimit, after which the
// publisher cuts it loose; the other subscribers of the tag get the
// message first, and nothing waits for a subscriber of another tag. One
// under a drop policy never makes it wait: what its link cannot take is
// dropped and counted.
//
// The result is nil when every subscriber of the tag still connected has
// the message, or dropped it under its policy. When ctx ends first, the
// error is an *UndeliveredError (errors.Is ErrUndelivered, and ctx's
// error) saying how many subscribers missed it; each of them sees the gap.
// A ctx that has already ended sends nothing and returns its error.
// Otherwise the error is ErrMessageTooLarge for a message above a
// subscriber's limit, or net.ErrClosed after Close or Shutdown; a
// subscriber that went away is not an error. Publish may be called from
// several goroutines at once: each tag's messages are numbered and
// delivered in the order their Publish calls took their turn.
func (p *Publisher) Publish(ctx context.Context, tag uint64, msg []byte) error {
	if p.state.Load() != pubOpen {
		return p.opError("publish", net.ErrClosed)
	}
	done := ctx.Done()
	if done != nil {
		select {
		case <-done:
			return p.opError("publish", ctx.Err())
		default:
		}
	}
	for {
		p.tableMu.RLock()
		e := p.tags[tag]
		p.tableMu.RUnlock()
		if e == nil {
			p.stats.unsubscribed.Add(1)
			return nil
		}
		if !e.turn.Lock(done) {
			return p.opError("publish", ctx.Err()) // nothing numbered, nothing sent
		}
		if e.dead {
			e.turn.Unlock()
			continue
		}
		if p.state.Load() != pubOpen {
			e.turn.Unlock()
			return p.opError("publish", net.ErrClosed)
		}
		seq := e.next
		e.next++
		err := p.deliver(ctx, tag, seq, msg, e.subs)
		e.turn.Unlock()
		return err
	}
}

// deliver hands message seq of tag to subs: first to every subscriber
// that takes it without waiting, then to those that make it wait, side by
// side (waitLater). Under the tag's turn.
func (p *Publisher) deliver(ctx context.Context, tag, seq uint64, msg []byte, subs []tagSub) error {
	p.stats.published.Add(1)
	var laterBuf [8]int
	later := laterBuf[:0]
	var missed uint64
	tooLarge := false
	for i := range subs {
		switch subs[i].pl.offer(tag, seq, msg, subs[i].policy) {
		case offerLater:
			later = append(later, i)
		case offerTooLarge:
			tooLarge = true
		case offerStranded:
			missed++
		}
	}
	missed += waitLater(ctx, tag, seq, msg, subs, later)
	if tooLarge {
		return p.opError("publish", ErrMessageTooLarge)
	}
	if missed > 0 {
		p.stats.undelivered.Add(missed)
		err := ctx.Err()
		if err == nil {
			err = net.ErrClosed // Shutdown or Close stopped it
		}
		return p.opError("publish", &UndeliveredError{Messages: missed, Subscribers: int(missed), Err: err})
	}
	return nil
}

// waitLater hands message seq to the subscribers of later, which could
// not take it at once, and returns how many missed it. Each waits on its
// own: one after the other, a subscriber that never reads would hold back
// the copy of one whose window was full only for a moment, for good under
// Block without a slow-subscriber limit. Under the tag's turn.
func waitLater(ctx context.Context, tag, seq uint64, msg []byte, subs []tagSub, later []int) uint64 {
	first := func() uint64 {
		if i := later[0]; !subs[i].pl.publishWaiting(ctx, tag, seq, msg, subs[i].policy) {
			return 1
		}
		return 0
	}
	switch len(later) {
	case 0:
		return 0
	case 1:
		return first() // nothing to allocate for the common slow case
	}
	var wg sync.WaitGroup
	var missed atomic.Uint64
	for _, i := range later[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !subs[i].pl.publishWaiting(ctx, tag, seq, msg, subs[i].policy) {
				missed.Add(1)
			}
		}()
	}
	missed.Add(first())
	wg.Wait()
	return missed.Load()
}

// Flush sends every subscriber's open page now (HighThroughput
// subscribers), without waiting for it to fill. It never waits for a
// subscriber: a page a Publish is writing into goes as that Publish
// returns.
func (p *Publisher) Flush() error {
	if p.state.Load() != pubOpen {
		return p.opError("flush", net.ErrClosed)
	}
	for _, pl := range *p.links.Load() {
		pl.flush() // a subscriber that went away is not an error
	}
	return nil
}

// Stats returns the publisher's counters. Any goroutine, also after Close.
func (p *Publisher) Stats() PublisherStats {
	s := PublisherStats{
		Published:     p.stats.published.Load(),
		Unsubscribed:  p.stats.unsubscribed.Load(),
		Dropped:       p.stats.dropped.Load(),
		Subscribers:   int(p.stats.subscribers.Load()),
		TimedOut:      p.stats.timedOut.Load(),
		Delivered:     p.stats.deliveredGone.Load(),
		TagsRefused:   p.stats.tagsRefused.Load(),
		CutSlow:       p.stats.cutSlow.Load(),
		Undelivered:   p.stats.undelivered.Load(),
		EventsDropped: p.events.dropped.Load(),
		Listener:      p.ac.stats.snapshot(),
	}
	for _, pl := range *p.links.Load() {
		s.Delivered += pl.send.delivered()
	}
	p.tableMu.RLock()
	s.Tags = len(p.tags)
	p.tableMu.RUnlock()
	return s
}

// Events returns the channel that reports subscribers joining and
// leaving (EventSubscriberJoined, EventSubscriberLeft, whose Err says
// why: ErrSlowSubscriber for one cut loose). It holds Config.EventBuffer
// events; what finds it full is dropped and counted in
// Stats().EventsDropped, never waited for. It is closed once Close or
// Shutdown is over.
func (p *Publisher) Events() <-chan Event { return p.events.c }

// Addr returns the address subscribers dial.
func (p *Publisher) Addr() net.Addr { return &p.ac.addr }

// Shutdown stops the publisher gracefully: it takes no new subscribers and
// no new Publish (they fail with net.ErrClosed), lets the Publish calls in
// progress finish, sends every subscriber what was published, and waits
// until each has it, bounded by ctx. Then it closes every subscriber's
// connection, telling each where every tag's sequence ended, so that a
// subscriber that did not get everything counts what it missed.
//
// It returns nil when every subscriber got everything. When ctx ends
// first, it stops waiting, and the error is an *UndeliveredError (errors.Is
// ErrUndelivered) saying how many messages did not reach how many
// subscribers. A Close while Shutdown waits makes it stop waiting the same
// way. After Close or another Shutdown it returns net.ErrClosed.
func (p *Publisher) Shutdown(ctx context.Context) error {
	if !p.state.CompareAndSwap(pubOpen, pubShutting) {
		return p.opError("shutdown", net.ErrClosed)
	}
	defer close(p.ended)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopHard := context.AfterFunc(p.hard, cancel)
	defer stopHard()
	p.eng.r.Call(p.ac.close)
	links := *p.links.Load()
	// Publish calls in progress end first (each holds its tag's turn).
	finals := p.collectFinals(ctx.Done(), links)
	for _, pl := range links {
		if !pl.drain(ctx) {
			p.stopWriters(links)
		}
	}
	var lost uint64
	var losers int
	var waits []<-chan struct{}
	p.eng.r.Call(func() {
		for _, pl := range links {
			// A subscriber that left counts what it missed when it
			// comes back; the others are told now.
			n := pl.unposted()
			p.stats.undelivered.Add(n) // the stranded ones were counted by their Publish
			if n += pl.stranded.Load(); n > 0 && !pl.l.life.Ended() {
				lost += n
				losers++
			}
			pl.counted = true
			pl.sayGoodbye(finals[pl], true)
			waits = append(waits, pl.l.life.Released())
		}
	})
	p.finish(waits)
	if lost > 0 {
		return p.opError("shutdown", &UndeliveredError{Messages: lost, Subscribers: losers, Err: ctx.Err()})
	}
	return nil
}

// Close stops listening and closes every subscriber's connection at once,
// sending what was already published for up to Config.Linger; a Publish
// waiting for a subscriber returns net.ErrClosed. Each subscriber is told
// where every tag's sequence ended, so that what it did not get counts as
// missed there (and in Stats().Undelivered here). Shutdown is the graceful
// end that waits for the subscribers. Subscribers see the end and try to
// reconnect.
func (p *Publisher) Close() error {
	if p.state.CompareAndSwap(pubOpen, pubClosed) {
		p.closeHard()
		close(p.ended)
		return nil
	}
	if p.state.CompareAndSwap(pubShutting, pubClosed) {
		p.stop()
		<-p.ended
		return nil
	}
	return p.opError("close", net.ErrClosed)
}

func (p *Publisher) closeHard() {
	links := *p.links.Load()
	p.stopWriters(links)
	for _, pl := range links {
		pl.send.sealForClose()
	}
	finals := p.collectFinals(nil, links)
	var waits []<-chan struct{}
	p.eng.r.Call(func() {
		p.ac.close()
		for _, pl := range links {
			pl.sayGoodbye(finals[pl], false)
			waits = append(waits, pl.l.life.Released())
		}
	})
	p.finish(waits)
}

// finish waits for the subscribers' links to go, stops the workers and
// lets go of the engine.
func (p *Publisher) finish(waits []<-chan struct{}) {
	<-p.ac.done // the port is free, as after Listener.Close
	awaitReleased(waits, p.cfg.Linger+farewellGrace)
	p.workers.stop()
	p.state.Store(pubClosed)
	p.stop()
	p.events.close(nil)
	p.eng.release()
}

// stopWriters makes every Publish give up on links, including one that
// waits for a subscriber's room.
func (p *Publisher) stopWriters(links []*pubLink) {
	for _, pl := range links {
		pl.closed.Store(true)
		pl.l.tx.wake.Ring()
	}
}

// collectFinals waits for each tag's turn, so that the Publish calls in
// progress are over, and returns where each link's tags end. If done
// closes first, the Publish calls are made to give up.
func (p *Publisher) collectFinals(done <-chan struct{}, links []*pubLink) map[*pubLink][]wire.FinalSeq {
	p.tableMu.RLock()
	entries := make(map[uint64]*tagEntry, len(p.tags))
	for tag, e := range p.tags {
		entries[tag] = e
	}
	p.tableMu.RUnlock()
	finals := map[*pubLink][]wire.FinalSeq{}
	for tag, e := range entries {
		if !e.turn.Lock(done) {
			p.stopWriters(links)
			done = nil
			e.turn.Lock(nil)
		}
		for _, s := range e.subs {
			finals[s.pl] = append(finals[s.pl], wire.FinalSeq{Tag: tag, Next: e.next})
		}
		e.turn.Unlock()
	}
	return finals
}

func (p *Publisher) opError(op string, err error) error {
	return &net.OpError{Op: op, Net: p.ac.network, Addr: &p.ac.addr, Err: err}
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
