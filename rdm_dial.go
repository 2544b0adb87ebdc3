package netio

import (
	"context"
	"net"
	"sync"

	"github.com/netio-go/netio/internal/admit"
	"github.com/netio-go/netio/internal/wire"
	"github.com/netio-go/netio/ofi"
)

// Dial, Listen, ListenPublisher and Subscribe on providers that have only
// reliable-datagram endpoints (shm, efa, cxi, opx, psm2, psm3) or are
// asked for them ("tcp;ofi_rxm"): the same Conn, Listener, Publisher and
// Subscription, with links on RDM endpoints (rdm_link.go). dialLink and
// listenContext choose this path by provider. Addresses are the
// provider's own, as Listener.Addr prints them ("fi_shm://7227:0:0",
// "fi_sockaddr_in://127.0.0.1:5000").

// dialArgs parses a dialer's arguments: host:port on a connected
// provider (an empty host is 127.0.0.1), the listener's printed address
// as it is on a reliable-datagram one.
func dialArgs(op, network, address string, opts []Option) (*args, error) {
	if isRDMProvider(provider(network)) {
		return parseOptions(op, network, address, opts)
	}
	return parseArgs(op, network, address, "127.0.0.1", opts)
}

// dialRDM is dialLink on a reliable-datagram provider: a's address is the
// listener's address as its Addr prints it. The process's dialers share
// one endpoint per provider (and local address), which rests when no
// link uses it.
func dialRDM(ctx context.Context, a *args, open func(*engine) (*link, error)) (*link, error) {
	if err := ctx.Err(); err != nil {
		return nil, a.opError(err)
	}
	ctx, cancel := context.WithTimeout(ctx, a.cfg.ConnectTimeout)
	defer cancel()
	peer, err := ofi.ParseAddress(a.address)
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
	p, err := rdmDialer(eng, a.provider, node, service)
	if err != nil {
		eng.release()
		return nil, a.opError(err)
	}
	l, err := open(eng)
	if err != nil {
		eng.release()
		return nil, a.opError(err)
	}
	var startErr error
	if err := eng.r.Call(func() {
		if startErr = p.start(); startErr == nil {
			startErr = l.connectRDM(p, peer)
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
	return awaitDial(ctx, a, l)
}

// listenRDM is listenContext on a reliable-datagram provider: an
// acceptor for owner on an endpoint of its own. address is host:port on
// a sockets provider (an empty host is 127.0.0.1: a wildcard address
// would be printed as one no dialer can use); shm names its endpoints
// after the process and takes no address ("" or ":0"; any is ignored).
func listenRDM(ctx context.Context, op, network, address string, opts []Option, r wire.Role, owner func(*acceptor, Config) acceptorOwner) (*acceptor, Config, error) {
	a, err := parseOptions(op, network, address, opts)
	if err != nil {
		return nil, Config{}, err
	}
	cfg := a.cfg
	if err := ctx.Err(); err != nil {
		return nil, cfg, a.opError(err)
	}
	node, service := "", ""
	if a.provider != "shm" {
		if node, service, err = net.SplitHostPort(address); err != nil {
			return nil, cfg, a.opError(err)
		}
		if err = checkPort(service); err != nil {
			return nil, cfg, a.opError(err)
		}
		if node == "" {
			node = "127.0.0.1"
		}
		if service == "" {
			service = "0"
		}
	}
	eng, err := acquireEngine() // the owner's
	if err != nil {
		return nil, cfg, a.opError(err)
	}
	p, err := openRDMEndpoint(eng, a.provider, node, service)
	if err != nil {
		eng.release()
		return nil, cfg, a.opError(err)
	}
	rememberRDMEndpoint(p)
	p.refs = 1 // the acceptor's, which close gives back
	ac := &acceptor{eng: eng, network: a.provider, addr: p.addr(), mode: cfg.Mode, role: r, maxConns: cfg.MaxConns,
		setupTimeout: cfg.ConnectTimeout, auth: admit.Checker{Key: cfg.Key, Seen: replays}, done: make(chan struct{}), logger: cfg.Logger, rdm: p}
	ac.owner = owner(ac, cfg)
	p.acceptor = ac
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
		return nil, cfg, a.opError(startErr)
	}
	return ac, cfg, nil
}

// The RDM endpoints of each engine: the dialers' shared ones, and every
// one opened, which the engine closes when it stops (rdmEndpoint.
// finishIfDone says why not before, on shm).
var rdmRegistry struct {
	mu      sync.Mutex
	all     map[*engine][]*rdmEndpoint
	dialers map[rdmDialKey]*rdmEndpoint
}

// rdmDialKey names the endpoint the dialers of an engine share for a
// provider and local address.
type rdmDialKey struct {
	eng           *engine
	network, node string
}

// rdmDialer returns the endpoint that eng's dialers share for network
// and node, opening it on first use. Not on the reactor: opening a
// tcp;ofi_rxm endpoint takes half a second.
func rdmDialer(eng *engine, network, node, service string) (*rdmEndpoint, error) {
	r := &rdmRegistry
	r.mu.Lock()
	defer r.mu.Unlock()
	key := rdmDialKey{eng, network, node}
	if p := r.dialers[key]; p != nil {
		return p, nil
	}
	p, err := openRDMEndpoint(eng, network, node, service)
	if err != nil {
		return nil, err
	}
	p.shared = true
	if r.dialers == nil {
		r.dialers = map[rdmDialKey]*rdmEndpoint{}
	}
	r.dialers[key] = p
	rememberLocked(p)
	return p, nil
}

// rememberRDMEndpoint records p for its engine to close.
func rememberRDMEndpoint(p *rdmEndpoint) {
	rdmRegistry.mu.Lock()
	rememberLocked(p)
	rdmRegistry.mu.Unlock()
}

func rememberLocked(p *rdmEndpoint) {
	r := &rdmRegistry
	if r.all == nil {
		r.all = map[*engine][]*rdmEndpoint{}
	}
	r.all[p.eng] = append(r.all[p.eng], p)
}

// forgetRDMEndpoint drops p, closed before its engine stops.
func forgetRDMEndpoint(p *rdmEndpoint) {
	r := &rdmRegistry
	r.mu.Lock()
	defer r.mu.Unlock()
	ps := r.all[p.eng]
	for i, q := range ps {
		if q == p {
			r.all[p.eng] = append(ps[:i], ps[i+1:]...)
			break
		}
	}
}

// closeRDMEndpoints closes every RDM endpoint of e, which is stopping: no
// link is left on any. On e's reactor.
func closeRDMEndpoints(e *engine) {
	r := &rdmRegistry
	r.mu.Lock()
	ps := r.all[e]
	delete(r.all, e)
	for k := range r.dialers {
		if k.eng == e {
			delete(r.dialers, k)
		}
	}
	r.mu.Unlock()
	for _, p := range ps {
		if p.fdWatch {
			e.r.Unregister(p.cq.FD())
		}
		if p.polled {
			e.r.RemovePoller(p)
		}
		p.free()
	}
}
