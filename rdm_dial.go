package netio

import (
	"context"
	"net"

	"github.com/netio-go/netio/internal/admit"
	"github.com/netio-go/netio/internal/wire"
	"github.com/netio-go/netio/ofi"
)

// Dial and Listen on providers that have only reliable-datagram endpoints
// (shm, efa, cxi, opx, psm2, psm3) or are asked for them ("tcp;ofi_rxm"):
// the same Conn and Listener, with links on RDM endpoints (rdm_link.go).
// Addresses are the provider's own, as Listener.Addr prints them
// ("fi_shm://7227:0:0", "fi_sockaddr_in://127.0.0.1:5000").

// dialRDM is DialContext on a reliable-datagram provider: address is the
// listener's address as its Addr prints it. The process's dialers share
// one endpoint per provider (and local address), which rests when no
// link uses it.
func dialRDM(ctx context.Context, network, address string, opts []Option) (*Conn, error) {
	a, err := parseOptions("dial", network, address, opts)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, a.opError(err)
	}
	ctx, cancel := context.WithTimeout(ctx, a.cfg.ConnectTimeout)
	defer cancel()
	peer, err := ofi.ParseAddress(address)
	if err != nil {
		return nil, a.opError(err)
	}
	// An endpoint on a sockets provider binds an address of its own: the
	// loopback one to reach a local listener, any otherwise.
	node, service := "", ""
	if ap, ok := peer.AddrPort(); ok && ap.Addr().IsLoopback() {
		node, service = ap.Addr().String(), "0"
	}
	eng, err := acquireEngine()
	if err != nil {
		return nil, a.opError(err)
	}
	c, err := newConn(eng, a.cfg, a.provider)
	if err != nil {
		eng.release()
		return nil, a.opError(err)
	}
	p, err := rdmDialer(eng, a.provider, node, service)
	if err != nil {
		eng.release()
		return nil, a.opError(err)
	}
	var startErr error
	if err := eng.r.Call(func() {
		if startErr = p.start(); startErr == nil {
			startErr = c.link.connectRDM(p, peer)
		}
		if p.refs == 0 { // no link holds it: it rests
			p.closing = true
			p.finishIfDone()
		}
	}); err != nil {
		startErr = err
	}
	if startErr != nil {
		eng.release()
		return nil, a.opError(startErr)
	}
	if _, err := awaitDial(ctx, a, c.link); err != nil {
		return nil, err
	}
	return c, nil
}

// listenRDM is Listen on a reliable-datagram provider. address is
// host:port on a sockets provider (an empty host is 127.0.0.1: a
// wildcard address would be printed as one no dialer can use); shm names
// its endpoints after the process and takes no address ("" or ":0").
func listenRDM(ctx context.Context, network, address string, opts []Option) (*Listener, error) {
	a, err := parseOptions("listen", network, address, opts)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, a.opError(err)
	}
	node, service := "", ""
	if a.provider != "shm" {
		if node, service, err = net.SplitHostPort(address); err != nil {
			return nil, a.opError(err)
		}
		if err = checkPort(service); err != nil {
			return nil, a.opError(err)
		}
		if node == "" {
			node = "127.0.0.1"
		}
		if service == "" {
			service = "0"
		}
	}
	eng, err := acquireEngine() // the Listener's
	if err != nil {
		return nil, a.opError(err)
	}
	p, err := openRDMEndpoint(eng, a.provider, node, service)
	if err != nil {
		eng.release()
		return nil, a.opError(err)
	}
	rememberRDMEndpoint(p)
	p.refs = 1 // the listener's
	cfg := a.cfg
	ac := &acceptor{eng: eng, network: a.provider, addr: p.addr(), mode: cfg.Mode, role: wire.RoleConn, maxConns: cfg.MaxConns,
		setupTimeout: cfg.ConnectTimeout, auth: admit.Checker{Key: cfg.Key, Seen: replays}, done: make(chan struct{}), logger: cfg.Logger}
	ln := &Listener{ac: ac, eng: eng, cfg: cfg, accepted: make(chan *Conn, cfg.Backlog), closing: make(chan struct{}), rdm: p}
	p.listener = ln
	var startErr error
	if err := eng.r.Call(func() {
		if startErr = p.start(); startErr != nil {
			p.release()
		}
	}); err != nil {
		startErr = err
	}
	if startErr != nil {
		eng.release()
		return nil, a.opError(startErr)
	}
	tracked.listeners.add(ln)
	return ln, nil
}

// closeRDM stops taking requests and lets go of the endpoint, which
// closes after the last of its connections. On the reactor.
func (l *Listener) closeRDM() {
	l.ac.closed.Store(true)
	l.rdm.listener = nil
	l.rdm.release()
}
