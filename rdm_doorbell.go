package netio

import (
	"crypto/rand"
	"encoding/binary"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netio-go/netio/internal/wire"
	"github.com/netio-go/netio/ofi"
	"github.com/netio-go/netio/reactor"
)

// A doorbell wakes a reactor asleep with an shm queue, which has no
// descriptor (docs/rdm.md, "An idle shm process"). Each shm endpoint binds
// a datagram socket in the abstract namespace, named from its own shm
// address, and the reactor sleeps on it instead of polling on a timer. A
// sender rings the peer's bell (one byte, never waiting) only when the
// peer may be asleep: when its last send or ring to that peer may be a
// peer's spin ago or more. Why that is enough: the peer polled that
// earlier message at some time t, after we posted it; a round that finds
// work is followed by a full spin of rounds, and the peer sleeps only
// after a round whose clock, read before its poll, is a spin past t
// (reactor/clock.go). So a message posted less than a spin after the
// earlier one is polled before the peer sleeps. The sender bounds both
// times with its reactor's round clock, read once per round, never per
// message: a send noted in a round before the current one happened after
// that round's clock (a lower bound, kept as last) and before the current
// one (an upper bound, compared), so rings are decided at the start of
// the next Poll.
//
// Both sides tell, in their set-up messages, their spin, their network
// namespace (abstract names are per namespace) and their process (a peer
// of the same process shares the reactor, which is awake when it sends:
// no ring). A link whose peer does not ring (no doorbell, another
// namespace, not heard yet) keeps its endpoint on the timer, as does a
// send not completed yet: the provider finishes it in later polls (CMA's
// acknowledgement, SAR's segments) without a message to ring for. While
// one is out the sender also rings the peer every window, so that the
// peer's half of the transfer goes on.

// bellPrefix names doorbells: the abstract name is the prefix and the
// endpoint's shm address.
const bellPrefix = "@netio-doorbell/"

// bellDrain bounds the rings read per wake-up: a local process that rings
// without end costs a bounded read per round (the descriptor stays ready,
// level-triggered), nothing more.
const bellDrain = 64

var ringByte = []byte{1}

// rdmBell is an endpoint's doorbell socket. Reactor only.
type rdmBell struct {
	fd         int
	registered bool
	rung       bool // read since the last Poll: the next one counts as work
	buf        [8]byte
}

// openBell binds the doorbell of the endpoint at addr. It returns nil
// where it cannot (the name taken, no /proc to tell the namespace): the
// endpoint then polls on the timer, as without doorbells.
func openBell(addr string) *rdmBell {
	if ownNetNS() == 0 {
		return nil
	}
	// Flags set after the call, under ForkLock as package net does, so
	// that the file builds where SOCK_NONBLOCK and SOCK_CLOEXEC do not
	// exist (RDM itself runs on Linux only).
	syscall.ForkLock.RLock()
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM, 0)
	if err == nil {
		unix.CloseOnExec(fd)
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return nil
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil
	}
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: bellPrefix + addr}); err != nil {
		unix.Close(fd)
		return nil
	}
	return &rdmBell{fd: fd}
}

// HandleEvents reads the rings waiting, up to bellDrain; the next Poll
// reads the queue as busy, so the reactor spins before it sleeps again.
func (b *rdmBell) HandleEvents(uint32) {
	for range bellDrain {
		if _, err := unix.Read(b.fd, b.buf[:]); err != nil {
			break
		}
	}
	b.rung = true
}

// ring rings the bell at to; a full or missing bell is no error: a full
// one is ringing already, a missing one belongs to a peer gone.
func (b *rdmBell) ring(to *unix.SockaddrUnix) {
	unix.Sendto(b.fd, ringByte, unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL, to)
}

func (b *rdmBell) close() { unix.Close(b.fd) }

// processID tells a peer of this process from another: the endpoints of a
// process share one reactor.
var processID = func() uint64 {
	var b [8]byte
	rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:]) | 1
}()

var netNS struct {
	once sync.Once
	id   uint64
}

// ownNetNS identifies the process's network namespace (the inode of
// /proc/self/ns/net); 0 if it cannot tell.
func ownNetNS() uint64 {
	netNS.once.Do(func() {
		var st unix.Stat_t
		if unix.Stat("/proc/self/ns/net", &st) == nil {
			netNS.id = st.Ino
		}
	})
	return netNS.id
}

// peerBell is a link's doorbell state: the peer's bell and when it was
// last known awake. Times are the reactor's round clock. Reactor only.
type peerBell struct {
	to     *unix.SockaddrUnix // the peer's bell, when paired
	window time.Duration      // the peer's: it is awake this long after our last send
	paired bool               // both ring each other
	joined bool               // counted in the endpoint's deaf until paired

	last      time.Duration // no later than our last send or ring the peer has taken
	sentAt    time.Duration // no later than the last send not decided on yet
	sentRound uint64        // the round of that send
	sent      bool          // sends not decided on yet
	olderAt   time.Duration // no later than the last of them noted in an earlier round
	older     bool          // there is one
	listed    bool          // in the endpoint's ringing list
	out       int           // sends not completed
}

// bellHello fills in the endpoint's doorbell for a set-up message.
func (p *rdmEndpoint) bellHello(m *wire.RDMHello) {
	m.Bell, m.NetNS, m.Proc = wire.RDMNoBell, ownNetNS(), processID
	if p.bell != nil {
		m.Bell = uint32(min(p.eng.r.Spin()/time.Microsecond, wire.RDMNoBell-1))
	}
}

// joinBell sets up q's doorbell state as it joins the endpoint: paired
// at once by a request heard (the listener's side), or when the accept
// comes (hearBell).
func (p *rdmEndpoint) joinBell(q *rdmPeer) {
	q.bell.joined = true
	q.bell.last = -1 << 62 // never: the first send rings, however young the reactor
	p.deaf++
	if p.request != nil {
		p.hearBell(q, p.request)
	}
}

// hearBell takes the peer's doorbell from its set-up message.
func (p *rdmEndpoint) hearBell(q *rdmPeer, m *wire.RDMHello) {
	b := &q.bell
	if !b.joined || b.paired || p.bell == nil || m.Bell == wire.RDMNoBell || m.NetNS != ownNetNS() {
		return
	}
	if m.Proc != processID {
		a, err := p.av.Lookup(q.peer)
		if err != nil {
			return
		}
		b.to = &unix.SockaddrUnix{Name: bellPrefix + a.String()}
		b.window = time.Duration(m.Bell) * time.Microsecond
	}
	b.paired = true
	p.deaf--
}

// leaveBell forgets q as its link leaves the endpoint.
func (p *rdmEndpoint) leaveBell(q *rdmPeer) {
	if q.bell.joined && !q.bell.paired {
		p.deaf--
	}
	q.bell = peerBell{}
	for i, r := range p.ringing {
		if r == q {
			last := len(p.ringing) - 1
			p.ringing[i] = p.ringing[last]
			p.ringing[last] = nil
			p.ringing = p.ringing[:last]
			return
		}
	}
}

// sentBell notes sends q posted, or that the provider refused them for
// now (refused: its queue to the peer is full, which the peer's progress
// empties): no system call, the ring (if any) is decided in the next Poll.
func (p *rdmEndpoint) sentBell(q *rdmPeer, segs []ofi.RDMSegment, inject int, refused bool) {
	if (len(segs) == 0 && !refused) || p.bell == nil {
		return
	}
	b := &q.bell
	for i := range segs {
		if inject <= 0 || segs[i].Len > uint64(inject) { // else fi_inject: no completion
			b.out++
			p.sendsOut++
		}
	}
	if b.to == nil { // unpaired, or the same process
		return
	}
	now, round := p.eng.r.Now(), p.eng.r.Round()
	if b.sent && b.sentRound < round {
		// Keep the earlier round's send decidable: sends noted every
		// round (a retry before each Poll) must not put it off for ever.
		b.older, b.olderAt = true, b.sentAt
	}
	b.sent, b.sentAt, b.sentRound = true, now, round
	if !b.listed {
		b.listed = true
		p.ringing = append(p.ringing, q)
	}
}

// sendDone takes a send completion of link id.
func (p *rdmEndpoint) sendDone(id uint32) {
	if p.bell == nil {
		return
	}
	if p.sendsOut > 0 {
		p.sendsOut--
	}
	if l := p.links[id]; l != nil {
		if q, ok := l.res.port.(*rdmPeer); ok && q.bell.out > 0 {
			q.bell.out--
		}
	}
}

// ringPeers rings the peers that may be asleep, at the start of Poll: a
// send noted before this round's clock (a smaller Round) happened before
// it, so the clock bounds how long the peer has had nothing from us.
// Sends noted since wait for the next round.
func (p *rdmEndpoint) ringPeers() {
	if len(p.ringing) == 0 {
		return
	}
	now, round := p.eng.r.Now(), p.eng.r.Round()
	keep := p.ringing[:0]
	for _, q := range p.ringing {
		b := &q.bell
		decided := b.sent && b.sentRound < round // else only older ones are
		if decided || b.older || b.out > 0 {
			switch {
			case now-b.last >= b.window:
				p.bell.ring(b.to) // after every send so far: covers them all
				b.last = now
				b.sent = false
			case decided:
				b.last = max(b.last, b.sentAt)
				b.sent = false
			case b.older:
				b.last = max(b.last, b.olderAt)
			}
			b.older = false
		}
		if b.sent || b.out > 0 {
			keep = append(keep, q)
		} else {
			b.listed = false
		}
	}
	clear(p.ringing[len(keep):])
	p.ringing = keep
}

// unrung reports sends whose ring is not decided yet: the reactor must
// not sleep before.
func (p *rdmEndpoint) unrung() bool {
	for _, q := range p.ringing {
		if q.bell.sent {
			return true
		}
	}
	return false
}

// ringHello rings the bell of peer after a set-up message: rare, so
// always, whether or not the peer has a bell.
func (p *rdmEndpoint) ringHello(peer ofi.FIAddr) {
	if p.bell == nil {
		return
	}
	if a, err := p.av.Lookup(peer); err == nil {
		p.bell.ring(&unix.SockaddrUnix{Name: bellPrefix + a.String()})
	}
}

// ringStalled rings peer, at most once per MinIdlePoll, while a set-up
// message to it is refused for now: shm's first send to a peer waits
// until the peer's progress has mapped us, and the peer may be asleep.
func (p *rdmEndpoint) ringStalled(peer ofi.FIAddr) {
	if p.bell == nil {
		return
	}
	if now := p.eng.r.Now(); now-p.stallRang >= reactor.MinIdlePoll || p.stallRang == 0 {
		p.stallRang = now
		p.ringHello(peer)
	}
}

// startBell has the reactor watch the doorbell.
func (p *rdmEndpoint) startBell() error {
	if p.bell == nil || p.bell.registered {
		return nil
	}
	if err := p.eng.r.Register(p.bell.fd, reactorIn, p.bell); err != nil {
		return err
	}
	p.bell.registered = true
	return nil
}

// stopBell stops watching it, as the endpoint rests.
func (p *rdmEndpoint) stopBell() {
	if p.bell != nil && p.bell.registered {
		p.eng.r.Unregister(p.bell.fd)
		p.bell.registered = false
	}
}

// closeBell closes it with the endpoint.
func (p *rdmEndpoint) closeBell() {
	if p.bell != nil {
		p.bell.close()
		p.bell = nil
	}
}
