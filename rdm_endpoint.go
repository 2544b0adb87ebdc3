package netio

import (
	"errors"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/netio-go/netio/internal/lifecycle"
	"github.com/netio-go/netio/internal/wire"
	"github.com/netio-go/netio/ofi"
)

// rdmEndpoint is one reliable-datagram endpoint (FI_EP_RDM) and what goes
// with it: its fabric, domain, address vector and one completion queue,
// shared by every link on it. A Listener has one for all the connections
// it accepts; the process's dialed Conns share one per provider
// (rdmDialer).
//
// Links tell their operations apart by token: the link's own (kind and
// buffer) with the link's id in bits 32 to 61; id 0 is the endpoint's own
// set-up window. Each link's receives are tagged with its id, and it
// sends with the peer link's id as tag, so credits, framing and close run
// as on a connected endpoint (rdmPeer). Reactor only, but for the fields
// set before it is handed to the reactor.
type rdmEndpoint struct {
	eng     *engine
	network string
	list    *ofi.InfoList
	info    *ofi.Info
	fabric  *ofi.Fabric
	dom     *domainRes
	cq      *ofi.RDMCQ
	av      *ofi.AV
	ep      *ofi.RDMEndpoint
	name    ofi.Address
	polled  bool // registered as a reactor poller
	fdWatch bool // its queue's descriptor is registered
	waits   ofi.WaitList

	// The doorbell (rdm_doorbell.go), shm only; nil: polled on the timer.
	bell      *rdmBell
	ringing   []*rdmPeer     // links whose sends may need a ring
	deaf      int            // links whose peer does not ring us
	sendsOut  int            // sends not completed, on the links' behalf
	request   *wire.RDMHello // the request being answered, while it is
	stallRang time.Duration  // when a refused set-up message last rang its peer

	// The set-up window: rdmHelloSlots untagged receives, then as many
	// buffers to send from.
	hello     *ofi.Region
	helloBusy [rdmHelloSlots]bool       // send buffers in flight
	helloTo   [rdmHelloSlots]ofi.FIAddr // and the peer each goes to
	helloOut  []rdmHelloSend            // sends the provider refused for now (EAGAIN)
	refused   []ofi.FIAddr              // peers refused in this flush: their later sends wait
	stallTurn int                       // which of them rings
	seg       [1]ofi.RDMSegment         // one set-up operation
	cqBuf     [64]ofi.TaggedCompletion  // completions of one read

	links   map[uint32]*link
	retired map[uint32]*rdmRetired
	// graves are buffers of links released with sends in flight, which
	// on shm to a dead peer never complete: they go with the endpoint.
	graves  []*ofi.Region
	touched []*link    // links whose completions this read handed over
	stalled []*rdmPeer // links a post was refused for: served again after the next read
	serving []*rdmPeer // the stalled being served
	heard   []bool     // and whether a receive was among them

	// Link endpoints (rdm_linkendpoint.go): on shm an accepted link sends
	// and receives on an endpoint of its own, bound to this one's queue and
	// AV, so that a stuck peer holds back only its own link's sends.
	linkEPs map[*ofi.RDMEndpoint]bool // open, the link's or spare
	spare   []*ofi.RDMEndpoint        // rested after a link of this process: taken again first
	peers   map[string]*rdmPeerAddr   // addresses inserted, each once (shm counts every insert)
	sweepAt int                       // len(peers) at which insertPeer next looks for gone peers

	acceptor *acceptor // a Listener's or Publisher's; nil for a dialer's endpoint
	refs     int       // its opener's (a Listener, or a Dial until its link holds it), and one per link
	closing  bool      // refs reached 0: rests once the retired are read
	shared   bool      // the process's endpoint for its dialers: it rests, to be used again
}

// rdmHelloSend is a set-up message waiting to be sent, and the link to
// open once it is (an accept: no data may overtake it).
type rdmHelloSend struct {
	slot int
	n    int
	peer ofi.FIAddr
	open *link
	// giveUp: a request or a reject still refused then is dropped. The
	// peer a request names may be nobody (no such shm process, a closed
	// port), and the provider refuses sends to it for ever; an accept
	// goes with its link's set-up timeout.
	giveUp time.Time
}

// rdmRetired is what a released link leaves on the endpoint: its buffers,
// until the provider has reported the receives that Cancel took back.
type rdmRetired struct {
	regions []*ofi.Region
	pending int              // cancelled receives not read yet
	ep      *ofi.RDMEndpoint // the link's own endpoint, if it had one
	closeEP bool             // closed then (its peer is another process), else spare
}

const (
	rdmHelloSlots = 16
	rdmIDShift    = 32
	// rdmContexts are the context slots of an endpoint's queue: every
	// window and send queue of its links. A link that does not fit is
	// refused (errAtLimit).
	rdmContexts = 1 << 15
	rdmCQSize   = 4096
)

// isRDMProvider reports whether network names a provider that has only
// reliable-datagram endpoints, or asks for them ("tcp;ofi_rxm").
func isRDMProvider(network string) bool {
	switch network {
	case "shm", "efa", "cxi", "opx", "psm2", "psm3":
		return true
	}
	for _, util := range []string{";ofi_rxm", ";ofi_rxd"} {
		if len(network) > len(util) && network[len(network)-len(util):] == util {
			return true
		}
	}
	return false
}

// openRDMEndpoint opens an endpoint of network's provider, bound to node
// and service where the provider takes them. Not on the reactor: its
// polling starts with start.
func openRDMEndpoint(eng *engine, network, node, service string) (p *rdmEndpoint, err error) {
	opened := &rdmEndpoint{eng: eng, network: network, links: map[uint32]*link{}, retired: map[uint32]*rdmRetired{}}
	p = opened
	defer func() {
		if err != nil {
			opened.free() // p is nil by now
		}
	}()
	if p.list, err = ofi.GetRDMInfo(ofi.RDMHints{Provider: network, Node: node, Service: service}); err != nil {
		return nil, err
	}
	p.info = p.list.Entries[0]
	if !p.info.Tagged() || !p.info.OrderedSends() {
		return nil, errors.New("netio: the provider's reliable-datagram endpoints lack tagged messages or send-after-send order")
	}
	if p.fabric, err = ofi.OpenFabric(p.info); err != nil {
		return nil, err
	}
	dom, err := p.fabric.OpenDomain(p.info)
	if err != nil {
		return nil, err
	}
	p.dom = &domainRes{name: p.info.DomainName(), domain: dom, refs: 1}
	if p.cq, err = dom.OpenRDMCQ(rdmCQSize, rdmContexts); err != nil {
		return nil, err
	}
	if p.av, err = dom.OpenAV(p.info, 64); err != nil {
		return nil, err
	}
	if p.ep, err = dom.OpenRDMEndpoint(p.info, p.cq, p.av); err != nil {
		return nil, err
	}
	if p.name, err = p.ep.Name(); err != nil {
		return nil, err
	}
	if network == "shm" {
		p.bell = openBell(p.name.String())
	}
	if p.hello, err = dom.NewRegion(2 * rdmHelloSlots * wire.RDMHelloSize); err != nil {
		return nil, err
	}
	if err = p.ep.BindRegion(p.hello); err != nil {
		return nil, err
	}
	for i := 0; i < rdmHelloSlots; i++ {
		if err = p.postHelloRecv(i); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// start has the reactor poll the endpoint, if it does not already: always
// where its queue has no descriptor (shm), and on its descriptor
// otherwise. On the reactor.
func (p *rdmEndpoint) start() error {
	p.closing = false
	if p.polled {
		return nil
	}
	if p.cq.HasFD() {
		if err := p.eng.r.Register(p.cq.FD(), reactorIn, (*rdmCQHandler)(p)); err != nil {
			return err
		}
		p.fdWatch = true
	}
	if err := p.startBell(); err != nil {
		return err
	}
	if err := p.eng.r.AddPoller(p); err != nil {
		return err
	}
	p.polled = true
	return nil
}

// addr is the endpoint's address as Dial takes it.
func (p *rdmEndpoint) addr() Addr { return Addr{Provider: p.network, Name: p.name.String()} }

func (p *rdmEndpoint) postHelloRecv(slot int) error {
	p.seg[0] = ofi.RDMSegment{Offset: uint64(slot * wire.RDMHelloSize), Len: wire.RDMHelloSize, Token: tokRecv | uint64(slot), Peer: ofi.AddrUnspec}
	_, err := p.ep.PostRecv(p.hello, p.seg[:])
	return err
}

// sendHello sends m to peer from a free send buffer, now or, when the
// provider refuses for now (the first send to a peer), after the next
// reads of the queue; open, if not nil, is opened once it went.
func (p *rdmEndpoint) sendHello(peer ofi.FIAddr, m *wire.RDMHello, open *link) error {
	slot := slices.Index(p.helloBusy[:], false)
	if slot < 0 {
		// Every buffer is taken by sends the provider refuses: the oldest
		// with no link to open goes, so that requests naming nobody cannot
		// keep out the answers to real ones.
		i := slices.IndexFunc(p.helloOut, func(s rdmHelloSend) bool { return s.open == nil })
		if i < 0 {
			return errAtLimit
		}
		slot = p.helloOut[i].slot
		p.helloBusy[slot] = false
		p.helloOut = slices.Delete(p.helloOut, i, i+1)
	}
	off := (rdmHelloSlots + slot) * wire.RDMHelloSize
	p.bellHello(m)
	b, err := m.Marshal(p.hello.Bytes()[off : off+wire.RDMHelloSize])
	if err != nil {
		return err
	}
	p.helloBusy[slot] = true
	p.helloTo[slot] = peer
	p.helloOut = append(p.helloOut, rdmHelloSend{slot: slot, n: len(b), peer: peer, open: open, giveUp: time.Now().Add(p.patience())})
	p.flushHellos()
	return nil
}

// patience bounds how long a request or a reject waits for the provider
// to take it: about as long as its dialer waits for an answer.
func (p *rdmEndpoint) patience() time.Duration {
	if p.acceptor != nil {
		return p.acceptor.setupTimeout
	}
	return DefaultConnectTimeout
}

// flushHellos posts the set-up messages waiting, in order for each peer:
// a peer the provider refuses for now holds back its own later messages
// only, not other peers' (one that is nobody would hold them for ever).
func (p *rdmEndpoint) flushHellos() {
	var now time.Time
	p.refused = p.refused[:0]
	for i := 0; i < len(p.helloOut); {
		s := p.helloOut[i]
		if slices.Contains(p.refused, s.peer) {
			i++
			continue
		}
		if s.open != nil && s.open.life.State() != lifecycle.Connecting {
			// The link gave up meanwhile: its accept goes no more.
			p.dropHello(i)
			continue
		}
		p.seg[0] = ofi.RDMSegment{Offset: uint64((rdmHelloSlots + s.slot) * wire.RDMHelloSize), Len: uint64(s.n), Token: tokSend | uint64(s.slot), Peer: s.peer}
		_, err := p.ep.PostSend(p.hello, p.seg[:], 0)
		if errors.Is(err, ofi.EAGAIN) {
			if now.IsZero() {
				now = time.Now()
			}
			if s.open == nil && now.After(s.giveUp) {
				p.dropHello(i)
				continue
			}
			p.refused = append(p.refused, s.peer)
			i++
			continue
		}
		if err != nil {
			p.dropHello(i)
		} else {
			p.helloOut = slices.Delete(p.helloOut, i, i+1)
			p.ringHello(s.peer)
		}
		if s.open != nil && err != nil {
			s.open.fail(err)
		} else if s.open != nil {
			s.open.acceptSent()
		}
	}
	if len(p.refused) > 0 {
		// The first send to a peer waits for the peer's progress: ring
		// the refused peers in turn, as a peer that is nobody stays
		// refused.
		p.stallTurn++
		p.ringStalled(p.refused[p.stallTurn%len(p.refused)])
	}
}

// dropHello gives up the waiting set-up message i, and its buffer.
func (p *rdmEndpoint) dropHello(i int) {
	p.helloBusy[p.helloOut[i].slot] = false
	p.helloOut = slices.Delete(p.helloOut, i, i+1)
}

// Poll reads the queue and hands each completion to its link. On the
// reactor, every round while it is busy or spinning.
func (p *rdmEndpoint) Poll() bool {
	if p.cq == nil {
		return false
	}
	p.ringPeers()
	busy := false
	if p.bell != nil && p.bell.rung {
		p.bell.rung = false
		busy = true // a peer rang: stay awake a spin, as it counts on
	}
	for {
		n, err := p.cq.Read(p.cqBuf[:])
		if err != nil {
			var ce ofi.TaggedCompletionError
			if ok, _ := p.cq.ReadError(&ce); ok {
				busy = true
				p.onError(&ce)
				continue
			}
			break
		}
		if n == 0 {
			break
		}
		busy = true
		for i := range n {
			c := &p.cqBuf[i]
			p.dispatch(c.Token, c.Len)
		}
		if n < len(p.cqBuf) {
			break
		}
	}
	for i, l := range p.touched {
		l.polled(true, p.heard[i], true)
	}
	clear(p.touched)
	p.touched, p.heard = p.touched[:0], p.heard[:0]
	if len(p.helloOut) > 0 {
		p.flushHellos()
		busy = true // progress clears EAGAIN: poll again
	}
	if len(p.stalled) > 0 {
		busy = true
		p.serving, p.stalled = p.stalled, p.serving[:0]
		for _, q := range p.serving {
			q.stalled = false
			if p.links[q.id] == q.l {
				q.l.service()
			}
		}
		clear(p.serving)
	}
	p.finishIfDone()
	return busy
}

// TryWait reports whether the reactor may sleep on the queue's descriptor.
func (p *rdmEndpoint) TryWait() bool {
	if len(p.helloOut) > 0 || len(p.stalled) > 0 || p.unrung() {
		return false
	}
	if !p.fdWatch {
		return true // the doorbell wakes it, or (Blind) its timer
	}
	p.waits.Reset()
	p.waits.Add(p.cq)
	ok, err := p.fabric.TryWait(&p.waits)
	return ok || err != nil
}

// Blind reports a queue without a descriptor, which only polling reads,
// unless the doorbell covers it: every link's peer rings it, and no send
// waits for the provider's progress (rdm_doorbell.go).
func (p *rdmEndpoint) Blind() bool {
	return p.cq != nil && !p.fdWatch && (p.bell == nil || p.deaf > 0 || p.sendsOut > 0)
}

// rdmCQHandler wakes the reactor for a queue with a descriptor: Poll,
// called after every wake, reads it.
type rdmCQHandler rdmEndpoint

// HandleEvents re-arms the descriptor, which stays readable (the reactor
// watches it level-triggered) until fi_trywait succeeds: without it an
// idle tcp;ofi_rxm endpoint kept the reactor awake, a whole core. When
// fi_trywait finds completions waiting, Poll reads them in this round and
// the next wake tries again.
func (h *rdmCQHandler) HandleEvents(uint32) {
	p := (*rdmEndpoint)(h)
	if p.cq == nil {
		return
	}
	p.waits.Reset()
	p.waits.Add(p.cq)
	p.fabric.TryWait(&p.waits)
}

// link returns the link a token belongs to, and marks it as polled.
func (p *rdmEndpoint) link(token uint64, recv bool) *link {
	l := p.links[uint32(token>>rdmIDShift)&wire.RDMMaxID]
	if l == nil {
		return nil
	}
	for i, t := range p.touched {
		if t == l {
			p.heard[i] = p.heard[i] || recv
			return l
		}
	}
	l.polling = true
	p.touched = append(p.touched, l)
	p.heard = append(p.heard, recv)
	return l
}

func (p *rdmEndpoint) dispatch(token, n uint64) {
	if token == ofi.UnknownToken {
		return
	}
	id := uint32(token>>rdmIDShift) & wire.RDMMaxID
	if id == 0 {
		p.onHelloDone(token, n)
		return
	}
	if token&tokKindMask != tokRecv {
		p.sendDone(id)
	}
	if l := p.link(token, token&tokKindMask == tokRecv); l != nil {
		if token&tokKindMask == tokRecv {
			l.res.port.(*rdmPeer).received(l, uint32(token), n)
		} else {
			l.complete(token&^(wire.RDMMaxID<<rdmIDShift), n)
		}
		return
	}
	// A link released since: a late completion of its sends, or a receive
	// that completed before its cancel.
	if r := p.retired[id]; r != nil && token&tokKindMask == tokRecv {
		p.retiredDone(id, r)
	}
}

func (p *rdmEndpoint) onError(ce *ofi.TaggedCompletionError) {
	token := ce.Token
	id := uint32(token>>rdmIDShift) & wire.RDMMaxID
	if token != ofi.UnknownToken && id != 0 && token&tokKindMask != tokRecv {
		p.sendDone(id)
	}
	switch {
	case token == ofi.UnknownToken:
	case id == 0:
		if token&tokKindMask == tokRecv {
			p.postHelloRecv(int(uint32(token))) // a set-up message too long: dropped
		} else {
			p.helloBusy[uint32(token)%rdmHelloSlots] = false
		}
	case p.links[id] != nil:
		p.link(token, false).onCompletionError(&ce.CompletionError)
	case p.retired[id] != nil && token&tokKindMask == tokRecv:
		p.retiredDone(id, p.retired[id])
	}
}

// onHelloDone takes a completion of the set-up window.
func (p *rdmEndpoint) onHelloDone(token, n uint64) {
	slot := int(uint32(token))
	if token&tokKindMask != tokRecv {
		if slot < rdmHelloSlots {
			p.helloBusy[slot] = false
		}
		return
	}
	if slot >= rdmHelloSlots {
		return
	}
	off := slot * wire.RDMHelloSize
	m, err := wire.ParseRDMHello(p.hello.Bytes()[off : off+int(min(n, wire.RDMHelloSize))])
	if err == nil {
		switch m.Kind {
		case wire.RDMRequest:
			if p.acceptor != nil && !p.closing {
				p.request = &m // the link accepted takes the peer's doorbell
				p.acceptor.onRDMRequest(p, &m)
				p.request = nil
			} else {
				p.refuse(&m)
			}
		case wire.RDMAccept, wire.RDMReject:
			if l := p.links[m.To]; l != nil {
				if q, ok := l.res.port.(*rdmPeer); ok && m.Kind == wire.RDMAccept {
					p.hearBell(q, &m)
				}
				l.onRDMAnswer(&m)
			}
		}
	}
	p.postHelloRecv(slot) // after: m points into the buffer
}

// addLink gives l an id on the endpoint, drawn at random: the id is the
// tag of the link's receives, and nothing else tells a link's messages
// (or a dialer's answers) from a third party's, which must then guess
// among 2^30 rather than count from 1. RDMMaxID is a listener's rejects'.
func (p *rdmEndpoint) addLink(l *link) uint32 {
	var id uint32
	for id == 0 || p.links[id] != nil || p.retired[id] != nil {
		id = 1 + rand.Uint32N(wire.RDMMaxID-1)
	}
	p.links[id] = l
	p.refs++
	return id
}

// removeLink forgets the link of id, whose cancelled receives (pending)
// hold regions until the provider reports them.
func (p *rdmEndpoint) removeLink(id uint32, r *rdmRetired) {
	delete(p.links, id)
	if r.pending > 0 {
		p.retired[id] = r
	} else {
		p.retiredEnd(r)
	}
	p.release()
}

func (p *rdmEndpoint) retiredDone(id uint32, r *rdmRetired) {
	if r.pending--; r.pending <= 0 {
		delete(p.retired, id)
		p.retiredEnd(r)
	}
}

// retiredEnd frees what a released link left once its receives are all
// reported: its buffers, and its own endpoint if it had one.
func (p *rdmEndpoint) retiredEnd(r *rdmRetired) {
	closeRegions(r.regions)
	if r.ep != nil {
		p.retireLinkEndpoint(r.ep, r.closeEP)
	}
}

func closeRegions(rs []*ofi.Region) {
	for _, r := range rs {
		if r != nil {
			r.Close()
		}
	}
}

// release drops a reference; after the last one the endpoint stops being
// polled once the receives its links cancelled are read (closing it
// before crashed tcp;ofi_rxm, docs/rdm.md). On the reactor.
func (p *rdmEndpoint) release() {
	if p.refs--; p.refs > 0 {
		return
	}
	p.closing = true
	p.finishIfDone()
}

// finishIfDone stops polling an endpoint that nobody uses, once its
// retired links are all read, and closes it where that is safe. On shm
// it is not: an shm endpoint of the same process maps a local peer's
// memory as the peer's own, which closing it unmaps, and a send from a
// link whose peer went without a FIN exchange (linger ran out, a
// failure) then crashed inside fi_tsend. Such endpoints rest, idle and
// unpolled, until the engine stops (closeRDMEndpoints), when no link is
// left to send.
func (p *rdmEndpoint) finishIfDone() {
	if !p.closing || p.cq == nil {
		return
	}
	if len(p.retired) > 0 {
		return // Poll comes back to it
	}
	p.closing = false
	if p.fdWatch {
		p.eng.r.Unregister(p.cq.FD())
		p.fdWatch = false
	}
	p.stopBell()
	if p.polled {
		p.eng.r.RemovePoller(p)
		p.polled = false
	}
	if p.shared || p.network == "shm" {
		return
	}
	forgetRDMEndpoint(p)
	p.free()
}

// free closes what was opened, in libfabric's order.
func (p *rdmEndpoint) free() {
	p.closeBell()
	p.closeLinkEndpoints()
	if p.ep != nil {
		p.ep.Close()
		p.ep = nil
	}
	if p.cq != nil {
		var ce ofi.TaggedCompletionError
		for i := 0; i < 64; i++ {
			n, err := p.cq.Read(p.cqBuf[:])
			if err != nil {
				p.cq.ReadError(&ce)
			} else if n == 0 {
				break
			}
		}
		p.cq.Close()
		p.cq = nil
	}
	if p.av != nil {
		p.av.Close()
		p.av = nil
	}
	for id, r := range p.retired {
		closeRegions(r.regions)
		delete(p.retired, id)
	}
	closeRegions(p.graves)
	p.graves = nil
	p.helloOut = nil
	if p.hello != nil {
		p.hello.Close()
		p.hello = nil
	}
	if p.dom != nil {
		p.dom.domain.Close()
		p.dom = nil
	}
	if p.fabric != nil {
		p.fabric.Close()
		p.fabric = nil
	}
	if p.list != nil {
		p.list.Free()
		p.list = nil
	}
}
