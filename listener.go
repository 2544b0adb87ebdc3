package netio

import (
	"context"
	"net"
	"strconv"
	"sync"

	"github.com/netio-go/netio/ofi"
)

// Listener accepts netio connections on a libfabric passive endpoint. It
// implements net.Listener.
type Listener struct {
	eng      *engine
	cfg      Config
	network  string
	addr     Addr
	accepted chan *Conn
	closing  chan struct{}
	once     sync.Once

	// Reactor only.
	token   uint64
	fab     *fabricRes
	pep     *ofi.PassiveEndpoint
	pending int
	closed  bool
}

// Listen listens on address (host:port; port 0 picks a free one) over the
// provider named by network ("" picks DefaultNetwork or $NETIO_PROVIDER).
// The options apply to every accepted connection.
func Listen(network, address string, opts ...Option) (*Listener, error) {
	a, err := parseArgs("listen", network, address, "0.0.0.0", opts)
	if err != nil {
		return nil, err
	}
	cfg, prov, host, port, opErr := a.cfg, a.provider, a.host, a.port, a.opError
	if port == "" {
		port = "0"
	}
	infos, err := ofi.GetInfo(ofi.Hints{Provider: prov, Node: host, Service: port, Source: true})
	if err != nil {
		return nil, opErr(a.lookupError(context.Background(), err))
	}
	defer infos.Free()
	eng, err := acquireEngine()
	if err != nil {
		return nil, opErr(err)
	}
	l := &Listener{eng: eng, cfg: cfg, network: prov, accepted: make(chan *Conn, cfg.Backlog), closing: make(chan struct{})}
	var startErr error
	if err := eng.r.Call(func() { startErr = l.start(infos.Entries[0]) }); err != nil {
		startErr = err
	}
	if startErr != nil {
		eng.release()
		return nil, opErr(startErr)
	}
	return l, nil
}

func (l *Listener) start(info *ofi.Info) (err error) {
	e := l.eng
	if l.fab, err = e.fabricFor(info); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			l.release()
		}
	}()
	l.token = e.newToken(l)
	if l.pep, err = l.fab.fabric.OpenPassiveEndpoint(info, l.token); err != nil {
		return err
	}
	if err = l.pep.Bind(l.fab.eq); err != nil {
		return err
	}
	if err = l.pep.Listen(); err != nil {
		return err
	}
	ap, err := l.pep.Addr()
	if err != nil {
		return err
	}
	l.addr = Addr{Provider: l.network, AddrPort: ap}
	return nil
}

func (l *Listener) release() {
	delete(l.eng.targets, l.token)
	if l.pep != nil {
		l.pep.Close()
		l.pep = nil
	}
	if l.fab != nil {
		l.fab.release()
		l.fab = nil
	}
}

// handleEvent takes connection requests; on the reactor.
func (l *Listener) handleEvent(ev *ofi.Event) {
	if ev.Kind != ofi.EventConnReq {
		return
	}
	req := ev.Info
	h, err := parseHello(ev.PrivateData())
	if err == nil && h.mode != l.cfg.Mode {
		l.pep.Reject(req, rejectModeData)
		return
	}
	if err != nil || l.closed || len(l.accepted)+l.pending >= cap(l.accepted) {
		l.pep.Reject(req, rejectData)
		return
	}
	eng := l.eng
	eng.ref() // the connection's own, as it may outlive the listener
	c, err := newConn(eng, l.cfg, l.network)
	if err != nil {
		l.pep.Reject(req, rejectData)
		eng.release()
		return
	}
	c.listener = l
	err = c.openEndpoint(req)
	if err == nil {
		err = c.setPeer(h)
	}
	if err == nil {
		err = c.ep.Accept(c.hello())
	}
	req.Free()
	if err != nil {
		c.releaseResources()
		eng.release()
		return
	}
	l.pending++
}

var (
	rejectData     = []byte(rejectMarker)
	rejectModeData = []byte(rejectModeMarker)
)

// onConnected queues an accepted connection for Accept.
func (l *Listener) onConnected(c *Conn) {
	l.pending--
	if l.closed {
		c.finishClose()
		return
	}
	l.accepted <- c // room was checked before accepting
}

// onFailed drops a connection that failed before it was established.
func (l *Listener) onFailed(c *Conn) {
	l.pending--
	c.finishClose()
}

// Accept waits for and returns the next connection; it implements
// net.Listener.
func (l *Listener) Accept() (net.Conn, error) {
	c, err := l.AcceptConn()
	if err != nil {
		return nil, err
	}
	return c, nil
}

// AcceptConn is Accept returning the concrete *Conn.
func (l *Listener) AcceptConn() (*Conn, error) {
	select {
	case c := <-l.accepted:
		return c, nil
	case <-l.closing:
		return nil, &net.OpError{Op: "accept", Net: l.network, Addr: &l.addr, Err: net.ErrClosed}
	}
}

// Close stops listening. Blocked Accept calls return net.ErrClosed, and
// connections established but not yet accepted are closed.
func (l *Listener) Close() error {
	first := false
	l.once.Do(func() { first = true; close(l.closing) })
	if !first {
		return &net.OpError{Op: "close", Net: l.network, Addr: &l.addr, Err: net.ErrClosed}
	}
	l.eng.r.Call(func() {
		l.closed = true
		l.release()
	})
	for {
		select {
		case c := <-l.accepted:
			c.Close()
		default:
			l.eng.release()
			return nil
		}
	}
}

// Addr returns the listening address; its String can be passed to Dial.
func (l *Listener) Addr() net.Addr { return &l.addr }

// String describes the listener for logs.
func (l *Listener) String() string {
	return "netio listener " + l.network + " " + l.addr.String() + " backlog " + strconv.Itoa(cap(l.accepted))
}

var _ net.Listener = (*Listener)(nil)
