package netio

import (
	"errors"
	"fmt"
	"io"
	"syscall"
	"time"

	"github.com/netio-go/netio/internal/admit"
	"github.com/netio-go/netio/internal/lifecycle"
	"github.com/netio-go/netio/internal/wire"
	"github.com/netio-go/netio/ofi"
)

// rdmPeer is a link's share of a reliable-datagram endpoint, the linkPort
// of links on one: its receives are tagged with its own id and its sends
// go to the peer with the peer link's id as tag, each operation's token
// carrying the id so that the endpoint hands its completion to the link.
type rdmPeer struct {
	ep   *rdmEndpoint
	lep  *ofi.RDMEndpoint // where the link posts: ep's, or its own (rdm_linkendpoint.go)
	l    *link
	peer ofi.FIAddr
	id   uint32 // ours: the tag of our receives
	tag  uint64 // the peer link's id: the tag of our sends
	segs []ofi.RDMSegment

	// Messages match receives in the order these were posted, but may
	// complete out of it (tcp;ofi_rxm completes a large message, read by
	// rendezvous, after smaller ones sent behind it): completions are
	// handed to the link in posting order, which is the peer's sending
	// order, as framing and credits need.
	order []uint32 // receive buffers in posting order, a ring
	first int      // its oldest
	count int
	got   []uint64 // per buffer: 1 + the length received, not handed on yet; 0: none

	stalled bool // in the endpoint's stalled list
	bell    peerBell

	own      bool // lep is the link's own endpoint
	local    bool // the peer is of this process: lep rests after the link
	peerLink bool // peer is the peer link's own endpoint, inserted for this link
}

var _ linkPort = (*rdmPeer)(nil)

// batch turns segs into RDM operations with tag, in the peer's scratch
// space (sized at open for a window and a send queue: no allocation).
func (p *rdmPeer) batch(segs []ofi.Segment, tag uint64) []ofi.RDMSegment {
	out := p.segs[:0]
	for _, s := range segs {
		out = append(out, ofi.RDMSegment{Offset: s.Offset, Len: s.Len, Token: s.Token | uint64(p.id)<<rdmIDShift, Tag: tag, Peer: p.peer})
	}
	p.segs = out[:0]
	return out
}

func (p *rdmPeer) PostRecv(r *ofi.Region, segs []ofi.Segment) (int, error) {
	n, err := p.lep.PostTaggedRecv(r, p.batch(segs, uint64(p.id)))
	p.stallOn(err)
	for _, s := range segs[:n] {
		p.order[(p.first+p.count)%len(p.order)] = uint32(s.Token)
		p.count++
	}
	return n, err
}

// received takes the completion of receive buffer slot and hands the
// link every completed one that is next in posting order.
func (p *rdmPeer) received(l *link, slot uint32, n uint64) {
	if int(slot) >= len(p.got) {
		l.complete(tokRecv|uint64(slot), n) // the link says what is wrong
		return
	}
	p.got[slot] = n + 1
	for p.count > 0 {
		s := p.order[p.first]
		g := p.got[s]
		if g == 0 {
			return
		}
		p.got[s] = 0
		p.first = (p.first + 1) % len(p.order)
		p.count--
		l.complete(tokRecv|uint64(s), g-1)
	}
}

func (p *rdmPeer) PostSendInject(r *ofi.Region, segs []ofi.Segment, inject int) (int, error) {
	batch := p.batch(segs, p.tag)
	n, err := p.lep.PostTaggedSend(r, batch, inject)
	p.stallOn(err)
	p.ep.sentBell(p, batch[:n], inject, errors.Is(err, ofi.EAGAIN))
	return n, err
}

// stallOn has the endpoint come back to the link after a post the
// provider refused for now (EAGAIN: its queue is full, or a new peer not
// reached yet): on a connected endpoint a completion of the link's own
// would, but here none may be coming.
func (p *rdmPeer) stallOn(err error) {
	if err != nil && !p.stalled && errors.Is(err, ofi.EAGAIN) {
		p.stalled = true
		p.ep.stalled = append(p.ep.stalled, p)
	}
}

// PostSendTail is never called: links on RDM endpoints do not lend
// (linkSizes.lend is false), as ofi's RDM layer sends one buffer each.
func (p *rdmPeer) PostSendTail(*ofi.Region, ofi.Segment, []byte) error {
	return errors.New("netio: sends from the writer's memory are not supported on reliable-datagram endpoints")
}

// attachRDM makes l a link on p to the peer at fi: its buffers, an id,
// and its receive window posted, so that the peer may send as soon as it
// hears of them. With own, l gets an endpoint of its own bound to p's
// queue and AV (rdm_linkendpoint.go).
func (l *link) attachRDM(p *rdmEndpoint, fi ofi.FIAddr, own, local bool) error {
	res := &l.res
	res.dom = p.dom
	p.dom.refs++
	window, bufSize := l.sizeFor(p.info)
	l.sizes.lend = false
	if need := window + l.cfg.txWindow + ctlSlots; p.cq.InFlight()+need > rdmContexts {
		return errAtLimit // the queue's context slots are spoken for
	}
	if err := l.openBuffers(window, bufSize); err != nil {
		return err
	}
	lep := p.ep
	if own {
		var err error
		if lep, err = p.openLinkEndpoint(); err != nil {
			return err
		}
	}
	q := &rdmPeer{ep: p, lep: lep, l: l, peer: fi, id: p.addLink(l), segs: make([]ofi.RDMSegment, 0, window+l.cfg.txWindow),
		order: make([]uint32, window), got: make([]uint64, window), own: own, local: local}
	res.port = q // from here releaseResources gives lep back
	for _, r := range []*ofi.Region{res.rxRegion, res.ctl.region} {
		if err := lep.BindRegion(r); err != nil {
			return err
		}
	}
	p.joinBell(res.port.(*rdmPeer))
	if c, ok := l.owner.(*Conn); ok {
		c.local = p.addr()
		c.remote = l.remoteAddr()
	}
	return l.postWindow()
}

// remoteAddr is the address of l's peer as Addr prints it, on either kind
// of endpoint; zero if unknown.
func (l *link) remoteAddr() Addr {
	if rp, ok := l.res.port.(*rdmPeer); ok {
		if a, err := rp.ep.av.Lookup(rp.peer); err == nil {
			return Addr{Provider: rp.ep.network, Name: a.String()}
		}
		return Addr{}
	}
	if l.res.ep != nil {
		if ap, err := l.res.ep.PeerAddr(); err == nil {
			return Addr{Provider: l.network, AddrPort: ap}
		}
	}
	return Addr{}
}

// release takes l off the endpoint: its receive window is cancelled, and
// its buffers stay until the provider has reported that (closing them, or
// the endpoint, before crashed tcp;ofi_rxm), or, with sends in flight
// that may never complete (a dead shm peer), until the endpoint closes.
// On the reactor, from releaseResources.
func (p *rdmPeer) release(l *link) {
	res := &l.res
	pending := 0
	for i := range l.rx.refs {
		pending += p.lep.Cancel(tokRecv | uint64(i) | uint64(p.id)<<rdmIDShift)
	}
	var keep []*ofi.Region
	inFlight := l.txPosted != l.tx.done.Load() || !res.ctl.idle()
	if p.peerLink && !inFlight {
		p.ep.forgetPeer(p.peer) // with sends in flight shm still reads its entry
	} else if inFlight {
		p.ep.pinPeer(p.peer)
	}
	if !l.rx.held.Load() { // else releaseResources keeps it for the messages still held
		keep = append(keep, res.rxRegion)
		res.rxRegion = nil
	}
	sending := []*ofi.Region{res.txRegion, res.ctl.region}
	res.txRegion, res.ctl.region = nil, nil
	if inFlight {
		for _, r := range sending {
			if r != nil {
				p.ep.graves = append(p.ep.graves, r)
			}
		}
	} else {
		keep = append(keep, sending...)
	}
	res.dom = nil // the endpoint's, which closes it
	p.ep.dom.refs--
	p.ep.leaveBell(p)
	r := &rdmRetired{regions: keep, pending: pending}
	if p.own {
		r.ep, r.closeEP = p.lep, !p.local
	}
	p.ep.removeLink(p.id, r) // may close the endpoint
}

// acceptSent opens an accepted link once its accept has gone: nothing it
// sends may overtake it.
func (l *link) acceptSent() {
	if l.life.State() != lifecycle.Connecting {
		return
	}
	l.forgetSetup()
	l.opened()
}

// onRDMAnswer takes the listener's answer to a dialing link.
func (l *link) onRDMAnswer(m *wire.RDMHello) {
	if l.life.State() != lifecycle.Connecting || l.tx.mem != nil {
		return
	}
	if m.Kind == wire.RDMReject {
		err := l.rejection(m.Data)
		if string(m.Data) == rdmRefusedMarker {
			err = errRDMRefused
		}
		if err == nil {
			err = ErrRejected
		}
		l.fail(err)
		return
	}
	q := l.res.port.(*rdmPeer)
	q.tag = uint64(m.From)
	if err := l.takeAccept(m.Data); err != nil { // the key's proof first
		l.fail(err)
		return
	}
	if m.Addr != "" {
		// The accepted link has an endpoint of its own: ours sends there.
		dialed, err := q.ep.av.Lookup(q.peer)
		var named ofi.Address
		if err == nil {
			named, err = linkAddr(q.ep.network, dialed.String(), m.Addr)
		}
		var fi ofi.FIAddr
		if err == nil {
			fi, err = q.ep.insertPeer(named, true)
		}
		if err != nil {
			l.fail(err)
			return
		}
		q.peer, q.peerLink = fi, true
	}
	l.opened()
}

// connectRDM begins a connection from l, on its own endpoint p, to the
// listener at peer: its window posted, then the request.
func (l *link) connectRDM(p *rdmEndpoint, peer ofi.Address) error {
	l.hb.dialed = true
	fi, err := p.insertPeer(peer, false)
	if err == nil {
		err = l.attachRDM(p, fi, false, false)
	}
	if err == nil {
		var data []byte
		data, l.authReq = admit.SealRequest(l.cfg.key, l.hello(), time.Now())
		err = p.sendHello(fi, &wire.RDMHello{Kind: wire.RDMRequest, From: l.res.port.(*rdmPeer).id, Addr: p.name.String(), Data: data}, nil)
	}
	if err != nil {
		l.releaseResources()
	}
	return err
}

// finEnds reports whether the peer's FIN ends l: on an RDM endpoint no
// shutdown event follows it, so the FIN itself is the peer's end.
func (l *link) finEnds() bool {
	_, ok := l.res.port.(*rdmPeer)
	return ok
}

// peerFinished ends a link on an RDM endpoint whose peer sent FIN. Ours
// answers it, if not sent yet: it tells the peer that nothing more comes
// from this side, so that it may close its endpoint (a send to a closed
// shm endpoint of the same process crashed inside the provider). Reads
// return what arrived, then io.EOF.
func (l *link) peerFinished() {
	if !l.finSent {
		l.finSent = l.sendControl(wire.KindFin, 0)
	}
	l.fail(io.EOF)
}

// onRDMRequest answers a connection request that came to the endpoint p
// of a Listener or Publisher: screened and admitted as on a connected
// endpoint, so rejected with the same reasons, or accepted with a link of
// its own whose accept goes before anything it sends. On the reactor.
func (a *acceptor) onRDMRequest(p *rdmEndpoint, m *wire.RDMHello) {
	peer, err := ofi.ParseAddress(m.Addr)
	if err != nil {
		a.stats.rejectedPeer.Add(1)
		return // nowhere to answer
	}
	fi, err := p.insertPeer(peer, false)
	if err != nil {
		a.stats.rejectedPeer.Add(1)
		return
	}
	req := &peerRequest{rdm: p, peer: fi, peerID: m.From, local: m.Proc == processID}
	h, reject := a.screen(m.Data)
	if reject != nil {
		a.screenFailed(reject)
	} else {
		reject = a.admit(req, h)
	}
	if reject != nil {
		a.reject(req, reject)
	}
}

// rdmRefusedMarker answers a request to an endpoint that takes none (its
// Listener or Publisher closed, which leaves the endpoint to its links):
// the dialer sees ECONNREFUSED, as from a closed tcp port, and a
// subscription tries again as it would there, instead of waiting out its
// connect timeout each time.
const rdmRefusedMarker = "NTIO-REFUSED"

var errRDMRefused = fmt.Errorf("%w (nothing listens at that address any more)", syscall.ECONNREFUSED)

// refuse answers a request that came to p while nothing listens on it.
func (p *rdmEndpoint) refuse(m *wire.RDMHello) {
	peer, err := ofi.ParseAddress(m.Addr)
	if err != nil {
		return
	}
	if fi, err := p.insertPeer(peer, false); err == nil {
		p.sendHello(fi, &wire.RDMHello{Kind: wire.RDMReject, From: wire.RDMMaxID, To: m.From, Data: []byte(rdmRefusedMarker)}, nil)
	}
}

// acceptRDM makes l the link of an admitted request on its endpoint and
// sends the accept, once l's set-up is watched (the accept sent opens
// it). On failure l's resources are gone, as after link.accept.
func (l *link) acceptRDM(a *acceptor, req *peerRequest, h wire.Hello) error {
	p := req.rdm
	err := l.attachRDM(p, req.peer, p.ownsLinkEndpoints(), req.local)
	var addr string
	if err == nil {
		q := l.res.port.(*rdmPeer)
		q.tag = uint64(req.peerID)
		if q.own {
			var name ofi.Address
			name, err = q.lep.Name()
			addr = name.String()
		}
	}
	if err == nil {
		err = l.setPeer(h)
	}
	if err == nil {
		l.watchSetup(a.setupTimeout, &a.stats)
		if err = p.sendHello(req.peer, &wire.RDMHello{Kind: wire.RDMAccept, From: l.res.port.(*rdmPeer).id, To: req.peerID, Addr: addr,
			Data: admit.SealAccept(l.cfg.key, l.hello(), h.Auth)}, l); err != nil {
			l.forgetSetup()
		}
	}
	if err != nil {
		l.releaseResources()
		l.owner.released(l)
	}
	return err
}
