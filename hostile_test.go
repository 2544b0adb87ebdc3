package netio_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/ofi"
)

// TestHostileInput sends what a hostile peer would at a LowLatency
// Listener, a HighThroughput Listener and a Publisher, many times over:
// netio frames that lie (lengths beyond the buffer or the largest message,
// unknown kinds, forged control messages with garbage payloads, credits
// beyond the window, data after FIN, pages whose records overrun), random
// bytes, and, from plain TCP, malformed connection requests. Each
// hostile connection comes from a bare libfabric endpoint and from a
// plain TCP socket speaking libfabric tcp's framing by hand
// (hostile_tcp_test.go).
//
// Each hostile connection must end: at a Listener its accepted Conn fails
// with ErrProtocol (or ErrMessageTooLarge) in a *net.OpError, and the
// peer is disconnected; a Publisher, which has no Conn to show, drops the
// peer and forgets it. Meanwhile a legitimate connection at each Listener
// and a subscription at the Publisher exchange numbered messages, and
// every one must arrive, in order. After a warm-up round, further rounds
// must leave the heap, the resident set, the goroutines and the open
// files where they were.
//
// Not sent: the forged libfabric acknowledgement that crashes libfabric
// 1.17's tcp provider (docs/reliability.md).
func TestHostileInput(t *testing.T) {
	const rounds = 6 // after the warm-up
	h := newHostileBench(t)
	defer h.stop()

	rng := rand.New(rand.NewPCG(12, 34))
	h.round(t, rng) // warm-up: every path has run once
	before := measureFootprint(t)
	conns, allocs := h.conns, heapAllocs()
	for i := 0; i < rounds; i++ {
		h.round(t, rng)
	}
	allocs, conns = heapAllocs()-allocs, h.conns-conns
	after := measureFootprint(t)
	t.Logf("%d hostile connections; footprint after the warm-up %v, after %d more rounds %v; %.1f KiB allocated per hostile connection", h.conns, before, rounds, after, float64(allocs)/float64(conns)/(1<<10))
	before.check(t, after)
	// What the Go heap was asked for, garbage included: the lengths that
	// lie within the largest message (a GiB) must not have been believed.
	if perConn := allocs / uint64(conns); perConn > 1<<20 {
		t.Errorf("%d bytes allocated per hostile connection: a length a peer announced was believed", perConn)
	}
	h.finish(t)
}

const (
	hostileBufSize = 16 << 10 // the Listeners' buffers: a larger frame does not fit
	hostileMaxMsg  = 1 << 30  // the LowLatency Listener's largest message: lying lengths within it must cost nothing
	legitTag       = 1
)

func randBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// target is what a hostile peer connects to.
type target int

const (
	llListener target = iota
	htListener
	publisherLL // a Publisher, the peer claiming a LowLatency subscriber
	publisherHT
)

func (g target) String() string {
	return [...]string{"LowLatency Listener", "HighThroughput Listener", "Publisher (LowLatency subscriber)", "Publisher (HighThroughput subscriber)"}[g]
}

func (g target) publisher() bool { return g >= publisherLL }

// hello is a valid handshake for the target.
func (g target) hello() []byte {
	m := netio.LowLatency
	if g == htListener || g == publisherHT {
		m = netio.HighThroughput
	}
	b := modeHello(m, rawWindow, rawBufSize, 1<<20)
	if g.publisher() {
		b[6] = 1 // a subscriber
	}
	return b
}

// attack is frames a hostile peer sends, each one libfabric message; the
// last of them at the latest breaks the protocol.
type attack struct {
	name   string
	frames [][]byte
}

// attacks are the framed attacks on g; random ones are new each call.
func attacks(g target, rng *rand.Rand) []attack {
	var random [][]byte
	for i := rng.IntN(3); i >= 0; i-- {
		random = append(random, randBytes(rng, rng.IntN(600)))
	}
	random = append(random, frame(wHeader{kind: 9, flags: wFlagLast}, nil))
	// A fragment of protocol level 2's LowLatency framing: no kind of
	// data any more.
	fragment := func(s string) []byte {
		return frame(wHeader{kind: wKindData, flags: wFlagLast, msgLen: uint64(len(s))}, []byte(s))
	}
	as := []attack{
		{"random frames", random},
		{"truncated header", [][]byte{randBytes(rng, 1+rng.IntN(15))}},
		{"empty message", [][]byte{{}}},
		{"fragLen says more", [][]byte{lying(wHeader{kind: wKindPage, fragLen: 100}, rawRecords("short"))}},
		{"fragLen says less", [][]byte{lying(wHeader{kind: wKindPage, fragLen: 5}, rawRecords("longer one"))}},
		{"fragLen huge", [][]byte{lying(wHeader{kind: wKindPage, fragLen: 1<<32 - 1}, rawRecords("x"))}},
		{"kind zero", [][]byte{frame(wHeader{kind: 0, flags: wFlagLast, msgLen: 3}, []byte("abc"))}},
		{"unknown kind", [][]byte{frame(wHeader{kind: 9, flags: wFlagLast}, nil)}},
		{"kind 255", [][]byte{frame(wHeader{kind: 255}, randBytes(rng, 40))}},
		{"credits beyond the window", [][]byte{frame(wHeader{kind: wKindCredit, credits: 1<<16 - 1}, nil)}},
		{"credits one beyond the window", [][]byte{frame(wHeader{kind: wKindCredit, credits: rawWindow + 1}, nil)}},
		{"forged acknowledgement", [][]byte{control(wKindAck, randBytes(rng, rng.IntN(64)))}},
		{"forged subscribe of odd length", [][]byte{control(wKindSubscribe, randBytes(rng, 8+1+rng.IntN(7)))}},
		{"forged subscribe with unknown policy", [][]byte{control(wKindSubscribe, request(1, 200, 5))}},
		{"forged unsubscribe too short", [][]byte{control(wKindUnsubscribe, randBytes(rng, rng.IntN(8)))}},
		{"larger than the receive buffer", [][]byte{rawPage(0, rawRecord(40000, randBytes(rng, 40000)))}},
	}
	switch g {
	case llListener, htListener: // both take pages, packed or filled
		as = append(as,
			attack{"credits beyond the window on a page", [][]byte{frame(wHeader{kind: wKindPage, credits: 1<<16 - 1}, rawRecords("x"))}},
			attack{"FIN then a page", [][]byte{rawPage(0, rawRecords("ok")), frame(wHeader{kind: wKindFin, flags: wFlagLast}, nil), rawPage(0, rawRecords("zombie"))}},
			attack{"record above the maximum", [][]byte{rawPage(0, rawRecord(1<<40, make([]byte, 10)))}},
			attack{"record overruns its page", [][]byte{rawPage(0, rawRecord(100, make([]byte, 10))), rawPage(0, rawRecords("next"))}},
			// The reader must not make room for the gigabyte announced.
			attack{"record length lies within the maximum", [][]byte{rawPage(0, rawRecord(hostileMaxMsg, make([]byte, 10))), rawPage(0, rawRecords("next"))}},
			attack{"record length lies among packed records", [][]byte{rawPage(0, append(append(rawRecords("a", "bb"), rawRecord(60, make([]byte, 10))...), rawRecords("c")...)), rawPage(0, rawRecords("next"))}},
			attack{"continuation one more", [][]byte{rawPage(0, rawRecord(100, make([]byte, 50))), rawPage(51, make([]byte, 60))}},
			attack{"continuation above the page", [][]byte{rawPage(0, rawRecord(100, make([]byte, 50))), lying(wHeader{kind: wKindPage, fragLen: 5, msgLen: 50}, make([]byte, 5))}},
			attack{"page ends inside a length", [][]byte{rawPage(0, append(rawRecords("ok"), 1, 2, 3))}},
			attack{"fragment of protocol level 2", [][]byte{fragment("x")}},
			attack{"tagged page on a connection", [][]byte{tagged(legitTag, "x")}},
		)
	default: // publishers take control messages only
		as = append(as,
			attack{"credits beyond the window on a request", [][]byte{frame(wHeader{kind: wKindSubscribe, flags: wFlagLast, credits: 1<<16 - 1, msgLen: 16}, request(1, 2, 99))}},
			attack{"subscribe, then garbage", [][]byte{control(wKindSubscribe, request(1, 2, 99, 100)), frame(wHeader{kind: 9}, nil)}},
			attack{"subscribe, then too short an unsubscribe", [][]byte{control(wKindSubscribe, request(1, 2, 99)), control(wKindUnsubscribe, []byte{1})}},
			attack{"FIN then a request", [][]byte{frame(wHeader{kind: wKindFin, flags: wFlagLast}, nil), control(wKindSubscribe, request(1, 2, 99))}},
			attack{"fragment of protocol level 2 at a publisher", [][]byte{fragment("x")}},
			attack{"page at a publisher", [][]byte{rawPage(0, rawRecords("x"))}},
			attack{"tagged page at a publisher", [][]byte{tagged(99, "x", "y")}},
			attack{"tagged page overrunning at a publisher", [][]byte{frame(wHeader{kind: wKindTagged}, rawRecord(1000, make([]byte, 30)))}},
		)
	}
	return as
}

// tcpAttack is an attack only plain TCP can make: bytes as they are,
// after a valid connection request or instead of one.
type tcpAttack struct {
	name    string
	request bool   // a valid connection request first
	bytes   []byte // then these
	// protocol: the Conn must fail with ErrProtocol. Else any error will
	// do (libfabric's tcp provider may take the bytes for a broken stream,
	// or for the start of a message that is still coming: the peer closes
	// its writing side after them, so that it is not).
	protocol bool
}

func tcpAttacks(rng *rand.Rand) []tcpAttack {
	junk := randBytes(rng, 16+rng.IntN(512))
	junk[0] = 3 // the provider's header version, so that its parser goes on
	if junk[1] == 0 && junk[4] == 2 {
		junk[4] = 0 // not the acknowledgement that crashes libfabric 1.17
	}
	noise := randBytes(rng, 40+rng.IntN(200))
	noise[0] = 7 // not the CM's version: refused as soon as read
	cut := tcpCMHeader(tcpCMConnReq, nil)[:8+rng.IntN(20)]
	return []tcpAttack{
		{"random bytes after the request", true, junk, false},
		{"tagged libfabric header", true, tcpDataHeader(tcpOpTagged, 0, 16), true},
		{"noise instead of a request", false, noise, false},
		{"request cut short", false, cut, false},
		{"request with garbage for a hello", false, tcpCMHeader(tcpCMConnReq, randBytes(rng, 1+rng.IntN(40))), false},
		{"request with no hello", false, tcpCMHeader(tcpCMConnReq, nil), false},
	}
}

// hostileBench is the targets, and the legitimate traffic at each.
type hostileBench struct {
	ll, ht *netio.Listener
	pub    *netio.Publisher
	legit  []*legitStream
	conns  int        // hostile connections made
	held   []net.Conn // requests whose private data never comes, held until the round ends
}

func newHostileBench(t *testing.T) *hostileBench {
	h := &hostileBench{}
	var err error
	if h.ll, err = netio.Listen("tcp", "127.0.0.1:0", netio.WithBufferSize(hostileBufSize), netio.WithMaxMessageSize(hostileMaxMsg), netio.WithBacklog(512)); err != nil {
		t.Fatal(err)
	}
	if h.ht, err = netio.Listen("tcp", "127.0.0.1:0", netio.WithMode(netio.HighThroughput), netio.WithBufferSize(hostileBufSize), netio.WithMaxMessageSize(hostileMaxMsg), netio.WithBacklog(512)); err != nil {
		t.Fatal(err)
	}
	if h.pub, err = netio.ListenPublisher("tcp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	h.legit = append(h.legit, startConnStream(t, h.ll, netio.LowLatency), startConnStream(t, h.ht, netio.HighThroughput), startPubStream(t, h.pub))
	return h
}

func (h *hostileBench) addr(g target) string {
	switch g {
	case llListener:
		return h.ll.Addr().String()
	case htListener:
		return h.ht.Addr().String()
	}
	return h.pub.Addr().String()
}

func (h *hostileBench) listener(g target) *netio.Listener {
	switch g {
	case llListener:
		return h.ll
	case htListener:
		return h.ht
	}
	return nil
}

// round makes every attack on every target once from each transport.
func (h *hostileBench) round(t *testing.T, rng *rand.Rand) {
	t.Helper()
	for _, g := range []target{llListener, htListener, publisherLL, publisherHT} {
		for i, a := range attacks(g, rng) {
			h.conns += 2
			h.attackRaw(t, g, a, i)
			h.attackTCP(t, g, a, i)
		}
		for _, a := range tcpAttacks(rng) {
			h.conns++
			h.attackBytes(t, g, a)
		}
		h.conns++
		h.held = append(h.held, requestWithoutItsData(t, h.addr(g)))
		h.checkServing(t, g)
	}
	for _, c := range h.held {
		c.Close()
	}
	h.held = h.held[:0]
}

// requestWithoutItsData connects to addr and sends a connection request's
// header, announcing a hello that never comes; it holds the socket open.
// libfabric's tcp provider reads the hello with a blocking recv inside the
// call that reads the listener's event queue; when netio's reactor made
// that call, this held every connection of the process (connmgr.go,
// ofi/requests.go).
func requestWithoutItsData(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(tcpCMHeader(tcpCMConnReq, defaultHello(netio.LowLatency))[:32]); err != nil {
		c.Close()
		t.Fatal(err)
	}
	return c
}

// A few requests that stop after their header, held open: the Listener's
// established connection keeps echoing, and it takes a new connection.
func TestRequestWithoutItsData(t *testing.T) {
	ln, err := netio.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	keep, keepServer := dialAccept(t, ln)
	for i := 0; i < 3; i++ {
		c := requestWithoutItsData(t, ln.Addr().String())
		defer c.Close()
		echo(t, keep, keepServer, []byte("while a request waits for its hello #"+fmt.Sprint(i)))
	}
	stillServes(t, ln)
	echo(t, keep, keepServer, []byte("still"))
}

// hostilePeer is one transport's hostile connection.
type hostilePeer interface {
	send(b []byte) bool // one netio frame; false once the target is gone
	waitGone() bool     // the target dropped the connection, within hangTimeout
	close()
}

// attackRaw makes a from a bare libfabric endpoint.
func (h *hostileBench) attackRaw(t *testing.T, g target, a attack, i int) {
	t.Helper()
	p, err := dialRaw(t, h.addr(g), g.hello())
	if err != nil {
		t.Fatalf("%v: a raw peer with a valid handshake was refused: %v", g, err)
	}
	defer p.close()
	h.run(t, g, a, i, &rawHostile{p}, "libfabric")
}

// attackTCP makes a from a plain TCP socket.
func (h *hostileBench) attackTCP(t *testing.T, g target, a attack, i int) {
	t.Helper()
	p, ok := dialTCPHostile(t, h.addr(g), g.hello())
	if !ok {
		t.Fatalf("%v: a TCP peer with a valid handshake was refused", g)
	}
	defer p.close()
	h.run(t, g, a, i, p, "TCP")
}

// run sends a's frames from p and checks that the connection ends, and
// how.
func (h *hostileBench) run(t *testing.T, g target, a attack, i int, p hostilePeer, transport string) {
	t.Helper()
	what := fmt.Sprintf("%v, %s from %s", g, a.name, transport)
	ln := h.listener(g)
	var victim *netio.Conn
	if ln != nil {
		victim = acceptHostile(t, ln, what)
		defer victim.Close()
	}
	for _, f := range a.frames {
		if !p.send(f) {
			break // gone already: fine, it was told
		}
	}
	if victim != nil {
		err := readToEnd(victim, i)
		var op *net.OpError
		if !errors.Is(err, netio.ErrProtocol) && !errors.Is(err, netio.ErrMessageTooLarge) || !errors.As(err, &op) {
			t.Fatalf("%s: the Conn ended with %v; want ErrProtocol or ErrMessageTooLarge in a *net.OpError", what, err)
		}
		victim.Close()
	}
	if !p.waitGone() {
		t.Fatalf("%s: the peer is still connected %v later", what, hangTimeout)
	}
}

// attackBytes makes a plain-TCP attack at g.
func (h *hostileBench) attackBytes(t *testing.T, g target, a tcpAttack) {
	t.Helper()
	what := fmt.Sprintf("%v, %s from TCP", g, a.name)
	addr := h.addr(g)
	if !a.request {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.Write(a.bytes)
		// The target refuses or drops it; either way the socket ends.
		c.SetReadDeadline(time.Now().Add(hangTimeout))
		if _, err := io.Copy(io.Discard, c); err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("%s: still connected %v later", what, hangTimeout)
		}
		return
	}
	p, ok := dialTCPHostile(t, addr, g.hello())
	if !ok {
		t.Fatalf("%s: a valid request was refused", what)
	}
	defer p.close()
	var victim *netio.Conn
	if ln := h.listener(g); ln != nil {
		victim = acceptHostile(t, ln, what)
		defer victim.Close()
	}
	p.c.Write(a.bytes)
	if !a.protocol {
		p.c.(*net.TCPConn).CloseWrite()
	}
	if victim != nil {
		err := readToEnd(victim, 0)
		var op *net.OpError
		if !errors.As(err, &op) || a.protocol && !errors.Is(err, netio.ErrProtocol) {
			t.Fatalf("%s: the Conn ended with %v; want ErrProtocol in a *net.OpError", what, err)
		}
		victim.Close()
	}
	if !p.waitGone() {
		t.Fatalf("%s: the peer is still connected %v later", what, hangTimeout)
	}
}

// acceptHostile accepts the hostile connection just made.
func acceptHostile(t *testing.T, ln *netio.Listener, what string) *netio.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangTimeout)
	defer cancel()
	c, err := ln.AcceptContext(ctx)
	if err != nil {
		t.Fatalf("%s: Accept: %v", what, err)
	}
	return c
}

// readToEnd reads c until an error, in the i-th of three ways, and returns
// the error; it gives up after hangTimeout.
func readToEnd(c *netio.Conn, i int) error {
	c.SetReadDeadline(time.Now().Add(hangTimeout))
	buf := make([]byte, 4096)
	for {
		var err error
		switch i % 3 {
		case 0:
			_, err = c.AppendMessage(nil)
		case 1:
			var m netio.Message
			if m, err = c.NextMessage(); err == nil {
				m.Release()
			}
		case 2:
			_, err = c.Read(buf)
		}
		if err != nil {
			return err
		}
	}
}

// checkServing checks that g takes a new legitimate connection and that
// the legitimate traffic still flows.
func (h *hostileBench) checkServing(t *testing.T, g target) {
	t.Helper()
	if ln := h.listener(g); ln != nil {
		m := netio.LowLatency
		if g == htListener {
			m = netio.HighThroughput
		}
		c, err := netio.Dial("tcp", ln.Addr().String(), netio.WithMode(m))
		if err != nil {
			t.Fatalf("%v: Dial after the attacks: %v", g, err)
		}
		s := acceptHostile(t, ln, g.String()+", a new legitimate connection")
		echo(t, c, s, []byte("after the attacks on the "+g.String()))
		c.Close()
		s.Close()
	}
	for _, l := range h.legit {
		l.checkFlowing(t)
	}
}

// stop closes everything, whatever happened.
func (h *hostileBench) stop() {
	for _, l := range h.legit {
		l.stop()
	}
	h.pub.Close()
	h.ht.Close()
	h.ll.Close()
}

// finish checks that the Publisher forgot every hostile subscriber (the
// legitimate one still subscribed), then stops the legitimate traffic and
// checks that every message arrived.
func (h *hostileBench) finish(t *testing.T) {
	t.Helper()
	eventually(t, "the Publisher counting only the legitimate subscriber and its tag after the last hostile one left", func() bool {
		st := h.pub.Stats()
		return st.Subscribers == 1 && st.Tags == 1
	})
	for _, l := range h.legit {
		l.finish(t)
	}
}

// ---------------------------------------------------------------------------
// Hostile transports

// rawHostile is a bare libfabric endpoint (rawpeer_test.go's rawPeer) that
// never fails the test for a send the target refuses.
type rawHostile struct{ p *rawPeer }

func (r *rawHostile) send(b []byte) bool {
	p := r.p
	if p.shutdown || p.cqErr != nil {
		return false
	}
	copy(p.tx.Bytes(), b)
	tok := p.nextTok
	p.nextTok++
	if _, err := p.ep.PostSend(p.tx, []ofi.Segment{{Offset: 0, Len: uint64(len(b)), Token: tok}}); err != nil {
		return false
	}
	for deadline := time.Now().Add(hangTimeout); !p.sent[tok]; {
		if p.cqErr != nil || p.shutdown || time.Now().After(deadline) {
			return false
		}
		p.poll()
	}
	return true
}

func (r *rawHostile) waitGone() bool {
	for deadline := time.Now().Add(hangTimeout); !r.p.shutdown; {
		if time.Now().After(deadline) {
			return false
		}
		r.p.poll()
		time.Sleep(100 * time.Microsecond) // polling pace: the raw peer has nothing to block on
	}
	return true
}

func (r *rawHostile) close() {}

// tcpHostile is a plain TCP socket that passed the connection request. A
// goroutine drains what the target sends until it closes the socket.
type tcpHostile struct {
	c    net.Conn
	gone chan struct{}
}

// dialTCPHostile connects to addr as a plain TCP client with a valid
// connection request carrying hello, and reports whether it was accepted.
func dialTCPHostile(t *testing.T, addr string, hello []byte) (*tcpHostile, bool) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(tcpCMHeader(tcpCMConnReq, netio.SealedRequest(hello))); err != nil {
		c.Close()
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(hangTimeout))
	resp := make([]byte, 32)
	if _, err := io.ReadFull(c, resp); err != nil {
		c.Close()
		t.Fatalf("reading the answer to a connection request: %v", err)
	}
	if _, err := io.CopyN(io.Discard, c, int64(binary.BigEndian.Uint16(resp[2:]))); err != nil {
		c.Close()
		t.Fatalf("reading the answer's private data: %v", err)
	}
	if resp[1] != tcpCMConnResp {
		c.Close()
		return nil, false
	}
	c.SetReadDeadline(time.Time{})
	p := &tcpHostile{c: c, gone: make(chan struct{})}
	go func() {
		defer close(p.gone)
		io.Copy(io.Discard, c)
	}()
	return p, true
}

// send sends b as one libfabric message: the provider's 16-byte header
// (opcode 0, a plain message) and b.
func (p *tcpHostile) send(b []byte) bool {
	_, err := p.c.Write(append(tcpDataHeader(0, 0, uint64(16+len(b))), b...))
	return err == nil
}

func (p *tcpHostile) waitGone() bool {
	select {
	case <-p.gone:
		return true
	case <-time.After(hangTimeout):
		return false
	}
}

func (p *tcpHostile) close() {
	p.c.Close()
	<-p.gone
}

// ---------------------------------------------------------------------------
// Legitimate traffic

// legitStream is numbered messages flowing while the attacks go on: a
// writer sends message after message (paced: the machine is shared, and
// the point is that they keep arriving, not how fast), a reader checks
// that each is the next.
type legitStream struct {
	name     string
	stopping atomic.Bool
	sent     atomic.Uint64
	got      atomic.Uint64
	wrote    chan error // the writer's end
	read     chan error // the reader's end
	closeAll func()
	once     sync.Once
}

// numbered is message i: its number, then filler that depends on it.
func numbered(i uint64) []byte {
	b := make([]byte, 8+int(i%200))
	binary.LittleEndian.PutUint64(b, i)
	for j := 8; j < len(b); j++ {
		b[j] = byte(i) + byte(j)
	}
	return b
}

func checkNumbered(b []byte, want uint64) error {
	if len(b) < 8 || binary.LittleEndian.Uint64(b) != want || !bytes.Equal(b, numbered(want)) {
		return fmt.Errorf("message %d: got %d bytes %.16x", want, len(b), b)
	}
	return nil
}

const legitPace = time.Millisecond

// startConnStream runs a legitimate connection to ln in mode m.
func startConnStream(t *testing.T, ln *netio.Listener, m netio.Mode) *legitStream {
	c, err := netio.Dial("tcp", ln.Addr().String(), netio.WithMode(m))
	if err != nil {
		t.Fatal(err)
	}
	s := acceptHostile(t, ln, "the legitimate connection")
	l := &legitStream{name: m.String() + " connection", wrote: make(chan error, 1), read: make(chan error, 1)}
	l.closeAll = func() { c.Close(); s.Close() }
	go func() {
		var err error
		for i := uint64(0); !l.stopping.Load(); i++ {
			if _, err = c.Write(numbered(i)); err == nil && m == netio.HighThroughput {
				err = c.Flush()
			}
			if err != nil {
				break
			}
			l.sent.Add(1)
			time.Sleep(legitPace) // a steady stream, not a flood
		}
		l.wrote <- err
	}()
	go func() {
		for i := uint64(0); ; i++ {
			b, err := s.AppendMessage(nil)
			if err == nil {
				err = checkNumbered(b, i)
			}
			if err != nil {
				l.read <- err
				return
			}
			l.got.Add(1)
		}
	}()
	return l
}

// startPubStream runs a legitimate subscription to p's legitTag.
func startPubStream(t *testing.T, p *netio.Publisher) *legitStream {
	ctx, cancel := context.WithTimeout(context.Background(), hangTimeout)
	defer cancel()
	sub, err := netio.Subscribe(ctx, "tcp", p.Addr().String(), []uint64{legitTag})
	if err != nil {
		t.Fatal(err)
	}
	l := &legitStream{name: "subscription", wrote: make(chan error, 1), read: make(chan error, 1)}
	l.closeAll = func() { sub.Close() }
	go func() {
		var err error
		for i := uint64(0); !l.stopping.Load(); i++ {
			ctx, cancel := context.WithTimeout(context.Background(), hangTimeout)
			err = p.Publish(ctx, legitTag, numbered(i))
			cancel()
			if err != nil {
				break
			}
			l.sent.Add(1)
			time.Sleep(legitPace) // a steady stream, not a flood
		}
		l.wrote <- err
	}()
	go func() {
		for i := uint64(0); ; i++ {
			m, ok := <-sub.C
			if !ok {
				l.read <- fmt.Errorf("C closed: %w", sub.Err())
				return
			}
			err := checkNumbered(m.Bytes(), i)
			if err == nil && (m.Tag() != legitTag || m.Seq() != i) {
				err = fmt.Errorf("message %d has tag %d and sequence number %d", i, m.Tag(), m.Seq())
			}
			m.Release()
			if err != nil {
				l.read <- err
				return
			}
			l.got.Add(1)
		}
	}()
	return l
}

// checkFlowing checks that the stream still moves: a message arrives that
// had not arrived yet.
func (l *legitStream) checkFlowing(t *testing.T) {
	t.Helper()
	from := l.got.Load()
	eventually(t, fmt.Sprintf("the legitimate %s: a message after the %d received", l.name, from), func() bool {
		select {
		case err := <-l.read:
			t.Fatalf("the legitimate %s: %v", l.name, err)
		case err := <-l.wrote:
			t.Fatalf("the legitimate %s: the writer stopped: %v", l.name, err)
		default:
		}
		return l.got.Load() != from
	})
}

// finish stops the writer and checks that every message it sent arrived.
func (l *legitStream) finish(t *testing.T) {
	t.Helper()
	l.stopping.Store(true)
	if err := <-l.wrote; err != nil {
		t.Fatalf("the legitimate %s: the writer failed: %v", l.name, err)
	}
	sent := l.sent.Load()
	eventually(t, fmt.Sprintf("the legitimate %s: all %d messages arriving", l.name, sent), func() bool {
		select {
		case err := <-l.read:
			t.Fatalf("the legitimate %s: %v after %d of %d messages", l.name, err, l.got.Load(), sent)
		default:
		}
		return l.got.Load() >= sent
	})
	t.Logf("the legitimate %s: all %d messages arrived in order", l.name, sent)
	l.stop()
}

func (l *legitStream) stop() {
	l.once.Do(func() {
		l.stopping.Store(true)
		l.closeAll()
	})
}

// ---------------------------------------------------------------------------
// Footprint

// heapAllocs is the bytes allocated on the heap so far.
func heapAllocs() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// footprint is what must not grow from round to round.
type footprint struct {
	heap       uint64 // bytes in live heap spans
	rss        int64  // resident bytes, the C side included
	goroutines int
	fds        int
}

func (f footprint) String() string {
	return fmt.Sprintf("{heap %.1f MiB, RSS %.1f MiB, %d goroutines, %d fds}", float64(f.heap)/(1<<20), float64(f.rss)/(1<<20), f.goroutines, f.fds)
}

// measureFootprint measures after a collection, once the connections
// closed so far have let go: closing sockets and goroutines may lag a
// little, so it takes the least of a few tries.
func measureFootprint(t *testing.T) footprint {
	t.Helper()
	var best footprint
	for i := 0; i < 5; i++ {
		runtime.GC()
		debug.FreeOSMemory()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		f := footprint{heap: ms.HeapInuse, rss: rssBytes(t), goroutines: runtime.NumGoroutine(), fds: openFDs(t)}
		if i == 0 || f.goroutines+f.fds < best.goroutines+best.fds {
			best.goroutines, best.fds = f.goroutines, f.fds
		}
		if i == 0 || f.heap < best.heap {
			best.heap = f.heap
		}
		if i == 0 || f.rss < best.rss {
			best.rss = f.rss
		}
		time.Sleep(20 * time.Millisecond) // samples apart in time, so that a passing peak is not the one kept
	}
	return best
}

func openFDs(t *testing.T) int {
	t.Helper()
	d, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd:", err)
	}
	return len(d)
}

// check fails t if after grew beyond f: by more than a tenth and a few
// MiB of memory (the allocators keep some of what they were given), or
// by more than a few goroutines or files (the legitimate traffic's come
// and go).
func (f footprint) check(t *testing.T, after footprint) {
	t.Helper()
	var grew []string
	if after.heap > f.heap+f.heap/10+4<<20 {
		grew = append(grew, "heap")
	}
	if after.rss > f.rss+f.rss/10+16<<20 {
		grew = append(grew, "resident memory")
	}
	if after.goroutines > f.goroutines+4 {
		grew = append(grew, "goroutines")
	}
	if after.fds > f.fds+4 {
		grew = append(grew, "open files")
	}
	if len(grew) > 0 {
		t.Errorf("%s grew from %v after the warm-up to %v", strings.Join(grew, ", "), f, after)
	}
}
