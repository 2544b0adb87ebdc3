package netio

import (
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/netio-go/netio/internal/admit"
	"github.com/netio-go/netio/internal/lifecycle"

	"github.com/netio-go/netio/internal/ring"

	"github.com/netio-go/netio/internal/page"
	"github.com/netio-go/netio/internal/wire"
	"github.com/netio-go/netio/ofi"
)

// A link's set-up: its endpoint and buffers opened, the handshake (hello,
// connect or accept, the memory it registers) and the connection-management
// events of its endpoint.

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
	window, bufSize := l.sizeFor(info)
	if err = l.openBuffers(window, bufSize); err != nil {
		return err
	}
	// Receives, sends, control messages, and the tcp guard's trap.
	if res.cq, err = res.dom.domain.OpenCQ(window + l.cfg.txWindow + ctlSlots + 2); err != nil {
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
	res.port = res.ep
	if err = l.postWindow(); err != nil {
		return err
	}
	res.cqWait.Add(res.cq)
	return nil
}

// sizeFor sizes l for the endpoints of info and returns its receive
// window and buffer size.
func (l *link) sizeFor(info *ofi.Info) (window, bufSize int) {
	// Never more receives or sends in flight than the endpoint's queues
	// hold: tcp ignores its limits, verbs answers EAGAIN.
	window, bufSize = l.cfg.rxWindow, l.cfg.rxBufSize
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
	// saves 4 of a 64 B round trip's 18 system calls
	// (docs/decisions/2026-11-23-inject.md).
	l.sizes.inject = min(info.InjectSize(), maxInject)
	l.sizes.lend = !info.NeedsRegistration() && info.SendIOVLimit() >= 2
	if m := info.MaxMsgSize(); m >= minBufferSize && m < maxBufferSize {
		l.sizes.msgMax = int(m)
	}
	return window, min(bufSize, l.sizes.msgMax)
}

// openBuffers makes l's receive buffers and control slots on its domain.
// What may run out (the memory budget, memory, descriptors) is taken
// before the endpoint: the endpoint of an accepted request takes over
// its socket, and a request that fails before that can still be rejected
// with a reason instead of seeing its socket closed.
func (l *link) openBuffers(window, bufSize int) (err error) {
	res := &l.res
	if err = l.reserve(window*bufSize + ctlSlots*(wire.HeaderSize+l.cfg.ctlPayload)); err != nil {
		return err
	}
	if res.rxRegion, err = res.dom.domain.NewRegion(window * bufSize); err != nil {
		return err
	}
	if err = res.ctl.open(res.dom.domain, l.cfg.ctlPayload); err != nil {
		return err
	}
	l.rx = recvQueue{mem: res.rxRegion.Bytes(), bufSize: bufSize, wake: l.rx.wake,
		ready: ring.New(window), free: ring.New(window), refs: make([]atomic.Int32, window),
		kickAt: max(1, window/4)}
	if !l.cfg.framing.Packed {
		// A page holds many messages: hand each back as soon as it is
		// read, the way NetIO re-posts a page.
		l.rx.kickAt = 1
	}
	l.rxReclaim = make([]uint32, 0, window)
	l.gives = make([]uint16, 0, l.cfg.txWindow)
	return nil
}

// postWindow posts every receive buffer, so the peer may send as soon as
// it knows of them.
func (l *link) postWindow() error {
	e := l.eng
	segs := e.segBuf[:0]
	for i := range l.rx.refs {
		segs = append(segs, ofi.Segment{Offset: uint64(i * l.rx.bufSize), Len: uint64(l.rx.bufSize), Token: tokRecv | uint64(i)})
	}
	e.segBuf = segs[:0]
	_, err := l.res.postRecv(l.res.rxRegion, segs)
	return err
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
func (l *link) hello() wire.Hello {
	return wire.Hello{Version: wire.ProtocolLevel, Mode: uint8(l.cfg.mode), Role: l.cfg.role, Window: uint32(len(l.rx.refs)), BufferSize: uint32(l.rx.bufSize), MaxMessage: uint64(l.cfg.maxMessage)}
}

// connect begins an active connection.
func (l *link) connect(info *ofi.Info) error {
	l.hb.dialed = true
	if err := l.openEndpoint(info, nil); err != nil {
		l.releaseResources()
		return err
	}
	var data []byte
	data, l.authReq = admit.SealRequest(l.cfg.key, l.hello(), time.Now())
	if err := l.res.ep.Connect(info, data); err != nil {
		l.releaseResources()
		return err
	}
	return nil
}

// accept answers the connection request info, which came to at, with h
// from the peer.
func (l *link) accept(at *acceptor, info *ofi.Info, h wire.Hello) error {
	err := l.openEndpoint(info, at)
	if err == nil {
		err = l.setPeer(h)
	}
	if err == nil {
		err = l.res.ep.Accept(admit.SealAccept(l.cfg.key, l.hello(), h.Auth))
	}
	if err != nil {
		l.releaseResources()
		l.owner.released(l) // what sized built goes too
	}
	return err
}

// setPeer records what the peer posts for us and sizes the send side.
func (l *link) setPeer(h wire.Hello) error {
	// Use at most what we would keep ourselves: the peer's handshake must
	// not choose how much memory this side commits. Fewer send buffers and
	// smaller buffers than the peer offers are always allowed.
	s := &l.sizes
	s.peerWindow = int(h.Window)
	slots := min(int(h.Window), l.cfg.txWindow, s.txMax)
	bufSize := min(int(h.BufferSize), l.cfg.txBufSize, s.msgMax)
	l.credit.Reset(s.peerWindow, len(l.rx.refs))
	s.maxSend = l.cfg.maxMessage
	if h.MaxMessage < uint64(s.maxSend) {
		s.maxSend = int(h.MaxMessage)
	}
	s.maxRecv = uint64(l.cfg.maxMessage)
	l.inline = page.NewInlineReader(l.cfg.framing, s.maxRecv)
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
	if err := registered.Reserve(n); err != nil {
		return err
	}
	l.res.reserved += n
	return nil
}

// registers is an upper bound of the memory a link of c accepted from a
// peer that sent h registers: what openEndpoint and setPeer reserve.
func (c *linkConfig) registers(h wire.Hello) int {
	tx := min(int(h.Window), c.txWindow) * min(int(h.BufferSize), c.txBufSize)
	return c.rxWindow*c.rxBufSize + tx + ctlSlots*(wire.HeaderSize+c.ctlPayload)
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
		if l.life.State() == lifecycle.Connecting {
			err = l.setupError(ev)
		}
		l.fail(err)
	}
}

// rejection is the error of a listener's reject marker, or nil for
// anything else.
func (l *link) rejection(data []byte) error {
	switch string(data) {
	case wire.RejectMarker:
		return ErrRejected
	case wire.RejectModeMarker:
		return fmt.Errorf("%w: the listener does not use %v mode", ErrRejected, l.cfg.mode)
	case wire.RejectRoleMarker:
		return fmt.Errorf("%w: the listener does not take a %v", ErrRejected, l.cfg.role)
	case wire.RejectLimitMarker:
		return fmt.Errorf("%w: %w", ErrRejected, errAtLimit)
	case wire.RejectAuthMarker:
		return errAuth(l.cfg.key)
	case rejectFailedMarker:
		return acceptFailedError()
	}
	return nil
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
	if err := l.rejection(ev.PrivateData()); err != nil {
		return err
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
	if l.life.State() != lifecycle.Connecting {
		return
	}
	if l.tx.mem == nil { // dialing: the accept's hello sizes the send side
		// With a key, the listener proves it holds it before anything
		// it sent is believed, or read: the queue is not watched yet.
		if err := l.takeAccept(ev.PrivateData()); err != nil {
			l.fail(err)
			return
		}
	}
	if err := l.watchCQ(); err != nil {
		l.fail(err)
		return
	}
	l.opened()
}

// takeAccept checks the listener's answer to a dialing link, its key
// proof first, and sizes the send side from it.
func (l *link) takeAccept(data []byte) error {
	err := openAccept(l.cfg.key, data, l.authReq)
	var h wire.Hello
	if err == nil {
		h, err = wire.ParseHello(data)
	}
	if err == nil && Mode(h.Mode) != l.cfg.mode {
		err = fmt.Errorf("%w: peer accepted in %v mode, not %v", ErrProtocol, h.Mode, l.cfg.mode)
	}
	if err == nil && h.Role != l.cfg.role.Peer() {
		err = fmt.Errorf("%w: peer accepted as a %v, not a %v", ErrProtocol, h.Role, l.cfg.role.Peer())
	}
	if err == nil {
		err = l.setPeer(h)
	}
	return err
}

// opened is the link connected: data flows.
func (l *link) opened() {
	l.life.Move(lifecycle.Open)
	l.startBeat()
	l.connected <- nil
	l.owner.up(l)
	l.service()
}
