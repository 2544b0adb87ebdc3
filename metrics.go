package netio

import (
	"errors"
	"expvar"
	"sync"
	"weak"
)

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
