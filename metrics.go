package netio

import (
	"errors"
	"expvar"
	"sync"
	"sync/atomic"
	"time"
	"weak"
)

// The counters a user reads: a connection's Stats, and those of every
// open object of the process published through expvar.

// Stats are a connection's counters since it was established. The message
// and byte counts of the sending side are updated as buffers are sealed
// for the fabric (a page that is filled or packed), those of the
// receiving side as the reader finishes a buffer.
type Stats struct {
	MessagesSent     uint64 // whole messages written
	BytesSent        uint64 // their payload bytes
	MessagesReceived uint64 // whole messages read
	BytesReceived    uint64 // payload bytes read
	// PagesSent and PagesReceived count libfabric messages carrying data:
	// pages, filled in HighThroughput mode, packed in LowLatency mode
	// (where MessagesSent/PagesSent shows how many messages queued behind
	// sends in flight and went out together).
	PagesSent     uint64
	PagesReceived uint64
	// Pages sent, by what sent them (HighThroughput mode): a full page,
	// Config.FlushInterval, Flush or Close, and a pause of the writer.
	FlushesFull     uint64
	FlushesTimer    uint64
	FlushesExplicit uint64
	FlushesIdle     uint64
	// CreditWait is the time writes spent waiting for a free send buffer,
	// that is for the peer to return credit.
	CreditWait time.Duration
	// MessagesLent counts the large messages that went out from the
	// writer's own memory instead of being copied in (on providers that
	// need no registration of local memory, as tcp); LentCopiedBack the
	// send buffers of such messages copied in after all, because the peer
	// had no buffer free for them and Write does not wait for one.
	MessagesLent   uint64
	LentCopiedBack uint64
}

// connStats is where a Conn's sides publish their counters; each field has
// one writer.
type connStats struct {
	messagesSent     atomic.Uint64
	bytesSent        atomic.Uint64
	messagesReceived atomic.Uint64
	bytesReceived    atomic.Uint64
	buffersSent      atomic.Uint64
	buffersReceived  atomic.Uint64
	flushes          [flushCauses]atomic.Uint64
	creditWait       atomic.Int64
	messagesLent     atomic.Uint64
	lentCopied       atomic.Uint64
}

// Stats returns the connection's counters. It may be called at any time,
// from any goroutine, also after Close.
func (c *Conn) Stats() Stats {
	s := &c.stats
	return Stats{
		MessagesSent:     s.messagesSent.Load(),
		BytesSent:        s.bytesSent.Load(),
		MessagesReceived: s.messagesReceived.Load(),
		BytesReceived:    s.bytesReceived.Load(),
		PagesSent:        s.buffersSent.Load(),
		PagesReceived:    s.buffersReceived.Load(),
		FlushesFull:      s.flushes[flushFull].Load(),
		FlushesTimer:     s.flushes[flushTimer].Load(),
		FlushesExplicit:  s.flushes[flushExplicit].Load(),
		FlushesIdle:      s.flushes[flushIdle].Load(),
		CreditWait:       time.Duration(s.creditWait.Load()),
		MessagesLent:     s.messagesLent.Load(),
		LentCopiedBack:   s.lentCopied.Load(),
	}
}

// Every Conn, Listener, Publisher and Subscription joins a live set when
// it is made: one insertion under a lock, at set-up only. PublishExpvar
// reads their Stats methods, which load atomic counters, only when the
// variable is read (GET /debug/vars): nothing is added to the paths that
// move messages. The sets hold weak pointers, so an object dropped without
// Close is not kept alive by them; closed ones are left out when read, and
// pruned then.
var tracked struct {
	conns         liveSet[Conn]
	listeners     liveSet[Listener]
	publishers    liveSet[Publisher]
	subscriptions liveSet[Subscription]
}

// liveSet is a set of objects held by weak pointers. Any goroutine.
type liveSet[T any] struct {
	mu sync.Mutex
	m  map[weak.Pointer[T]]struct{}
}

func (s *liveSet[T]) add(p *T) {
	s.mu.Lock()
	if s.m == nil {
		s.m = make(map[weak.Pointer[T]]struct{})
	}
	s.m[weak.Make(p)] = struct{}{}
	s.mu.Unlock()
}

// open returns the objects of s that are still referenced and for which
// closed is false, and drops the others from s.
func (s *liveSet[T]) open(closed func(*T) bool) []*T {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*T
	for w := range s.m {
		p := w.Value()
		if p == nil || closed(p) {
			delete(s.m, w)
			continue
		}
		out = append(out, p)
	}
	return out
}

// The entries of the published variable, one per open object.
type (
	connMetrics struct {
		Network string `json:"network"`
		Local   string `json:"local"`
		Remote  string `json:"remote"`
		Stats   Stats  `json:"stats"`
	}
	listenerMetrics struct {
		Network string        `json:"network"`
		Addr    string        `json:"addr"`
		Stats   ListenerStats `json:"stats"`
	}
	publisherMetrics struct {
		Network string         `json:"network"`
		Addr    string         `json:"addr"`
		Stats   PublisherStats `json:"stats"`
	}
	subscriptionMetrics struct {
		Network   string            `json:"network"`
		Publisher string            `json:"publisher"`
		Stats     SubscriptionStats `json:"stats"`
	}
)

// counters is what PublishExpvar publishes: the counters of every open
// connection, listener, publisher and subscription of the process.
type counters struct {
	Conns         []connMetrics         `json:"conns"`
	Listeners     []listenerMetrics     `json:"listeners"`
	Publishers    []publisherMetrics    `json:"publishers"`
	Subscriptions []subscriptionMetrics `json:"subscriptions"`
}

// readMetrics returns the counters of every open Conn, Listener,
// Publisher and Subscription of the process, as their Stats methods
// report them now.
func readMetrics() counters {
	m := counters{Conns: []connMetrics{}, Listeners: []listenerMetrics{}, Publishers: []publisherMetrics{}, Subscriptions: []subscriptionMetrics{}}
	for _, c := range tracked.conns.open(func(c *Conn) bool { return c.closed.Load() }) {
		m.Conns = append(m.Conns, connMetrics{c.network, c.local.String(), c.remote.String(), c.Stats()})
	}
	for _, l := range tracked.listeners.open(func(l *Listener) bool { return isDone(l.closing) }) {
		m.Listeners = append(m.Listeners, listenerMetrics{l.ac.network, l.ac.addr.String(), l.Stats()})
	}
	for _, p := range tracked.publishers.open(func(p *Publisher) bool { return p.state.Load() == pubClosed }) {
		m.Publishers = append(m.Publishers, publisherMetrics{p.ac.network, p.ac.addr.String(), p.Stats()})
	}
	for _, s := range tracked.subscriptions.open(func(s *Subscription) bool { return isDone(s.done) }) {
		m.Subscriptions = append(m.Subscriptions, subscriptionMetrics{s.sc.args.provider, s.sc.args.address, s.Stats()})
	}
	return m
}

func isDone(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// PublishExpvar publishes readMetrics under name in the expvar package, and
// so on /debug/vars of a program that serves http.DefaultServeMux (or
// expvar.Handler). The counters are read when the variable is, never on
// the paths that move messages. It fails if name is already published.
func PublishExpvar(name string) error {
	if expvar.Get(name) != nil {
		return errors.New("netio: expvar " + name + " is already published")
	}
	expvar.Publish(name, expvar.Func(func() any { return readMetrics() }))
	return nil
}
