package netio_test

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"io"
	mrand "math/rand/v2"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/internal/admit"
	"github.com/netio-go/netio/internal/wire"
	"github.com/netio-go/netio/ofi"
)

// Hostile input to a Listener on a reliable-datagram provider, from a bare
// RDM endpoint of package ofi in the same process: what any local process
// (shm) or any host that reaches the port (tcp;ofi_rxm) can send.

// rawRDM is a bare RDM endpoint that sends what a well-behaved netio never
// would. One goroutine uses it; it makes progress only when polled.
type rawRDM struct {
	t      testing.TB
	list   *ofi.InfoList
	fabric *ofi.Fabric
	domain *ofi.Domain
	cq     *ofi.RDMCQ
	av     *ofi.AV
	ep     *ofi.RDMEndpoint
	region *ofi.Region
	name   ofi.Address
	inject int
	got    []ofi.TaggedCompletion
	nextTx int
}

const (
	rawRDMRegion   = 1 << 20
	rawRDMRecvOff  = rawRDMRegion / 2 // receives above, sends below
	rawRDMSlot     = 8 << 10          // a receive
	rawRDMSendSlot = 64 << 10
	rawTokSend     = 1 << 40
)

func openRawRDM(t testing.TB, network, listen string) *rawRDM {
	t.Helper()
	h := ofi.RDMHints{Provider: network}
	if listen != "" {
		h.Node, h.Service = "127.0.0.1", "0"
	}
	r := &rawRDM{t: t}
	var err error
	if r.list, err = ofi.GetRDMInfo(h); err != nil {
		if errors.Is(err, ofi.ENODATA) {
			t.Skipf("provider %s: %v", network, err)
		}
		t.Fatal(err)
	}
	t.Cleanup(r.close)
	info := r.list.Entries[0]
	r.inject = 64
	if network == "shm" {
		r.inject = 4096
	}
	if r.fabric, err = ofi.OpenFabric(info); err == nil {
		r.domain, err = r.fabric.OpenDomain(info)
	}
	if err == nil {
		r.cq, err = r.domain.OpenRDMCQ(256, 256)
	}
	if err == nil {
		r.av, err = r.domain.OpenAV(info, 4)
	}
	if err == nil {
		r.ep, err = r.domain.OpenRDMEndpoint(info, r.cq, r.av)
	}
	if err == nil {
		r.region, err = r.domain.NewRegion(rawRDMRegion)
	}
	if err == nil {
		err = r.ep.BindRegion(r.region)
	}
	if err == nil {
		r.name, err = r.ep.Name()
	}
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *rawRDM) close() {
	if r.ep != nil {
		r.ep.Close()
	}
	if r.cq != nil {
		var buf [64]ofi.TaggedCompletion
		var e ofi.TaggedCompletionError
		for range 100 {
			if k, err := r.cq.Read(buf[:]); err != nil {
				r.cq.ReadError(&e)
			} else if k == 0 {
				break
			}
		}
		r.cq.Close()
	}
	for _, c := range []interface{ Close() error }{r.av, r.region, r.domain, r.fabric} {
		if c != nil {
			c.Close()
		}
	}
	if r.list != nil {
		r.list.Free()
	}
}

// insert adds the peer printed as addr.
func (r *rawRDM) insert(addr string) ofi.FIAddr {
	r.t.Helper()
	a, err := ofi.ParseAddress(addr)
	if err != nil {
		r.t.Fatal(err)
	}
	fi, err := r.av.Insert(a)
	if err != nil {
		r.t.Fatal(err)
	}
	return fi
}

// poll reads the queue; failed operations are recorded as completions of
// length 0 with the error's token, as the tests only wait for them.
func (r *rawRDM) poll() {
	var buf [32]ofi.TaggedCompletion
	k, err := r.cq.Read(buf[:])
	if errors.Is(err, ofi.EAVAIL) {
		var e ofi.TaggedCompletionError
		if ok, _ := r.cq.ReadError(&e); ok {
			r.got = append(r.got, ofi.TaggedCompletion{Token: e.Token})
		}
		return
	}
	r.got = append(r.got, buf[:k]...)
}

// await polls until the operation of token completed, and returns it.
func (r *rawRDM) await(token uint64) ofi.TaggedCompletion {
	r.t.Helper()
	var c ofi.TaggedCompletion
	eventually(r.t, "raw endpoint's operation", func() bool {
		r.poll()
		for i, g := range r.got {
			if g.Token == token {
				c = g
				r.got = append(r.got[:i], r.got[i+1:]...)
				return true
			}
		}
		return false
	})
	return c
}

// send sends b to peer, tagged with tag if tagged, and waits until the
// provider took it: retried while it answers EAGAIN (the first send to a
// peer), then its completion unless it went inline.
func (r *rawRDM) send(peer ofi.FIAddr, tagged bool, tag uint64, b []byte) {
	r.t.Helper()
	if len(b) > rawRDMSendSlot {
		r.t.Fatalf("raw send of %d bytes", len(b))
	}
	off := (r.nextTx % (rawRDMRecvOff / rawRDMSendSlot)) * rawRDMSendSlot
	r.nextTx++
	copy(r.region.Bytes()[off:], b)
	token := rawTokSend | uint64(r.nextTx)
	seg := []ofi.RDMSegment{{Offset: uint64(off), Len: uint64(len(b)), Token: token, Tag: tag, Peer: peer}}
	post := r.ep.PostSend
	if tagged {
		post = r.ep.PostTaggedSend
	}
	inject := 0
	if len(b) <= r.inject {
		inject = r.inject
	}
	eventually(r.t, "raw send accepted", func() bool {
		n, err := post(r.region, seg, inject)
		if err != nil && !errors.Is(err, ofi.EAGAIN) {
			r.t.Fatalf("raw send: %v", err)
		}
		r.poll()
		return n == 1
	})
	if inject == 0 {
		r.await(token)
	}
}

// recvUntagged posts an untagged receive in slot i of the receive half,
// with token i.
func (r *rawRDM) recvUntagged(i int) {
	r.t.Helper()
	seg := []ofi.RDMSegment{{Offset: uint64(rawRDMRecvOff + i*rawRDMSlot), Len: rawRDMSlot, Token: uint64(i), Peer: ofi.AddrUnspec}}
	if _, err := r.ep.PostRecv(r.region, seg); err != nil {
		r.t.Fatal(err)
	}
}

// recvTagged posts a receive for tag in slot i, with token i.
func (r *rawRDM) recvTagged(i int, tag uint64) {
	r.t.Helper()
	seg := []ofi.RDMSegment{{Offset: uint64(rawRDMRecvOff + i*rawRDMSlot), Len: rawRDMSlot, Token: uint64(i), Tag: tag, Peer: ofi.AddrUnspec}}
	if _, err := r.ep.PostTaggedRecv(r.region, seg); err != nil {
		r.t.Fatal(err)
	}
}

// received waits for the receive of slot i and returns its bytes.
func (r *rawRDM) received(i int) []byte {
	r.t.Helper()
	c := r.await(uint64(i))
	off := rawRDMRecvOff + i*rawRDMSlot
	return append([]byte(nil), r.region.Bytes()[off:off+int(c.Len)]...)
}

// answer waits for the set-up message to link id, skipping others (the
// answers to earlier tests' endpoints of the same shm name), with an
// untagged receive in slot 0.
func (r *rawRDM) answer(id uint32) (wire.RDMHello, error) {
	for {
		r.recvUntagged(0)
		m, err := wire.ParseRDMHello(r.received(0))
		if err != nil || m.To == id {
			return m, err
		}
	}
}

// setup is an RDM set-up message's bytes (wire.RDMHello) from a sender
// without a doorbell; the checks of Marshal on its size are not a hostile
// peer's.
func setup(kind uint8, from, to uint32, addr string, data []byte) []byte {
	m := wire.RDMHello{Kind: kind, From: from, To: to, Bell: wire.RDMNoBell}
	b, err := m.Marshal(make([]byte, wire.RDMHelloSize))
	if err != nil {
		panic(err)
	}
	binary.LittleEndian.PutUint16(b[len(b)-2:], uint16(len(addr)))
	return append(append(b, addr...), data...)
}

// rdmHeader is the length of a set-up message's header: its address
// length is its last two bytes.
var rdmHeader = len(setup(wire.RDMRequest, 1, 0, "", nil))

// rawHello is the hello of a raw connection end: LowLatency, window w.
func rawHello(w uint32) wire.Hello {
	return wire.Hello{Version: wire.ProtocolLevel, Role: wire.RoleConn, Window: w, BufferSize: rawRDMSlot, MaxMessage: 1 << 16}
}

// rdmRequest is a set-up request from link from, naming addr, with a key proof
// made with key.
func rdmRequest(key []byte, from uint32, addr string) ([]byte, [wire.AuthTrailer]byte) {
	data, auth := admit.SealRequest(key, rawHello(4), time.Now())
	return setup(wire.RDMRequest, from, 0, addr, data), auth
}

// rdmHostileSite is a listener with a key, a connection to it that must
// keep working, and a raw endpoint that knows the listener's address.
type rdmHostileSite struct {
	network, listen string
	key             []byte
	ln              *netio.Listener
	c, s            *netio.Conn
	raw             *rawRDM
	lnAddr          ofi.FIAddr
}

func newRDMHostileSite(t *testing.T, network, listen string, opts ...netio.Option) *rdmHostileSite {
	key := make([]byte, 32)
	rand.Read(key)
	h := &rdmHostileSite{network: network, listen: listen, key: key}
	h.c, h.s, h.ln = rdmPair(t, network, listen, append(opts, netio.WithKey(key))...)
	h.raw = openRawRDM(t, network, listen)
	h.lnAddr = h.raw.insert(h.ln.Addr().String())
	return h
}

// healthy checks what a user would: the connection beside still echoes
// both ways, and the listener still accepts a new connection that echoes.
func (h *rdmHostileSite) healthy(t *testing.T) {
	t.Helper()
	echo(t, h.c, h.s, []byte("beside"))
	echo(t, h.s, h.c, []byte("still here"))
	c, err := netio.Dial(h.network, h.ln.Addr().String(), netio.WithKey(h.key))
	if err != nil {
		t.Fatalf("Dial after hostile input: %v", err)
	}
	defer c.Close()
	s := acceptOne(t, h.ln, hangTimeout)
	defer s.Close()
	echo(t, c, s, []byte("new"))
	echo(t, s, c, bytes.Repeat([]byte{7}, 5000))
}

// seen sends a set-up request with a wrong key after what the test sent,
// from the same endpoint (send-after-send order), and waits until the
// listener has counted it: everything before it was handled.
func (h *rdmHostileSite) seen(t *testing.T) {
	t.Helper()
	before := h.ln.Stats().RejectedAuth
	req, _ := rdmRequest([]byte("not the listener's key, not at all"), 1, h.raw.name.String())
	h.raw.send(h.lnAddr, false, 0, req)
	eventually(t, "the listener read the marker request", func() bool {
		return h.ln.Stats().RejectedAuth > before
	})
}

func TestRDMHostileGarbage(t *testing.T) {
	forEachRDMNetwork(t, func(t *testing.T, network, listen string) {
		h := newRDMHostileSite(t, network, listen)
		valid, _ := rdmRequest(h.key, 9, h.raw.name.String())
		for _, b := range [][]byte{
			{},
			[]byte("x"),
			[]byte("NTIO-REJECT"),
			bytes.Repeat([]byte{0xff}, 300),
			[]byte("NRDM"),
			valid[:rdmHeader-1],                   // header cut short
			setup(wire.RDMRequest, 9, 0, "", nil), // no address
			setup(wire.RDMRequest, 0, 0, "fi_shm://1:0:0", nil), // link 0
			setup(wire.RDMRequest, wire.RDMMaxID+1, 0, "fi_shm://1:0:0", nil),
			setup(wire.RDMRequest, 9, 5, h.raw.name.String(), valid[rdmHeader+len(h.raw.name.String()):]), // to a link
			setup(99, 9, 0, h.raw.name.String(), nil),                                                     // unknown kind
			append(setup(wire.RDMRequest, 9, 0, "", nil)[:rdmHeader-2], 0xff, 0xff),                       // address past the end
		} {
			h.raw.send(h.lnAddr, false, 0, b)
		}
		h.seen(t)
		h.healthy(t)
		// Longer than a set-up buffer (within shm's inject size: see
		// docs/rdm.md), last and from an endpoint of its own: after it,
		// tcp;ofi_rxm delivers nothing more from that sender.
		spoiler := openRawRDM(t, network, listen)
		spoiler.send(spoiler.insert(h.ln.Addr().String()), false, 0, append(valid, bytes.Repeat([]byte{1}, 1000)...))
		h.healthy(t)
	})
}

// A set-up request with a key proof the listener cannot check, answered
// with the MSG path's rejection; one naming an address that is not its
// sender's, real or not, sends that rejection elsewhere or nowhere: the
// listener goes on either way, also after more of them than it has
// set-up send buffers.
func TestRDMHostileSetup(t *testing.T) {
	forEachRDMNetwork(t, func(t *testing.T, network, listen string) {
		// The set-up timeout bounds how long the rejects to nobody wait.
		h := newRDMHostileSite(t, network, listen, netio.WithConnectTimeout(2*time.Second))
		req, _ := rdmRequest([]byte("a key of the right length but wrong"), 3, h.raw.name.String())
		h.raw.send(h.lnAddr, false, 0, req)
		m, err := h.raw.answer(3)
		if err != nil || m.Kind != wire.RDMReject || m.To != 3 || string(m.Data) != wire.RejectAuthMarker {
			t.Fatalf("answer to a wrong key: %+v, %v; want a reject to link 3 with the auth marker", m, err)
		}
		if st := h.ln.Stats(); st.RejectedAuth != 1 || st.Accepted != 1 {
			t.Errorf("stats %+v, want 1 rejected for its key and the 1 good connection", st)
		}
		h.healthy(t)

		// Another endpoint's address: it gets the rejection.
		victim := openRawRDM(t, network, listen)
		req, _ = rdmRequest(nil, 4, victim.name.String())
		h.raw.send(h.lnAddr, false, 0, req)
		if m, err := victim.answer(4); err != nil || m.Kind != wire.RDMReject {
			t.Fatalf("the named endpoint got %+v, %v; want a reject to link 4", m, err)
		}

		// Addresses of nobody, more than the set-up window's send buffers.
		nobody := "fi_shm://4000000:0:0"
		if network != "shm" {
			nobody = "fi_sockaddr_in://127.0.0.1:1"
		}
		for i := range 40 {
			req, _ := rdmRequest(nil, uint32(10+i), nobody)
			h.raw.send(h.lnAddr, false, 0, req)
		}
		h.seen(t)
		h.healthy(t)
		eventually(t, "the rejects to nobody given up", func() bool {
			_, waiting, busy := netio.RDMListenerSetup(h.ln)
			return waiting == 0 && busy == 0
		})
	})
}

// rawLink is a connection set up by hand from a raw endpoint, and its
// accepted end.
type rawLink struct {
	id, peer uint32     // the raw side's link id, the listener's
	to       ofi.FIAddr // where the link's messages go: the endpoint its accept named (shm), or the listener's
	victim   *netio.Conn
}

// handSetup sets up a connection from h.raw with link id id, its window
// of 4 tagged receives in slots 1 to 4 posted first, as netio's dialer
// does.
func (h *rdmHostileSite) handSetup(t *testing.T, id uint32) rawLink {
	t.Helper()
	for i := 1; i <= 4; i++ {
		h.raw.recvTagged(i, uint64(id))
	}
	req, _ := rdmRequest(h.key, id, h.raw.name.String())
	h.raw.send(h.lnAddr, false, 0, req)
	m, err := h.raw.answer(id)
	if err != nil || m.Kind != wire.RDMAccept {
		t.Fatalf("answer to a hand-made request: %+v, %v; want an accept", m, err)
	}
	to := h.lnAddr
	if m.Addr != "" {
		to = h.raw.insert(m.Addr)
	}
	return rawLink{id: id, peer: m.From, to: to, victim: acceptOne(t, h.ln, hangTimeout)}
}

// A connection set up by hand from a raw endpoint, then sent the MSG
// path's hostile frames (hostile_test.go's attacks), one connection per
// attack: each ends with a clear error, the listener forgets it, and the
// connection beside goes on. Set-up messages of the other kinds, and
// tagged messages for links that do not exist, change nothing.
func TestRDMHostileLink(t *testing.T) {
	forEachRDMNetwork(t, func(t *testing.T, network, listen string) {
		h := newRDMHostileSite(t, network, listen, netio.WithBufferSize(hostileBufSize))
		// A good hand-made connection first: what the attacks start from.
		rl := h.handSetup(t, 100)
		h.raw.send(rl.to, true, uint64(rl.peer), dataMsg([]byte("by hand")))
		rl.victim.SetReadDeadline(time.Now().Add(hangTimeout))
		if got, err := rl.victim.AppendMessage(nil); err != nil || string(got) != "by hand" {
			t.Fatalf("hand-made connection read %q, %v", got, err)
		}

		// Accepts and rejects to a listener, for the links it has and
		// some it has not, and tagged messages for links that do not
		// exist: nothing to answer, nothing to end.
		for _, to := range []uint32{rl.peer, 1, 2, 3, 1000, wire.RDMMaxID} {
			h.raw.send(h.lnAddr, false, 0, setup(wire.RDMAccept, 7, to, "", []byte("forged accept")))
			h.raw.send(h.lnAddr, false, 0, setup(wire.RDMReject, 7, to, "", []byte(wire.RejectMarker)))
		}
		// The first ids, as a third party that counts would guess them:
		// links' ids are drawn at random, so the connection beside is not
		// among them.
		tags := []uint64{0, wire.RDMMaxID, 1 << 40, ^uint64(0)}
		for id := range uint64(32) {
			tags = append(tags, 1+id)
		}
		for _, tag := range tags {
			if tag != uint64(rl.peer) {
				h.raw.send(h.lnAddr, true, tag, dataMsg([]byte("nobody's")))
				if rl.to != h.lnAddr {
					h.raw.send(rl.to, true, tag, dataMsg([]byte("nobody's"))) // the link's own endpoint
				}
			}
		}
		h.seen(t)
		h.raw.send(rl.to, true, uint64(rl.peer), dataMsg([]byte("still")))
		if got, err := rl.victim.AppendMessage(nil); err != nil || string(got) != "still" {
			t.Fatalf("hand-made connection after forged set-up messages read %q, %v", got, err)
		}
		h.healthy(t)

		rng := mrand.New(mrand.NewPCG(5, 6))
		for i, a := range attacks(llListener, rng) {
			if network == "shm" && a.name == "larger than the receive buffer" {
				// Above shm's inject size, a message longer than its
				// receive spins the receiving side (docs/rdm.md).
				continue
			}
			var next rawLink
			if i == 0 {
				next = rl
			} else {
				next = h.handSetup(t, uint32(100+i))
			}
			for _, f := range a.frames {
				h.raw.send(next.to, true, uint64(next.peer), f)
			}
			err := readToEnd(next.victim, i)
			var op *net.OpError
			ok := errors.As(err, &op) && (errors.Is(err, netio.ErrProtocol) || errors.Is(err, netio.ErrMessageTooLarge))
			if strings.HasPrefix(a.name, "FIN") {
				ok = errors.Is(err, io.EOF) // on RDM the peer's FIN ends the link
			}
			if !ok {
				t.Errorf("%s: the Conn ended with %v; want ErrProtocol or ErrMessageTooLarge in a *net.OpError", a.name, err)
			}
			next.victim.Close()
		}
		h.healthy(t)
		eventually(t, "the hostile links forgotten", func() bool {
			links, _, _ := netio.RDMListenerSetup(h.ln)
			return links == 1 // the connection beside
		})
	})
}

// An accept that names, as its link's endpoint, an address of another
// process than the one dialed fails the Dial with ErrProtocol: it cannot
// point the link at a third party. (Naming another endpoint of the
// dialed process is what a Listener on shm does.)
func TestRDMForgedAcceptAddress(t *testing.T) {
	if os.Getenv("NETIO_PROFILE") != "" {
		t.Skip("NETIO_PROFILE: reliable-datagram providers are not profiled")
	}
	key := make([]byte, 32)
	rand.Read(key)
	raw := openRawRDM(t, "shm", "")
	defer raw.close()
	raw.recvUntagged(0)
	type result struct {
		c   *netio.Conn
		err error
	}
	done := make(chan result, 1)
	go func() {
		c, err := netio.Dial("shm", raw.name.String(), netio.WithKey(key), netio.WithConnectTimeout(hangTimeout))
		done <- result{c, err}
	}()
	m, err := wire.ParseRDMHello(raw.received(0))
	if err != nil || m.Kind != wire.RDMRequest {
		t.Fatalf("the dialer's request: %+v, %v", m, err)
	}
	checker := admit.Checker{Key: key, Seen: admit.NewReplayCache(16)}
	auth, err := checker.Check(m.Data, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	accept := setup(wire.RDMAccept, 9, m.From, "fi_shm://1:0:0", admit.SealAccept(key, rawHello(4), auth))
	raw.send(raw.insert(m.Addr), false, 0, accept)
	r := <-done
	if r.err == nil {
		r.c.Close()
		t.Fatal("a Dial took an accept naming another process's endpoint")
	}
	var op *net.OpError
	if !errors.As(r.err, &op) || !errors.Is(r.err, netio.ErrProtocol) {
		t.Fatalf("Dial: %v, want ErrProtocol in a *net.OpError", r.err)
	}
}
