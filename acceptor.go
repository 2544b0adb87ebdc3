package netio

import (
	"context"

	"github.com/netio-go/netio/ofi"
)

// acceptor is a passive endpoint that answers connection requests on the
// reactor, for a Listener or a Publisher: it checks each request's hello
// and rejects what its owner does not take, so that no endpoint or buffer
// is made for a peer that will be turned away.
type acceptor struct {
	eng     *engine
	network string
	addr    Addr
	mode    Mode
	anyMode bool // peers may use either mode (a publisher's subscribers)
	role    role // what the peers must be
	owner   acceptorOwner

	// Reactor only.
	token  uint64
	fab    *fabricRes
	pep    *ofi.PassiveEndpoint
	closed bool
}

// acceptorOwner takes the requests an acceptor lets through. On the reactor.
type acceptorOwner interface {
	// admit answers a request whose hello passed: it accepts it (through
	// link.accept) and returns nil, or returns the data to reject it with.
	admit(req *ofi.Info, h hello) (reject []byte)
}

var (
	rejectData     = []byte(rejectMarker)
	rejectModeData = []byte(rejectModeMarker)
	rejectRoleData = []byte(rejectRoleMarker)
)

// listen resolves address and opens the passive endpoint; Listen's and
// ListenPublisher's common part. The engine reference it takes is the
// owner's, given back by close.
func listen(op, network, address string, opts []Option, r role, owner func(*acceptor, Config) acceptorOwner) (*acceptor, Config, error) {
	return listenContext(context.Background(), op, network, address, opts, r, owner)
}

// listenContext is listen that fails at once when ctx has ended, and
// bounds the host lookup that explains a failed resolution by ctx.
func listenContext(ctx context.Context, op, network, address string, opts []Option, r role, owner func(*acceptor, Config) acceptorOwner) (*acceptor, Config, error) {
	a, err := parseArgs(op, network, address, "0.0.0.0", opts)
	if err != nil {
		return nil, Config{}, err
	}
	cfg, prov, host, port, opErr := a.cfg, a.provider, a.host, a.port, a.opError
	if err := ctx.Err(); err != nil {
		return nil, cfg, opErr(err)
	}
	if port == "" {
		port = "0"
	}
	infos, err := ofi.GetInfo(ofi.Hints{Provider: prov, Node: host, Service: port, Source: true})
	if err != nil {
		return nil, cfg, opErr(a.lookupError(ctx, err))
	}
	defer infos.Free()
	eng, err := acquireEngine()
	if err != nil {
		return nil, cfg, opErr(err)
	}
	ac := &acceptor{eng: eng, network: prov, mode: cfg.Mode, role: r}
	ac.owner = owner(ac, cfg)
	var startErr error
	if err := eng.r.Call(func() { startErr = ac.start(infos.Entries[0]) }); err != nil {
		startErr = err
	}
	if startErr != nil {
		eng.release()
		return nil, cfg, opErr(startErr)
	}
	return ac, cfg, nil
}

func (a *acceptor) start(info *ofi.Info) (err error) {
	e := a.eng
	if a.fab, err = e.fabricFor(info); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			a.release()
		}
	}()
	a.token = e.newToken(a)
	if a.pep, err = a.fab.fabric.OpenPassiveEndpoint(info, a.token); err != nil {
		return err
	}
	if err = a.pep.Bind(a.fab.eq); err != nil {
		return err
	}
	if err = a.pep.Listen(); err != nil {
		return err
	}
	ap, err := a.pep.Addr()
	if err != nil {
		return err
	}
	a.addr = Addr{Provider: a.network, AddrPort: ap}
	return nil
}

// handleEvent takes connection requests.
func (a *acceptor) handleEvent(ev *ofi.Event) {
	if ev.Kind != ofi.EventConnReq {
		return
	}
	req := ev.Info
	h, reject := a.screen(ev.PrivateData())
	if reject == nil {
		reject = a.owner.admit(req, h)
	}
	if reject != nil {
		a.pep.Reject(req, reject)
	}
}

// screen checks a connection request's private data, which anyone may
// send: it returns the data to reject the request with, or nil for a hello
// its owner may admit. FuzzHello holds it to that.
func (a *acceptor) screen(data []byte) (hello, []byte) {
	h, err := parseHello(data)
	switch {
	case err != nil || a.closed:
		return h, rejectData
	case h.mode != a.mode && !a.anyMode:
		return h, rejectModeData
	case h.role != a.role:
		return h, rejectRoleData
	}
	return h, nil
}

// accept makes the link for an admitted request, with the engine
// reference the link holds (open builds it and its owner), and frees req.
func (a *acceptor) accept(req *ofi.Info, h hello, open func(eng *engine) (*link, error)) error {
	eng := a.eng
	eng.ref() // the link's own, as it may outlive the acceptor
	l, err := open(eng)
	if err == nil {
		err = l.accept(req, h)
	}
	req.Free()
	if err != nil {
		eng.release()
	}
	return err
}

// close stops taking requests; on the reactor.
func (a *acceptor) close() {
	a.closed = true
	a.release()
}

func (a *acceptor) release() {
	delete(a.eng.targets, a.token)
	if a.pep != nil {
		a.pep.Close()
		a.pep = nil
	}
	if a.fab != nil {
		a.fab.release()
		a.fab = nil
	}
}
