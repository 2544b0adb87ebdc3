package netio_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/ofi"
)

// ---------------------------------------------------------------------------
// A raw peer: a bare libfabric endpoint that speaks netio's wire format by
// hand, so that a test can send what a well-behaved netio never would.

// Wire constants, copied from wire.go (unexported there).
const (
	wHeaderSize = 16
	wKindData   = 1
	wKindCredit = 2
	wKindFin    = 3
	wFlagLast   = 1
)

// wHeader is one netio message header.
type wHeader struct {
	kind, flags uint8
	credits     uint16
	fragLen     uint32
	msgLen      uint64
}

func (h wHeader) bytes() []byte {
	b := make([]byte, wHeaderSize)
	b[0], b[1] = h.kind, h.flags
	binary.LittleEndian.PutUint16(b[2:], h.credits)
	binary.LittleEndian.PutUint32(b[4:], h.fragLen)
	binary.LittleEndian.PutUint64(b[8:], h.msgLen)
	return b
}

// dataMsg is a well-formed page holding one message.
func dataMsg(payload []byte) []byte {
	return rawPage(0, rawRecord(uint64(len(payload)), payload))
}

// helloBytes is the 24-byte netio handshake: "NTIO", version, 3 bytes of
// padding, window, buffer size and largest message, little-endian.
func helloBytes(version uint8, window, bufferSize uint32, maxMessage uint64) []byte {
	b := make([]byte, 24)
	copy(b, "NTIO")
	b[4] = version
	binary.LittleEndian.PutUint32(b[8:], window)
	binary.LittleEndian.PutUint32(b[12:], bufferSize)
	binary.LittleEndian.PutUint64(b[16:], maxMessage)
	return b
}

const (
	rawWindow  = 8
	rawBufSize = 4096
	rawTxSize  = 64 << 10
)

// rawPeer is one connected bare endpoint with its own fabric. It is used
// from one goroutine only, and makes progress only when polled.
type rawPeer struct {
	t        testing.TB
	infos    *ofi.InfoList
	fab      *ofi.Fabric
	eq       *ofi.EQ
	dom      *ofi.Domain
	cq       *ofi.CQ
	rx, tx   *ofi.Region
	ep       *ofi.Endpoint
	accept   []byte // the listener's handshake
	nextTok  uint64
	sent     map[uint64]bool // send tokens completed
	shutdown bool            // FI_SHUTDOWN seen
	cqErr    error
	cqBuf    [16]ofi.Completion
}

// dialRaw connects a bare endpoint to addr with hello as private data,
// sealed with the default key (a peer that holds the key), after posting
// rawWindow receive buffers of rawBufSize bytes. It returns the error
// event when the connection is refused.
func dialRaw(t testing.TB, addr string, hello []byte) (p *rawPeer, err error) {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	p = &rawPeer{t: t, nextTok: 1 << 32, sent: map[uint64]bool{}}
	peer := p
	defer func() {
		if err != nil {
			peer.close()
			p = nil
		}
	}()
	if p.infos, err = ofi.GetInfo(ofi.Hints{Provider: "tcp", Node: host, Service: port}); err != nil {
		t.Fatal(err)
	}
	info := p.infos.Entries[0]
	must := func(err error) {
		t.Helper()
		if err != nil {
			p.close()
			t.Fatal(err)
		}
	}
	p.fab, err = ofi.OpenFabric(info)
	must(err)
	p.eq, err = p.fab.OpenEQ(16)
	must(err)
	p.dom, err = p.fab.OpenDomain(info)
	must(err)
	p.cq, err = p.dom.OpenCQ(256)
	must(err)
	p.rx, err = p.dom.NewRegion(rawWindow * rawBufSize)
	must(err)
	p.tx, err = p.dom.NewRegion(rawTxSize)
	must(err)
	p.ep, err = p.dom.OpenEndpoint(info, 7)
	must(err)
	must(p.ep.BindEQ(p.eq))
	must(p.ep.BindCQ(p.cq))
	must(p.ep.Enable())
	segs := make([]ofi.Segment, rawWindow)
	for i := range segs {
		segs[i] = ofi.Segment{Offset: uint64(i * rawBufSize), Len: rawBufSize, Token: uint64(i)}
	}
	_, err = p.ep.PostRecv(p.rx, segs)
	must(err)
	must(p.ep.Connect(info, netio.SealedRequest(hello)))
	deadline := time.Now().Add(hangTimeout)
	var ev ofi.Event
	for {
		if time.Now().After(deadline) {
			p.close()
			t.Fatalf("raw peer: no answer to the connection request in %v", hangTimeout)
		}
		p.pollCQ()
		ok, err := p.eq.Read(&ev)
		must(err)
		if !ok {
			time.Sleep(100 * time.Microsecond)
			continue
		}
		switch ev.Kind {
		case ofi.EventConnected:
			p.accept = append([]byte(nil), ev.PrivateData()...)
			return p, nil
		case ofi.EventError:
			return nil, ev.Err
		case ofi.EventShutdown:
			return nil, errors.New("raw peer: FI_SHUTDOWN while connecting")
		}
	}
}

// pollCQ reads the completion queue once, which also drives the provider.
func (p *rawPeer) pollCQ() {
	for {
		n, err := p.cq.Read(p.cqBuf[:])
		if err != nil {
			var ce ofi.CompletionError
			if ok, _ := p.cq.ReadError(&ce); ok {
				if !errors.Is(&ce.AsyncError, ofi.ECANCELED) && p.cqErr == nil {
					p.cqErr = &ce.AsyncError
				}
				continue
			}
			return
		}
		for _, c := range p.cqBuf[:n] {
			if c.Token >= 1<<32 {
				p.sent[c.Token] = true
			}
		}
		if n < len(p.cqBuf) {
			return
		}
	}
}

// poll drives the peer once: completions and connection events.
func (p *rawPeer) poll() {
	p.pollCQ()
	var ev ofi.Event
	if ok, _ := p.eq.Read(&ev); ok && ev.Kind == ofi.EventShutdown {
		p.shutdown = true
	}
}

// send sends b as one libfabric message and waits for its completion.
func (p *rawPeer) send(b []byte) {
	p.t.Helper()
	if len(b) > rawTxSize {
		p.t.Fatalf("raw peer: %d bytes is more than the send region", len(b))
	}
	copy(p.tx.Bytes(), b)
	tok := p.nextTok
	p.nextTok++
	if _, err := p.ep.PostSend(p.tx, []ofi.Segment{{Offset: 0, Len: uint64(len(b)), Token: tok}}); err != nil {
		p.t.Fatalf("raw peer: fi_send: %v", err)
	}
	deadline := time.Now().Add(hangTimeout)
	for !p.sent[tok] {
		if p.cqErr != nil {
			p.t.Fatalf("raw peer: send of %d bytes failed: %v", len(b), p.cqErr)
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("raw peer: send of %d bytes did not complete in %v", len(b), hangTimeout)
		}
		p.poll()
	}
}

// pumpUntil polls the peer until done is closed or the timeout passes,
// and reports whether done was closed.
func (p *rawPeer) pumpUntil(done <-chan struct{}, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-done:
			return true
		default:
		}
		if time.Now().After(deadline) {
			return false
		}
		p.poll()
		time.Sleep(50 * time.Microsecond)
	}
}

// close tears the peer down in libfabric's order.
func (p *rawPeer) close() {
	if p.ep != nil {
		p.ep.Close()
		p.ep = nil
	}
	if p.cq != nil {
		var ce ofi.CompletionError
		for i := 0; i < 1000; i++ {
			n, err := p.cq.Read(p.cqBuf[:])
			if err != nil {
				if ok, _ := p.cq.ReadError(&ce); ok {
					continue
				}
			}
			if n == 0 {
				break
			}
		}
		p.cq.Close()
		p.cq = nil
	}
	for _, r := range []**ofi.Region{&p.rx, &p.tx} {
		if *r != nil {
			(*r).Close()
			*r = nil
		}
	}
	if p.eq != nil {
		p.eq.Close()
		p.eq = nil
	}
	if p.dom != nil {
		p.dom.Close()
		p.dom = nil
	}
	if p.fab != nil {
		p.fab.Close()
		p.fab = nil
	}
	if p.infos != nil {
		p.infos.Free()
		p.infos = nil
	}
}

// ---------------------------------------------------------------------------
// Helpers on netio connections.

// acceptOne accepts one connection within timeout.
func acceptOne(t testing.TB, ln *netio.Listener, timeout time.Duration) *netio.Conn {
	t.Helper()
	type res struct {
		c   *netio.Conn
		err error
	}
	ch := make(chan res, 1)
	go func() {
		c, err := ln.AcceptConn()
		ch <- res{c, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("Accept: %v", r.err)
		}
		t.Cleanup(func() { r.c.Close() })
		return r.c
	case <-time.After(timeout):
		ln.Close() // unblocks the goroutine
		if r := <-ch; r.c != nil {
			r.c.Close()
		}
		t.Fatalf("Accept: nothing in %v", timeout)
		return nil
	}
}

// dialAccept dials ln and accepts the connection.
func dialAccept(t testing.TB, ln *netio.Listener, opts ...netio.Option) (client, server *netio.Conn) {
	t.Helper()
	c, err := netio.Dial("tcp", ln.Addr().String(), opts...)
	if err != nil {
		t.Fatalf("Dial %s: %v", ln.Addr(), err)
	}
	t.Cleanup(func() { c.Close() })
	return c, acceptOne(t, ln, hangTimeout)
}

// echo sends msg from a to b, which sends it back; both must arrive intact.
func echo(t testing.TB, a, b *netio.Conn, msg []byte) {
	t.Helper()
	a.SetDeadline(time.Now().Add(hangTimeout))
	b.SetDeadline(time.Now().Add(hangTimeout))
	defer a.SetDeadline(time.Time{})
	defer b.SetDeadline(time.Time{})
	if _, err := a.Write(msg); err != nil {
		t.Fatalf("echo: Write: %v", err)
	}
	got, err := b.AppendMessage(nil)
	if err != nil {
		t.Fatalf("echo: far side: %v; want %q", err, trunc(msg))
	}
	if !bytes.Equal(msg, got) { // cmp.Diff takes seconds over 300 KB under -race: only to explain
		t.Fatalf("echo: far side got (-want +got):\n%s", cmp.Diff(msg, got))
	}
	if _, err := b.Write(got); err != nil {
		t.Fatalf("echo: Write back: %v", err)
	}
	back, err := a.AppendMessage(nil)
	if err != nil {
		t.Fatalf("echo: got back %v; want %q", err, trunc(msg))
	}
	if !bytes.Equal(msg, back) {
		t.Fatalf("echo: got back (-want +got):\n%s", cmp.Diff(msg, back))
	}
}

func trunc(b []byte) []byte {
	if len(b) > 40 {
		return b[:40]
	}
	return b
}

// ---------------------------------------------------------------------------
// 2. Bad input from the network.

// TestBadPeerMessages connects a hand-made peer to a Listener and sends it
// messages that break the wire protocol. The accepted Conn must fail with
// ErrProtocol (ErrMessageTooLarge for an oversized message), not hang,
// and the Listener and its other connections must carry on.
func TestBadPeerMessages(t *testing.T) {
	const maxMsg = 1000
	bigPayload := bytes.Repeat([]byte{'B'}, maxMsg+1)
	cases := []struct {
		name string
		msgs [][]byte // sent in order after a valid "ok" message
		want error
	}{
		{"truncated", [][]byte{wHeader{kind: wKindPage}.bytes()[:8]}, netio.ErrProtocol},
		{"empty libfabric message", [][]byte{{}}, netio.ErrProtocol},
		{"fragLen says more", [][]byte{append(wHeader{kind: wKindPage, fragLen: 100}.bytes(), rawRecords("short")...)}, netio.ErrProtocol},
		{"fragLen says less", [][]byte{append(wHeader{kind: wKindPage, fragLen: 5}.bytes(), rawRecords("longer")...)}, netio.ErrProtocol},
		{"fragLen huge", [][]byte{append(wHeader{kind: wKindPage, fragLen: 0xffffffff}.bytes(), rawRecords("x")...)}, netio.ErrProtocol},
		{"unknown kind", [][]byte{wHeader{kind: 9, flags: wFlagLast}.bytes()}, netio.ErrProtocol},
		{"kind zero", [][]byte{append(wHeader{kind: 0, flags: wFlagLast, fragLen: 3, msgLen: 3}.bytes(), "abc"...)}, netio.ErrProtocol},
		{"fragment of protocol level 2", [][]byte{append(wHeader{kind: wKindData, flags: wFlagLast, fragLen: 3, msgLen: 3}.bytes(), "abc"...)}, netio.ErrProtocol},
		{"credits beyond the window", [][]byte{wHeader{kind: wKindCredit, flags: wFlagLast, credits: rawWindow + 1}.bytes()}, netio.ErrProtocol},
		{"credits on data beyond the window", [][]byte{frame(wHeader{kind: wKindPage, credits: 0xffff}, rawRecords("x"))}, netio.ErrProtocol},
		{"message above the maximum", [][]byte{dataMsg(bigPayload)}, netio.ErrMessageTooLarge},
		{"length prefix announces above the maximum", [][]byte{rawPage(0, rawRecord(1<<40, make([]byte, 10)))}, netio.ErrMessageTooLarge},
		{"length prefix overruns its page", [][]byte{rawPage(0, rawRecord(100, make([]byte, 10))), rawPage(0, rawRecords("next"))}, netio.ErrProtocol},
		{"continuation one more", [][]byte{rawPage(0, rawRecord(100, make([]byte, 50))), rawPage(51, make([]byte, 60))}, netio.ErrProtocol},
		{"continuation of no message", [][]byte{rawPage(5, []byte("abcde"))}, netio.ErrProtocol},
		{"page ends inside a length prefix", [][]byte{rawPage(0, []byte{1, 2, 3})}, netio.ErrProtocol},
		{"data after FIN", [][]byte{wHeader{kind: wKindFin, flags: wFlagLast}.bytes(), dataMsg([]byte("zombie"))}, netio.ErrProtocol},
		{"message larger than the receive buffer", [][]byte{dataMsg(make([]byte, 8000))}, netio.ErrProtocol},
	}
	ln, err := netio.Listen("tcp", "127.0.0.1:0", netio.WithMaxMessageSize(maxMsg), netio.WithBufferSize(4096), netio.WithWindow(8))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	goodC, goodS := dialAccept(t, ln)
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := dialRaw(t, ln.Addr().String(), helloBytes(netio.ProtocolLevel, rawWindow, rawBufSize, 1<<20))
			if err != nil {
				t.Fatalf("raw peer with a valid handshake was refused: %v", err)
			}
			defer p.close()
			if len(p.accept) < 24 || string(p.accept[:4]) != "NTIO" {
				t.Fatalf("listener's accept data %q is not a netio handshake", p.accept)
			}
			s := acceptOne(t, ln, hangTimeout)

			// A valid message first: proves the fake peer speaks the
			// protocol, so the failure below is due to the bad input.
			p.send(dataMsg([]byte("ok")))
			type res struct {
				msg []byte
				err error
			}
			rc := make(chan res, 1)
			done := make(chan struct{})
			go func() {
				defer close(done)
				buf := make([]byte, 64)
				n, err := s.ReadMessage(buf)
				rc <- res{buf[:n], err}
			}()
			if !p.pumpUntil(done, hangTimeout) {
				s.Close()
				<-done
				t.Fatal("the valid message before the bad one never arrived")
			}
			if r := <-rc; r.err != nil || string(r.msg) != "ok" {
				t.Fatalf("valid message: %q, %v", r.msg, r.err)
			}

			for _, m := range tc.msgs {
				p.send(m)
			}
			start := time.Now()
			done = make(chan struct{})
			go func() {
				defer close(done)
				got, err := s.AppendMessage(nil)
				rc <- res{got, err}
			}()
			if !p.pumpUntil(done, hangTimeout) {
				s.Close()
				<-done
				t.Fatalf("after %s, ReadMessage on the accepted Conn still blocked %v later; want an error wrapping %v", tc.name, hangTimeout, tc.want)
			}
			r := <-rc
			if !errors.Is(r.err, tc.want) {
				t.Fatalf("after %s, ReadMessage returned %q, %v; want an error wrapping %q", tc.name, trunc(r.msg), r.err, tc.want)
			}
			var oe *net.OpError
			if !errors.As(r.err, &oe) {
				t.Errorf("error %v is a %T, want a *net.OpError", r.err, r.err)
			}
			t.Logf("%v after %v", r.err, time.Since(start).Round(time.Microsecond))
			// The connection is dead: writing fails. When the reader found
			// the violation (a length prefix inside a page), the reactor
			// learns of it just after.
			for deadline := time.Now().Add(hangTimeout); ; time.Sleep(time.Millisecond) {
				if _, err := s.Write([]byte("x")); err != nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("Write on a connection closed for %v still succeeds %v later", r.err, hangTimeout)
				}
			}
			if err := s.Close(); err != nil {
				t.Errorf("Close after a protocol violation: %v", err)
			}
			// The peer is told: the endpoint is closed and it sees a shutdown.
			sd := make(chan struct{})
			for deadline := time.Now().Add(hangTimeout); !p.shutdown && time.Now().Before(deadline); {
				p.pumpUntil(sd, time.Millisecond)
			}
			if !p.shutdown {
				t.Errorf("the misbehaving peer was not disconnected within %v of Close", hangTimeout)
			}

			// Everything else carries on.
			echo(t, goodC, goodS, []byte("still here after "+tc.name))
			c2, s2 := dialAccept(t, ln)
			echo(t, c2, s2, []byte("new connection #"+strconv.Itoa(i)))
		})
	}
}

// TestBadPeerHandshake: a connection request whose private data is not a
// netio handshake is rejected, the requester hears so, and the Listener
// still accepts real connections.
func TestBadPeerHandshake(t *testing.T) {
	ln, err := netio.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	valid := helloBytes(netio.ProtocolLevel, rawWindow, rawBufSize, 1<<20)
	badMagic := append([]byte("XTIO"), valid[4:]...)
	cases := []struct {
		name  string
		hello []byte
	}{
		{"wrong magic", badMagic},
		{"garbage", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")},
		{"short", valid[:10]},
		{"none", nil},
		{"wrong version", helloBytes(netio.ProtocolLevel-1, rawWindow, rawBufSize, 1<<20)},
		{"window zero", helloBytes(netio.ProtocolLevel, 0, rawBufSize, 1<<20)},
		{"window huge", helloBytes(netio.ProtocolLevel, 1<<30, rawBufSize, 1<<20)},
		{"buffer too small", helloBytes(netio.ProtocolLevel, rawWindow, 16, 1<<20)},
		{"max message zero", helloBytes(netio.ProtocolLevel, rawWindow, rawBufSize, 0)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			p, err := dialRaw(t, ln.Addr().String(), tc.hello)
			if err == nil {
				p.close()
				t.Fatalf("handshake %q was accepted; want the listener to reject it", tc.hello)
			}
			t.Logf("rejected with %v after %v", err, time.Since(start).Round(time.Microsecond))
			c, s := dialAccept(t, ln)
			echo(t, c, s, []byte("after "+tc.name))
		})
	}
}

// ---------------------------------------------------------------------------
// 3. Maximum message size.

func TestMaxMessageSizeDialer(t *testing.T) {
	ln, err := netio.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, s := dialAccept(t, ln, netio.WithMaxMessageSize(1000))
	n, err := c.Write(make([]byte, 1001))
	if !errors.Is(err, netio.ErrMessageTooLarge) || n != 0 {
		t.Fatalf("Write of 1001 bytes with a 1000-byte limit: %d, %v; want 0, ErrMessageTooLarge", n, err)
	}
	var oe *net.OpError
	if !errors.As(err, &oe) || oe.Op != "write" {
		t.Fatalf("Write error %T %v; want a *net.OpError with Op \"write\"", err, err)
	}
	echo(t, c, s, bytes.Repeat([]byte{'m'}, 1000))
	// The listener side learnt the dialer's limit in the handshake.
	if _, err := s.Write(make([]byte, 1001)); !errors.Is(err, netio.ErrMessageTooLarge) {
		t.Fatalf("listener-side Write of 1001 bytes to a dialer accepting 1000: %v; want ErrMessageTooLarge", err)
	}
	echo(t, s, c, bytes.Repeat([]byte{'n'}, 1000))
}

func TestMaxMessageSizeListener(t *testing.T) {
	ln, err := netio.Listen("tcp", "127.0.0.1:0", netio.WithMaxMessageSize(1000), netio.WithBufferSize(4096))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, s := dialAccept(t, ln) // the dialer has no limit of its own
	for _, size := range []int{1001, 5000, 1 << 20} {
		if _, err := c.Write(make([]byte, size)); !errors.Is(err, netio.ErrMessageTooLarge) {
			t.Fatalf("dialer Write of %d bytes to a listener accepting 1000: %v; want ErrMessageTooLarge (learnt from the handshake)", size, err)
		}
	}
	if _, err := s.Write(make([]byte, 1001)); !errors.Is(err, netio.ErrMessageTooLarge) {
		t.Fatalf("listener Write of 1001 bytes with its own 1000-byte limit: %v; want ErrMessageTooLarge", err)
	}
	echo(t, c, s, bytes.Repeat([]byte{'q'}, 1000))
}

// ---------------------------------------------------------------------------
// 4. Dial errors.

func freePort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// checkDialError checks that a Dial failed with a *net.OpError, and failed
// promptly: not by running into a connect timeout (a Dial that waits for an
// answer that never comes ends with os.ErrDeadlineExceeded, which the tests
// that expect it check through checkDialErrorShape), and not after a hang.
func checkDialError(t *testing.T, err error, elapsed time.Duration) *net.OpError {
	t.Helper()
	oe := checkDialErrorShape(t, err, elapsed)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Dial ran into its timeout (%v, after %v); want a prompt failure", err, elapsed)
	}
	return oe
}

// checkDialErrorShape checks that a Dial failed with a *net.OpError, and
// within hangTimeout.
func checkDialErrorShape(t *testing.T, err error, elapsed time.Duration) *net.OpError {
	t.Helper()
	if err == nil {
		t.Fatal("Dial succeeded; want an error")
	}
	var oe *net.OpError
	if !errors.As(err, &oe) || oe.Op != "dial" {
		t.Fatalf("Dial error %T %v; want a *net.OpError with Op \"dial\"", err, err)
	}
	if elapsed >= hangTimeout {
		t.Fatalf("Dial took %v to fail: it hung", elapsed)
	}
	t.Logf("%v (after %v)", err, elapsed.Round(time.Microsecond))
	return oe
}

func TestDialRefused(t *testing.T) {
	addr := freePort(t)
	start := time.Now()
	c, err := netio.Dial("tcp", addr)
	if c != nil {
		c.Close()
	}
	checkDialError(t, err, time.Since(start))
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("Dial to a closed port: %v; want errors.Is(err, syscall.ECONNREFUSED)", err)
	}
}

// TestDialTimeout dials a plain TCP listener that never accepts: the TCP
// handshake completes in the kernel but nobody answers netio's request.
// Each case has one short deadline, the one under test, and a backstop of
// hangTimeout: a Dial that ignored the short one ends at the backstop, which
// the check tells apart however slow the machine. It does not give up
// before its deadline either.
func TestDialTimeout(t *testing.T) {
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	check := func(t *testing.T, err error, elapsed, want time.Duration) {
		t.Helper()
		checkDialErrorShape(t, err, elapsed)
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("Dial past its deadline: %v; want errors.Is(err, os.ErrDeadlineExceeded)", err)
		}
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Errorf("Dial past its deadline: %v; want a net.Error with Timeout() true", err)
		}
		if elapsed < want-5*time.Millisecond {
			t.Errorf("Dial gave up after %v; want not before its deadline, %v", elapsed, want)
		}
	}
	t.Run("context deadline", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		start := time.Now()
		c, err := netio.DialContext(ctx, "tcp", silent.Addr().String(), netio.WithConnectTimeout(hangTimeout))
		if c != nil {
			c.Close()
		}
		check(t, err, time.Since(start), 50*time.Millisecond)
	})
	t.Run("ConnectTimeout", func(t *testing.T) {
		backstop, cancel := context.WithTimeout(context.Background(), hangTimeout)
		defer cancel()
		start := time.Now()
		c, err := netio.DialContext(backstop, "tcp", silent.Addr().String(), netio.WithConnectTimeout(80*time.Millisecond))
		if c != nil {
			c.Close()
		}
		check(t, err, time.Since(start), 80*time.Millisecond)
	})
}

func TestDialCanceledContext(t *testing.T) {
	ln, err := netio.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan *netio.Conn, 16)
	go func() {
		defer close(accepted)
		for {
			c, err := ln.AcceptConn()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	const tries = 5
	for i := 0; i < tries; i++ {
		start := time.Now()
		c, err := netio.DialContext(ctx, "tcp", ln.Addr().String())
		if c != nil {
			c.Close()
			t.Fatalf("DialContext with a canceled context returned a connection")
		}
		checkDialError(t, err, time.Since(start))
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("DialContext with a canceled context: %v; want errors.Is(err, context.Canceled)", err)
		}
	}
	// The listener is unharmed. Attempts abandoned after the listener had
	// accepted them may show up in Accept (as with TCP): they must end
	// promptly, and the real connection must come through.
	c, err := netio.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	want := []byte("after canceled dials")
	if _, err := c.Write(want); err != nil {
		t.Fatal(err)
	}
	abandoned := 0
	for {
		var s *netio.Conn
		select {
		case s = <-accepted:
		case <-time.After(hangTimeout):
			t.Fatalf("the real connection was not accepted in %v (%d abandoned ones were)", hangTimeout, abandoned)
		}
		s.SetReadDeadline(time.Now().Add(hangTimeout))
		got, err := s.AppendMessage(nil)
		if err == nil && bytes.Equal(got, want) {
			echo(t, c, s, []byte("echo"))
			s.Close()
			break
		}
		s.Close()
		abandoned++
		if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("a connection from a canceled Dial was accepted and read %q, %v; want it to end with an error", got, err)
		}
		t.Logf("accepted connection of a canceled Dial ended with %v", err)
		if abandoned > tries {
			t.Fatalf("more connections accepted than dialed")
		}
	}
	if abandoned > 0 {
		t.Logf("%d of %d Dials with an already canceled context still reached the listener", abandoned, tries)
	}
}

func TestDialBadArguments(t *testing.T) {
	addr := freePort(t)
	t.Run("unknown provider", func(t *testing.T) {
		start := time.Now()
		c, err := netio.Dial("no-such-provider", addr)
		if c != nil {
			c.Close()
		}
		oe := checkDialError(t, err, time.Since(start))
		if oe.Net != "no-such-provider" {
			t.Errorf("OpError.Net = %q; want the provider asked for", oe.Net)
		}
		if !bytes.Contains([]byte(err.Error()), []byte("no-such-provider")) {
			t.Errorf("error %q does not name the unknown provider", err)
		}
	})
	for _, a := range []string{"no-port", "127.0.0.1", "127.0.0.1:99999", "127.0.0.1:-1", "127.0.0.1:port", "[::1:80", ""} {
		t.Run("address "+strconv.Quote(a), func(t *testing.T) {
			start := time.Now()
			c, err := netio.Dial("tcp", a)
			if c != nil {
				c.Close()
			}
			checkDialError(t, err, time.Since(start))
		})
	}
}

// ---------------------------------------------------------------------------
// 5. Listener.

func TestListenerCloseUnblocksAccept(t *testing.T) {
	ln, err := netio.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 2)
	for i := 0; i < 2; i++ {
		go func() {
			c, err := ln.Accept()
			if c != nil {
				c.Close()
			}
			errc <- err
		}()
	}
	waitBlocked(t, 2, "netio.(*Listener).Accept")
	if err := ln.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for i := 0; i < 2; i++ {
		select {
		case err := <-errc:
			if !errors.Is(err, net.ErrClosed) {
				t.Fatalf("Accept after Close: %v; want net.ErrClosed", err)
			}
		case <-time.After(hangTimeout):
			t.Fatalf("Accept still blocked %v after the Listener was closed", hangTimeout)
		}
	}
	if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept on a closed Listener: %v; want net.ErrClosed", err)
	}
	if err := ln.Close(); err == nil {
		t.Fatalf("second Close of a Listener returned nil; want an error")
	}
	// The port is free again: nothing listens there.
	start := time.Now()
	c, err := netio.Dial("tcp", ln.Addr().String())
	if c != nil {
		c.Close()
		t.Fatalf("Dial to a closed Listener succeeded")
	}
	checkDialError(t, err, time.Since(start))
}

func TestListenerAddr(t *testing.T) {
	ln, err := netio.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	a := ln.Addr()
	if a.Network() != "tcp" {
		t.Errorf("Addr().Network() = %q; want the provider, tcp", a.Network())
	}
	host, port, err := net.SplitHostPort(a.String())
	if err != nil || host != "127.0.0.1" || port == "0" {
		t.Fatalf("Addr().String() = %q; want 127.0.0.1 and the port chosen", a.String())
	}
	c, s := dialAccept(t, ln)
	if c.RemoteAddr().String() != a.String() {
		t.Errorf("dialer's RemoteAddr %v; want the listener's %v", c.RemoteAddr(), a)
	}
	if s.LocalAddr().String() != a.String() {
		t.Errorf("accepted LocalAddr %v; want the listener's %v", s.LocalAddr(), a)
	}
	if s.RemoteAddr().String() != c.LocalAddr().String() {
		t.Errorf("accepted RemoteAddr %v; want the dialer's LocalAddr %v", s.RemoteAddr(), c.LocalAddr())
	}
	echo(t, c, s, []byte("addr works"))
}

func TestListenerBacklog(t *testing.T) {
	ln, err := netio.Listen("tcp", "127.0.0.1:0", netio.WithBacklog(1))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	first, err := netio.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("first Dial, into an empty backlog of 1: %v", err)
	}
	defer first.Close()
	var rejected []error
	for i := 2; i <= 3; i++ {
		start := time.Now()
		c, err := netio.Dial("tcp", ln.Addr().String(), netio.WithConnectTimeout(hangTimeout))
		elapsed := time.Since(start)
		if c != nil {
			c.Close()
			t.Fatalf("Dial #%d with a full backlog of 1 succeeded; want it rejected", i)
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("Dial #%d with a full backlog hung until its timeout (%v); want a prompt rejection", i, elapsed)
		}
		checkDialError(t, err, elapsed)
		rejected = append(rejected, err)
	}
	s := acceptOne(t, ln, hangTimeout)
	echo(t, first, s, []byte("first"))
	// The backlog has room again.
	c, s2 := dialAccept(t, ln)
	echo(t, c, s2, []byte("after draining"))

	t.Run("ErrRejected", func(t *testing.T) {
		// netio.go: "ErrRejected is returned by Dial when the listener
		// refused the connection (its backlog was full, or it is closing)".
		for _, err := range rejected {
			if !errors.Is(err, netio.ErrRejected) {
				t.Errorf("Dial rejected by a full backlog returned %v; want errors.Is(err, netio.ErrRejected) as documented", err)
			}
		}
	})
}

// ---------------------------------------------------------------------------
// 6. Deadlines and Close.

// fillWindow writes small messages to c, whose peer does not read, until a
// Write blocks past the write deadline; it returns that Write's error and
// how many messages went through.
func fillWindow(t *testing.T, c *netio.Conn, d time.Duration) (error, int, time.Duration) {
	t.Helper()
	start := time.Now()
	c.SetWriteDeadline(start.Add(d))
	msg := make([]byte, 100)
	for i := 0; i < 1000; i++ {
		if _, err := c.Write(msg); err != nil {
			return err, i, time.Since(start)
		}
	}
	t.Fatalf("1000 Writes to a peer that reads nothing, with a window of 4, all succeeded")
	return nil, 0, 0
}

// TestWriteDeadline: a Write blocked on flow control gives up at its
// deadline, not before. A Write that ignored it would end, failing the test,
// when a backstop closes the Conn after hangTimeout.
func TestWriteDeadline(t *testing.T) {
	c, _ := pair(t, netio.WithWindow(4), netio.WithBufferSize(4096), netio.WithLinger(200*time.Millisecond))
	backstop := time.AfterFunc(hangTimeout, func() { c.Close() })
	defer backstop.Stop()
	err, n, elapsed := fillWindow(t, c, 100*time.Millisecond)
	t.Logf("%d Writes went through; the next failed after %v: %v", n, elapsed, err)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("blocked Write past its deadline: %v; want errors.Is(err, os.ErrDeadlineExceeded)", err)
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("blocked Write past its deadline: %v; want a net.Error with Timeout() true", err)
	}
	// Messages queued behind a send in flight are packed: a 4 KiB buffer
	// holds 37 of these 100-byte ones with their length prefixes. At most
	// the peer's 4 buffers and our 4 are full when a Write must wait.
	if perBuffer := (4096 - 16) / (100 + 8); n > 8*perBuffer {
		t.Errorf("%d messages written to a peer with a window of 4 buffers of 4 KiB that reads nothing; flow control should block sooner", n)
	}
	if elapsed < 95*time.Millisecond {
		t.Errorf("Write gave up after %v; want not before its deadline, 100 ms", elapsed)
	}
	// Another Write fails at once while the deadline is in the past.
	if _, err := c.Write([]byte("x")); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("Write with a past deadline: %v; want os.ErrDeadlineExceeded", err)
	}
}

func TestCloseUnblocks(t *testing.T) {
	c, s := pair(t, netio.WithWindow(4), netio.WithBufferSize(4096), netio.WithLinger(200*time.Millisecond))
	// s reads nothing, so c's Writes block; c reads, and s sends nothing.
	c.SetWriteDeadline(time.Now().Add(hangTimeout)) // a backstop

	rerr := make(chan error, 1)
	werr := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 10))
		rerr <- err
	}()
	go func() {
		msg := make([]byte, 100)
		for {
			if _, err := c.Write(msg); err != nil {
				werr <- err
				return
			}
		}
	}()
	waitBlocked(t, 1, "netio.(*Conn).Read")
	waitBlocked(t, 1, "netio.(*Conn).Write")
	select {
	case err := <-werr:
		t.Fatalf("Write failed before Close: %v", err)
	case err := <-rerr:
		t.Fatalf("Read returned before Close: %v", err)
	default:
	}
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	for _, w := range []struct {
		op string
		ch chan error
	}{{"Read", rerr}, {"Write", werr}} {
		select {
		case err := <-w.ch:
			if !errors.Is(err, net.ErrClosed) {
				t.Errorf("blocked %s after Close: %v; want net.ErrClosed", w.op, err)
			}
		case <-time.After(hangTimeout):
			t.Fatalf("%s still blocked %v after Close", w.op, hangTimeout)
		}
	}
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(hangTimeout):
		t.Fatalf("Close itself blocked %v", hangTimeout)
	}
	if err := c.Close(); err == nil {
		t.Errorf("second Close returned nil; want an error")
	}
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Read after Close: %v; want net.ErrClosed", err)
	}
	if _, err := c.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Write after Close: %v; want net.ErrClosed", err)
	}
	// The peer read nothing for the whole Linger, so what c could not send
	// is lost: after what did arrive, the peer sees a reset, not a clean end.
	s.SetReadDeadline(time.Now().Add(hangTimeout))
	_, err := io.Copy(io.Discard, s)
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("peer reading after Close gave up lingering: %v; want ECONNRESET", err)
	}
}

// TestCloseDelivers: a program that writes, closes and exits loses nothing.
// Close returns only once the slow peer has taken every message.
func TestCloseDelivers(t *testing.T) {
	c, s := pair(t, netio.WithWindow(4), netio.WithBufferSize(4096))
	const n = 200
	written := make(chan error, 1)
	go func() {
		msg := make([]byte, 1000)
		for i := 0; i < n; i++ {
			if _, err := c.Write(msg); err != nil {
				written <- err
				return
			}
		}
		written <- c.Close()
	}()
	waitBlocked(t, 1, "netio.(*Conn).Write") // the writer is blocked on the window now
	s.SetReadDeadline(time.Now().Add(hangTimeout))
	got, buf := 0, make([]byte, 1000)
	for {
		_, err := s.ReadMessage(buf)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("after %d messages: %v", got, err)
		}
		got++
	}
	if err := <-written; err != nil {
		t.Fatalf("write or Close: %v", err)
	}
	if got != n {
		t.Fatalf("peer got %d of %d messages before io.EOF", got, n)
	}
}

// ---------------------------------------------------------------------------
// 7. Many connections on one reactor.

func TestManyConnections(t *testing.T) {
	const (
		conns = 50
		msgs  = 100
	)
	opts := []netio.Option{netio.WithBufferSize(4096), netio.WithWindow(8)}
	ln, err := netio.Listen("tcp", "127.0.0.1:0", opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	clients := make([]*netio.Conn, conns)
	servers := make([]*netio.Conn, conns)
	for i := range clients {
		clients[i], servers[i] = dialAccept(t, ln, opts...)
	}
	msg := func(conn, seq int) []byte {
		// Sizes from 0 to over one buffer, content tied to conn and seq.
		size := (conn*37 + seq*101) % 6000
		b := make([]byte, size)
		for k := range b {
			b[k] = byte(conn ^ seq*7 ^ k)
		}
		return b
	}
	var wg sync.WaitGroup
	errs := make(chan error, 3*conns)
	deadline := time.Now().Add(3 * hangTimeout) // a backstop for the whole test
	for i := 0; i < conns; i++ {
		c, s := clients[i], servers[i]
		c.SetDeadline(deadline)
		s.SetDeadline(deadline)
		wg.Add(3)
		go func() { // server: echo every message
			defer wg.Done()
			buf := make([]byte, 0, 8192)
			for j := 0; j < msgs; j++ {
				m, err := s.AppendMessage(buf[:0])
				if err != nil {
					errs <- fmt.Errorf("conn %d server read %d: %w", i, j, err)
					return
				}
				if _, err := s.Write(m); err != nil {
					errs <- fmt.Errorf("conn %d server write %d: %w", i, j, err)
					return
				}
			}
		}()
		go func() { // client writer
			defer wg.Done()
			for j := 0; j < msgs; j++ {
				if _, err := c.Write(msg(i, j)); err != nil {
					errs <- fmt.Errorf("conn %d client write %d: %w", i, j, err)
					return
				}
			}
		}()
		go func() { // client reader
			defer wg.Done()
			buf := make([]byte, 0, 8192)
			for j := 0; j < msgs; j++ {
				m, err := c.AppendMessage(buf[:0])
				if err != nil {
					errs <- fmt.Errorf("conn %d client read %d: %w", i, j, err)
					return
				}
				if want := msg(i, j); !bytes.Equal(m, want) {
					errs <- fmt.Errorf("conn %d echo %d: %d bytes, want %d, content differs: %v", i, j, len(m), len(want), !bytes.Equal(m[:min(len(m), len(want))], want[:min(len(m), len(want))]))
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// ---------------------------------------------------------------------------
// 8. OnMessage.

func TestOnMessage(t *testing.T) {
	type got struct {
		c   *netio.Conn
		msg []byte
	}
	ch := make(chan got, 100)
	ln, err := netio.Listen("tcp", "127.0.0.1:0", netio.WithBufferSize(4096), netio.WithOnMessage(func(c *netio.Conn, msg []byte) {
		// msg is only valid during the call.
		ch <- got{c, append([]byte(nil), msg...)}
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, s := dialAccept(t, ln)
	big := make([]byte, 20000) // spans five 4 KiB buffers
	for i := range big {
		big[i] = byte(i * 13)
	}
	want := [][]byte{[]byte("one"), {}, big, []byte("two"), bytes.Repeat([]byte{'z'}, 4096-16), bytes.Repeat([]byte{'y'}, 4096-15), []byte("three")}
	for i, m := range want {
		if _, err := c.Write(m); err != nil {
			t.Fatalf("Write %d: %v", i, err)
		}
	}
	var msgs [][]byte
	for i := range want {
		select {
		case g := <-ch:
			if g.c != s {
				t.Errorf("message %d: callback got Conn %v; want the accepted one %v", i, g.c, s)
			}
			msgs = append(msgs, g.msg)
		case <-time.After(hangTimeout):
			t.Fatalf("callback got %d of %d messages in %v", i, len(want), hangTimeout)
		}
	}
	// EquateEmpty: the empty message may reach the callback as nil.
	if diff := cmp.Diff(want, msgs, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("messages the callback got (-want +got):\n%s", diff)
	}
	// No extra message reached the callback: the next one it gets is the
	// next one written (checked in order below), whenever it comes.
	// Many more than the window: credits must flow back without a reader.
	for i := 0; i < 200; i++ {
		c.SetWriteDeadline(time.Now().Add(hangTimeout))
		if _, err := c.Write([]byte(strconv.Itoa(i))); err != nil {
			t.Fatalf("Write %d to an OnMessage connection: %v (the callback consumed every message, credits should come back)", i, err)
		}
		select {
		case g := <-ch:
			if string(g.msg) != strconv.Itoa(i) {
				t.Fatalf("message %q; want %q", g.msg, strconv.Itoa(i))
			}
		case <-time.After(hangTimeout):
			t.Fatalf("message %d never reached the callback", i)
		}
	}
	s.SetReadDeadline(time.Now().Add(hangTimeout))
	if n, err := s.Read(make([]byte, 10)); err == nil {
		t.Fatalf("Read on an OnMessage connection: %d, nil; want an error", n)
	} else if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read on an OnMessage connection blocked until its deadline; want an immediate error")
	}
	if _, err := s.ReadMessage(make([]byte, 10)); err == nil {
		t.Fatalf("ReadMessage on an OnMessage connection succeeded; want an error")
	}
	// The callback side can still write back.
	if _, err := s.Write([]byte("reply")); err != nil {
		t.Fatalf("Write from an OnMessage connection: %v", err)
	}
	buf := make([]byte, 10)
	c.SetReadDeadline(time.Now().Add(hangTimeout))
	if n, err := c.ReadMessage(buf); err != nil || string(buf[:n]) != "reply" {
		t.Fatalf("reply: %q, %v", buf[:n], err)
	}
}

// ---------------------------------------------------------------------------
// 9. Message boundaries.

func TestReadStreamAcrossMessages(t *testing.T) {
	c, s := pair(t, netio.WithBufferSize(4096))
	s.SetReadDeadline(time.Now().Add(hangTimeout))
	big := make([]byte, 10<<10)
	for i := range big {
		big[i] = byte(i*31 + i>>8)
	}
	next := []byte("the next message")
	for _, m := range [][]byte{big, next} {
		if _, err := c.Write(m); err != nil {
			t.Fatal(err)
		}
	}
	var got []byte
	reads := 0
	buf := make([]byte, 1000)
	for len(got) < len(big) {
		n, err := s.Read(buf[:min(len(buf), len(big)-len(got))])
		if err != nil {
			t.Fatalf("Read after %d bytes: %v", len(got), err)
		}
		if n == 0 {
			t.Fatalf("Read returned 0 bytes and no error")
		}
		got = append(got, buf[:n]...)
		reads++
	}
	if diff := cmp.Diff(big, got); diff != "" {
		t.Fatalf("10 KiB message read with a 1000-byte buffer came out corrupted (-want +got):\n%s", diff)
	}
	if reads < 11 {
		t.Errorf("10 KiB read in %d Reads of at most 1000 bytes", reads)
	}
	p := make([]byte, 100)
	n, err := s.ReadMessage(p)
	if err != nil {
		t.Fatalf("message after the streamed one: %v; want %q", err, next)
	}
	if diff := cmp.Diff(next, p[:n]); diff != "" {
		t.Fatalf("message after the streamed one (-want +got):\n%s", diff)
	}

	// A partial Read, then ReadMessage returns the rest of that message.
	c.Write([]byte("0123456789"))
	c.Write([]byte("after"))
	if n, err := s.Read(p[:4]); err != nil || string(p[:n]) != "0123" {
		t.Fatalf("partial Read: %q, %v", p[:n], err)
	}
	if n, err := s.ReadMessage(p); err != nil || string(p[:n]) != "456789" {
		t.Fatalf("ReadMessage after a partial Read: %q, %v; want the rest, \"456789\"", p[:n], err)
	}
	if n, err := s.ReadMessage(p); err != nil || string(p[:n]) != "after" {
		t.Fatalf("ReadMessage: %q, %v; want \"after\"", p[:n], err)
	}

	// Read as a stream may join messages, in order.
	c.Write([]byte("abc"))
	c.Write([]byte("def"))
	var stream []byte
	for len(stream) < 6 {
		n, err := s.Read(p)
		if err != nil {
			t.Fatal(err)
		}
		stream = append(stream, p[:n]...)
	}
	if string(stream) != "abcdef" {
		t.Fatalf("stream %q; want \"abcdef\"", stream)
	}
}

func TestReadMessageShortBuffer(t *testing.T) {
	c, s := pair(t, netio.WithBufferSize(4096))
	s.SetReadDeadline(time.Now().Add(hangTimeout))
	msg := make([]byte, 10000) // spans three buffers
	for i := range msg {
		msg[i] = byte(i % 251)
	}
	c.Write(msg)
	c.Write([]byte("tail"))
	small := make([]byte, 100)
	for i := 0; i < 2; i++ { // and again: nothing was consumed
		n, err := s.ReadMessage(small)
		if !errors.Is(err, io.ErrShortBuffer) || n != 0 {
			t.Fatalf("ReadMessage of a 10000-byte message into 100 bytes: %d, %v; want 0, io.ErrShortBuffer", n, err)
		}
	}
	if n, err := s.MessageLen(); err != nil || n != len(msg) {
		t.Fatalf("MessageLen: %d, %v; want %d", n, err, len(msg))
	}
	prefix := []byte("prefix:")
	got, err := s.AppendMessage(prefix)
	if err != nil {
		t.Fatalf("AppendMessage after io.ErrShortBuffer: %v", err)
	}
	if diff := cmp.Diff(append([]byte("prefix:"), msg...), got); diff != "" {
		t.Fatalf("AppendMessage after io.ErrShortBuffer: want the prefix and the whole 10000-byte message (-want +got):\n%s", diff)
	}
	if n, err := s.ReadMessage(small); err != nil || string(small[:n]) != "tail" {
		t.Fatalf("next message: %q, %v; want \"tail\"", small[:n], err)
	}
}

func TestZeroLengthMessages(t *testing.T) {
	c, s := pair(t)
	s.SetReadDeadline(time.Now().Add(hangTimeout))
	for _, m := range []string{"", "", "x", "", "yz"} {
		if n, err := c.Write([]byte(m)); err != nil || n != len(m) {
			t.Fatalf("Write(%q): %d, %v", m, n, err)
		}
	}
	p := make([]byte, 10)
	for i := 0; i < 2; i++ {
		if n, err := s.ReadMessage(p); err != nil || n != 0 {
			t.Fatalf("ReadMessage of an empty message: %d, %v; want 0, nil", n, err)
		}
	}
	if got, err := s.AppendMessage(nil); err != nil || string(got) != "x" {
		t.Fatalf("AppendMessage: %q, %v; want \"x\"", got, err)
	}
	// Read is a byte stream: the empty message is skipped.
	n, err := s.Read(p)
	if err != nil || string(p[:n]) != "yz" {
		t.Fatalf("Read over an empty message: %q, %v; want \"yz\"", p[:n], err)
	}
	// An empty message alone does not wake Read with 0 bytes. MessageLen
	// waits for it without consuming it: it is there before Read starts.
	c.Write(nil)
	if n, err := s.MessageLen(); err != nil || n != 0 {
		t.Fatalf("MessageLen with an empty message pending: %d, %v; want 0, nil", n, err)
	}
	s.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if n, err := s.Read(p); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read with only an empty message pending: %d, %v; want to keep waiting (deadline)", n, err)
	}
	s.SetReadDeadline(time.Now().Add(hangTimeout))
	c.Write([]byte("end"))
	if n, err := s.Read(p); err != nil || string(p[:n]) != "end" {
		t.Fatalf("Read: %q, %v; want \"end\"", p[:n], err)
	}
}

// rssBytes is the resident set size of this process.
func rssBytes(t testing.TB) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip("no /proc/self/status:", err)
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("VmRSS:")); ok {
			kb, err := strconv.ParseInt(string(bytes.TrimSpace(bytes.TrimSuffix(bytes.TrimSpace(v), []byte("kB")))), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Skip("no VmRSS")
	return 0
}

// TestBadPeerHugeWindow: the handshake is valid, but the peer claims a
// window of 4096 buffers of 64 KiB. A Listener configured for 16 buffers
// of 256 KiB (4 MiB per direction) should not let one unauthenticated
// connection request make it allocate 256 MiB: sending smaller buffers
// and using fewer credits than the peer offers is always allowed, so the
// send side can be bounded by the Listener's own configuration.
func TestBadPeerHugeWindow(t *testing.T) {
	ln, err := netio.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	// Warm up the engine and the accept path so they are not counted.
	c0, s0 := dialAccept(t, ln)
	echo(t, c0, s0, []byte("warm"))
	before := rssBytes(t)
	p, err := dialRaw(t, ln.Addr().String(), helloBytes(netio.ProtocolLevel, 4096, 64<<10, 1<<20))
	if err != nil {
		// Refusing such a peer is a fine answer too.
		t.Logf("peer with a 4096 x 64 KiB window refused: %v", err)
		return
	}
	defer p.close()
	s := acceptOne(t, ln, hangTimeout)
	grown := rssBytes(t) - before
	t.Logf("resident memory grew by %d MiB accepting one connection", grown>>20)
	if grown > 64<<20 {
		t.Errorf("one connection request claiming a window of 4096 x 64 KiB made the Listener allocate %d MiB (its own configuration is 16 x 256 KiB = 4 MiB per direction); a remote peer must not choose how much memory a Listener commits", grown>>20)
	}
	s.Close()
}

// rawListener is a bare passive endpoint that accepts every connection
// request with the given private data. One goroutine owns every libfabric
// object and polls them until stop.
type rawListener struct {
	addr string
	stop chan struct{}
	done chan struct{}
	reqs chan []byte // the private data of each request
}

func listenRaw(t testing.TB, accept []byte) *rawListener {
	t.Helper()
	infos, err := ofi.GetInfo(ofi.Hints{Provider: "tcp", Node: "127.0.0.1", Service: "0", Source: true})
	if err != nil {
		t.Fatal(err)
	}
	info := infos.Entries[0]
	fab, err := ofi.OpenFabric(info)
	if err != nil {
		infos.Free()
		t.Fatal(err)
	}
	eq, err := fab.OpenEQ(16)
	if err != nil {
		fab.Close()
		infos.Free()
		t.Fatal(err)
	}
	pep, err := fab.OpenPassiveEndpoint(info, 1)
	if err == nil {
		err = pep.Bind(eq)
	}
	if err == nil {
		err = pep.Listen()
	}
	var ap interface{ String() string }
	if err == nil {
		ap, err = pep.Addr()
	}
	if err != nil {
		if pep != nil {
			pep.Close()
		}
		eq.Close()
		fab.Close()
		infos.Free()
		t.Fatal(err)
	}
	l := &rawListener{addr: ap.String(), stop: make(chan struct{}), done: make(chan struct{}), reqs: make(chan []byte, 16)}
	go func() {
		defer close(l.done)
		type side struct {
			dom *ofi.Domain
			cq  *ofi.CQ
			ep  *ofi.Endpoint
		}
		var sides []side
		var ev ofi.Event
		var cqBuf [16]ofi.Completion
		for {
			select {
			case <-l.stop:
				for _, s := range sides {
					s.ep.Close()
					var ce ofi.CompletionError
					for i := 0; i < 100; i++ {
						if n, err := s.cq.Read(cqBuf[:]); err != nil {
							s.cq.ReadError(&ce)
						} else if n == 0 {
							break
						}
					}
					s.cq.Close()
					s.dom.Close()
				}
				pep.Close()
				eq.Close()
				fab.Close()
				infos.Free()
				return
			default:
			}
			for _, s := range sides {
				if _, err := s.cq.Read(cqBuf[:]); err != nil {
					var ce ofi.CompletionError
					s.cq.ReadError(&ce)
				}
			}
			ok, err := eq.Read(&ev)
			if err != nil || !ok {
				time.Sleep(50 * time.Microsecond)
				continue
			}
			if ev.Kind != ofi.EventConnReq {
				continue
			}
			select {
			case l.reqs <- append([]byte(nil), ev.PrivateData()...):
			default:
			}
			req := ev.Info
			var s side
			s.dom, err = fab.OpenDomain(req)
			if err != nil {
				pep.Reject(req, nil)
				continue
			}
			s.cq, _ = s.dom.OpenCQ(64)
			s.ep, err = s.dom.OpenEndpoint(req, 2)
			if err == nil {
				err = s.ep.BindEQ(eq)
			}
			if err == nil {
				err = s.ep.BindCQ(s.cq)
			}
			if err == nil {
				err = s.ep.Enable()
			}
			if err == nil {
				// A listener that holds the key proves it.
				err = s.ep.Accept(netio.SealedAccept(accept, ev.PrivateData()))
			}
			req.Free()
			sides = append(sides, s) // closed at stop
		}
	}()
	t.Cleanup(func() { close(l.stop); <-l.done })
	return l
}

// TestBadListenerHandshake: a peer that holds the key and accepts our
// connection request with something other than a netio handshake makes
// Dial fail with ErrProtocol, promptly, and leaks nothing. An answer too
// short to carry the proof of the key fails admission (ErrRejected).
func TestBadListenerHandshake(t *testing.T) {
	valid := helloBytes(netio.ProtocolLevel, rawWindow, rawBufSize, 1<<20)
	cases := []struct {
		name   string
		accept []byte
		want   error
	}{
		{"wrong magic", append([]byte("XTIO"), valid[4:]...), netio.ErrProtocol},
		{"none", nil, netio.ErrRejected},
		{"short", valid[:12], netio.ErrRejected},
		{"wrong version", helloBytes(9, rawWindow, rawBufSize, 1<<20), netio.ErrProtocol},
		{"window too small", helloBytes(netio.ProtocolLevel, 1, rawBufSize, 1<<20), netio.ErrProtocol},
		{"buffer too small", helloBytes(netio.ProtocolLevel, rawWindow, 100, 1<<20), netio.ErrProtocol},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := listenRaw(t, tc.accept)
			start := time.Now()
			c, err := netio.Dial("tcp", l.addr, netio.WithConnectTimeout(hangTimeout))
			if c != nil {
				c.Close()
				t.Fatalf("Dial to a peer that answered with %q succeeded; want %v", tc.accept, tc.want)
			}
			select {
			case req := <-l.reqs:
				if len(req) < 4 || string(req[:4]) != "NTIO" {
					t.Errorf("netio's connection request carried %q; want a netio handshake", req)
				}
			default:
				t.Errorf("the raw listener saw no connection request")
			}
			checkDialError(t, err, time.Since(start))
			if !errors.Is(err, tc.want) {
				t.Fatalf("Dial to a peer that answered with a bad handshake: %v; want errors.Is(err, %v)", err, tc.want)
			}
		})
	}
}

// ---------------------------------------------------------------------------
// Idle cost.

func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestIdleConnectionCPU: a connection nobody uses must let the reactor
// sleep. A process holding idle connections should use next to no CPU. The
// test waits for the reactor to fall asleep (however long the machine takes
// to get there), then measures; a busy machine lends a busy-polling reactor
// less CPU, but still far more than the quarter of a core allowed.
func TestIdleConnectionCPU(t *testing.T) {
	c, s := pair(t)
	echo(t, c, s, []byte("one message, then silence"))
	eventually(t, "the reactor asleep after the echo", reactorAsleep)
	const window = 300 * time.Millisecond
	t0, w0 := processCPU(), time.Now()
	time.Sleep(window)
	used, wall := processCPU()-t0, time.Since(w0)
	t.Logf("idle pair: %v of CPU in %v", used, wall.Round(time.Millisecond))
	if used > wall/4 {
		t.Errorf("an idle connection pair used %v of CPU in %v (%.0f%% of a core); the reactor should be asleep in epoll_wait", used, wall.Round(time.Millisecond), 100*used.Seconds()/wall.Seconds())
	}
}
