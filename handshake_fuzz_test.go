package netio

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/netio-go/netio/internal/wire"
)

// FuzzHello holds the handshake's decoder to its contract, whatever the
// private data of a connection request or of an accept holds: parseHello
// never panics, refuses with ErrProtocol what it does not validate, and
// what it accepts is within every bound the links size themselves by and
// survives marshal and parse again unchanged; an acceptor (screen) lets
// through only a hello that parsed, is in a mode it takes and of the role
// it serves, and is closed to everything once closed.
func FuzzHello(f *testing.F) {
	addSeeds(f, helloSeeds())
	f.Fuzz(func(t *testing.T, b []byte) { checkHello(t, b) })
}

// screens are the acceptors a hello meets: a Listener in either mode, a
// Publisher (either mode, subscribers only), and a closed one.
var screens = []*acceptor{
	{mode: LowLatency, role: wire.RoleConn},
	{mode: HighThroughput, role: wire.RoleConn},
	{mode: LowLatency, anyMode: true, role: wire.RoleSubscriber},
	closedAcceptor(),
}

func closedAcceptor() *acceptor {
	a := &acceptor{mode: HighThroughput, role: wire.RoleConn}
	a.closed.Store(true)
	return a
}

// checkHello checks b against parseHello's and screen's contracts and
// returns parseHello's error.
func checkHello(t *testing.T, b []byte) error {
	h, err := wire.ParseHello(b)
	if err != nil {
		if !errors.Is(err, ErrProtocol) {
			t.Fatalf("parseHello(%x): %v, not ErrProtocol", b, err)
		}
	} else {
		switch {
		case len(b) < wire.HelloSize || string(b[:len("NTIO")]) != "NTIO":
			t.Fatalf("parseHello accepted %x: not a netio hello", b)
		case h.Version != wire.ProtocolLevel:
			t.Fatalf("parseHello accepted protocol %d", h.Version)
		case h.Window < minWindow || h.Window > maxWindow:
			t.Fatalf("parseHello accepted a window of %d", h.Window)
		case h.BufferSize < minBufferSize || h.BufferSize > maxBufferSize:
			t.Fatalf("parseHello accepted a buffer size of %d", h.BufferSize)
		case Mode(h.Mode) > HighThroughput:
			t.Fatalf("parseHello accepted mode %d", h.Mode)
		case h.Role > wire.RolePublisher:
			t.Fatalf("parseHello accepted role %d", h.Role)
		case h.MaxMessage == 0:
			t.Fatalf("parseHello accepted a peer that takes no messages")
		}
		// What is accepted is what the bytes say: the sizes a link commits
		// memory by come from the hello, never from elsewhere.
		if h.Window != binary.LittleEndian.Uint32(b[8:]) || h.BufferSize != binary.LittleEndian.Uint32(b[12:]) || h.MaxMessage != binary.LittleEndian.Uint64(b[16:]) {
			t.Fatalf("parseHello(%x) = %+v: not the bytes' sizes", b, h)
		}
		again, err := wire.ParseHello(h.Marshal())
		if err != nil {
			t.Fatalf("hello %+v, marshalled and parsed again: %v", h, err)
		}
		if !sameHello(h, again) {
			t.Fatalf("hello %+v, marshalled and parsed again: %+v", h, again)
		}
	}
	for _, a := range screens {
		got, reject := a.screen(b)
		switch {
		case reject == nil && (err != nil || a.closed.Load()):
			t.Fatalf("acceptor %+v let through %x (parseHello: %v)", a, b, err)
		case reject == nil && Mode(got.Mode) != a.mode && !a.anyMode:
			t.Fatalf("acceptor in %v mode let through a %v hello", a.mode, got.Mode)
		case reject == nil && got.Role != a.role:
			t.Fatalf("acceptor for a %v let through a %v", a.role, got.Role)
		case reject == nil && !sameHello(got, h):
			t.Fatalf("acceptor let through %+v, parseHello says %+v", got, h)
		case reject == nil:
		case err != nil || a.closed.Load():
			if string(reject) != wire.RejectMarker {
				t.Fatalf("acceptor %+v rejected %x with %q, want %q", a, b, reject, wire.RejectMarker)
			}
		case !strings.HasPrefix(string(reject), wire.RejectMarker):
			t.Fatalf("acceptor rejected with %q, not a netio reject marker", reject)
		}
	}
	return err
}

// sameHello reports whether a and b state the same: what the peer is and
// what it posts (fields a hello may carry besides, such as an
// authenticator, are not compared).
func sameHello(a, b wire.Hello) bool {
	return a.Version == b.Version && a.Mode == b.Mode && a.Role == b.Role && a.Window == b.Window && a.BufferSize == b.BufferSize && a.MaxMessage == b.MaxMessage
}

// helloOf marshals h and then applies edit to the bytes.
func helloOf(h wire.Hello, edit func(b []byte)) []byte {
	b := h.Marshal()
	if edit != nil {
		edit(b)
	}
	return b
}

func helloSeeds() []fuzzSeed {
	ll := wire.Hello{Version: wire.ProtocolLevel, Mode: uint8(LowLatency), Role: wire.RoleConn, Window: DefaultWindow, BufferSize: DefaultBufferSize, MaxMessage: DefaultMaxMessageSize}
	ht := wire.Hello{Version: wire.ProtocolLevel, Mode: uint8(HighThroughput), Role: wire.RoleConn, Window: DefaultPages, BufferSize: DefaultPageSize, MaxMessage: DefaultMaxMessageSize}
	sub := ll
	sub.Role = wire.RoleSubscriber
	pub := wire.Hello{Version: wire.ProtocolLevel, Mode: uint8(HighThroughput), Role: wire.RolePublisher, Window: minWindow, BufferSize: minBufferSize, MaxMessage: 1}
	edge := wire.Hello{Version: wire.ProtocolLevel, Mode: uint8(LowLatency), Window: maxWindow, BufferSize: maxBufferSize, MaxMessage: 1<<64 - 1}
	with := func(h wire.Hello, edit func(*wire.Hello)) []byte { edit(&h); return h.Marshal() }
	bad := ErrProtocol
	return []fuzzSeed{
		{"lowlatency", ll.Marshal(), nil, 0},
		{"highthroughput", ht.Marshal(), nil, 0},
		{"subscriber", sub.Marshal(), nil, 0},
		{"publisher-smallest", pub.Marshal(), nil, 0},
		{"largest", edge.Marshal(), nil, 0},
		{"trailing-bytes", append(ll.Marshal(), "and more"...), nil, 0},
		{"reserved-byte-set", helloOf(ll, func(b []byte) { b[7] = 0xff }), nil, 0},
		{"empty", nil, bad, 0},
		{"magic-only", []byte("NTIO"), bad, 0},
		{"one-short", ll.Marshal()[:wire.HelloSize-1], bad, 0},
		{"wrong-magic", helloOf(ll, func(b []byte) { b[0] = 'X' }), bad, 0},
		{"http", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), bad, 0},
		{"version-0", with(ll, func(h *wire.Hello) { h.Version = 0 }), bad, 0},
		{"version-1", with(ll, func(h *wire.Hello) { h.Version = 1 }), bad, 0}, // before heartbeats
		{"version-2", with(ll, func(h *wire.Hello) { h.Version = 2 }), bad, 0}, // before packed LowLatency pages
		{"version-4", with(ll, func(h *wire.Hello) { h.Version = 4 }), bad, 0},
		{"window-below", with(ll, func(h *wire.Hello) { h.Window = minWindow - 1 }), bad, 0},
		{"window-above", with(ll, func(h *wire.Hello) { h.Window = maxWindow + 1 }), bad, 0},
		{"window-huge", with(ll, func(h *wire.Hello) { h.Window = 1<<32 - 1 }), bad, 0},
		{"buffer-below", with(ll, func(h *wire.Hello) { h.BufferSize = minBufferSize - 1 }), bad, 0},
		{"buffer-above", with(ll, func(h *wire.Hello) { h.BufferSize = maxBufferSize + 1 }), bad, 0},
		{"mode-unknown", with(ll, func(h *wire.Hello) { h.Mode = 2 }), bad, 0},
		{"mode-huge", with(ll, func(h *wire.Hello) { h.Mode = 255 }), bad, 0},
		{"role-unknown", with(ll, func(h *wire.Hello) { h.Role = wire.RolePublisher + 1 }), bad, 0},
		{"max-message-zero", with(ll, func(h *wire.Hello) { h.MaxMessage = 0 }), bad, 0},
		{"zeros", make([]byte, wire.HelloSize), bad, 0},
		{"reject-marker", []byte(wire.RejectModeMarker + "-and-a-bit-more"), bad, 0},
	}
}

func TestHelloSeeds(t *testing.T) {
	checkSeedCorpus(t, "FuzzHello", helloSeeds(), func(t *testing.T, s fuzzSeed) {
		if err := checkHello(t, s.in); (err == nil) != (s.end == nil) {
			t.Fatalf("parseHello: %v, want %v", err, s.end)
		}
	})
}
