package netio_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/netio-go/netio"
)

// Admission with a pre-shared key (Config.Key): peers with the key connect
// and move data; every other is turned away before the listener posts a
// buffer for it, so the forged headers that crash libfabric 1.17's tcp
// provider never reach it.

var (
	keyA = []byte("0123456789abcdef-netio-test-key-A")
	keyB = []byte("0123456789abcdef-netio-test-key-B")
)

// tcpCMNack is libfabric tcp's reject (ofi_ctrl_nack).
const tcpCMNack = 6

// forgedAck is the acknowledgement header that no send awaits: libfabric
// 1.17's tcp provider pops an empty list on it (tcpx_handle_ack) and the
// process dies. Only admission keeps it from the provider.
func forgedAck() []byte { return tcpDataHeader(0, 2, 16) }

// readCM reads one connection-management message of libfabric tcp from c:
// its type and private data.
func readCM(t *testing.T, c net.Conn) (msgType byte, data []byte) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(hangTimeout))
	defer c.SetReadDeadline(time.Time{})
	hdr := make([]byte, 32)
	if _, err := io.ReadFull(c, hdr); err != nil {
		t.Fatalf("reading a connection-management header: %v", err)
	}
	data = make([]byte, binary.BigEndian.Uint16(hdr[2:]))
	if _, err := io.ReadFull(c, data); err != nil {
		t.Fatalf("reading %d bytes of private data: %v", len(data), err)
	}
	return hdr[1], data
}

// wantAuthReject sends req (and what follows it) to addr from a plain TCP
// socket and checks that the listener rejects it at admission.
func wantAuthReject(t *testing.T, addr string, req []byte) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(req); err != nil {
		t.Fatal(err)
	}
	typ, data := readCM(t, c)
	if typ != tcpCMNack || string(data) != "NTIO-REJECT-AUTH" {
		t.Fatalf("listener answered type %d with %q, want a reject (type %d) with NTIO-REJECT-AUTH", typ, data, tcpCMNack)
	}
}

// wantRejected checks that a Dial or Subscribe failed admission.
func wantRejected(t *testing.T, what string, err error) {
	t.Helper()
	var op *net.OpError
	if !errors.Is(err, netio.ErrRejected) || !errors.As(err, &op) || !strings.Contains(err.Error(), "authentication failed") {
		t.Fatalf("%s: %v, want an authentication failure wrapping ErrRejected in a *net.OpError", what, err)
	}
}

// keyedJunkHello is a request that claims a key but carries a made-up
// authenticator: what a peer without the key can send.
func keyedJunkHello(m netio.Mode) []byte {
	b := defaultHello(m)
	b[7] = 1
	b = binary.LittleEndian.AppendUint64(b, uint64(time.Now().UnixNano()))
	return append(b, bytes.Repeat([]byte{0x42}, 4+16)...)
}

func TestKeyAdmits(t *testing.T) {
	for _, m := range modes() {
		t.Run(m.String(), func(t *testing.T) {
			ln, err := netio.Listen("tcp", "127.0.0.1:0", netio.WithMode(m), netio.WithKey(keyA))
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			c, s := dialAccept(t, ln, netio.WithMode(m), netio.WithKey(keyA))
			echo(t, c, s, []byte("with the key"))
			echo(t, s, c, bytes.Repeat([]byte("large "), 50<<10)) // spans several buffers
		})
	}
}

func TestKeyRejects(t *testing.T) {
	for _, c := range []struct {
		name                 string
		listenerKey, dialKey []byte
	}{
		{"wrong key", keyA, keyB},
		{"no key", keyA, nil},
		{"key to a keyless listener", nil, keyA},
	} {
		for _, m := range modes() {
			t.Run(c.name+"/"+m.String(), func(t *testing.T) {
				lopts := []netio.Option{netio.WithMode(m), netio.WithKey(c.listenerKey)}
				ln, err := netio.Listen("tcp", "127.0.0.1:0", lopts...)
				if err != nil {
					t.Fatal(err)
				}
				defer ln.Close()
				keep, keepServer := dialAccept(t, ln, lopts...)

				_, err = netio.Dial("tcp", ln.Addr().String(), netio.WithMode(m), netio.WithKey(c.dialKey))
				wantRejected(t, "Dial", err)
				if st := ln.Stats(); st.RejectedAuth != 1 || st.RejectedPeer != 0 || st.Accepted != 1 {
					t.Fatalf("listener stats %+v, want 1 accepted and 1 rejected at admission", st)
				}

				echo(t, keep, keepServer, []byte("the other connection"))
				// The rejected dial never reached Accept: the next
				// connection accepted is the next one dialled.
				stillServes(t, ln, lopts...)
			})
		}
	}
}

func TestKeyPubSub(t *testing.T) {
	for _, m := range modes() {
		t.Run(m.String(), func(t *testing.T) {
			p := listenPublisher(t, netio.WithKey(keyA))
			s := subscribe(t, p, []uint64{1, 2}, netio.WithMode(m), netio.WithKey(keyA))
			for _, bad := range [][]byte{keyB, nil} {
				ctx, cancel := context.WithTimeout(context.Background(), hangTimeout)
				_, err := netio.Subscribe(ctx, testNetwork, p.Addr().String(), []uint64{1}, netio.WithMode(m), netio.WithKey(bad))
				cancel()
				wantRejected(t, "Subscribe with another key", err)
			}
			const per = 100
			go func() {
				for i := 0; i < per; i++ {
					for _, tag := range []uint64{1, 2} {
						p.Publish(context.Background(), tag, payload(tag, i, 64))
					}
				}
				p.Flush()
			}()
			got := receive(t, s, 2*per)
			if got[1] != per || got[2] != per {
				t.Fatalf("received per tag %v", got)
			}
			if st := p.Stats(); st.Subscribers != 1 {
				t.Fatalf("publisher has %d subscribers, want only the one with the key", st.Subscribers)
			}
		})
	}
}

// The attack that kills a keyless listener of libfabric 1.17 (a valid
// request, then a forged acknowledgement header) is turned away at
// admission when the listener has a key: the header never reaches the
// provider.
func TestForgedAckAtKeyedListener(t *testing.T) {
	for _, m := range modes() {
		t.Run(m.String(), func(t *testing.T) {
			opts := []netio.Option{netio.WithMode(m), netio.WithKey(keyA)}
			ln, err := netio.Listen("tcp", "127.0.0.1:0", opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			keep, keepServer := dialAccept(t, ln, opts...)
			addr := ln.Addr().String()

			wantAuthReject(t, addr, append(tcpCMHeader(tcpCMConnReq, defaultHello(m)), forgedAck()...))
			wantAuthReject(t, addr, append(tcpCMHeader(tcpCMConnReq, keyedJunkHello(m)), forgedAck()...))
			if st := ln.Stats(); st.RejectedAuth != 2 {
				t.Fatalf("listener stats %+v, want 2 rejected at admission", st)
			}

			echo(t, keep, keepServer, []byte("the other connection"))
			stillServes(t, ln, opts...)
		})
	}
}

// recordingProxy relays one TCP connection to target and hands over the
// first connection-management message the client sent.
func recordingProxy(t *testing.T, target string) (addr string, request <-chan []byte) {
	t.Helper()
	pl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	req := make(chan []byte, 1)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	track := func(c net.Conn) { mu.Lock(); conns = append(conns, c); mu.Unlock() }
	wg.Add(1)
	go func() {
		defer wg.Done()
		client, err := pl.Accept()
		if err != nil {
			close(req)
			return
		}
		track(client)
		server, err := net.Dial("tcp", target)
		if err != nil {
			close(req)
			return
		}
		track(server)
		hdr := make([]byte, 32)
		if _, err := io.ReadFull(client, hdr); err != nil {
			close(req)
			return
		}
		msg := append(hdr, make([]byte, binary.BigEndian.Uint16(hdr[2:]))...)
		if _, err := io.ReadFull(client, msg[32:]); err != nil {
			close(req)
			return
		}
		req <- msg
		server.Write(msg)
		wg.Add(1)
		go func() { defer wg.Done(); io.Copy(client, server); client.Close() }()
		io.Copy(server, client)
		server.Close()
	}()
	t.Cleanup(func() {
		pl.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return pl.Addr().String(), req
}

// A connection request recorded on the wire cannot be used again: not
// alone, and not to smuggle a forged header past admission.
func TestReplayedRequestRejected(t *testing.T) {
	opts := []netio.Option{netio.WithMode(netio.HighThroughput), netio.WithKey(keyA)}
	ln, err := netio.Listen("tcp", "127.0.0.1:0", opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	proxy, recorded := recordingProxy(t, ln.Addr().String())
	c, err := netio.Dial("tcp", proxy, opts...)
	if err != nil {
		t.Fatalf("Dial through the recording proxy: %v", err)
	}
	defer c.Close()
	s := acceptOne(t, ln, hangTimeout)
	echo(t, c, s, []byte("recorded"))
	req := <-recorded
	if len(req) != 32+52 {
		t.Fatalf("recorded a request of %d bytes, want 32 + 52 (a keyed hello)", len(req))
	}

	wantAuthReject(t, ln.Addr().String(), req)
	wantAuthReject(t, ln.Addr().String(), append(bytes.Clone(req), forgedAck()...))

	echo(t, c, s, []byte("the recorded connection itself"))
	stillServes(t, ln, opts...)
}

// A dialer with a key does not let a server that cannot prove it holds it
// send anything the provider would parse: a hostile server that answers
// with no proof or a false one, then a forged acknowledgement header,
// fails the Dial, and the process lives on.
func TestKeyedDialerRefusesUnprovenServer(t *testing.T) {
	for _, m := range modes() {
		falseProof := defaultHello(m)
		falseProof[7] = 1
		falseProof = append(falseProof, bytes.Repeat([]byte{0x42}, 16)...)
		for _, c := range []struct {
			name   string
			accept []byte
		}{
			{"no proof", defaultHello(m)},
			{"false proof", falseProof},
		} {
			t.Run(m.String()+"/"+c.name, func(t *testing.T) {
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				defer ln.Close()
				served := make(chan error, 1)
				go func() {
					conn, err := ln.Accept()
					if err != nil {
						served <- err
						return
					}
					defer conn.Close()
					hdr := make([]byte, 32)
					if _, err := io.ReadFull(conn, hdr); err != nil {
						served <- err
						return
					}
					req := make([]byte, binary.BigEndian.Uint16(hdr[2:]))
					if _, err := io.ReadFull(conn, req); err != nil {
						served <- err
						return
					}
					if len(req) != 52 || req[7]&1 == 0 {
						served <- errors.New("the dialer's request carries no key")
						return
					}
					// The answer and the forged header in one write: both
					// are in the socket before the dialer looks.
					conn.Write(append(tcpCMHeader(tcpCMConnResp, c.accept), forgedAck()...))
					conn.SetReadDeadline(time.Now().Add(hangTimeout))
					io.Copy(io.Discard, conn) // until the dialer lets go
					served <- nil
				}()
				_, err = netio.Dial("tcp", ln.Addr().String(), netio.WithMode(m), netio.WithKey(keyA))
				wantRejected(t, "Dial", err)
				if err := <-served; err != nil {
					t.Fatal(err)
				}
				nl, err := netio.Listen("tcp", "127.0.0.1:0", netio.WithMode(m), netio.WithKey(keyA))
				if err != nil {
					t.Fatal(err)
				}
				defer nl.Close()
				stillServes(t, nl, netio.WithMode(m), netio.WithKey(keyA))
			})
		}
	}
}
