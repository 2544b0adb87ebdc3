package netio

import "sync"

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
