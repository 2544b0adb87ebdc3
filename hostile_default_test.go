package netio_test

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/netio-go/netio"
)

// The sequences that crash libfabric 1.17's tcp provider (a valid
// connection request, then a forged acknowledgement header, or a tagged
// one) from a peer that does not have the key, against netio with its
// default options: every kind of listener turns the request away at
// admission, before the provider reads a byte after it, and every kind of
// dialer refuses a server that cannot prove it has the key, before it
// reads anything that server sent. The process lives on and serves.

// forgedTagged is the 16-byte tagged header (the 72 bytes of a request
// and this killed endpoints without a shared receive context).
func forgedTagged() []byte { return tcpDataHeader(tcpOpTagged, 0, 16) }

// withoutKey are connection requests a peer without the key can make,
// each followed by a header that crashes the provider if it gets to it.
func withoutKey(m netio.Mode) map[string][]byte {
	return map[string][]byte{
		"no key, ack":           append(tcpCMHeader(tcpCMConnReq, defaultHello(m)), forgedAck()...),
		"no key, tagged":        append(tcpCMHeader(tcpCMConnReq, defaultHello(m)), forgedTagged()...),
		"made-up key, ack":      append(tcpCMHeader(tcpCMConnReq, keyedJunkHello(m)), forgedAck()...),
		"made-up key, tagged":   append(tcpCMHeader(tcpCMConnReq, keyedJunkHello(m)), forgedTagged()...),
		"subscriber hello, ack": append(tcpCMHeader(tcpCMConnReq, subscriberHello(m)), forgedAck()...),
	}
}

// subscriberHello is a subscriber's handshake in mode m.
func subscriberHello(m netio.Mode) []byte {
	b := defaultHello(m)
	b[6] = 1 // role: subscriber
	return b
}

func TestForgedHeadersWithoutKeyAtListener(t *testing.T) {
	for _, m := range modes() {
		t.Run(m.String(), func(t *testing.T) {
			ln := listenT(t, netio.WithMode(m))
			keep, keepServer := dialAccept(t, ln, netio.WithMode(m))
			attacks := withoutKey(m)
			for name, b := range attacks {
				t.Run(name, func(t *testing.T) { wantAuthReject(t, ln.Addr().String(), b) })
			}
			if st := ln.Stats(); st.RejectedAuth != uint64(len(attacks)) || st.Accepted != 1 {
				t.Errorf("listener stats %+v, want %d rejected at admission and the one connection", st, len(attacks))
			}
			echo(t, keep, keepServer, []byte("the other connection"))
			stillServes(t, ln, netio.WithMode(m))
		})
	}
}

func TestForgedHeadersWithoutKeyAtPublisher(t *testing.T) {
	p := listenPublisher(t)
	var subs []*netio.Subscription
	for _, m := range modes() {
		subs = append(subs, subscribe(t, p, []uint64{7}, netio.WithMode(m)))
	}
	attacks := 0
	for _, m := range modes() {
		for name, b := range withoutKey(m) {
			t.Run(m.String()+"/"+name, func(t *testing.T) { wantAuthReject(t, p.Addr().String(), b) })
			attacks++
		}
	}
	if st := p.Stats(); st.Listener.RejectedAuth != uint64(attacks) || st.Subscribers != len(subs) {
		t.Errorf("publisher stats %+v, want %d rejected at admission and %d subscribers", st, attacks, len(subs))
	}
	ctx, cancel := context.WithTimeout(context.Background(), hangTimeout)
	defer cancel()
	if err := p.Publish(ctx, 7, payload(7, 0, 64)); err != nil {
		t.Fatal(err)
	}
	for _, s := range subs {
		receive(t, s, 1)
	}
}

// hostileServer is a plain TCP server that answers one netio connection
// request with answer, then sends after, and holds the socket until the
// dialer lets go. It reports what the dialer's request carried.
func hostileServer(t *testing.T, answer, after []byte) (addr string, request <-chan []byte) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	req := make(chan []byte, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			close(req)
			return
		}
		defer c.Close()
		hdr := make([]byte, 32)
		if _, err := io.ReadFull(c, hdr); err != nil {
			close(req)
			return
		}
		data := make([]byte, binary.BigEndian.Uint16(hdr[2:]))
		if _, err := io.ReadFull(c, data); err != nil {
			close(req)
			return
		}
		req <- data
		// The answer and the forged header in one write: both are in the
		// socket before the dialer looks.
		c.Write(append(tcpCMHeader(tcpCMConnResp, answer), after...))
		c.SetReadDeadline(time.Now().Add(hangTimeout))
		io.Copy(io.Discard, c)
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
	})
	return ln.Addr().String(), req
}

// A dialer or subscriber with the default key, at a hostile server that
// does not have it: the request carries the key's proof, the server's
// answer carries none (or a made-up one), and the forged header behind it
// is never parsed. The Dial or Subscribe fails with ErrRejected.
func TestForgedHeadersWithoutKeyAtDialer(t *testing.T) {
	for _, m := range modes() {
		madeUp := defaultHello(m)
		madeUp[7] = 1
		madeUp = append(madeUp, make([]byte, 16)...)
		for _, kind := range []string{"dial", "subscribe"} {
			for name, answer := range map[string][]byte{"no proof": defaultHello(m), "made-up proof": madeUp} {
				for hname, after := range map[string][]byte{"ack": forgedAck(), "tagged": forgedTagged()} {
					t.Run(m.String()+"/"+kind+"/"+name+"/"+hname, func(t *testing.T) {
						if kind == "subscribe" {
							answer = append([]byte(nil), answer...)
							answer[6] = 2 // role: publisher
						}
						addr, request := hostileServer(t, answer, after)
						var err error
						if kind == "dial" {
							var c *netio.Conn
							if c, err = netio.Dial("tcp", addr, netio.WithMode(m)); c != nil {
								c.Close()
							}
						} else {
							ctx, cancel := context.WithTimeout(context.Background(), hangTimeout)
							var s *netio.Subscription
							if s, err = netio.Subscribe(ctx, "tcp", addr, []uint64{1}, netio.WithMode(m)); s != nil {
								s.Close()
							}
							cancel()
						}
						wantRejected(t, kind, err)
						if req := <-request; len(req) != 52 || req[7]&1 == 0 {
							t.Errorf("the %s's request carried %d bytes, want a keyed hello of 52", kind, len(req))
						}
					})
				}
			}
		}
	}
	// The process's netio still works.
	ln := listenT(t)
	stillServes(t, ln)
}

// A connection request from a peer holding the key that stops after the
// header, or a connection that sends nothing, must not hold anything but
// a socket of its own, for at most Config.ConnectTimeout.
func TestHeaderOnlyClients(t *testing.T) {
	const clients = 100
	ln := listenT(t, netio.WithConnectTimeout(2*time.Second))
	c, s := dialAccept(t, ln)
	go echoMessages(s)
	var held []net.Conn
	for i := range clients {
		var h net.Conn
		if i%10 == 9 {
			var err error
			if h, err = net.Dial("tcp", ln.Addr().String()); err != nil { // sends nothing
				t.Fatal(err)
			}
		} else {
			h = requestWithoutItsData(t, ln.Addr().String())
		}
		held = append(held, h)
		defer h.Close()
	}
	eventually(t, "every client taken", func() bool { return ln.Stats().PendingRequests == clients })
	// While they are held, the connection's round trips go on, and a new
	// connection is made.
	roundTrips(t, c, 200)
	c2, s2 := dialAccept(t, ln)
	echo(t, c2, s2, []byte("a new connection among the held ones"))
	// Each held client is still waiting or, on a machine slow enough that
	// ConnectTimeout has passed, given up as incomplete: none accepted.
	if st := ln.Stats(); uint64(st.PendingRequests)+st.Incomplete != clients || st.Accepted != 2 {
		t.Fatalf("listener stats %+v: want all %d waiting or incomplete, 2 accepted", st, clients)
	}
	// At ConnectTimeout they are reset: the listener holds nothing for them.
	for i, h := range held {
		h.SetReadDeadline(time.Now().Add(hangTimeout))
		if _, err := h.Read(make([]byte, 64)); err == nil {
			t.Fatalf("client %d read data from a listener that never answered", i)
		}
	}
	eventually(t, "the clients forgotten", func() bool {
		st := ln.Stats()
		return st.PendingRequests == 0 && st.Incomplete == clients
	})
	roundTrips(t, c, 10)
}

func isReset(err error) bool { return errors.Is(err, syscall.ECONNRESET) }

// The connections of the process do not depend on the thread that reads
// connection requests: while it is held, round trips go on; requests that
// arrive meanwhile are served once it is free.
func TestConnectionsIndependentOfConnectionSetUp(t *testing.T) {
	ln := listenT(t)
	c, s := dialAccept(t, ln)
	go echoMessages(s)
	release := netio.HoldConnManager(ln)
	dialed := make(chan error, 1)
	go func() {
		c2, err := netio.Dial("tcp", ln.Addr().String())
		if err == nil {
			c2.Close()
		}
		dialed <- err
	}()
	roundTrips(t, c, 200)
	release()
	if err := <-dialed; err != nil {
		t.Fatalf("Dial made while the connection manager was held: %v", err)
	}
	acceptOne(t, ln, hangTimeout)
}

// A listener closed while requests wait for their data: their sockets are
// closed with it (the provider would never read them again), nothing
// leaks, and data they send afterwards reaches nothing.
func TestListenerClosedWithPendingRequests(t *testing.T) {
	other := listenT(t) // keeps the process's fabric and threads up
	ln, err := netio.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var held []net.Conn
	for range 10 {
		h := requestWithoutItsData(t, ln.Addr().String())
		defer h.Close()
		held = append(held, h)
	}
	eventually(t, "every client taken", func() bool { return ln.Stats().PendingRequests == len(held) })
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	for i, h := range held {
		h.Write(netio.SealedRequest(defaultHello(netio.LowLatency)))
		h.SetReadDeadline(time.Now().Add(hangTimeout))
		if _, err := h.Read(make([]byte, 64)); err == nil {
			t.Fatalf("client %d read an answer from a closed listener", i)
		} else if !errors.Is(err, io.EOF) && !isReset(err) {
			t.Fatalf("client %d: %v, want end of file or a reset", i, err)
		}
	}
	stillServes(t, other)
}

// A server that answers a Dial with a response header announcing data it
// never sends, then closes: the dial fails as refused when the server
// closes, not when it times out. At that end of file libfabric's tcp
// provider can take the reactor's errno, left at EAGAIN by the traffic of
// other connections, for "try again", and kept the reactor reading the
// queue until the dial's own timeout.
func TestDialHeaderOnlyServer(t *testing.T) {
	c, s := pair(t)
	go echoMessages(s)
	stop := make(chan struct{})
	pinging := make(chan struct{})
	go func() {
		defer close(pinging)
		msg, buf := make([]byte, 64), make([]byte, 64)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := c.Write(msg); err != nil {
				return
			}
			if _, err := c.ReadMessage(buf); err != nil {
				return
			}
		}
	}()
	defer func() {
		close(stop)
		<-pinging
	}()
	for range 3 {
		tl, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		served := make(chan struct{})
		go func() {
			defer close(served)
			conn, err := tl.Accept()
			if err != nil {
				return
			}
			defer conn.Close()
			io.ReadFull(conn, make([]byte, 32+52))
			conn.Write(tcpCMHeader(tcpCMConnResp, defaultHello(netio.LowLatency))[:32])
			// Until the dialer has read the header and waits for the rest.
			conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
			conn.Read(make([]byte, 1))
		}()
		_, err = netio.Dial("tcp", tl.Addr().String(), netio.WithConnectTimeout(hangTimeout))
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("Dial to a server that closed mid-answer: %v; want ECONNREFUSED", err)
		}
		<-served
		tl.Close()
	}
}
