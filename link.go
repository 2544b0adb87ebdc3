package netio

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/netio-go/netio/internal/credit"
	"github.com/netio-go/netio/internal/doorbell"
	"github.com/netio-go/netio/internal/lifecycle"
	"github.com/netio-go/netio/internal/page"
	"github.com/netio-go/netio/internal/ring"
	"github.com/netio-go/netio/internal/wire"
	"github.com/netio-go/netio/ofi"
)

// link is the transport under a connection: one libfabric endpoint with its
// completion queue and registered buffers, the handshake, credit-based
// flow control and the connection's lifecycle. Everything in it belongs to
// the reactor, except what the user side shares through tx and rx (the
// hand-off queues), life's done/err, and kick.
//
// It knows nothing of how messages are used: its owner (a Conn today) is
// told of the handshake and of the end, gets control messages of kinds the
// link does not know, and may take data messages on the reactor
// (onMessage). The send and receive sides are sized apart, so that one end
// may post a few small buffers while the other sends large pages.
type link struct {
	eng     *engine
	owner   linkOwner
	stats   *connStats // the owner's: the link counts buffers
	cfg     linkConfig
	network string
	life    lifecycle.Life
	credit  credit.Window
	tx      sendQueue
	rx      recvQueue
	sizes   linkSizes // set at open and at the handshake
	hb      heartbeat // reactor only

	scheduled atomic.Bool // kick queued a task

	// Reactor only.
	res   linkResources
	dirty bool
	// worked: something besides heartbeats happened since the link
	// joined the engine's busy list (engine.pruneQuiet).
	worked      bool
	txPosted    uint64           // sends posted; txPosted-tx.done are in flight
	txInFlight  int              // bytes of data sends posted and not completed
	txCompleted []bool           // per send buffer: completed out of order
	rxReclaim   []uint32         // receive buffers to post again without a reader
	gives       []uint16         // credits carried by each send of the batch being posted
	pinned      []runtime.Pinner // writers' slices a failed link's provider may point at (send_from_slice.go)
	rxNotify    bool             // data arrived in this poll: wake the reader after it
	postLater   bool             // a poll left service to the engine (slice.go)
	finSent     bool
	finRecv     bool
	shutWrite   bool                   // the owner closed its writing side: FIN follows what it wrote
	ctlOut      [][]byte               // the owner's control messages waiting to go, kind first
	onMessage   func(msg []byte)       // data on the reactor (Config.OnMessage), or nil
	inline      page.InlineReader      // onMessage's position in the received buffers
	packed      openSealer             // the owner's sender, when it packs (packing, sender.go)
	connected   chan error             // the handshake's outcome, for Dial
	authReq     [wire.AuthTrailer]byte // dialing with a key: our request's authenticator
	// farewell, when the owner sets it, is its last word: called once, as
	// the FIN goes, it returns the FIN's payload. dropping tells it that
	// data written and not posted is given up (closeNow, or Linger ran
	// out): what was not sent shows in the payload instead.
	farewell   func(dropping bool) []byte
	finPayload []byte
	dropping   bool
	ctlSlot    uint32 // the buffer of the control message being handled
	ctlHeld    bool   // its owner keeps it (holdControl)
	// phase is the deadline of the set-up of an accepted link, then of
	// its close (acceptor.go); setupStats counts a set-up that
	// missed it.
	phase      timed
	setupStats *acceptStats
	// polling is a completion loop running: what ends the link waits in
	// ending until the loop is over (afterLoop), so that nothing the loop
	// uses is freed under it.
	polling bool
	ending  loopEnd
}

// The two hand-offs between a connection's user side and the reactor. They
// are the only state both sides touch: everything in them is fixed once
// connected, an atomic, or a ring with one producer and one consumer.

// sendQueue is the send buffers between the writing side and the reactor.
// The writer fills buffers in order and publishes them by advancing head;
// the reactor posts what credit allows and advances done as sends
// complete. Buffer i is free for the writer once head-done < slots.
type sendQueue struct {
	mem     []byte   // the registered send region, slots buffers of bufSize
	bufSize int      // bytes per buffer, header included
	slots   int      // buffers
	lens    []uint32 // bytes to send per buffer: written before head moves past it
	// tails are, per buffer, nil or the last bytes of its lens that lie in
	// the writer's memory instead of the buffer (send_from_slice.go); written with lens.
	tails   [][]byte
	lent    []atomic.Uint32 // per buffer, who has its tail: lentNone, lentWaiting, ...
	head    atomic.Uint64
	done    atomic.Uint64
	waiting atomic.Bool // a writer waits for a buffer: the reactor wakes it
	wake    *doorbell.Bell
}

// buf is the send buffer of sequence number seq.
func (q *sendQueue) buf(seq uint64) []byte {
	slot := int(seq % uint64(q.slots))
	return q.mem[slot*q.bufSize : (slot+1)*q.bufSize]
}

// full reports whether every buffer is in flight once head is published.
func (q *sendQueue) full(head uint64) bool { return head-q.done.Load() >= uint64(q.slots) }

// free is how many buffers the writer may fill without waiting.
func (q *sendQueue) free() int { return q.slots - int(q.head.Load()-q.done.Load()) }

// recvQueue is the receive buffers between the reactor and the reading
// side. The reactor hands over checked buffers in order through ready;
// the reader, and Message.Release from any goroutine, hand them back
// through free, and the reactor posts them again.
type recvQueue struct {
	mem     []byte // the registered receive region
	bufSize int
	ready   *ring.SPSC // reactor to reader
	free    *ring.SPSC // back to the reactor; producers serialised by freeMu
	freeMu  sync.Mutex
	refs    []atomic.Int32 // per buffer: words of lent Messages not all back (lending, message.go)
	lending lending        // which Messages are out, to catch a second Release
	kickAt  int            // free buffers that make it worth waking the reactor
	urgent  atomic.Bool    // the peer is out of credit: hand buffers back at once
	held    atomic.Bool    // Messages may outlive the connection (zero-copy reads)
	waiting atomic.Bool    // a reader waits: the reactor wakes it
	// fin is the peer's FIN received, set after the buffers that came
	// before it are in ready: once they are read, the stream has ended,
	// though the link may still be open for sending (the peer's
	// CloseWrite).
	fin  atomic.Bool
	wake *doorbell.Bell
}

// payload is the data of buffer slot, as its header describes it.
func (q *recvQueue) payload(slot uint32) ([]byte, wire.Header) {
	off := int(slot) * q.bufSize
	h := wire.ReadHeader(q.mem[off:])
	return q.mem[off+wire.HeaderSize : off+wire.HeaderSize+int(h.FragLen)], h
}

// giveBack hands a buffer back to the reactor for re-posting and reports
// whether the reactor should be told now. Any goroutine.
func (q *recvQueue) giveBack(slot uint32) bool {
	q.freeMu.Lock()
	q.free.Push(slot)
	n := q.free.Len()
	q.freeMu.Unlock()
	return n >= q.kickAt || q.urgent.Load()
}

// linkConfig is what a link posts and accepts, from the Config of its
// owner.
type linkConfig struct {
	mode       Mode
	role       wire.Role // what the link is to its peer
	ctlPayload int       // largest payload of the owner's control messages; 0: none
	framing    page.Format
	takesData  bool // false: a data buffer from the peer breaks the protocol (publisher.go)
	rxWindow   int  // receive buffers posted for the peer
	rxBufSize  int  // bytes each, header included
	txWindow   int  // send buffers kept at most
	txBufSize  int  // bytes each at most
	maxMessage int
	linger     time.Duration
	key        []byte // Config.Key: the handshake proves it (internal/admit)
	beat       beatConfig
}

// newLinkConfig sizes a link of the given role from c, whose defaults are
// set. A connection sends and receives as the options say. A publisher's
// link to a subscriber sends as they say and receives just the
// subscriber's small requests, as control messages: data from a subscriber
// would go to a reader that does not exist, so it breaks the protocol. A
// subscriber's link is the mirror image.
func newLinkConfig(role wire.Role, c *Config) linkConfig {
	lc := linkConfig{mode: c.Mode, role: role, maxMessage: c.MaxMessageSize, linger: c.Linger, key: c.Key, beat: beatConfigOf(c), takesData: true}
	switch role {
	case wire.RoleConn:
		lc.framing = page.Plain
		if c.Mode == LowLatency {
			lc.framing = page.Packed
		}
		size := bufferFor(lc.framing, c.BufferSize)
		lc.rxWindow, lc.rxBufSize, lc.txWindow, lc.txBufSize = c.Window, size, c.Window, size
	case wire.RolePublisher:
		lc.framing, lc.ctlPayload, lc.takesData = page.Tagged(c.Mode == LowLatency), wire.ControlPayloadMax, false
		lc.rxWindow, lc.rxBufSize = minWindow, minBufferSize
		lc.txWindow, lc.txBufSize = c.Window, bufferFor(lc.framing, c.BufferSize)
	case wire.RoleSubscriber:
		lc.framing, lc.ctlPayload = page.Tagged(c.Mode == LowLatency), wire.ControlPayloadMax
		lc.rxWindow, lc.rxBufSize = c.Window, bufferFor(lc.framing, c.BufferSize)
		lc.txWindow, lc.txBufSize = minWindow, minBufferSize
	}
	return lc
}

// bufferFor is the size of the buffers that carry messages of up to size
// bytes in pages of format f: size plus what a page holds besides one
// message, up to the largest buffer (at MaxBufferSize a message that large
// is cut in two, as it always was).
func bufferFor(f page.Format, size int) int { return min(size+f.Pad(), maxBufferSize) }

// linkSizes are fixed once the link is connected.
type linkSizes struct {
	txMax      int    // sends the endpoint's transmit queue holds
	peerWindow int    // receive buffers the peer posts for us
	maxSend    int    // largest message we may send
	maxRecv    uint64 // largest message we accept
	msgMax     int    // largest buffer the provider carries
	inject     int    // sends of at most this many bytes go with fi_inject
	softCopy   bool   // the provider copies data in software (slice.go)
	lend       bool   // large payloads may go from the writer's memory (send_from_slice.go)
}

// linkResources are the libfabric objects a link holds.
type linkResources struct {
	token     uint64
	fab       *fabricRes
	dom       *domainRes
	ep        *ofi.Endpoint // FI_EP_MSG only
	port      linkPort      // where the link posts: ep, or its share of an RDM endpoint
	cq        *ofi.CQ
	cqWatched bool // registered with the reactor
	cqWait    ofi.WaitList
	rxRegion  *ofi.Region
	txRegion  *ofi.Region
	ctl       controlSlots
	reserved  int // bytes of the process's registered-memory budget held
}

// linkPort is where a link posts its operations: a connected endpoint of
// its own (*ofi.Endpoint, FI_EP_MSG, with a queue of its own that the link
// reads), or its share of a reliable-datagram endpoint (rdmPeer, FI_EP_RDM:
// one endpoint and queue for many links, whose completions the endpoint's
// owner hands to each link by token). Everything above it (credits,
// framing, packing, queues, close) is the same on both.
type linkPort interface {
	// PostRecv posts the link's receive buffers, in one batch.
	PostRecv(r *ofi.Region, segs []ofi.Segment) (int, error)
	// PostSendInject posts sends to the peer, in one batch; those of at
	// most inject bytes complete at once, without a completion.
	PostSendInject(r *ofi.Region, segs []ofi.Segment, inject int) (int, error)
	// PostSendTail sends seg followed by tail in one message (only where
	// linkSizes.lend allows it).
	PostSendTail(r *ofi.Region, seg ofi.Segment, tail []byte) error
}

var _ linkPort = (*ofi.Endpoint)(nil)

// postRecv, postSend and postSendTail post on the link's own endpoint
// with a direct call, the MSG fast path as it was, or through its port.

func (r *linkResources) postRecv(rg *ofi.Region, segs []ofi.Segment) (int, error) {
	if r.ep != nil {
		return r.ep.PostRecv(rg, segs)
	}
	return r.port.PostRecv(rg, segs)
}

func (r *linkResources) postSend(rg *ofi.Region, segs []ofi.Segment, inject int) (int, error) {
	if r.ep != nil {
		return r.ep.PostSendInject(rg, segs, inject)
	}
	return r.port.PostSendInject(rg, segs, inject)
}

func (r *linkResources) postSendTail(rg *ofi.Region, seg ofi.Segment, tail []byte) error {
	if r.ep != nil {
		return r.ep.PostSendTail(rg, seg, tail)
	}
	return r.port.PostSendTail(rg, seg, tail)
}

// linkOwner is told what happens to a link. Its methods run on the reactor.
type linkOwner interface {
	// sized is the handshake done: the link's queues are sized and its
	// framing chosen; the owner builds what uses them.
	sized(l *link) error
	// up is the link connected and ready.
	up(l *link)
	// setupFailed is the link failed before it was up.
	setupFailed(l *link)
	// ended is the link failed, or its peer went away, after it was up:
	// it keeps its resources until the owner closes it.
	ended(l *link)
	// control takes a message of a kind the link does not handle; an error
	// ends the link.
	control(l *link, kind uint8, payload []byte) error
	// released is everything freed.
	released(l *link)
}

// Tokens of completion-queue operations: the kind in the top bits, the
// buffer index below. ofi.TrapToken (all ones) is the guard's.
const (
	tokRecv     = 0 << 62
	tokSend     = 1 << 62
	tokCtl      = 2 << 62
	tokKindMask = 3 << 62
)

// maxInject bounds the sends that go with fi_inject, which copies them in
// the call: beyond a few hundred bytes a completion costs less than that.
const maxInject = 512

func newLink(eng *engine, owner linkOwner, stats *connStats, cfg linkConfig, network string) (*link, error) {
	rx, err := doorbell.New()
	if err != nil {
		return nil, err
	}
	tx, err := doorbell.New()
	if err != nil {
		rx.Close()
		return nil, err
	}
	l := &link{eng: eng, owner: owner, stats: stats, cfg: cfg, network: network, life: lifecycle.New(), connected: make(chan error, 1)}
	l.rx.wake, l.tx.wake = rx, tx
	l.phase.Value = l.onPhaseDeadline
	l.hb.send.Value, l.hb.check.Value = l.onBeatSend, l.onBeatCheck
	return l, nil
}

// flowing reports whether data flows: connected and not ended or closed.
func (l *link) flowing() bool { return l.life.State() == lifecycle.Open && !l.life.Ended() }

// fail ends the link because of err (io.EOF for an orderly close by the
// peer). Data already received stays readable until the owner closes it.
func (l *link) fail(err error) {
	switch l.life.State() {
	case lifecycle.Connecting:
		l.life.Move(lifecycle.Ended)
		l.life.End(err)
		l.connected <- err
		l.owner.setupFailed(l)
	case lifecycle.Open:
		l.life.Move(lifecycle.Ended)
		l.life.End(err)
		l.rx.wake.Ring()
		l.tx.wake.Ring()
		l.afterLoop(endOwner)
	case lifecycle.Draining:
		l.life.Over = true // whatever failed, the close is over
		l.afterLoop(endClose)
	}
}

// loopEnd is what a completion loop found that ends the link.
type loopEnd uint8

const (
	endOwner loopEnd = 1 << iota // the link ended: stop its queue, tell the owner
	endClose                     // a draining link's close is over: finish it
)

// afterLoop does what ends the link at once, or, inside a completion loop,
// once the loop is over (endLoop): the owner's callbacks and the end of a
// close never run under the loop that found them.
func (l *link) afterLoop(e loopEnd) {
	l.ending |= e
	if !l.polling {
		l.endLoop()
	}
}

// endLoop ends a completion loop: it does what the loop found that ends
// the link.
func (l *link) endLoop() {
	l.polling = false
	e := l.ending
	l.ending = 0
	if e&endOwner != 0 {
		l.stopCQ()
		l.owner.ended(l)
	}
	if e&endClose != 0 {
		l.finishClose()
	}
}

// failLater is fail from another goroutine (a reader that could not
// decode what arrived).
func (l *link) failLater(err error) { l.eng.r.SubmitFunc(func() { l.fail(err) }) }

// protocolError ends a link whose peer broke the wire protocol.
func (l *link) protocolError(format string, args ...any) {
	l.fail(fmt.Errorf("%w: "+format, append([]any{ErrProtocol}, args...)...))
}

// kick asks the reactor to look at l, at most once until it has. Any
// goroutine.
func (l *link) kick() {
	if !l.scheduled.Load() && l.scheduled.CompareAndSwap(false, true) {
		if l.eng.r.Submit(l) != nil {
			l.scheduled.Store(false)
		}
	}
}

// Run is the link as a reactor task, after a kick.
func (l *link) Run() {
	l.scheduled.Store(false)
	l.service()
}

// notify wakes a user goroutine that waits on w; one eventfd write, and
// none while it is busy.
func (l *link) notify(waiting *atomic.Bool, w *doorbell.Bell) {
	if waiting.Load() && waiting.Swap(false) {
		l.eng.wakesInFlight.Add(1)
		w.Ring()
	}
}
