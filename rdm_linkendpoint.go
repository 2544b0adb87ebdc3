package netio

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"github.com/netio-go/netio/internal/wire"
	"github.com/netio-go/netio/ofi"
	"golang.org/x/sys/unix"
)

// Link endpoints. shm (libfabric 1.17) completes an endpoint's sends
// above its inject size in posting order, whoever they went to: its
// response queue is one per endpoint, and a peer that is stopped or dead
// never answers the one at its head. So on shm a Listener's or
// Publisher's accepted link gets an endpoint of its own, bound to the
// listening endpoint's queue and AV (shm's util queue progresses every
// endpoint bound to it, so one fi_cq_read per round still serves them
// all, and tokens still name the link). The accept names it
// (wire.RDMHello.Addr) and the dialer sends there from then on. Set-up
// messages and the doorbell stay the listening endpoint's. A released
// link's endpoint closes if its peer is another process; otherwise it
// rests for the next link (closing an shm endpoint whose peer is of the
// same process crashed that peer's later sends, docs/rdm.md).

// ownsLinkEndpoints reports whether links accepted on p get endpoints of
// their own.
func (p *rdmEndpoint) ownsLinkEndpoints() bool {
	return p.network == "shm" && p.acceptor != nil
}

// openLinkEndpoint returns an endpoint for a new link on p: a spare one,
// or a new one bound to p's queue and AV.
func (p *rdmEndpoint) openLinkEndpoint() (*ofi.RDMEndpoint, error) {
	if n := len(p.spare); n > 0 {
		ep := p.spare[n-1]
		p.spare = p.spare[:n-1]
		return ep, nil
	}
	ep, err := p.dom.domain.OpenRDMEndpoint(p.info, p.cq, p.av)
	if err != nil {
		return nil, err
	}
	if p.linkEPs == nil {
		p.linkEPs = map[*ofi.RDMEndpoint]bool{}
	}
	p.linkEPs[ep] = true
	return ep, nil
}

// retireLinkEndpoint closes a released link's endpoint, or keeps it as a
// spare when its peer was of this process.
func (p *rdmEndpoint) retireLinkEndpoint(ep *ofi.RDMEndpoint, close bool) {
	if !close {
		p.spare = append(p.spare, ep)
		return
	}
	delete(p.linkEPs, ep)
	ep.Close()
}

// closeLinkEndpoints closes every link endpoint, before p's own: the
// engine stops, no link is left.
func (p *rdmEndpoint) closeLinkEndpoints() {
	for ep := range p.linkEPs {
		ep.Close()
	}
	p.linkEPs, p.spare = nil, nil
}

// insertPeer inserts addr into p's AV once: shm's AV counts every insert
// of an address against its 256 peers, and a removal of one of them
// unmaps the peer for all. With link, the address is a peer link's own
// endpoint, counted until forgetPeer. Other addresses (dialers at a
// listener, listeners at the dialers' endpoint) stay until sweepPeers
// finds their endpoint gone.
func (p *rdmEndpoint) insertPeer(addr ofi.Address, link bool) (ofi.FIAddr, error) {
	key := addr.String()
	e, ok := p.peers[key]
	if !ok {
		if len(p.peers) >= max(p.sweepAt, peerSweepMin) {
			p.sweepPeers()
		}
		fi, err := p.av.Insert(addr)
		if err != nil {
			return fi, err
		}
		if p.peers == nil {
			p.peers = map[string]*rdmPeerAddr{}
		}
		e = &rdmPeerAddr{fi: fi, addr: addr}
		p.peers[key] = e
	}
	if link {
		e.links++
	}
	return e.fi, nil
}

// rdmPeerAddr is an address in an endpoint's AV.
type rdmPeerAddr struct {
	fi     ofi.FIAddr
	addr   ofi.Address
	links  int  // links sending to it as a peer link's own endpoint
	pinned bool // a link was released with sends to it in flight: the provider may still read it
}

// forgetPeer removes a peer link's endpoint from p's AV once no link
// sends there: its link is released with nothing in flight to it.
func (p *rdmEndpoint) forgetPeer(fi ofi.FIAddr) {
	for k, e := range p.peers {
		if e.fi == fi && e.links > 0 {
			if e.links--; e.links == 0 {
				delete(p.peers, k)
				p.av.Remove(fi)
			}
			return
		}
	}
}

// pinPeer keeps fi in the AV for as long as the endpoint lives: a link
// was released with sends to it that may never complete.
func (p *rdmEndpoint) pinPeer(fi ofi.FIAddr) {
	for _, e := range p.peers {
		if e.fi == fi {
			e.pinned = true
			return
		}
	}
}

// peerSweepMin is the number of addresses in an shm endpoint's AV (which
// holds 256) from which an insert first removes the addresses of
// endpoints that are gone.
const peerSweepMin = 128

// sweepPeers removes from p's AV the shm addresses that no link or
// set-up message uses and whose endpoint is gone: a listener accepts
// dialers from processes that come and go, and each would otherwise keep
// one of the AV's 256 places. Only a gone endpoint is removed: shm (1.17)
// does not tell a live peer that it was removed, and that peer's next
// message would name a place that is empty or another's.
func (p *rdmEndpoint) sweepPeers() {
	if p.network != "shm" {
		return
	}
	used := map[ofi.FIAddr]bool{}
	for _, l := range p.links {
		if q, ok := l.res.port.(*rdmPeer); ok {
			used[q.peer] = true
		}
	}
	for slot, busy := range p.helloBusy {
		if busy {
			used[p.helloTo[slot]] = true
		}
	}
	for k, e := range p.peers {
		if e.links == 0 && !e.pinned && !used[e.fi] && shmEndpointGone(e.addr) {
			delete(p.peers, k)
			p.av.Remove(e.fi)
		}
	}
	p.sweepAt = len(p.peers) + peerSweepMin/4
}

// shmEndpointGone reports whether the shm endpoint at a is gone: its process dead, or its region
// removed from /dev/shm and no longer mapped by its process (closed). A
// region removed but still mapped is an endpoint that lives on: shm
// removes every region of a process that gets SIGINT or SIGTERM, and the
// process may go on sending.
func shmEndpointGone(a ofi.Address) bool {
	name, pid, ok := a.ShmRegion()
	if !ok {
		return false
	}
	if unix.Kill(pid, 0) == unix.ESRCH {
		return true
	}
	if _, err := os.Stat("/dev/shm/" + name); !errors.Is(err, fs.ErrNotExist) {
		return false
	}
	maps, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/maps")
	if err != nil {
		return errors.Is(err, fs.ErrNotExist) // the process went meanwhile
	}
	region := "/dev/shm/" + name
	for line := range strings.SplitSeq(string(maps), "\n") {
		line = strings.TrimSuffix(line, " (deleted)")
		if strings.HasSuffix(line, " "+region) {
			return false
		}
	}
	return true
}

// linkAddr checks the address an accept names for its link: it must be
// an endpoint of the process the dialed listener's address names (shm
// addresses are fi_shm://<pid>:<uid>:<index>), so that an accept cannot
// point a link at anyone else.
func linkAddr(network, dialed, named string) (ofi.Address, error) {
	cut := func(a string) (string, bool) {
		i := strings.LastIndexByte(a, ':')
		return a[:max(i, 0)], i > len("fi_shm://")
	}
	d, ok1 := cut(dialed)
	n, ok2 := cut(named)
	if network != "shm" || !ok1 || !ok2 || d != n || !strings.HasPrefix(named, "fi_shm://") {
		return ofi.Address{}, fmt.Errorf("%w: an accept naming %q as its link's endpoint, dialing %q", wire.ErrProtocol, named, dialed)
	}
	return ofi.ParseAddress(named)
}
