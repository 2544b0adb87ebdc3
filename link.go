package netio

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"

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
	life    lifecycle
	credit  creditWindow
	tx      sendQueue
	rx      recvQueue
	frames  frameCheck // set at the handshake
	sizes   linkSizes  // set at open and at the handshake
	hb      heartbeat  // reactor only

	scheduled atomic.Bool // kick queued a task

	// Reactor only.
	res         linkResources
	dirty       bool
	txPosted    uint64           // sends posted; txPosted-tx.done are in flight
	txInFlight  int              // bytes of data sends posted and not completed
	txCompleted []bool           // per send buffer: completed out of order
	rxReclaim   []uint32         // receive buffers to post again without a reader
	gives       []uint16         // credits carried by each send of the batch being posted
	pinned      []runtime.Pinner // writers' slices a failed link's provider may point at (lent.go)
	rxNotify    bool             // data arrived in this poll: wake the reader after it
	postLater   bool             // a poll left service to the engine (slice.go)
	finSent     bool
	finRecv     bool
	shutWrite   bool              // the owner closed its writing side: FIN follows what it wrote
	ctlOut      [][]byte          // the owner's control messages waiting to go, kind first
	onMessage   func(msg []byte)  // data on the reactor (Config.OnMessage), or nil
	here        hereReader        // onMessage's position in the received buffers
	packed      openSealer        // the owner's sender, when it packs (packing.go)
	connected   chan error        // the handshake's outcome, for Dial
	authReq     [authTrailer]byte // dialing with a key: our request's authenticator
	// farewell, when the owner sets it, is its last word: called once, as
	// the FIN goes, it returns the FIN's payload. dropping tells it that
	// data written and not posted is given up (closeNow, or Linger ran
	// out): what was not sent shows in the payload instead.
	farewell   func(dropping bool) []byte
	finPayload []byte
	dropping   bool
	ctlSlot    uint32 // the buffer of the control message being handled
	ctlHeld    bool   // its owner keeps it (holdControl)
}

// linkConfig is what a link posts and accepts, from the Config of its
// owner.
type linkConfig struct {
	mode       Mode
	role       role // what the link is to its peer
	ctlPayload int  // largest payload of the owner's control messages; 0: none
	framing    framing
	rxWindow   int // receive buffers posted for the peer
	rxBufSize  int // bytes each, header included
	txWindow   int // send buffers kept at most
	txBufSize  int // bytes each at most
	maxMessage int
	linger     time.Duration
	key        []byte // Config.Key: the handshake proves it (admission.go)
	beat       beatConfig
}

func linkConfigOf(c *Config) linkConfig {
	f := framingFor(c.Mode)
	size := bufferFor(f, c.BufferSize)
	return linkConfig{mode: c.Mode, role: roleConn, framing: f, rxWindow: c.Window, rxBufSize: size, txWindow: c.Window, txBufSize: size, maxMessage: c.MaxMessageSize, linger: c.Linger, key: c.Key, beat: beatConfigOf(c)}
}

// linkSizes are fixed once the link is connected.
type linkSizes struct {
	txMax      int    // sends the endpoint's transmit queue holds
	peerWindow int    // receive buffers the peer posts for us
	maxSend    int    // largest message we may send
	maxRecv    uint64 // largest message we accept
	msgMax     int    // largest buffer the provider carries
	inject     int    // sends of at most this many bytes go with fi_inject
	softCopy   bool   // the provider copies data in software (slice.go)
	lend       bool   // large payloads may go from the writer's memory (lent.go)
}

// linkResources are the libfabric objects a link holds.
type linkResources struct {
	token     uint64
	fab       *fabricRes
	dom       *domainRes
	ep        *ofi.Endpoint
	cq        *ofi.CQ
	cqWatched bool // registered with the reactor
	cqWait    ofi.WaitList
	rxRegion  *ofi.Region
	txRegion  *ofi.Region
	ctl       controlSlots
	reserved  int // bytes of the process's registered-memory budget held
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
	rx, err := newWaker()
	if err != nil {
		return nil, err
	}
	tx, err := newWaker()
	if err != nil {
		rx.close()
		return nil, err
	}
	l := &link{eng: eng, owner: owner, stats: stats, cfg: cfg, network: network, life: newLifecycle(), connected: make(chan error, 1)}
	l.rx.wake, l.tx.wake = rx, tx
	return l, nil
}

// openEndpoint opens the endpoint, queue and receive buffers of l from info and
// posts every receive buffer, so the peer may send as soon as it is
// connected. The queue is watched only once connected (watchCQ). An
// accepted link (at, the request's acceptor, not nil) is made on the
// acceptor's fabric and domain: a request's info may name neither
// provider nor fabric (sockets), and its endpoint must live where the
// passive endpoint does.
func (l *link) openEndpoint(info *ofi.Info, at *acceptor) (err error) {
	e, res := l.eng, &l.res
	domInfo := info
	if at != nil {
		res.fab = at.fab
		res.fab.refs++
		domInfo = at.domainInfo(info)
	} else if res.fab, err = e.fabricFor(info); err != nil {
		return err
	}
	if res.dom, err = res.fab.domainFor(domInfo); err != nil {
		return err
	}
	// Never more receives or sends in flight than the endpoint's queues
	// hold: tcp ignores its limits, verbs answers EAGAIN.
	window, bufSize := l.cfg.rxWindow, l.cfg.rxBufSize
	if rx := info.RxSize(); rx >= minWindow && rx < window {
		window = rx
	}
	l.sizes.txMax = minWindow
	if tx := info.TxSize() - ctlSlots; tx >= minWindow {
		l.sizes.txMax = tx
	}
	l.sizes.msgMax = maxBufferSize
	l.sizes.softCopy = copiesInSoftware(info.Provider())
	// A send this small goes with fi_inject: no completion, which on tcp
	// saves a write and a read of the queue's wait socketpair per send, 4
	// of a 64 B round trip's 18 system calls (BenchmarkRoundTripInterleaved,
	// 5 runs alternated with the binary before, 2026-11-23: netio/tcp 4.46x
	// -> 3.95x, OnMessage 3.14x -> 2.71x; cross-process make compare
	// rtt-netio, 4 runs: 146 -> 119 µs against Go TCP's 30-37).
	l.sizes.inject = min(info.InjectSize(), maxInject)
	l.sizes.lend = !info.NeedsRegistration() && info.SendIOVLimit() >= 2
	if m := info.MaxMsgSize(); m >= minBufferSize && m < maxBufferSize {
		l.sizes.msgMax = int(m)
	}
	bufSize = min(bufSize, l.sizes.msgMax)
	// What may run out (the memory budget, memory, descriptors) is taken
	// before the endpoint: the endpoint of an accepted request takes over
	// its socket, and a request that fails before that can still be
	// rejected with a reason instead of seeing its socket closed.
	if err = l.reserve(window*bufSize + ctlSlots*(headerSize+l.cfg.ctlPayload)); err != nil {
		return err
	}
	// Receives, sends, control messages, and the tcp guard's trap.
	if res.cq, err = res.dom.domain.OpenCQ(window + l.cfg.txWindow + ctlSlots + 2); err != nil {
		return err
	}
	if res.rxRegion, err = res.dom.domain.NewRegion(window * bufSize); err != nil {
		return err
	}
	if err = res.ctl.open(res.dom.domain, l.cfg.ctlPayload); err != nil {
		return err
	}
	res.token = e.newToken(l)
	if res.ep, err = res.dom.domain.OpenEndpoint(info, res.token); err != nil {
		return err
	}
	if err = res.ep.BindEQ(res.fab.eq); err != nil {
		return err
	}
	if err = res.ep.BindCQ(res.cq); err != nil {
		return err
	}
	if err = res.ep.Enable(); err != nil {
		return err
	}
	l.rx = recvQueue{mem: res.rxRegion.Bytes(), bufSize: bufSize, wake: l.rx.wake,
		ready: newSPSCRing(window), free: newSPSCRing(window), refs: make([]atomic.Int32, window),
		kickAt: max(1, window/4)}
	if l.cfg.framing.writer(minBufferSize).lazy() {
		// A page holds many messages: hand each back as soon as it is
		// read, the way NetIO re-posts a page.
		l.rx.kickAt = 1
	}
	l.rxReclaim = make([]uint32, 0, window)
	l.gives = make([]uint16, 0, l.cfg.txWindow)
	segs := e.segBuf[:0]
	for i := 0; i < window; i++ {
		segs = append(segs, ofi.Segment{Offset: uint64(i * bufSize), Len: uint64(bufSize), Token: tokRecv | uint64(i)})
	}
	e.segBuf = segs[:0]
	if _, err = res.ep.PostRecv(res.rxRegion, segs); err != nil {
		return err
	}
	res.cqWait.Add(res.cq)
	return nil
}

// watchCQ starts reading l's completion queue, once the connection is
// established and, with a key, the peer has proved it holds it.
//
// Not before: reading the queue is what makes libfabric's tcp provider
// parse what the peer sent, and a dialer must not let it parse anything
// from a listener that has not proved it holds the key (onConnected),
// since a forged header crashes the provider. The provider gives no such
// guarantee on its own (libfabric 1.17, prov/tcp/src/tcpx_conn_mgr.c):
// fi_eq_read runs its connection manager, which on the accept's arrival
// marks the endpoint connected and adds its socket to the completion
// queue's wait set (tcpx_ep_enable) before FI_CONNECTED reaches netio; from
// then on fi_cq_read on the link's queue (tcpx_cq_progress ->
// tcpx_progress_rx) parses the socket's bytes, and so does fi_trywait on
// it (util_wait_fd_try -> util_poll_run calls fi_cq_read: measured, a
// hostile server's forged acknowledgement crashed the dialer inside the
// engine's fi_trywait while the link was still connecting). And netio's
// event reads do not always hand FI_CONNECTED over at once: closing
// another endpoint reads events ahead into the EQ's backlog
// (ofi.EQ.purge), while the engine goes on polling and trywaiting the
// queues of its busy links. Before the connection manager has enabled the
// endpoint, its queue parses nothing: the socket is not in the wait set,
// and the handshake was read with plain recv, so the endpoint's buffered
// socket holds nothing.
func (l *link) watchCQ() error {
	if err := l.eng.r.Register(l.res.cq.FD(), reactorIn, (*cqHandler)(l)); err != nil {
		return err
	}
	l.res.cqWatched = true
	l.eng.markDirty(l)
	return nil
}

// hello is what l tells the peer at connect: what it posts for it.
func (l *link) hello() hello {
	return hello{version: protocolLevel, mode: l.cfg.mode, role: l.cfg.role, window: uint32(len(l.rx.refs)), bufferSize: uint32(l.rx.bufSize), maxMessage: uint64(l.cfg.maxMessage)}
}

// connect begins an active connection.
func (l *link) connect(info *ofi.Info) error {
	l.hb.dialed = true
	if err := l.openEndpoint(info, nil); err != nil {
		l.releaseResources()
		return err
	}
	var data []byte
	data, l.authReq = sealRequest(l.cfg.key, l.hello(), time.Now())
	if err := l.res.ep.Connect(info, data); err != nil {
		l.releaseResources()
		return err
	}
	return nil
}

// accept answers the connection request info, which came to at, with h
// from the peer.
func (l *link) accept(at *acceptor, info *ofi.Info, h hello) error {
	err := l.openEndpoint(info, at)
	if err == nil {
		err = l.setPeer(h)
	}
	if err == nil {
		err = l.res.ep.Accept(sealAccept(l.cfg.key, l.hello(), h.auth))
	}
	if err != nil {
		l.releaseResources()
		l.owner.released(l) // what sized built goes too
	}
	return err
}

// setPeer records what the peer posts for us and sizes the send side.
func (l *link) setPeer(h hello) error {
	// Use at most what we would keep ourselves: the peer's handshake must
	// not choose how much memory this side commits. Fewer send buffers and
	// smaller buffers than the peer offers are always allowed.
	s := &l.sizes
	s.peerWindow = int(h.window)
	slots := min(int(h.window), l.cfg.txWindow, s.txMax)
	bufSize := min(int(h.bufferSize), l.cfg.txBufSize, s.msgMax)
	l.credit.reset(s.peerWindow, len(l.rx.refs))
	s.maxSend = l.cfg.maxMessage
	if h.maxMessage < uint64(s.maxSend) {
		s.maxSend = int(h.maxMessage)
	}
	s.maxRecv = uint64(l.cfg.maxMessage)
	l.frames = l.cfg.framing.checker(s.maxRecv)
	l.here = hereReader{r: l.cfg.framing.reader(), pos: cursor{max: s.maxRecv}}
	if err := l.reserve(slots * bufSize); err != nil {
		return err
	}
	var err error
	if l.res.txRegion, err = l.res.dom.domain.NewRegion(slots * bufSize); err != nil {
		return err
	}
	l.tx = sendQueue{mem: l.res.txRegion.Bytes(), bufSize: bufSize, slots: slots, lens: make([]uint32, slots), tails: make([][]byte, slots), lent: make([]atomic.Uint32, slots), wake: l.tx.wake}
	l.txCompleted = make([]bool, slots)
	return l.owner.sized(l)
}

// reserve takes n bytes of the process's registered-memory budget for l,
// given back when its resources are released.
func (l *link) reserve(n int) error {
	if err := reserveRegistered(n); err != nil {
		return err
	}
	l.res.reserved += n
	return nil
}

// registers is an upper bound of the memory a link of c accepted from a
// peer that sent h registers: what openEndpoint and setPeer reserve.
func (c *linkConfig) registers(h hello) int {
	tx := min(int(h.window), c.txWindow) * min(int(h.bufferSize), c.txBufSize)
	return c.rxWindow*c.rxBufSize + tx + ctlSlots*(headerSize+c.ctlPayload)
}

// handleEvent takes the connection-management events of l's endpoint.
func (l *link) handleEvent(ev *ofi.Event) {
	switch ev.Kind {
	case ofi.EventConnected:
		l.onConnected(ev)
	case ofi.EventShutdown:
		l.pollCQ() // completions that arrived before the shutdown come first
		if l.finRecv {
			l.fail(io.EOF)
		} else {
			l.fail(syscall.ECONNRESET)
		}
	case ofi.EventError:
		err := error(ev.Err)
		if l.life.state == linkConnecting {
			err = l.setupError(ev)
		}
		l.fail(err)
	}
}

// errAtLimit is wrapped, with ErrRejected, by the dialer's error when the
// listener was at one of its limits: a condition that may pass, unlike a
// rejection for mode or role.
var errAtLimit = errors.New("the listener is at a limit (connections, registered memory or file descriptors)")

// setupError is what a dialer reports for a connection request that
// failed. A netio listener's reject says why. Anything else that ends a
// request before it is answered is a refusal, as net.Dial would say: a
// listener that closes the socket shows in libfabric's tcp as a stale
// errno (EINPROGRESS, left by the connect), and a reply that is not
// libfabric's as ENOPROTOOPT, neither of which tells the caller anything.
func (l *link) setupError(ev *ofi.Event) error {
	switch string(ev.PrivateData()) {
	case rejectMarker:
		return ErrRejected
	case rejectModeMarker:
		return fmt.Errorf("%w: the listener does not use %v mode", ErrRejected, l.cfg.mode)
	case rejectRoleMarker:
		return fmt.Errorf("%w: the listener does not take a %v", ErrRejected, l.cfg.role)
	case rejectLimitMarker:
		return fmt.Errorf("%w: %w", ErrRejected, errAtLimit)
	case rejectAuthMarker:
		return errAuth(l.cfg.key)
	case rejectFailedMarker:
		return acceptFailedError()
	}
	e := ev.Err.Err
	switch {
	case e == ofi.ECONNREFUSED:
		return syscall.ECONNREFUSED
	case e == ofi.ETIMEDOUT, errors.Is(e, syscall.EHOSTUNREACH), errors.Is(e, syscall.ENETUNREACH):
		return ev.Err // as net.Dial reports them
	case errors.Is(e, syscall.ENOPROTOOPT):
		return fmt.Errorf("%w (the peer's answer is not a libfabric connection response)", syscall.ECONNREFUSED)
	case errors.Is(e, syscall.EINPROGRESS), errors.Is(e, syscall.EIO), errors.Is(e, syscall.ECONNRESET), errors.Is(e, syscall.EPIPE):
		return fmt.Errorf("%w (the listener closed the connection during set-up)", syscall.ECONNREFUSED)
	}
	return fmt.Errorf("%w (set-up failed: %v)", syscall.ECONNREFUSED, ev.Err)
}

func (l *link) onConnected(ev *ofi.Event) {
	if l.life.state != linkConnecting {
		return
	}
	if l.tx.mem == nil { // dialing: the accept's hello sizes the send side
		// With a key, the listener proves it holds it before anything
		// it sent is believed, or read: the queue is not watched yet.
		err := openAccept(l.cfg.key, ev.PrivateData(), l.authReq)
		var h hello
		if err == nil {
			h, err = parseHello(ev.PrivateData())
		}
		if err == nil && h.mode != l.cfg.mode {
			err = fmt.Errorf("%w: peer accepted in %v mode, not %v", ErrProtocol, h.mode, l.cfg.mode)
		}
		if err == nil && h.role != l.cfg.role.peer() {
			err = fmt.Errorf("%w: peer accepted as a %v, not a %v", ErrProtocol, h.role, l.cfg.role.peer())
		}
		if err == nil {
			err = l.setPeer(h)
		}
		if err != nil {
			l.fail(err)
			return
		}
	}
	if err := l.watchCQ(); err != nil {
		l.fail(err)
		return
	}
	l.life.move(linkOpen)
	l.startBeat()
	l.connected <- nil
	l.owner.up(l)
	l.service()
}

// flowing reports whether data flows: connected and not ended or closed.
func (l *link) flowing() bool { return l.life.state == linkOpen && !l.life.ended.Load() }

// fail ends the link because of err (io.EOF for an orderly close by the
// peer). Data already received stays readable until the owner closes it.
func (l *link) fail(err error) {
	switch l.life.state {
	case linkConnecting:
		l.life.move(linkEnded)
		l.life.end(err)
		l.connected <- err
		l.owner.setupFailed(l)
	case linkOpen:
		l.life.move(linkEnded)
		l.life.end(err)
		l.rx.wake.wake()
		l.tx.wake.wake()
		l.stopCQ()
		l.owner.ended(l)
	case linkDraining:
		l.finishClose() // whatever failed, the close is over
	}
}

// failLater is fail from another goroutine (a reader that could not
// decode what arrived).
func (l *link) failLater(err error) { l.eng.r.SubmitFunc(func() { l.fail(err) }) }

// protocolError ends a link whose peer broke the wire protocol.
func (l *link) protocolError(format string, args ...any) {
	l.fail(fmt.Errorf("%w: "+format, append([]any{ErrProtocol}, args...)...))
}

// stopCQ stops watching the queue of a link that has ended, so a dead
// endpoint cannot keep the reactor awake.
func (l *link) stopCQ() {
	if l.res.cqWatched {
		l.eng.r.Unregister(l.res.cq.FD())
		l.res.cqWatched = false
	}
	l.eng.forget(l)
	l.eng.forgetBeat(l)
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

// cqHandler is the link as the handler of its completion queue's fd.
type cqHandler link

// HandleEvents drains the queue and re-arms its wait fd, which stays
// readable (and would keep the reactor spinning) until fi_trywait succeeds.
// A link already in the engine's busy list is read by the engine's poll in
// its turn (bulk links after latency-sensitive ones, one slice each): here
// it is only re-armed, if it is quiet.
func (h *cqHandler) HandleEvents(uint32) {
	l := (*link)(h)
	if l.dirty {
		l.res.fab.fabric.TryWait(&l.res.cqWait)
		return
	}
	for i := 0; i < 8; i++ {
		l.pollCQ()
		if l.res.cq == nil || !l.res.cqWatched {
			return
		}
		if ok, err := l.res.fab.fabric.TryWait(&l.res.cqWait); ok || err != nil {
			return
		}
	}
	l.eng.markDirty(l) // still busy: the poller takes it from here
}

// pollCQ reads l's completions and reports whether there were any; not
// before the link has been open (see watchCQ).
func (l *link) pollCQ() bool {
	cq := l.res.cq
	if cq == nil || !l.life.wasOpen {
		return false
	}
	e := l.eng
	busy := false
	for l.res.cq != nil {
		n, err := cq.Read(e.cqBuf[:])
		if err != nil {
			var ce ofi.CompletionError
			if ok, _ := cq.ReadError(&ce); ok {
				busy = true
				l.onCompletionError(&ce)
				continue
			}
			break
		}
		if n == 0 {
			break
		}
		busy = true
		for i := 0; i < n && l.life.state != linkClosed; i++ {
			cmp := &e.cqBuf[i]
			if cmp.Token == ofi.TrapToken {
				l.foreignOp()
				continue
			}
			slot := uint32(cmp.Token)
			switch cmp.Token & tokKindMask {
			case tokRecv:
				l.onRecv(slot, cmp.Len)
			case tokSend:
				l.onSent(slot)
			case tokCtl:
				l.res.ctl.done(slot)
			}
		}
		if n < len(e.cqBuf) {
			break
		}
	}
	if l.life.state == linkClosed {
		return busy
	}
	if busy {
		e.markDirty(l)
		if l.rxNotify {
			l.rxNotify = false
			l.notify(&l.rx.waiting, l.rx.wake)
		}
		if l.sliced() {
			l.postLater = true // after the latency-sensitive links' turn
		} else {
			l.service()
		}
	}
	return busy
}

// queue is the link as the engine sees it: a completion queue to poll.
func (l *link) queue() (*fabricRes, *ofi.CQ) { return l.res.fab, l.res.cq }

// setDirty sets the mark that l is in the engine's busy list and returns
// the old one.
func (l *link) setDirty(d bool) bool { was := l.dirty; l.dirty = d; return was }

func (l *link) onCompletionError(ce *ofi.CompletionError) {
	if errors.Is(&ce.AsyncError, ofi.ECANCELED) {
		return // buffers flushed by a shutdown or close
	}
	if l.life.state == linkClosed {
		return
	}
	if ce.Token == ofi.TrapToken {
		l.foreignOp() // a forged tagged message too large for the trap
		return
	}
	err := error(&ce.AsyncError)
	if l.finRecv {
		// The peer closed in order and is gone: what we still tried to
		// send fails, but reading ends with io.EOF as usual.
		err = io.EOF
	} else if errors.Is(err, ofi.ETRUNC) {
		err = fmt.Errorf("%w: peer sent a message larger than the receive buffer", ErrProtocol)
	}
	l.fail(err)
}

// foreignOp ends a link whose peer sent a libfabric tagged message, caught
// by the ofi guard's trap: netio never sends one, and without the trap the
// tcp provider would have crashed the process on it.
func (l *link) foreignOp() {
	l.protocolError("peer sent a libfabric tagged message, which netio never uses")
}

// onSent frees a send buffer; completions may come out of order.
func (l *link) onSent(slot uint32) {
	if int(slot) >= len(l.txCompleted) {
		return
	}
	l.txCompleted[slot] = true
	l.txInFlight -= int(l.tx.lens[slot])
	if l.tx.lent[slot].Load() != lentNone {
		l.tx.tails[slot] = nil
		l.tx.lent[slot].Store(lentNone) // the writer's memory is its own again
	}
	slots := uint64(l.tx.slots)
	done := l.tx.done.Load()
	for l.txCompleted[done%slots] && done < l.txPosted {
		l.txCompleted[done%slots] = false
		done++
	}
	l.tx.done.Store(done)
	l.notify(&l.tx.waiting, l.tx.wake)
}

// onRecv checks and routes one received buffer.
func (l *link) onRecv(slot uint32, n uint64) {
	if !l.life.accepting() {
		return
	}
	if int(slot) >= len(l.rx.refs) {
		l.protocolError("completion for unknown buffer %d", slot)
		return
	}
	l.credit.used()
	if n < headerSize {
		l.protocolError("truncated message of %d bytes", n)
		return
	}
	b := l.rx.mem[int(slot)*l.rx.bufSize:]
	h := readHeader(b)
	if uint64(h.fragLen)+headerSize != n {
		l.protocolError("header says %d bytes, %d arrived", h.fragLen, n-headerSize)
		return
	}
	if err := l.credit.give(h.credits); err != nil {
		l.fail(err)
		return
	}
	switch {
	case dataKind(h.kind):
		l.stats.buffersReceived.Add(1)
		if err := l.frames.check(h); err != nil {
			l.fail(err)
			return
		}
		if l.finRecv {
			l.protocolError("data after the peer closed")
			return
		}
		switch {
		case l.onMessage != nil:
			l.deliverHere(slot, h)
		case l.life.closedByOwner():
			// Nobody will read it. Dropping it returns the credit, so a
			// peer stuck writing to us can finish too.
			l.rxReclaim = append(l.rxReclaim, slot)
		default:
			l.rx.ready.push(slot)
			l.rxNotify = true
		}
	case h.kind == kindCredit:
		l.hb.ctlHeard++
		l.credit.quietly()
		l.rxReclaim = append(l.rxReclaim, slot) // no reader involved: re-post at once
	case h.kind == kindHeartbeat:
		l.hb.ctlHeard++
		if h.fragLen != 0 {
			l.protocolError("heartbeat with a payload of %d bytes", h.fragLen)
			return
		}
		l.rxReclaim = append(l.rxReclaim, slot) // the peer's reader may be stopped: re-post at once
		l.onHeartbeat(h.msgLen)
	case h.kind == kindFin:
		l.hb.ctlHeard++
		if h.fragLen > 0 { // the owner's farewell
			if err := l.owner.control(l, kindFin, b[headerSize:headerSize+int(h.fragLen)]); err != nil {
				l.fail(err)
				return
			}
		}
		l.finRecv = true
		if h.flags&flagHalfClose != 0 {
			l.rx.fin.Store(true) // after the data before it, in ready
			l.rxNotify = true    // a waiting reader reads io.EOF
		}
		l.rxReclaim = append(l.rxReclaim, slot)
	default:
		l.hb.ctlHeard++
		if l.finRecv {
			l.protocolError("message of kind %d after the peer closed", h.kind)
			return
		}
		payload := b[headerSize : headerSize+int(h.fragLen)]
		l.ctlSlot = slot
		err := l.owner.control(l, h.kind, payload)
		if l.ctlHeld {
			l.ctlHeld = false // the owner posts it again (releaseControl)
		} else {
			l.rxReclaim = append(l.rxReclaim, slot)
		}
		if err != nil {
			l.fail(err)
		}
	}
}

// holdControl keeps the buffer of the control message that owner.control
// is handling from being posted again until releaseControl: the peer's
// credits then bound the messages its owner has yet to handle. On the
// reactor, inside owner.control.
func (l *link) holdControl() uint32 {
	l.ctlHeld = true
	return l.ctlSlot
}

// releaseControl posts again a buffer held by holdControl. On the reactor.
func (l *link) releaseControl(slot uint32) {
	if l.life.accepting() {
		l.rxReclaim = append(l.rxReclaim, slot)
		l.service()
	}
}

// deliverHere hands the messages of a buffer to onMessage on the reactor.
func (l *link) deliverHere(slot uint32, h header) {
	off := int(slot) * l.rx.bufSize
	l.rxReclaim = append(l.rxReclaim, slot)
	if err := l.here.deliver(l.rx.mem[off+headerSize:off+headerSize+int(h.fragLen)], h, l.onMessage); err != nil {
		l.fail(err)
	}
}

// service posts what is ready: receive buffers handed back, written
// buffers the credits allow, credit returns, and the closing FIN.
func (l *link) service() {
	if !l.life.accepting() {
		return
	}
	e, res := l.eng, &l.res
	// Receive buffers first: they become credits for the peer.
	segs := e.segBuf[:0]
	for {
		slot, ok := l.rx.free.pop()
		if !ok {
			break
		}
		l.rxReclaim = append(l.rxReclaim, slot)
	}
	for _, slot := range l.rxReclaim {
		segs = append(segs, ofi.Segment{Offset: uint64(int(slot) * l.rx.bufSize), Len: uint64(l.rx.bufSize), Token: tokRecv | uint64(slot)})
	}
	l.rxReclaim = l.rxReclaim[:0]
	if len(segs) > 0 {
		n, err := res.ep.PostRecv(res.rxRegion, segs)
		l.credit.owe(n)
		for _, sg := range segs[n:] { // a full queue: again after the next completion
			l.rxReclaim = append(l.rxReclaim, uint32(sg.Token))
		}
		if err != nil && !errors.Is(err, ofi.EAGAIN) {
			l.fail(err)
			return
		}
	}
	// The owner's control messages go before the data written after
	// them (a publisher's acknowledgement before the messages it
	// announces), so data waits while any do.
	l.sendQueuedControl()
	if l.packed != nil && l.txPosted == l.tx.head.Load() && len(l.ctlOut) == 0 && l.credit.canTake(dataSend) {
		l.packed.sealOpen() // what was written while the sends went out, in one
	}
	// Data, as far as the window allows: it keeps one credit back.
	posted := false
	for {
		var tail []byte
		segs, tail = l.gatherData(segs[:0])
		if len(segs) == 0 {
			break
		}
		all, err := l.postData(segs, tail)
		posted = true
		if err != nil {
			l.fail(err)
			return
		}
		if !all {
			break
		}
	}
	e.segBuf = segs[:0]
	if l.hb.pending { // its turn came without a credit or slot for it
		l.sendHeartbeat()
	}
	// An explicit credit return when enough is owed or the peer is stuck.
	// After the peer's FIN it sends no data, but a peer that only closed
	// its writing side (CloseWrite) still reads, and returns our credits
	// in control messages that need credits of their own: these must keep
	// coming back, or both sides could end up waiting for the other's.
	if l.credit.returnable() {
		l.sendControl(kindCredit, 0)
	}
	l.rx.urgent.Store(l.credit.peerStarved())
	switch {
	case l.life.state == linkDraining:
		l.continueClose()
	case l.shutWrite:
		l.sendFin()
	}
	if posted || l.credit.owing() {
		e.markDirty(l)
	}
}

// gatherData takes the published send buffers that the window and the
// slice allow, in order, into segs, up to the first whose payload lies in
// the writer's memory (lent.go): that one goes alone, with its tail.
func (l *link) gatherData(segs []ofi.Segment) ([]ofi.Segment, []byte) {
	head := l.tx.head.Load()
	slots := uint64(l.tx.slots)
	for l.txPosted < head && len(l.ctlOut) == 0 && !l.dropping {
		slot := int(l.txPosted % slots)
		lent := &l.tx.lent[slot]
		st := lent.Load()
		if st != lentNone && len(segs) > 0 || st == lentTaken {
			break // a lent one goes alone; a taken one is being copied in
		}
		if !l.mayPost(int(l.tx.lens[slot])) {
			l.stallLent(lent, st)
			break
		}
		give, ok := l.credit.take(dataSend)
		if !ok {
			l.stallLent(lent, st)
			break
		}
		if st != lentNone && !lent.CompareAndSwap(st, lentPosted) {
			l.credit.undo(give) // the writer took it back: it kicks once copied
			break
		}
		putCredits(l.tx.mem[slot*l.tx.bufSize:], give)
		l.gives = append(l.gives, give)
		segs = append(segs, ofi.Segment{Offset: uint64(slot * l.tx.bufSize), Len: uint64(l.tx.lens[slot]), Token: tokSend | uint64(slot)})
		l.txPosted++
		l.txInFlight += int(l.tx.lens[slot])
		if st != lentNone {
			tail := l.tx.tails[slot]
			segs[0].Len -= uint64(len(tail)) // the header part, in the buffer
			return segs, tail
		}
	}
	return segs, nil
}

// stallLent tells the writer of a lent buffer that it waits for credit
// (or for the slice): the writer copies it in and returns, as a Write
// that copies would have (lent.go).
func (l *link) stallLent(lent *atomic.Uint32, st uint32) {
	if st == lentWaiting && lent.CompareAndSwap(lentWaiting, lentStalled) {
		l.notify(&l.tx.waiting, l.tx.wake)
	}
}

// postData posts what gatherData took and reports whether all of it went
// out; what did not (a full queue, EAGAIN on verbs) is taken back, credits
// and all, and posted after the next completion.
func (l *link) postData(segs []ofi.Segment, tail []byte) (bool, error) {
	res := &l.res
	var n int
	var err error
	if tail != nil {
		if err = res.ep.PostSendTail(res.txRegion, segs[0], tail); err == nil {
			n = 1
		}
	} else {
		n, err = res.ep.PostSendInject(res.txRegion, segs, l.sizes.inject)
	}
	l.stats.buffersSent.Add(uint64(n))
	for i, g := range l.gives[n:] {
		slot := segs[n+i].Token &^ tokSend
		l.credit.undo(g)
		l.txPosted--
		l.txInFlight -= int(l.tx.lens[slot])
		if tail != nil {
			l.tx.lent[slot].Store(lentWaiting)
		}
	}
	l.gives = l.gives[:0]
	// Injected sends were copied and have no completion: done now.
	// No completion brings the reactor back either, for what was
	// written meanwhile into the open buffer (packing.go): a kick
	// does, on its next round.
	injected := false
	for _, sg := range segs[:n] {
		if tail == nil && int(sg.Len) <= l.sizes.inject {
			l.onSent(uint32(sg.Token))
			injected = true
		}
	}
	if injected {
		l.kick()
	}
	if err != nil && !errors.Is(err, ofi.EAGAIN) {
		return false, err
	}
	return n == len(segs), nil
}

// sendOwnerControl queues a control message of the owner's: kind and a
// payload of at most cfg.ctlPayload bytes, sent in order after the data
// written so far as credit allows. On the reactor.
func (l *link) sendOwnerControl(kind uint8, payload []byte) error {
	if len(payload) > l.cfg.ctlPayload {
		return fmt.Errorf("netio: control message of %d bytes, limit %d", len(payload), l.cfg.ctlPayload)
	}
	l.ctlOut = append(l.ctlOut, append([]byte{kind}, payload...))
	l.service()
	return nil
}

// sendQueuedControl posts the owner's queued control messages. They take
// data credits, never the reserve, and leave one control slot free for
// credit returns and FIN.
func (l *link) sendQueuedControl() {
	for len(l.ctlOut) > 0 {
		slot, ok := l.res.ctl.freeLeavingOne()
		if !ok || !l.credit.canTake(dataSend) {
			return
		}
		m := l.ctlOut[0]
		give, _ := l.credit.take(dataSend)
		if err := l.res.ctl.send(l.res.ep, slot, m[0], 0, give, m[1:]); err != nil {
			l.credit.undo(give)
			if !errors.Is(err, ofi.EAGAIN) {
				l.fail(err)
			}
			return
		}
		l.ctlOut[0] = nil
		l.ctlOut = l.ctlOut[1:]
		l.eng.markDirty(l)
	}
}

// sendControl sends a header-only message (credits or FIN, with flags),
// returning everything owed, and reports whether it went out.
func (l *link) sendControl(kind, flags uint8) bool {
	slot, ok := l.res.ctl.free()
	if !ok || !l.credit.canTake(controlSend) {
		return false
	}
	give, _ := l.credit.take(controlSend)
	if err := l.res.ctl.send(l.res.ep, slot, kind, flags, give, nil); err != nil {
		l.credit.undo(give)
		if !errors.Is(err, ofi.EAGAIN) {
			l.fail(err)
		}
		return false
	}
	l.eng.markDirty(l)
	return true
}

// notify wakes a user goroutine that waits on w; one eventfd write, and
// none while it is busy.
func (l *link) notify(waiting *atomic.Bool, w *waker) {
	if waiting.Load() && waiting.Swap(false) {
		l.eng.wakesInFlight.Add(1)
		w.wake()
	}
}

// close starts an orderly close: what was written is sent, then FIN, and
// the link is released once every send has completed or linger has
// passed. It does not wait; life.released is closed at the end. On the
// reactor.
func (l *link) close() {
	switch l.life.state {
	case linkConnecting, linkEnded:
		l.finishClose()
	case linkOpen:
		l.life.drain(l.cfg.linger)
		// The owner's readers are gone: unread buffers are ours.
		for {
			slot, ok := l.rx.ready.pop()
			if !ok {
				break
			}
			l.rxReclaim = append(l.rxReclaim, slot)
		}
		l.eng.linger(l)
		l.service()
	}
}

// closeAndWait closes a link that never reached its user (a Dial that
// failed) and waits for it to let go. Not on the reactor.
func (l *link) closeAndWait() {
	if l.eng.r.SubmitFunc(l.close) == nil {
		<-l.life.released
	}
}

// closeWrite closes the owner's writing side and not the link: FIN goes
// once everything written is posted, and the link goes on receiving. A
// later close sends no second FIN. On the reactor.
func (l *link) closeWrite() {
	if l.life.state != linkOpen {
		return // closing sends FIN itself; an ended link sends nothing
	}
	l.shutWrite = true
	l.service()
}

// sendFin sends FIN, once, when everything written is posted (or is
// being dropped), with the owner's farewell as its payload.
func (l *link) sendFin() {
	if l.finSent || !l.dropping && (l.txPosted != l.tx.head.Load() || len(l.ctlOut) > 0) {
		return
	}
	if l.farewell != nil {
		l.finPayload = l.farewell(l.dropping)
		l.farewell = nil
	}
	var flags uint8
	if l.shutWrite {
		flags = flagHalfClose
	}
	if l.finPayload == nil {
		l.finSent = l.sendControl(kindFin, flags)
		return
	}
	slot, ok := l.res.ctl.free()
	if !ok || !l.credit.canTake(controlSend) {
		return
	}
	give, _ := l.credit.take(controlSend)
	if err := l.res.ctl.send(l.res.ep, slot, kindFin, flags, give, l.finPayload); err != nil {
		l.credit.undo(give)
		if !errors.Is(err, ofi.EAGAIN) {
			l.fail(err)
		}
		return
	}
	l.finSent = true
	l.eng.markDirty(l)
}

// closeNow closes l at once for its owner: what was written and not
// posted is dropped, the owner's control messages too, and FIN goes with
// the farewell as soon as a credit allows, the last one included. On the
// reactor.
func (l *link) closeNow() {
	l.dropping = true
	l.ctlOut = nil
	if l.life.state == linkDraining {
		l.service()
		return
	}
	l.close()
}

// continueClose sends FIN once everything written is posted, and finishes
// once every send has completed, so fi_shutdown loses nothing.
func (l *link) continueClose() {
	l.sendFin()
	if l.finSent && l.tx.done.Load() == l.txPosted && l.res.ctl.idle() {
		l.finishClose()
	}
}

// lingerExpired reports whether a draining link has waited long enough,
// and if so finishes it.
func (l *link) lingerExpired(now time.Time) bool {
	if !now.After(l.life.lingerUntil) {
		return false
	}
	if (l.farewell != nil || l.finPayload != nil) && !l.dropping && !l.finSent {
		// The owner says what did not go: one more while for its FIN,
		// which may take the last credit.
		l.life.lingerUntil = now.Add(min(l.cfg.linger, farewellGrace))
		l.closeNow()
		return l.life.state == linkClosed
	}
	l.finishClose()
	return true
}

// farewellGrace bounds how long a link that gave up on its data waits for
// its FIN, with the owner's farewell, to go.
const farewellGrace = time.Second

// finishClose tears the endpoint down and frees everything.
func (l *link) finishClose() {
	if l.life.state == linkClosed {
		return
	}
	if !l.life.ended.Load() && l.life.wasOpen {
		l.res.ep.Shutdown()
	}
	l.releaseResources()
	l.life.release()
	l.owner.released(l)
	l.eng.release()
}

// releaseResources closes in libfabric's order: endpoint, then the drained
// queue, then the memory it pointed at.
func (l *link) releaseResources() {
	e, res := l.eng, &l.res
	l.stopCQ()
	if res.token != 0 {
		delete(e.targets, res.token)
	}
	if res.ep != nil {
		res.ep.Close()
		res.ep = nil
	}
	l.unpinAll() // no provider points at a writer's slice now (lent.go)
	if res.cq != nil {
		for i := 0; i < 16; i++ {
			n, err := res.cq.Read(e.cqBuf[:])
			if err != nil {
				var ce ofi.CompletionError
				res.cq.ReadError(&ce)
				continue
			}
			if n == 0 {
				break
			}
		}
		res.cq.Close()
		res.cq = nil
	}
	if res.rxRegion != nil && l.rx.held.Load() {
		// Messages from NextMessage may still point into the receive
		// buffers: unmap them only once they and the link are garbage.
		res.rxRegion.Deregister()
		runtime.AddCleanup(l, func(r *ofi.Region) { r.Close() }, res.rxRegion)
		res.rxRegion = nil
	}
	for _, r := range []**ofi.Region{&res.rxRegion, &res.txRegion} {
		if *r != nil {
			(*r).Close()
			*r = nil
		}
	}
	res.ctl.close()
	releaseRegistered(res.reserved)
	res.reserved = 0
	l.tx.wake.close()
	l.rx.wake.close()
	if res.dom != nil {
		res.dom.release()
		res.dom = nil
	}
	if res.fab != nil {
		res.fab.release()
		res.fab = nil
	}
}
