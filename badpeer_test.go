package netio_test

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/netio-go/netio"
)

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
			eventually(t, fmt.Sprintf("Write failing on a connection closed for %v", r.err), func() bool {
				_, err := s.Write([]byte("x"))
				return err != nil
			})
			if err := s.Close(); err != nil {
				t.Errorf("Close after a protocol violation: %v", err)
			}
			// The peer is told: the endpoint is closed and it sees a shutdown.
			eventually(t, "the misbehaving peer disconnected after Close", func() bool {
				p.poll()
				return p.shutdown
			})

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
