package netio

import (
	"context"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/netio-go/netio/internal/wire"
)

// Listener accepts netio connections on a libfabric passive endpoint. It
// implements net.Listener.
type Listener struct {
	ac       *acceptor
	eng      *engine
	cfg      Config
	accepted chan *Conn
	closing  chan struct{}
	once     sync.Once

	pending int // reactor only: accepted, not yet up
}

// Listen listens on address (host:port; port 0 picks a free one) over the
// provider named by network ("" picks DefaultNetwork or $NETIO_PROVIDER).
// The options apply to every accepted connection. It admits only peers
// that prove they hold its key, by default the user's key file
// (Config.KeyFile), and rejects every other before libfabric reads
// anything else from it: libfabric's tcp provider trusts what an admitted
// peer sends (see Config.Insecure).
func Listen(network, address string, opts ...Option) (*Listener, error) {
	return listenConns(context.Background(), network, address, opts)
}

// listenConns is Listen and ListenConfig.Listen.
func listenConns(ctx context.Context, network, address string, opts []Option) (*Listener, error) {
	var l *Listener
	_, _, err := listenContext(ctx, "listen", network, address, opts, wire.RoleConn, func(ac *acceptor, cfg Config) acceptorOwner {
		l = &Listener{ac: ac, eng: ac.eng, cfg: cfg, accepted: make(chan *Conn, cfg.Backlog), closing: make(chan struct{})}
		return l
	})
	if err != nil {
		return nil, err
	}
	tracked.listeners.add(l)
	return l, nil
}

// admit accepts a request while the backlog has room and the process
// can afford the connection's buffers; on the reactor.
func (l *Listener) admit(req *peerRequest, h wire.Hello) []byte {
	if len(l.accepted)+l.pending >= cap(l.accepted) {
		l.ac.stats.rejectedFull.Add(1)
		logRejected(l.ac.logger, l.ac.network, l.ac.addr, "backlog full")
		return rejectData
	}
	lc := newLinkConfig(wire.RoleConn, &l.cfg)
	if !l.ac.affords(&lc, h) {
		return rejectLimitData
	}
	// Counted before: on an RDM endpoint the link may be up before
	// accept returns (onConnected).
	l.pending++
	_, err := l.ac.accept(req, h, func(eng *engine) (*link, error) {
		c, err := newConn(eng, l.cfg, l.ac.network)
		if err != nil {
			return nil, err
		}
		c.listener = l
		c.acceptor = l.ac
		return c.link, nil
	})
	if err != nil {
		l.pending--
	}
	return nil
}

// onConnected queues an accepted connection for Accept.
func (l *Listener) onConnected(c *Conn) {
	l.pending--
	c.listener = nil
	if l.ac.closed.Load() {
		l.ac.setupFailed(c.link)
		c.link.finishClose()
		return
	}
	l.ac.setUp(c.link)
	l.accepted <- c // room was checked before accepting
}

// onFailed drops a connection that failed before it was established.
func (l *Listener) onFailed(c *Conn) {
	l.pending--
	c.listener = nil
	l.ac.setupFailed(c.link)
	c.link.finishClose()
}

// Stats returns the listener's counters of connection set-up. Any
// goroutine, also after Close.
func (l *Listener) Stats() ListenerStats { return l.ac.stats.snapshot() }

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
		return nil, l.opError("accept", net.ErrClosed)
	}
}

// AcceptContext is AcceptConn that gives up when ctx ends: it returns a
// *net.OpError wrapping ctx.Err() (so errors.Is finds context.Canceled or
// context.DeadlineExceeded) and leaves the listener open. A ctx that has
// already ended fails at once, even when a connection is waiting; that
// connection stays queued for the next Accept.
func (l *Listener) AcceptContext(ctx context.Context) (*Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, l.opError("accept", err)
	}
	select {
	case c := <-l.accepted:
		return c, nil
	case <-l.closing:
		return nil, l.opError("accept", net.ErrClosed)
	case <-ctx.Done():
		return nil, l.opError("accept", ctx.Err())
	}
}

func (l *Listener) opError(op string, err error) error {
	return &net.OpError{Op: op, Net: l.ac.network, Addr: &l.ac.addr, Err: err}
}

// Close stops listening. Blocked Accept calls return net.ErrClosed, and
// connections established but not yet accepted are closed.
func (l *Listener) Close() error {
	first := false
	l.once.Do(func() { first = true; close(l.closing) })
	if !first {
		return l.opError("close", net.ErrClosed)
	}
	l.eng.r.Call(l.ac.close)
	<-l.ac.done // the port is free
	// Close them all, then wait once: a peer that does not read costs one
	// Linger in all, not one each.
	var waits []<-chan struct{}
	for done := false; !done; {
		select {
		case c := <-l.accepted:
			if released, _ := c.startClose(); released != nil {
				waits = append(waits, released)
			}
		default:
			done = true
		}
	}
	awaitReleased(waits, l.cfg.Linger)
	l.eng.release()
	return nil
}

// awaitReleased waits for links closed together, for linger (and a second
// for the reactor to act on it) in all.
func awaitReleased(waits []<-chan struct{}, linger time.Duration) {
	if len(waits) == 0 {
		return
	}
	t := time.NewTimer(linger + time.Second)
	defer t.Stop()
	for _, released := range waits {
		select {
		case <-released:
		case <-t.C:
			return
		}
	}
}

// Addr returns the listening address; its String can be passed to Dial.
func (l *Listener) Addr() net.Addr { return &l.ac.addr }

// String describes the listener for logs.
func (l *Listener) String() string {
	return "netio listener " + l.ac.network + " " + l.ac.addr.String() + " backlog " + strconv.Itoa(cap(l.accepted))
}

var _ net.Listener = (*Listener)(nil)
