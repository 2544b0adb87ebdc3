package netio

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/netio-go/netio/ofi"
	"github.com/netio-go/netio/reactor"
)

// Conn is a message connection over a libfabric FI_EP_MSG endpoint. In
// LowLatency mode (the default) Write sends each message at once; in
// HighThroughput mode messages are batched into pages (see Mode). It
// implements net.Conn; Read sees the messages as one byte stream, while
// ReadMessage, AppendMessage and NextMessage (no copy) keep their
// boundaries.
//
// Read and Write may be called from different goroutines at the same time;
// concurrent Writes are serialised whole messages.
type Conn struct {
	eng     *engine
	cfg     Config
	network string
	local   Addr
	remote  Addr
	ht      bool // HighThroughput mode
	stats   connStats

	// Fixed once connected.
	rxWindow   int // receive buffers this side posts
	rxBufSize  int
	txSlots    int // send buffers this side keeps: at most the peer's window
	peerWindow int // receive buffers the peer posts for us
	txMax      int // sends the endpoint's transmit queue holds
	txBufSize  int // the peer's buffer size: the largest fragment or page
	payloadMax int // payload bytes of one send buffer: a fragment or a page
	rxKickAt   int // free receive buffers that make the reader kick the reactor
	rxRefs     []atomic.Int32
	maxSend    int
	maxRecv    uint64
	rxRegion   *ofi.Region
	txRegion   *ofi.Region
	ctlRegion  *ofi.Region
	rxMem      []byte
	txMem      []byte
	txLen      []uint32 // bytes to send per send buffer; written by the writer before publishing txHead

	// Writer to reactor.
	wmu       sync.Mutex
	txHead    atomic.Uint64 // send buffers filled, published by the writer
	txDone    atomic.Uint64 // send buffers completed, published by the reactor
	txWaiting atomic.Bool
	txWake    *waker
	werr      error // a Write that failed half-way poisons the write side
	wMsgs     uint64
	wBytes    uint64
	wOpen     bool       // HighThroughput: a page is being filled
	pw        pageWriter // the open page
	// wPagesOpened counts pages the writer opened, for the reactor to
	// notice a new one.
	wPagesOpened atomic.Uint64

	// Reactor to reader and back.
	rmu       sync.Mutex
	rxReady   *spscRing // received data buffers, in order
	rxFree    *spscRing // buffers the reader is done with
	rxWaiting atomic.Bool
	rxWake    *waker
	rxUrgent  atomic.Bool // the peer is out of credit: hand buffers back at once
	cur       int         // reader: buffer being read, -1 if none
	rc        cursor      // reader: position in the messages of cur
	handed    int32       // reader: Messages handed out from cur
	rxMsgs    uint64      // reader
	rxBytes   uint64      // reader
	rerr      error       // reader: what the peer sent did not decode
	zeroCopy  atomic.Bool // NextMessage was used: Messages may outlive the Conn
	freeMu    sync.Mutex  // serialises rxFree's producers; guards spares
	spares    [][]byte    // buffers for messages NextMessage joins
	joined    []byte      // reader: the message Next joined

	scheduled atomic.Bool // a kick is queued on the reactor
	closing   chan struct{}
	released  chan struct{} // closed when the reactor has torn everything down
	closeOnce sync.Once
	closed    atomic.Bool   // closing is closed: a cheaper test on the fast paths
	ended     atomic.Bool   // dead is closed
	dead      chan struct{} // closed by the reactor when the connection ended
	deadErr   error         // why; written before dead is closed
	rdl, wdl  atomic.Int64  // read and write deadlines, Unix ns; 0 is none
	pollFor   time.Duration
	connected chan error

	// Reactor only.
	token        uint64
	state        connState
	fab          *fabricRes
	dom          *domainRes
	ep           *ofi.Endpoint
	cq           *ofi.CQ
	cqRegistered bool
	cqWait       ofi.WaitList // just the CQ
	ctlSeg       [1]ofi.Segment
	dirty        bool
	txPosted     uint64
	txCompleted  []bool
	credits      int // buffers the peer has posted for us and we have not used
	owed         int // buffers we re-posted and have not told the peer about
	peerCredits  int // buffers the peer believes it may still use
	ctlBusy      uint32
	rxMsgLeft    uint64 // bytes of the message being received still to come
	rxMsgLen     uint64
	rxNotify     bool
	up           bool // connected once: fi_shutdown is allowed
	finSent      bool
	finRecv      bool
	lingerUntil  time.Time
	onClosed     func()
	cbMsg        []byte   // OnMessage reassembly
	rxReclaim    []uint32 // buffers the reactor itself is done with (control messages, OnMessage)
	flushTimer   *reactor.Timer
	flushArmed   bool
	seenOpened   uint64    // wPagesOpened at the last look
	pageSince    time.Time // when the reactor saw the open page first
	idleWatched  bool
	idleSeen     uint64   // wMsgs at the last idle check
	gives        []uint16 // credits carried by each send of the batch being posted
	listener     *Listener
}

type connState uint8

const (
	stateConnecting connState = iota
	stateConnected
	stateClosing
	stateClosed
)

// Tokens of completion-queue operations: the kind in the top bits, the
// buffer index below.
const (
	tokRecv     = 0 << 62
	tokSend     = 1 << 62
	tokCtl      = 2 << 62
	tokKindMask = 3 << 62
	ctlSlots    = 4
)

// connTask is the Conn as a reactor task: run when a goroutine kicked it.
type connTask Conn

func (t *connTask) Run() { (*Conn)(t).onKick() }

// cqHandler is the Conn as the handler of its completion queue's fd.
type cqHandler Conn

// HandleEvents drains the queue and re-arms its wait fd, which stays
// readable (and would keep the reactor spinning) until fi_trywait succeeds.
func (h *cqHandler) HandleEvents(uint32) {
	c := (*Conn)(h)
	for i := 0; i < 8; i++ {
		c.pollCQ()
		if c.cq == nil || !c.cqRegistered {
			return
		}
		if ok, err := c.fab.fabric.TryWait(&c.cqWait); ok || err != nil {
			return
		}
	}
	c.eng.markDirty(c) // still busy: the poller takes it from here
}

func newConn(eng *engine, cfg Config, network string) (*Conn, error) {
	rx, err := newWaker()
	if err != nil {
		return nil, err
	}
	tx, err := newWaker()
	if err != nil {
		rx.close()
		return nil, err
	}
	return &Conn{
		rxWake:    rx,
		pollFor:   pollFor(cfg),
		txWake:    tx,
		eng:       eng,
		cfg:       cfg,
		network:   network,
		closing:   make(chan struct{}),
		released:  make(chan struct{}),
		dead:      make(chan struct{}),
		connected: make(chan error, 1),
		cur:       -1,
		ht:        cfg.Mode == HighThroughput,
	}, nil
}

// Dial connects to address on the named network (a libfabric provider;
// "" picks DefaultNetwork or $NETIO_PROVIDER). See DialContext.
func Dial(network, address string, opts ...Option) (*Conn, error) {
	return DialContext(context.Background(), network, address, opts...)
}

// DialContext connects to address, a host:port, over the provider named by
// network. Connection set-up is bounded by ctx and by
// Config.ConnectTimeout, whichever ends first.
func DialContext(ctx context.Context, network, address string, opts ...Option) (*Conn, error) {
	a, err := parseArgs("dial", network, address, "127.0.0.1", opts)
	if err != nil {
		return nil, err
	}
	cfg, prov, host, port, opErr := a.cfg, a.provider, a.host, a.port, a.opError
	if err := ctx.Err(); err != nil {
		return nil, opErr(err)
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.ConnectTimeout)
	defer cancel()
	infos, err := ofi.GetInfo(ofi.Hints{Provider: prov, Node: host, Service: port})
	if err != nil {
		return nil, opErr(a.lookupError(ctx, err))
	}
	eng, err := acquireEngine()
	if err != nil {
		infos.Free()
		return nil, opErr(err)
	}
	c, err := newConn(eng, cfg, prov)
	if err != nil {
		infos.Free()
		eng.release()
		return nil, opErr(err)
	}
	if ap, ok := infos.Entries[0].DestAddr(); ok {
		c.remote = Addr{Provider: prov, AddrPort: ap}
	}
	var startErr error
	if err := eng.r.Call(func() { startErr = c.startConnect(infos.Entries[0]) }); err != nil {
		startErr = err
	}
	infos.Free()
	if startErr != nil {
		eng.release()
		return nil, opErr(startErr)
	}
	select {
	case err := <-c.connected:
		if err != nil {
			c.Close()
			return nil, opErr(err)
		}
		return c, nil
	case <-ctx.Done():
		c.Close()
		err := ctx.Err()
		if errors.Is(err, context.DeadlineExceeded) {
			err = errTimeout
		}
		return nil, opErr(err)
	}
}

// errTimeout is a dial time-out: os.ErrDeadlineExceeded says Timeout() true.
var errTimeout = os.ErrDeadlineExceeded

// stringAddr is an address that could not be resolved, for error messages.
type stringAddr struct{ net, addr string }

func (a stringAddr) Network() string { return a.net }
func (a stringAddr) String() string  { return a.addr }

// openEndpoint opens the endpoint, queue and receive buffers of c from
// info and posts every receive buffer, so the peer may send as soon as it
// is connected. On the reactor.
func (c *Conn) openEndpoint(info *ofi.Info) (err error) {
	e := c.eng
	if c.fab, err = e.fabricFor(info); err != nil {
		return err
	}
	if c.dom, err = c.fab.domainFor(info); err != nil {
		return err
	}
	// Never more receives or sends in flight than the endpoint's queues
	// hold: tcp ignores its limits, verbs answers EAGAIN.
	c.rxWindow, c.rxBufSize = c.cfg.Window, c.cfg.BufferSize
	if rx := info.RxSize(); rx >= minWindow && rx < c.rxWindow {
		c.rxWindow = rx
	}
	if tx := info.TxSize() - ctlSlots; tx >= minWindow {
		c.txMax = tx
	} else {
		c.txMax = minWindow
	}
	if m := info.MaxMsgSize(); m >= minBufferSize && m < uint64(c.rxBufSize) {
		c.rxBufSize = int(m)
	}
	c.token = e.newToken(c)
	if c.ep, err = c.dom.domain.OpenEndpoint(info, c.token); err != nil {
		return err
	}
	if c.cq, err = c.dom.domain.OpenCQ(c.rxWindow + c.cfg.Window + ctlSlots + 1); err != nil {
		return err
	}
	if err = c.ep.BindEQ(c.fab.eq); err != nil {
		return err
	}
	if err = c.ep.BindCQ(c.cq); err != nil {
		return err
	}
	if err = c.ep.Enable(); err != nil {
		return err
	}
	if c.rxRegion, err = c.dom.domain.NewRegion(c.rxWindow * c.rxBufSize); err != nil {
		return err
	}
	c.rxMem = c.rxRegion.Bytes()
	if c.ctlRegion, err = c.dom.domain.NewRegion(ctlSlots * headerSize); err != nil {
		return err
	}
	c.rxReady = newSPSCRing(c.rxWindow)
	c.rxFree = newSPSCRing(c.rxWindow)
	c.rxRefs = make([]atomic.Int32, c.rxWindow)
	c.rxKickAt = max(1, c.rxWindow/4)
	if c.ht {
		// A page holds many messages: hand each back as soon as it is
		// read, the way NetIO re-posts a page.
		c.rxKickAt = 1
		if c.flushTimer, err = e.r.NewTimer(c.onFlushTimer); err != nil {
			return err
		}
	}
	c.rxReclaim = make([]uint32, 0, c.rxWindow)
	c.gives = make([]uint16, 0, c.cfg.Window)
	segs := e.segBuf[:0]
	for i := 0; i < c.rxWindow; i++ {
		segs = append(segs, ofi.Segment{Offset: uint64(i * c.rxBufSize), Len: uint64(c.rxBufSize), Token: tokRecv | uint64(i)})
	}
	e.segBuf = segs[:0]
	if _, err = c.ep.PostRecv(c.rxRegion, segs); err != nil {
		return err
	}
	c.peerCredits = c.rxWindow
	c.cqWait.Add(c.cq)
	if err = e.r.Register(c.cq.FD(), reactorIn, (*cqHandler)(c)); err != nil {
		return err
	}
	c.cqRegistered = true
	e.markDirty(c)
	return nil
}

func (c *Conn) hello() []byte {
	return hello{version: protocolLevel, mode: c.cfg.Mode, window: uint32(c.rxWindow), bufferSize: uint32(c.rxBufSize), maxMessage: uint64(c.cfg.MaxMessageSize)}.marshal()
}

// startConnect begins an active connection; on the reactor.
func (c *Conn) startConnect(info *ofi.Info) error {
	if err := c.openEndpoint(info); err != nil {
		c.releaseResources()
		return err
	}
	if err := c.ep.Connect(info, c.hello()); err != nil {
		c.releaseResources()
		return err
	}
	return nil
}

// setPeer records what the peer posts for us and sizes the send side.
func (c *Conn) setPeer(h hello) error {
	// Use at most what we would post ourselves: the peer's handshake must
	// not choose how much memory this side commits. Fewer send buffers and
	// smaller fragments than the peer offers are always allowed.
	c.peerWindow = int(h.window)
	c.txSlots = min(int(h.window), c.cfg.Window, c.txMax)
	c.txBufSize = min(int(h.bufferSize), c.cfg.BufferSize, c.rxBufSize)
	c.credits = c.peerWindow
	c.maxSend = c.cfg.MaxMessageSize
	if h.maxMessage < uint64(c.maxSend) {
		c.maxSend = int(h.maxMessage)
	}
	c.maxRecv = uint64(c.cfg.MaxMessageSize)
	c.payloadMax = c.txBufSize - headerSize
	c.rc = cursor{prefixed: c.ht, max: c.maxRecv}
	var err error
	if c.txRegion, err = c.dom.domain.NewRegion(c.txSlots * c.txBufSize); err != nil {
		return err
	}
	c.txMem = c.txRegion.Bytes()
	c.txLen = make([]uint32, c.txSlots)
	c.txCompleted = make([]bool, c.txSlots)
	if ap, err := c.ep.LocalAddr(); err == nil {
		c.local = Addr{Provider: c.network, AddrPort: ap}
	}
	if ap, err := c.ep.PeerAddr(); err == nil {
		c.remote = Addr{Provider: c.network, AddrPort: ap}
	}
	return nil
}

// handleEvent takes the connection-management events of c's endpoint.
func (c *Conn) handleEvent(ev *ofi.Event) {
	switch ev.Kind {
	case ofi.EventConnected:
		c.onConnected(ev)
	case ofi.EventShutdown:
		c.pollCQ() // completions that arrived before the shutdown come first
		if c.finRecv {
			c.fail(io.EOF)
		} else {
			c.fail(syscall.ECONNRESET)
		}
	case ofi.EventError:
		err := error(ev.Err)
		if errors.Is(ev.Err.Err, ofi.ECONNREFUSED) && c.state == stateConnecting {
			err = syscall.ECONNREFUSED
			switch string(ev.PrivateData()) {
			case rejectMarker:
				err = ErrRejected
			case rejectModeMarker:
				err = fmt.Errorf("%w: the listener does not use %v mode", ErrRejected, c.cfg.Mode)
			}
		}
		c.fail(err)
	}
}

func (c *Conn) onConnected(ev *ofi.Event) {
	if c.state != stateConnecting {
		return
	}
	if c.listener == nil {
		h, err := parseHello(ev.PrivateData())
		if err == nil && h.mode != c.cfg.Mode {
			err = fmt.Errorf("%w: peer accepted in %v mode, not %v", ErrProtocol, h.mode, c.cfg.Mode)
		}
		if err == nil {
			err = c.setPeer(h)
		}
		if err != nil {
			c.fail(err)
			return
		}
	}
	c.state = stateConnected
	c.up = true
	c.connected <- nil
	if c.listener != nil {
		c.listener.onConnected(c)
	}
	c.service()
}

// fail ends the connection because of err (io.EOF for an orderly close by
// the peer). Data already received stays readable. On the reactor.
func (c *Conn) fail(err error) {
	switch c.state {
	case stateConnecting:
		c.state = stateClosing
		c.deadErr = err
		c.ended.Store(true)
		close(c.dead)
		c.connected <- err
		if c.listener != nil {
			c.listener.onFailed(c)
		}
		return
	case stateConnected:
		c.state = stateClosing
		c.deadErr = err
		c.ended.Store(true)
		close(c.dead)
		c.rxWake.wake()
		c.txWake.wake()
		c.stopCQ()
	case stateClosing:
		// A close in progress: whatever failed, finish it now.
		if c.lingerUntil.IsZero() {
			return
		}
		c.finishClose()
	}
}

// stopCQ stops watching the queue of a connection that has ended, so a
// dead endpoint cannot keep the reactor awake.
func (c *Conn) stopCQ() {
	if c.cqRegistered {
		c.eng.r.Unregister(c.cq.FD())
		c.cqRegistered = false
	}
	c.eng.forget(c)
}

// kick asks the reactor to look at c, at most once until it has.
func (c *Conn) kick() {
	if !c.scheduled.Load() && c.scheduled.CompareAndSwap(false, true) {
		if c.eng.r.Submit((*connTask)(c)) != nil {
			c.scheduled.Store(false)
		}
	}
}

func (c *Conn) onKick() {
	c.scheduled.Store(false)
	c.service()
}

// pollCQ reads c's completions; on the reactor.
func (c *Conn) pollCQ() bool {
	if c.cq == nil {
		return false
	}
	e := c.eng
	busy := false
	for c.cq != nil {
		n, err := c.cq.Read(e.cqBuf[:])
		if err != nil {
			var ce ofi.CompletionError
			if ok, _ := c.cq.ReadError(&ce); ok {
				busy = true
				c.onCompletionError(&ce)
				continue
			}
			break
		}
		if n == 0 {
			break
		}
		busy = true
		for i := 0; i < n && c.state != stateClosed; i++ {
			cmp := &e.cqBuf[i]
			if cmp.Token == ofi.TrapToken {
				c.foreignOp()
				continue
			}
			slot := uint32(cmp.Token)
			switch cmp.Token & tokKindMask {
			case tokRecv:
				c.onRecv(slot, cmp.Len)
			case tokSend:
				c.onSent(slot)
			case tokCtl:
				c.ctlBusy &^= 1 << slot
			}
		}
		if n < len(e.cqBuf) {
			break
		}
	}
	if c.state == stateClosed {
		return busy
	}
	if busy {
		e.markDirty(c)
		if c.rxNotify {
			c.rxNotify = false
			c.notifyReader()
		}
		c.service()
	}
	return busy
}

func (c *Conn) onCompletionError(ce *ofi.CompletionError) {
	if errors.Is(&ce.AsyncError, ofi.ECANCELED) {
		return // buffers flushed by a shutdown or close
	}
	if c.state == stateClosed {
		return
	}
	if ce.Token == ofi.TrapToken {
		c.foreignOp() // a forged tagged message too large for the trap
		return
	}
	err := error(&ce.AsyncError)
	if c.finRecv {
		// The peer closed in order and is gone: what we still tried to
		// send fails, but reading ends with io.EOF as usual.
		err = io.EOF
	} else if errors.Is(err, ofi.ETRUNC) {
		err = fmt.Errorf("%w: peer sent a message larger than the receive buffer", ErrProtocol)
	}
	c.fail(err)
}

// onSent frees a send buffer; completions may come out of order.
func (c *Conn) onSent(slot uint32) {
	if c.txCompleted == nil || int(slot) >= len(c.txCompleted) {
		return
	}
	c.txCompleted[slot] = true
	done := c.txDone.Load()
	for c.txCompleted[done%uint64(c.txSlots)] && done < c.txPosted {
		c.txCompleted[done%uint64(c.txSlots)] = false
		done++
	}
	c.txDone.Store(done)
	c.notifyWriter()
}

// foreignOp ends a connection whose peer sent a libfabric tagged message,
// caught by the ofi guard's trap: netio never sends one, and without the
// trap the tcp provider would have crashed the process on it.
func (c *Conn) foreignOp() {
	c.protocolError("peer sent a libfabric tagged message, which netio never uses")
}

func (c *Conn) protocolError(format string, args ...any) {
	c.fail(fmt.Errorf("%w: "+format, append([]any{ErrProtocol}, args...)...))
}

// onRecv checks and routes one received buffer.
func (c *Conn) onRecv(slot uint32, n uint64) {
	if c.state != stateConnected && c.state != stateClosing || c.deadErr != nil {
		return
	}
	if int(slot) >= c.rxWindow {
		c.protocolError("completion for unknown buffer %d", slot)
		return
	}
	c.peerCredits--
	c.stats.buffersReceived.Add(1)
	if n < headerSize {
		c.protocolError("truncated message of %d bytes", n)
		return
	}
	b := c.rxMem[int(slot)*c.rxBufSize:]
	h := readHeader(b)
	if uint64(h.fragLen)+headerSize != n {
		c.protocolError("header says %d bytes, %d arrived", h.fragLen, n-headerSize)
		return
	}
	if c.credits += int(h.credits); c.credits > c.peerWindow {
		c.protocolError("peer returned %d credits for a window of %d", c.credits, c.peerWindow)
		return
	}
	switch h.kind {
	case kindPage:
		switch {
		case !c.ht:
			c.protocolError("page on a %v connection", c.cfg.Mode)
		case c.finRecv:
			c.protocolError("data after the peer closed")
		case h.msgLen > uint64(h.fragLen):
			c.protocolError("page continues %d bytes but holds %d", h.msgLen, h.fragLen)
		case !c.lingerUntil.IsZero():
			c.rxReclaim = append(c.rxReclaim, slot) // closed by the user: nobody reads it
		default:
			c.rxReady.push(slot)
			c.rxNotify = true
		}
	case kindData:
		if c.ht {
			c.protocolError("low-latency message on a %v connection", c.cfg.Mode)
			return
		}
		if c.finRecv {
			c.protocolError("data after the peer closed")
			return
		}
		if c.rxMsgLeft == 0 {
			if h.msgLen > c.maxRecv {
				c.fail(fmt.Errorf("%w: peer sent %d bytes, limit %d", ErrMessageTooLarge, h.msgLen, c.maxRecv))
				return
			}
			c.rxMsgLen, c.rxMsgLeft = h.msgLen, h.msgLen
		} else if h.msgLen != c.rxMsgLen {
			c.protocolError("fragment of a %d-byte message inside a %d-byte one", h.msgLen, c.rxMsgLen)
			return
		}
		if uint64(h.fragLen) > c.rxMsgLeft {
			c.protocolError("fragment of %d bytes with %d left in the message", h.fragLen, c.rxMsgLeft)
			return
		}
		c.rxMsgLeft -= uint64(h.fragLen)
		if (c.rxMsgLeft == 0) != (h.flags&flagLast != 0) {
			c.protocolError("message end flag disagrees with its length")
			return
		}
		if c.cfg.OnMessage != nil {
			c.deliverCallback(slot, h)
			return
		}
		if !c.lingerUntil.IsZero() {
			// Closed by the user: nobody will read it. Dropping it returns
			// the credit, so a peer stuck writing to us can finish too.
			c.rxReclaim = append(c.rxReclaim, slot)
			return
		}
		c.rxReady.push(slot)
		c.rxNotify = true
	case kindCredit:
		c.rxReclaim = append(c.rxReclaim, slot) // no reader involved: re-post at once
	case kindFin:
		c.finRecv = true
		c.rxReclaim = append(c.rxReclaim, slot)
	default:
		c.protocolError("unknown message kind %d", h.kind)
	}
}

// deliverCallback runs Config.OnMessage on the reactor.
func (c *Conn) deliverCallback(slot uint32, h header) {
	off := int(slot) * c.rxBufSize
	frag := c.rxMem[off+headerSize : off+headerSize+int(h.fragLen)]
	if h.flags&flagLast != 0 && uint64(h.fragLen) == h.msgLen {
		c.cfg.OnMessage(c, frag)
	} else {
		c.cbMsg = append(c.cbMsg, frag...)
		if h.flags&flagLast != 0 {
			c.cfg.OnMessage(c, c.cbMsg)
			c.cbMsg = c.cbMsg[:0]
		}
	}
	c.rxReclaim = append(c.rxReclaim, slot)
}

// service posts what is ready: receive buffers handed back, written
// messages the credits allow, credit returns, and the closing FIN.
func (c *Conn) service() {
	if c.state != stateConnected && c.state != stateClosing || c.deadErr != nil {
		return
	}
	e := c.eng
	if c.ht && c.state == stateConnected {
		c.watchPage()
	}
	// Receive buffers first: they become credits for the peer.
	segs := e.segBuf[:0]
	for {
		slot, ok := c.rxFree.pop()
		if !ok {
			break
		}
		c.rxReclaim = append(c.rxReclaim, slot)
	}
	for _, slot := range c.rxReclaim {
		segs = append(segs, ofi.Segment{Offset: uint64(int(slot) * c.rxBufSize), Len: uint64(c.rxBufSize), Token: tokRecv | uint64(slot)})
	}
	c.rxReclaim = c.rxReclaim[:0]
	if len(segs) > 0 {
		n, err := c.ep.PostRecv(c.rxRegion, segs)
		c.owed += n
		for _, sg := range segs[n:] { // a full queue: again after the next completion
			c.rxReclaim = append(c.rxReclaim, uint32(sg.Token))
		}
		if err != nil && !errors.Is(err, ofi.EAGAIN) {
			c.fail(err)
			return
		}
	}
	// Data: one credit always stays back for credit returns and FIN.
	segs = segs[:0]
	head := c.txHead.Load()
	for c.txPosted < head && c.credits >= 2 {
		slot := int(c.txPosted % uint64(c.txSlots))
		give := min(c.owed, 0xffff)
		putCredits(c.txMem[slot*c.txBufSize:], uint16(give))
		c.owed -= give
		c.peerCredits += give
		c.gives = append(c.gives, uint16(give))
		segs = append(segs, ofi.Segment{Offset: uint64(slot * c.txBufSize), Len: uint64(c.txLen[slot]), Token: tokSend | uint64(slot)})
		c.credits--
		c.txPosted++
	}
	if len(segs) > 0 {
		n, err := c.ep.PostSend(c.txRegion, segs)
		c.stats.buffersSent.Add(uint64(n))
		// What did not go out (a full queue, EAGAIN on verbs) is taken
		// back, credits and all, and posted after the next completion.
		for _, g := range c.gives[n:] {
			c.owed += int(g)
			c.peerCredits -= int(g)
			c.credits++
			c.txPosted--
		}
		c.gives = c.gives[:0]
		if err != nil && !errors.Is(err, ofi.EAGAIN) {
			c.fail(err)
			return
		}
	}
	e.segBuf = segs[:0]
	// An explicit credit return when enough is owed or the peer is stuck.
	// After the peer's FIN it sends nothing more and needs no credit.
	if c.owed > 0 && !c.finRecv && (c.owed >= c.rxWindow/2 || c.peerCredits < 2) && c.credits >= 1 {
		c.sendControl(kindCredit)
	}
	c.rxUrgent.Store(c.peerCredits < 2)
	if c.state == stateClosing {
		c.continueClose()
	}
	if len(segs) > 0 || c.owed > 0 {
		e.markDirty(c)
	}
}

// sendControl sends a header-only message (credits or FIN) from the small
// control region, returning everything owed.
func (c *Conn) sendControl(kind uint8) bool {
	slot := -1
	for i := 0; i < ctlSlots; i++ {
		if c.ctlBusy&(1<<i) == 0 {
			slot = i
			break
		}
	}
	if slot < 0 || c.credits < 1 {
		return false
	}
	give := min(c.owed, 0xffff)
	b := c.ctlRegion.Bytes()[slot*headerSize:]
	putHeader(b, header{kind: kind, flags: flagLast, credits: uint16(give)})
	c.ctlSeg[0] = ofi.Segment{Offset: uint64(slot * headerSize), Len: headerSize, Token: tokCtl | uint64(slot)}
	if _, err := c.ep.PostSend(c.ctlRegion, c.ctlSeg[:]); err != nil {
		if !errors.Is(err, ofi.EAGAIN) {
			c.fail(err)
		}
		return false
	}
	c.ctlBusy |= 1 << slot
	c.owed -= give
	c.peerCredits += give
	c.credits--
	c.eng.markDirty(c)
	return true
}

// notifyReader wakes a reader that waits; one eventfd write, and none
// while the reader is busy.
func (c *Conn) notifyReader() {
	if c.rxWaiting.Load() && c.rxWaiting.Swap(false) {
		wakesInFlight.Add(1)
		c.rxWake.wake()
	}
}

func (c *Conn) notifyWriter() {
	if c.txWaiting.Load() && c.txWaiting.Swap(false) {
		wakesInFlight.Add(1)
		c.txWake.wake()
	}
}

// wakesInFlight counts wake-ups sent to parked netio goroutines that have
// not run yet. While there are any, nobody polls: Go's scheduler looks at
// the netpoller only when a processor has nothing else to run, so a
// goroutine that polls and yields would keep the woken one from running.
var wakesInFlight atomic.Int32

// stopWaiting clears a waiting flag after a wait. If the reactor cleared it
// first, it also sent a wake-up, which this goroutine now accounts for.
func (c *Conn) stopWaiting(w *atomic.Bool) {
	if !w.Swap(false) {
		wakesInFlight.Add(-1)
	}
}

// parks counts every park, for the benchmarks' wakes-per-message figures.
var parks atomic.Uint64

// poll checks ready, yielding the processor in between, for up to
// Config.PollFor before a wait parks. A parked goroutine costs a thread
// wake-up when data comes (tens of µs on small VMs), more than a round trip
// on a fast fabric; a goroutine that yields keeps every other goroutine
// running. It also gives up at once when the connection ends.
func (c *Conn) poll(ready func() bool) bool {
	if c.pollFor <= 0 {
		return false
	}
	var start time.Time
	for i := 0; ; i++ {
		if ready() {
			return true
		}
		if isClosed(c.closing) || isClosed(c.dead) || wakesInFlight.Load() > 0 {
			return false
		}
		if i&15 == 0 {
			if start.IsZero() {
				start = time.Now()
			} else if time.Since(start) > c.pollFor {
				return false
			}
		}
		runtime.Gosched()
	}
}

// expired reports whether a deadline stored as Unix ns has passed.
func expired(d *atomic.Int64) bool {
	t := d.Load()
	return t != 0 && time.Now().UnixNano() >= t
}

func (c *Conn) opError(op string, err error) error {
	return &net.OpError{Op: op, Net: c.network, Source: &c.local, Addr: &c.remote, Err: err}
}

// Close closes the connection. Blocked Read and Write calls return
// net.ErrClosed. Close returns once every message already written has been
// handed to the fabric and the peer told that the stream ends (it reads
// io.EOF after the data), or after Config.Linger if the peer does not take
// them.
func (c *Conn) Close() error {
	first := false
	c.closeOnce.Do(func() {
		first = true
		c.closed.Store(true)
		close(c.closing)
	})
	if !first {
		return c.opError("close", net.ErrClosed)
	}
	// Wake blocked readers and writers and wait for them to leave: after
	// this nobody but the reactor touches the buffers.
	c.rxWake.wake()
	c.txWake.wake()
	c.rmu.Lock()
	if c.cur >= 0 {
		c.leaveBuffer() // Messages handed out from it keep it
	}
	c.wmu.Lock()
	if c.wOpen {
		c.seal(flushExplicit) // Close sends what was written
	}
	c.wmu.Unlock()
	c.rmu.Unlock()
	if c.eng.r.SubmitFunc(c.startClose) != nil || c.eng.r.OnReactor() {
		// The reactor is gone (it only stops when nothing uses it), or
		// this is OnMessage, which must not wait for the reactor.
		return nil
	}
	// What was written is sent before Close returns, as a program may exit
	// right after: messages still in netio's buffers would die with it
	// (data in a kernel socket buffer would not). Bounded by Linger.
	t := time.NewTimer(c.cfg.Linger + time.Second)
	defer t.Stop()
	select {
	case <-c.released:
	case <-t.C:
	}
	return nil
}

// startClose runs on the reactor after Close.
func (c *Conn) startClose() {
	switch c.state {
	case stateConnecting:
		c.state = stateClosing
		c.finishClose()
	case stateConnected:
		c.state = stateClosing
		c.lingerUntil = time.Now().Add(c.cfg.Linger)
		// Close waited for the reader to leave: unread buffers are ours.
		for {
			slot, ok := c.rxReady.pop()
			if !ok {
				break
			}
			c.rxReclaim = append(c.rxReclaim, slot)
		}
		c.eng.linger(c)
		c.service()
	case stateClosing:
		if c.deadErr != nil {
			c.finishClose()
		}
	}
}

// continueClose sends FIN once everything written is posted, and finishes
// once every send has completed, so fi_shutdown loses nothing.
func (c *Conn) continueClose() {
	if c.lingerUntil.IsZero() {
		return // the peer ended it; wait for the user's Close
	}
	if !c.finSent && c.txPosted == c.txHead.Load() {
		c.finSent = c.sendControl(kindFin)
	}
	if c.finSent && c.txDone.Load() == c.txPosted && c.ctlBusy == 0 {
		c.finishClose()
	}
}

// finishClose tears the endpoint down and frees everything; on the reactor.
func (c *Conn) finishClose() {
	if c.state == stateClosed {
		return
	}
	if c.deadErr == nil && c.up {
		c.ep.Shutdown()
	}
	c.state = stateClosed
	if c.deadErr == nil {
		c.deadErr = net.ErrClosed
		c.ended.Store(true)
		close(c.dead)
	}
	c.releaseResources()
	close(c.released)
	c.eng.release()
}

// releaseResources closes in libfabric's order: endpoint, then the drained
// queue, then the memory it pointed at.
func (c *Conn) releaseResources() {
	e := c.eng
	c.stopCQ()
	if c.token != 0 {
		delete(e.targets, c.token)
	}
	if c.ep != nil {
		c.ep.Close()
		c.ep = nil
	}
	if c.cq != nil {
		for i := 0; i < 16; i++ {
			n, err := c.cq.Read(e.cqBuf[:])
			if err != nil {
				var ce ofi.CompletionError
				c.cq.ReadError(&ce)
				continue
			}
			if n == 0 {
				break
			}
		}
		c.cq.Close()
		c.cq = nil
	}
	if c.flushTimer != nil {
		c.flushTimer.Close()
		c.flushTimer = nil
	}
	if c.rxRegion != nil && c.zeroCopy.Load() {
		// Messages from NextMessage may still point into the receive
		// buffers: unmap them only once they and the Conn are garbage.
		c.rxRegion.Deregister()
		runtime.AddCleanup(c, func(r *ofi.Region) { r.Close() }, c.rxRegion)
		c.rxRegion = nil
	}
	for _, r := range []**ofi.Region{&c.rxRegion, &c.txRegion, &c.ctlRegion} {
		if *r != nil {
			(*r).Close()
			*r = nil
		}
	}
	c.rxMem, c.txMem = nil, nil
	c.rxWake.close()
	c.txWake.close()
	if c.dom != nil {
		c.dom.release()
		c.dom = nil
	}
	if c.fab != nil {
		c.fab.release()
		c.fab = nil
	}
}

// LocalAddr returns the local address.
func (c *Conn) LocalAddr() net.Addr { return &c.local }

// RemoteAddr returns the peer's address.
func (c *Conn) RemoteAddr() net.Addr { return &c.remote }

// SetDeadline sets the read and write deadlines; the zero time means none.
func (c *Conn) SetDeadline(t time.Time) error {
	c.SetReadDeadline(t)
	return c.SetWriteDeadline(t)
}

// SetReadDeadline sets the deadline for Read, ReadMessage and AppendMessage.
func (c *Conn) SetReadDeadline(t time.Time) error {
	c.rdl.Store(unixNano(t))
	c.rxWake.setDeadline(t)
	return nil
}

// SetWriteDeadline sets the deadline for Write.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	c.wdl.Store(unixNano(t))
	c.txWake.setDeadline(t)
	return nil
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// String describes the connection for logs.
func (c *Conn) String() string {
	return "netio " + c.network + " " + c.local.String() + "->" + c.remote.String() + " window " + strconv.Itoa(c.txSlots)
}

var _ net.Conn = (*Conn)(nil)
