package netio

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
)

// The events of publishers and subscriptions, what their Events channels
// carry, and the queue that never blocks whoever reports one.

// EventKind says what an Event reports.
type EventKind uint8

// What a Subscription's events report.
const (
	// EventDisconnected: the connection to the publisher was lost. Err is
	// why: ErrSlowSubscriber when the publisher cut this subscriber loose,
	// ErrPublisherClosed when it closed, ErrPeerTimeout when it went
	// silent, or the transport's error. The subscription tries to connect
	// again.
	EventDisconnected EventKind = iota + 1
	// EventReconnected: connected again and every tag subscribed again.
	EventReconnected
	// EventPublisherRestarted: the publisher connected to again is a new
	// one (it restarted): its sequences began again. LossUnknown says
	// whether the old one ended without telling where its sequences
	// stopped (it crashed): messages it published after the last one
	// received are then lost in a number nobody knows.
	EventPublisherRestarted
	// EventGap: messages From to To (inclusive) of Tag did not arrive;
	// Stats counts them in Missed.
	EventGap
	// EventClosed: the subscription ended, C is closed, and Err says why
	// (net.ErrClosed after Close). The last event: Events closes after it.
	EventClosed
)

// What a Publisher's events report.
const (
	// EventSubscriberJoined: a subscriber connected, from Remote.
	EventSubscriberJoined EventKind = iota + 16
	// EventSubscriberLeft: the subscriber at Remote is gone. Err is why:
	// ErrSlowSubscriber when the publisher cut it loose, ErrPeerTimeout
	// when it went silent, io.EOF or a transport error when it left.
	EventSubscriberLeft
)

var eventNames = map[EventKind]string{
	EventDisconnected:       "disconnected",
	EventReconnected:        "reconnected",
	EventPublisherRestarted: "publisher restarted",
	EventGap:                "gap",
	EventClosed:             "closed",
	EventSubscriberJoined:   "subscriber joined",
	EventSubscriberLeft:     "subscriber left",
}

func (k EventKind) String() string {
	if s, ok := eventNames[k]; ok {
		return s
	}
	return fmt.Sprintf("event(%d)", uint8(k))
}

// Event is something that happened to a Subscription or a Publisher,
// delivered on its Events channel. Which fields are set depends on Kind.
type Event struct {
	Kind EventKind
	// Err is the cause of EventDisconnected, EventClosed and
	// EventSubscriberLeft.
	Err error
	// Tag, From and To are EventGap's: messages From to To of Tag.
	Tag, From, To uint64
	// LossUnknown is EventPublisherRestarted's: see there.
	LossUnknown bool
	// Remote is the subscriber of EventSubscriberJoined and
	// EventSubscriberLeft.
	Remote net.Addr
}

func (e Event) String() string {
	switch e.Kind {
	case EventGap:
		return fmt.Sprintf("gap: tag %d, messages %d to %d", e.Tag, e.From, e.To)
	case EventPublisherRestarted:
		if e.LossUnknown {
			return "publisher restarted: loss since its last message unknown"
		}
		return "publisher restarted"
	case EventSubscriberJoined:
		return fmt.Sprintf("subscriber joined from %v", e.Remote)
	case EventSubscriberLeft:
		return fmt.Sprintf("subscriber %v left: %v", e.Remote, e.Err)
	}
	if e.Err != nil {
		return e.Kind.String() + ": " + e.Err.Error()
	}
	return e.Kind.String()
}

// ErrSlowSubscriber is why a publisher cut a Block subscriber loose: its
// window stayed full for longer than the publisher's
// Config.SlowSubscriberLimit while a Publish waited for it. The
// subscriber reconnects by itself and counts what it missed.
var ErrSlowSubscriber = errors.New("netio: cut loose as a slow subscriber")

// ErrPublisherClosed is why a subscription lost its publisher when the
// publisher closed (Close or Shutdown) and said so.
var ErrPublisherClosed = errors.New("netio: the publisher closed")

// eventQueue is an Events channel that never blocks whoever reports: an
// event that finds it full is dropped and counted.
type eventQueue struct {
	mu      sync.Mutex // sends against close
	c       chan Event
	closed  bool
	dropped atomic.Uint64
}

func newEventQueue(n int) *eventQueue { return &eventQueue{c: make(chan Event, n)} }

// emit reports e if there is room. Any goroutine but the reactor (which
// never takes a lock that another goroutine holds): the mutex is held for
// a send that never waits.
func (q *eventQueue) emit(e Event) {
	q.mu.Lock()
	if !q.closed {
		select {
		case q.c <- e:
		default:
			q.dropped.Add(1)
		}
	}
	q.mu.Unlock()
}

// close reports last, if not nil, and closes the channel, once.
func (q *eventQueue) close(last *Event) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	if last != nil {
		select {
		case q.c <- *last:
		default:
			q.dropped.Add(1)
		}
	}
	q.closed = true
	close(q.c)
}
