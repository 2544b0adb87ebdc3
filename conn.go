package netio

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/netio-go/netio/internal/page"
	"github.com/netio-go/netio/internal/sendgate"
	"github.com/netio-go/netio/internal/wire"
	"github.com/netio-go/netio/ofi"
)

// Conn is a message connection over a libfabric FI_EP_MSG endpoint. In
// LowLatency mode (the default) Write sends each message at once, packing
// only what queues behind sends in flight; in HighThroughput mode messages
// are batched into pages (see Mode). It
// implements net.Conn; Read sees the messages as one byte stream, while
// ReadMessage, AppendMessage and NextMessage (no copy) keep their
// boundaries.
//
// Read and Write may be called from different goroutines at the same time;
// concurrent Writes are serialised whole messages.
type Conn struct {
	eng     *engine
	link    *link    // the transport, on the reactor
	send    sender   // the writing side
	recv    receiver // the reading side
	cfg     Config
	network string
	pollFor time.Duration
	stats   connStats

	// Set at the handshake, on the reactor, before the Conn is handed out.
	local, remote Addr

	closeOnce sync.Once
	closed    atomic.Bool // Close was called

	listener *Listener // reactor only: who accepted it, until it is up
	acceptor *acceptor // reactor only: who accepted it, for its count of connections
}

// side is what a sender or receiver needs, off its fast paths, of the
// connection it is half of: a Conn, or a publisher's link to a subscriber.
type side interface {
	opError(op string, err error) error
	stopWaiting(w *atomic.Bool)
}

// half is what the sending and the receiving side of a connection both
// hold of it: its owner (side), the owner's closed flag and counters, and
// the link under them.
type half struct {
	side    side
	closed  *atomic.Bool // the owner's: closed by the user
	stats   *connStats   // the owner's
	l       *link
	pollFor time.Duration // how long a wait polls before it parks
}

// Lock order: recv.mu before the send gate (Close takes both). The reactor
// takes neither: it enters the send gate only with one CAS that never
// waits (sendgate.Gate.tryReactor).

func newConn(eng *engine, cfg Config, network string) (*Conn, error) {
	c := &Conn{eng: eng, cfg: cfg, network: network, pollFor: pollFor(cfg)}
	l, err := newLink(eng, c, &c.stats, newLinkConfig(wire.RoleConn, &cfg), network)
	if err != nil {
		return nil, err
	}
	c.link = l
	h := half{side: c, closed: &c.closed, stats: &c.stats, l: l, pollFor: c.pollFor}
	c.send = sender{half: h, q: &l.tx, gate: sendgate.New()}
	c.recv = receiver{half: h, q: &l.rx, slot: -1}
	tracked.conns.add(c)
	if cfg.OnMessage != nil {
		l.onMessage = func(msg []byte) { cfg.OnMessage(c, msg) }
	}
	return c, nil
}

// sized builds the halves once the handshake has sized the link. On the
// reactor.
func (c *Conn) sized(l *link) error {
	f := l.cfg.framing
	s := &c.send
	s.frames = f.Writer(l.tx.bufSize - wire.HeaderSize)
	s.maxSend = l.sizes.maxSend
	s.appendMax = s.maxSend
	if f == page.Packed && l.sizes.lend {
		s.lend = true
		s.appendMax = min(s.maxSend, lendMin-1)
	}
	if s.pack = s.frames.Packs(); s.pack {
		l.packed = s
	}
	if s.lazy = s.frames.Lazy(); s.lazy {
		s.watch = newPageWatch(s, l, &c.cfg)
	}
	r := &c.recv
	r.frames = f.Reader()
	r.pos.Max = l.sizes.maxRecv
	r.spares.limit = 4 * l.rx.bufSize
	if l.res.ep == nil {
		return nil // on an RDM endpoint: set with the link (rdm_link.go)
	}
	if ap, err := l.res.ep.LocalAddr(); err == nil {
		c.local = Addr{Provider: c.network, AddrPort: ap}
	}
	if ap, err := l.res.ep.PeerAddr(); err == nil {
		c.remote = Addr{Provider: c.network, AddrPort: ap}
	}
	return nil
}

func (c *Conn) up(*link) {
	if c.listener != nil {
		c.listener.onConnected(c)
	}
}

func (c *Conn) setupFailed(l *link) {
	logSetupFailed(c.cfg.Logger, c.network, c.remote, l.life.Err())
	if c.listener != nil {
		c.listener.onFailed(c)
	}
}

// ended: the user finds out through reads and writes, and closes; writers
// look from now on.
func (c *Conn) ended(l *link) {
	c.send.gate.Stop()
	logEnded(c.cfg.Logger, c.network, c.local, c.remote, l.life.Err())
}

func (c *Conn) control(_ *link, kind uint8, _ []byte) error {
	return fmt.Errorf("%w: unknown message kind %d", ErrProtocol, kind)
}

func (c *Conn) released(*link) {
	if c.send.watch != nil {
		c.send.watch.close()
	}
	if c.acceptor != nil {
		c.acceptor.released()
		c.acceptor = nil
	}
}

// Dial connects to address on the named network (a libfabric provider;
// "" picks DefaultNetwork or $NETIO_PROVIDER). See DialContext.
func Dial(network, address string, opts ...Option) (*Conn, error) {
	return DialContext(context.Background(), network, address, opts...)
}

// DialContext connects to address, a host:port, over the provider named by
// network. Connection set-up is bounded by ctx and by
// Config.ConnectTimeout, whichever ends first. The listener must prove it
// holds this side's key, by default the user's key file (Config.KeyFile),
// before anything it sends is read; a listener that does not, or that
// turns this side away, fails the dial with an error wrapping ErrRejected
// that says where this side's key came from.
func DialContext(ctx context.Context, network, address string, opts ...Option) (*Conn, error) {
	a, err := dialArgs("dial", network, address, opts)
	if err != nil {
		return nil, err
	}
	var c *Conn
	_, err = dialLink(ctx, a, func(eng *engine) (*link, error) {
		var err error
		if c, err = newConn(eng, a.cfg, a.provider); err != nil {
			return nil, err
		}
		return c.link, nil
	}, func(ap netip.AddrPort) { c.remote = Addr{Provider: a.provider, AddrPort: ap} })
	if err != nil {
		return nil, err
	}
	return c, nil
}

// dialLink resolves a's address, makes a link with open and connects it,
// bounded by ctx and the connect timeout. A link that does not come up is
// closed; the error is a's *net.OpError.
func dialLink(ctx context.Context, a *args, open func(*engine) (*link, error), dest func(netip.AddrPort)) (*link, error) {
	if isRDMProvider(a.provider) {
		return dialRDM(ctx, a, open) // the link names its peer itself
	}
	if err := ctx.Err(); err != nil {
		return nil, a.opError(err)
	}
	ctx, cancel := context.WithTimeout(ctx, a.cfg.ConnectTimeout)
	defer cancel()
	infos, info, err := a.getInfo(ctx, ofi.Hints{Node: a.host, Service: a.port})
	if err != nil {
		return nil, a.opError(err)
	}
	defer infos.Free()
	if err := checkLockedMemory(info, &a.cfg); err != nil {
		return nil, a.opError(err)
	}
	eng, err := acquireEngine()
	if err != nil {
		return nil, a.opError(err)
	}
	l, err := open(eng)
	if err != nil {
		eng.release()
		return nil, a.opError(err)
	}
	if ap, ok := info.DestAddr(); ok {
		dest(ap)
	}
	var startErr error
	if err := eng.r.Call(func() { startErr = l.connect(info) }); err != nil {
		startErr = err
	}
	if startErr != nil {
		eng.release()
		return nil, a.opError(startErr)
	}
	return awaitDial(ctx, a, l)
}

// awaitDial waits for l's set-up, bounded by ctx; a link that does not
// come up is closed.
func awaitDial(ctx context.Context, a *args, l *link) (*link, error) {
	select {
	case err := <-l.connected:
		if err != nil {
			l.closeAndWait()
			var ae *authError
			if errors.As(err, &ae) {
				ae.source = a.cfg.keySource
			}
			return nil, a.opError(err)
		}
		return l, nil
	case <-ctx.Done():
		l.closeAndWait()
		err := ctx.Err()
		if errors.Is(err, context.DeadlineExceeded) {
			err = errTimeout
		}
		return nil, a.opError(err)
	}
}

// errTimeout is a dial time-out: os.ErrDeadlineExceeded says Timeout() true.
var errTimeout = os.ErrDeadlineExceeded

// stringAddr is an address that could not be resolved, for error messages.
type stringAddr struct{ net, addr string }

func (a stringAddr) Network() string { return a.net }
func (a stringAddr) String() string  { return a.addr }

// Write sends p as one message. In LowLatency mode it goes out at once, or,
// while earlier sends are still going out, with the messages written after
// it in the next send; in HighThroughput mode it is copied into the
// current page, which goes out when full, on Flush, when the writer pauses
// or after Config.FlushInterval. Write blocks while every send buffer is
// in flight (the peer is not reading), until the write deadline. A message
// above the maximum size fails with ErrMessageTooLarge; a deadline that
// passes half-way through a message larger than a buffer leaves the write
// side unusable, as a message cannot be taken back.
//
// In LowLatency mode, on providers that need no registered memory for
// sends (tcp), a message of 256 KiB or more (and at least half a buffer)
// is sent from p instead of being copied, and Write returns once it has
// been sent, as *net.TCPConn's Write returns once the kernel has the
// bytes; Stats.MessagesLent counts them. p may be reused after Write
// returns, as always.
func (c *Conn) Write(p []byte) (int, error) {
	return c.write(p) // checks c: this stays inlined
}

// WriteBatch writes each element of msgs as one message, as Write would
// one by one, and returns how many it wrote. Taking the connection's write
// lock once per batch instead of once per message makes it the cheapest
// way to write small messages in HighThroughput mode. On an error the
// messages before the failed one were written.
func (c *Conn) WriteBatch(msgs [][]byte) (int, error) {
	return c.writeBatch(msgs) // checks c: this stays inlined
}

// WriteContext is Write bounded by ctx as well as by the write deadline.
func (c *Conn) WriteContext(ctx context.Context, p []byte) (int, error) {
	if !c.ok() {
		return 0, zeroError("write")
	}
	if err := ctx.Err(); err != nil {
		return 0, c.opError("write", err)
	}
	return c.send.writeWaiting(ctx, p, false)
}

// TryWrite is Write that never waits: when the message does not fit in the
// free send buffers, or another Write holds them, it sends nothing and
// returns an error that errors.Is ErrWouldBlock.
func (c *Conn) TryWrite(p []byte) (int, error) {
	if !c.ok() {
		return 0, zeroError("write")
	}
	return c.send.writeWaiting(context.Background(), p, true)
}

// Flush sends the current page of a HighThroughput connection now, without
// waiting for it to fill. It does not wait for the page to be delivered.
// A LowLatency connection needs no Flush: what was written goes out at
// once or with the send after the one in flight, and Flush only closes
// the batch being packed early. It fails once the write deadline has
// passed.
func (c *Conn) Flush() error {
	if !c.ok() {
		return zeroError("write")
	}
	return c.send.flush()
}

// Read reads bytes of the incoming messages as one stream: a message
// longer than p is returned across several Reads, and message boundaries
// are not marked. Use ReadMessage or NextMessage to keep them.
func (c *Conn) Read(p []byte) (int, error) {
	return c.read(p) // checks c: this stays inlined
}

// ReadMessage reads one whole message into p and returns its length. A
// message longer than p is not consumed: ReadMessage returns
// io.ErrShortBuffer (wrapped) and MessageLen, AppendMessage or
// NextMessage can take it. If Read has consumed part of a message,
// ReadMessage returns the rest.
func (c *Conn) ReadMessage(p []byte) (int, error) {
	if !c.ok() {
		return 0, zeroError("read")
	}
	return c.recv.readMessage(context.Background(), p)
}

// ReadMessageContext is ReadMessage bounded by ctx as well as by the read
// deadline. When ctx ends first it returns a *net.OpError wrapping
// ctx.Err(), so that errors.Is finds context.Canceled or
// context.DeadlineExceeded; a ctx that has already ended fails at once,
// even when a message is waiting, which stays for the next read. A ctx
// that cannot end (context.Background()) costs nothing over ReadMessage.
// As with a deadline, a message larger than a buffer whose later
// buffers are still coming is returned in part with the error; the next
// read returns the rest.
func (c *Conn) ReadMessageContext(ctx context.Context, p []byte) (int, error) {
	if !c.ok() {
		return 0, zeroError("read")
	}
	if err := ctx.Err(); err != nil {
		return 0, c.opError("read", err)
	}
	return c.recv.readMessage(ctx, p)
}

// AppendMessage reads one whole message, appends it to dst and returns the
// extended slice. It allocates only when dst lacks the capacity.
func (c *Conn) AppendMessage(dst []byte) ([]byte, error) {
	if !c.ok() {
		return nil, zeroError("read")
	}
	return c.recv.appendMessage(dst)
}

// MessageLen waits for the next message and returns its length (or what
// is left of it after a partial Read) without consuming it. The length is
// the peer's word, at most Config.MaxMessageSize: its bytes may not have
// arrived yet, and from a peer that lies they never will.
func (c *Conn) MessageLen() (int, error) {
	if !c.ok() {
		return 0, zeroError("read")
	}
	return c.recv.messageLen()
}

// NextMessage waits for the next message and returns it without copying
// it out of the receive buffer. A message that arrived in several buffers
// (it did not fit what was left of one) is joined in a spare
// buffer that Release recycles, so the steady state allocates nothing.
// If Read has consumed part of a message, NextMessage returns the rest.
func (c *Conn) NextMessage() (Message, error) {
	return c.nextMessage(context.Background()) // checks c: this stays inlined
}

// NextMessageContext is NextMessage bounded by ctx as well as by the read
// deadline, with ReadMessageContext's errors: a *net.OpError wrapping
// ctx.Err() when ctx ends first, at once if it already has. A ctx that
// cannot end (context.Background()) costs nothing over NextMessage.
func (c *Conn) NextMessageContext(ctx context.Context) (Message, error) {
	if !c.ok() {
		return Message{}, zeroError("read")
	}
	if err := ctx.Err(); err != nil {
		return Message{}, c.opError("read", err)
	}
	return c.nextMessage(ctx)
}

// Next returns the next message without copying it: the slice points into
// the receive buffer and is valid only until the next read on c (any of
// Read, ReadMessage, AppendMessage, MessageLen, Next, NextBatch or
// NextMessage, or their Context forms) or Close.
// It is the cheapest way to read; use NextMessage to keep messages longer.
// A message that arrived in several buffers is joined in a buffer of c's
// own that the next such message reuses.
func (c *Conn) Next() ([]byte, error) {
	return c.next() // checks c: this stays inlined
}

// NextBatch is Next for many messages at once: it waits for one message,
// then adds those that are already at hand, up to len(dst), and returns
// how many it stored in dst. They are valid until the next read on c.
// Taking the connection's read lock once per batch instead of once per
// message makes it the cheapest way to read small messages.
func (c *Conn) NextBatch(dst [][]byte) (int, error) {
	return c.nextBatch(dst) // checks c: this stays inlined
}

// Close closes the connection. Blocked Read and Write calls return
// net.ErrClosed. Close returns once every message already written has been
// handed to the fabric and the peer told that the stream ends (it reads
// io.EOF after the data), or after Config.Linger if the peer does not take
// them.
func (c *Conn) Close() error {
	if !c.ok() {
		return zeroError("close")
	}
	released, err := c.startClose()
	if err != nil || released == nil {
		return err
	}
	// What was written is sent before Close returns, as a program may exit
	// right after: messages still in netio's buffers would die with it
	// (data in a kernel socket buffer would not). Bounded by Linger.
	t := time.NewTimer(c.cfg.Linger + time.Second)
	defer t.Stop()
	select {
	case <-released:
	case <-t.C:
	}
	return nil
}

// CloseWrite closes the writing side of the connection, as
// *net.TCPConn's does (shutdown(SHUT_WR)): what was written is sent,
// including a HighThroughput connection's partly filled page, and then
// the peer reads io.EOF after the last message, while this side goes on
// reading what the peer sends. Write, Flush and TryWrite then fail with
// syscall.EPIPE in a *net.OpError. CloseWrite does not wait for the data
// to be delivered; Close, which is still needed to free the connection,
// does. Calling it again does nothing; after Close it returns
// net.ErrClosed.
func (c *Conn) CloseWrite() error {
	if !c.ok() {
		return zeroError("close")
	}
	if c.closed.Load() {
		return c.opError("close", net.ErrClosed)
	}
	if !c.send.shutWrite() {
		return nil
	}
	if err := c.eng.r.SubmitFunc(c.link.closeWrite); err != nil {
		return c.opError("close", err)
	}
	return nil
}

// startClose closes c without waiting for what was written to go out; the
// returned channel is closed when it has (nil when there is nothing to
// wait for). Closing many connections this way and then waiting takes one
// Linger, not one each.
func (c *Conn) startClose() (<-chan struct{}, error) {
	first := false
	c.closeOnce.Do(func() {
		first = true
		c.closed.Store(true)
		c.send.gate.Stop()
	})
	if !first {
		return nil, c.opError("close", net.ErrClosed)
	}
	// Wake blocked readers and writers and wait for them to leave: after
	// this nobody but the reactor touches the buffers.
	l := c.link
	l.rx.wake.Ring()
	l.tx.wake.Ring()
	c.recv.lock()
	if c.recv.slot >= 0 {
		c.recv.leaveBuffer() // Messages handed out from it keep it
	}
	c.send.sealForClose() // Close sends what was written
	c.recv.mu.Unlock()
	if c.eng.r.SubmitFunc(l.close) != nil || c.eng.r.OnReactor() {
		// The reactor is gone (it only stops when nothing uses it), or
		// this is OnMessage, which must not wait for the reactor.
		return nil, nil
	}
	return l.life.Released(), nil
}

// pollReady checks ready, yielding the processor in between, for up to
// pollFor before a wait parks. A parked goroutine costs a thread wake-up
// when data comes (tens of µs on small VMs), more than a round trip on a
// fast fabric; a goroutine that yields keeps every other goroutine
// running. It gives up at once when l ends or closed is set. A plain
// function, not a method of an interface, so that ready (a closure) stays
// on the caller's stack.
func pollReady(pollFor time.Duration, l *link, closed *atomic.Bool, ready func() bool) bool {
	if pollFor <= 0 {
		return false
	}
	var start time.Time
	for i := 0; ; i++ {
		if ready() {
			return true
		}
		if closed.Load() || l.life.Ended() || l.eng.wakesInFlight.Load() > 0 {
			return false
		}
		if i&15 == 0 {
			if start.IsZero() {
				start = time.Now()
			} else if time.Since(start) > pollFor {
				return false
			}
		}
		runtime.Gosched()
	}
}

// stopWaiting clears a waiting flag after a wait. If the reactor cleared it
// first, it also sent a wake-up, which this goroutine now accounts for.
func (c *Conn) stopWaiting(w *atomic.Bool) {
	if !w.Swap(false) {
		c.eng.wakesInFlight.Add(-1)
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

// errZeroConn is the error of every call on a Conn that Dial, DialContext
// or Accept did not make (the zero Conn, a nil *Conn): an error instead of
// a panic deep inside.
var errZeroConn = errors.New("netio: Conn not made by Dial, DialContext or Accept")

// ok reports whether c was made by Dial or Accept, as net's conn.ok does.
func (c *Conn) ok() bool { return c != nil && c.link != nil }

// zeroError is the error of op on a Conn that is not ok.
func zeroError(op string) error {
	return &net.OpError{Op: op, Net: "netio", Err: errZeroConn}
}

// settable is nil when c's deadlines may be set: c was made by Dial or
// Accept and is not closed (net's conns fail then with ErrClosed too).
func (c *Conn) settable() error {
	switch {
	case !c.ok():
		return zeroError("set")
	case c.closed.Load():
		return c.opError("set", net.ErrClosed)
	}
	return nil
}

// LocalAddr returns the local address.
func (c *Conn) LocalAddr() net.Addr { return &c.local }

// RemoteAddr returns the peer's address.
func (c *Conn) RemoteAddr() net.Addr { return &c.remote }

// SetDeadline sets the read and write deadlines, as SetReadDeadline and
// SetWriteDeadline do; the zero time means none.
func (c *Conn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.SetWriteDeadline(t)
}

// SetReadDeadline sets the deadline, an absolute time, for every read:
// Read, ReadMessage, ReadMessageContext, AppendMessage, MessageLen, Next,
// NextBatch, NextMessage and NextMessageContext. A read that is waiting
// when it passes, or that starts after it, fails with an error wrapping
// os.ErrDeadlineExceeded, even when a message is at hand (it stays for
// the next read). A later call moves the deadline, also for reads already
// waiting; the zero time means none.
func (c *Conn) SetReadDeadline(t time.Time) error {
	if err := c.settable(); err != nil {
		return err
	}
	c.recv.deadline.Store(unixNano(t))
	c.link.rx.wake.SetDeadline(t)
	return nil
}

// SetWriteDeadline sets the deadline, an absolute time, for every write:
// Write, WriteBatch and WriteContext wait for a free send buffer until it
// passes, and TryWrite and Flush fail once it has, with an error wrapping
// os.ErrDeadlineExceeded. A deadline that passes half-way through a
// message larger than a buffer leaves the write side unusable (see
// Write). A later call moves the deadline, also for writes already
// waiting; the zero time means none. Close is bounded by Config.Linger,
// not by this deadline.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	if err := c.settable(); err != nil {
		return err
	}
	c.send.gate.SetDeadline(&c.send.deadline, unixNano(t))
	c.link.tx.wake.SetDeadline(t)
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
	if !c.ok() {
		return "netio Conn (not connected)"
	}
	return "netio " + c.network + " " + c.local.String() + "->" + c.remote.String() + " window " + strconv.Itoa(c.link.tx.slots)
}

var _ net.Conn = (*Conn)(nil)
