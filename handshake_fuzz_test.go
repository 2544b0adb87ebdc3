package netio

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"
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
	{mode: LowLatency, role: roleConn},
	{mode: HighThroughput, role: roleConn},
	{mode: LowLatency, anyMode: true, role: roleSubscriber},
	closedAcceptor(),
}

func closedAcceptor() *acceptor {
	a := &acceptor{mode: HighThroughput, role: roleConn}
	a.closed.Store(true)
	return a
}

// checkHello checks b against parseHello's and screen's contracts and
// returns parseHello's error.
func checkHello(t *testing.T, b []byte) error {
	h, err := parseHello(b)
	if err != nil {
		if !errors.Is(err, ErrProtocol) {
			t.Fatalf("parseHello(%x): %v, not ErrProtocol", b, err)
		}
	} else {
		switch {
		case len(b) < helloSize || string(b[:len(helloMagic)]) != helloMagic:
			t.Fatalf("parseHello accepted %x: not a netio hello", b)
		case h.version != protocolLevel:
			t.Fatalf("parseHello accepted protocol %d", h.version)
		case h.window < minWindow || h.window > maxWindow:
			t.Fatalf("parseHello accepted a window of %d", h.window)
		case h.bufferSize < minBufferSize || h.bufferSize > maxBufferSize:
			t.Fatalf("parseHello accepted a buffer size of %d", h.bufferSize)
		case h.mode > HighThroughput:
			t.Fatalf("parseHello accepted mode %d", h.mode)
		case h.role > rolePublisher:
			t.Fatalf("parseHello accepted role %d", h.role)
		case h.maxMessage == 0:
			t.Fatalf("parseHello accepted a peer that takes no messages")
		}
		// What is accepted is what the bytes say: the sizes a link commits
		// memory by come from the hello, never from elsewhere.
		if h.window != binary.LittleEndian.Uint32(b[8:]) || h.bufferSize != binary.LittleEndian.Uint32(b[12:]) || h.maxMessage != binary.LittleEndian.Uint64(b[16:]) {
			t.Fatalf("parseHello(%x) = %+v: not the bytes' sizes", b, h)
		}
		again, err := parseHello(h.marshal())
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
		case reject == nil && got.mode != a.mode && !a.anyMode:
			t.Fatalf("acceptor in %v mode let through a %v hello", a.mode, got.mode)
		case reject == nil && got.role != a.role:
			t.Fatalf("acceptor for a %v let through a %v", a.role, got.role)
		case reject == nil && !sameHello(got, h):
			t.Fatalf("acceptor let through %+v, parseHello says %+v", got, h)
		case reject == nil:
		case err != nil || a.closed.Load():
			if string(reject) != rejectMarker {
				t.Fatalf("acceptor %+v rejected %x with %q, want %q", a, b, reject, rejectMarker)
			}
		case !strings.HasPrefix(string(reject), rejectMarker):
			t.Fatalf("acceptor rejected with %q, not a netio reject marker", reject)
		}
	}
	return err
}

// sameHello reports whether a and b state the same: what the peer is and
// what it posts (fields a hello may carry besides, such as an
// authenticator, are not compared).
func sameHello(a, b hello) bool {
	return a.version == b.version && a.mode == b.mode && a.role == b.role && a.window == b.window && a.bufferSize == b.bufferSize && a.maxMessage == b.maxMessage
}

// helloOf marshals h and then applies edit to the bytes.
func helloOf(h hello, edit func(b []byte)) []byte {
	b := h.marshal()
	if edit != nil {
		edit(b)
	}
	return b
}

func helloSeeds() []fuzzSeed {
	ll := hello{version: protocolLevel, mode: LowLatency, role: roleConn, window: DefaultWindow, bufferSize: DefaultBufferSize, maxMessage: DefaultMaxMessageSize}
	ht := hello{version: protocolLevel, mode: HighThroughput, role: roleConn, window: DefaultPages, bufferSize: DefaultPageSize, maxMessage: DefaultMaxMessageSize}
	sub := ll
	sub.role = roleSubscriber
	pub := hello{version: protocolLevel, mode: HighThroughput, role: rolePublisher, window: minWindow, bufferSize: minBufferSize, maxMessage: 1}
	edge := hello{version: protocolLevel, mode: LowLatency, window: maxWindow, bufferSize: maxBufferSize, maxMessage: 1<<64 - 1}
	with := func(h hello, edit func(*hello)) []byte { edit(&h); return h.marshal() }
	bad := ErrProtocol
	return []fuzzSeed{
		{"lowlatency", ll.marshal(), nil, 0},
		{"highthroughput", ht.marshal(), nil, 0},
		{"subscriber", sub.marshal(), nil, 0},
		{"publisher-smallest", pub.marshal(), nil, 0},
		{"largest", edge.marshal(), nil, 0},
		{"trailing-bytes", append(ll.marshal(), "and more"...), nil, 0},
		{"reserved-byte-set", helloOf(ll, func(b []byte) { b[7] = 0xff }), nil, 0},
		{"empty", nil, bad, 0},
		{"magic-only", []byte(helloMagic), bad, 0},
		{"one-short", ll.marshal()[:helloSize-1], bad, 0},
		{"wrong-magic", helloOf(ll, func(b []byte) { b[0] = 'X' }), bad, 0},
		{"http", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), bad, 0},
		{"version-0", with(ll, func(h *hello) { h.version = 0 }), bad, 0},
		{"version-1", with(ll, func(h *hello) { h.version = 1 }), bad, 0}, // before heartbeats
		{"version-2", with(ll, func(h *hello) { h.version = 2 }), bad, 0}, // before packed LowLatency pages
		{"version-4", with(ll, func(h *hello) { h.version = 4 }), bad, 0},
		{"window-below", with(ll, func(h *hello) { h.window = minWindow - 1 }), bad, 0},
		{"window-above", with(ll, func(h *hello) { h.window = maxWindow + 1 }), bad, 0},
		{"window-huge", with(ll, func(h *hello) { h.window = 1<<32 - 1 }), bad, 0},
		{"buffer-below", with(ll, func(h *hello) { h.bufferSize = minBufferSize - 1 }), bad, 0},
		{"buffer-above", with(ll, func(h *hello) { h.bufferSize = maxBufferSize + 1 }), bad, 0},
		{"mode-unknown", with(ll, func(h *hello) { h.mode = 2 }), bad, 0},
		{"mode-huge", with(ll, func(h *hello) { h.mode = 255 }), bad, 0},
		{"role-unknown", with(ll, func(h *hello) { h.role = rolePublisher + 1 }), bad, 0},
		{"max-message-zero", with(ll, func(h *hello) { h.maxMessage = 0 }), bad, 0},
		{"zeros", make([]byte, helloSize), bad, 0},
		{"reject-marker", []byte(rejectModeMarker + "-and-a-bit-more"), bad, 0},
	}
}

func TestHelloSeeds(t *testing.T) {
	checkSeedCorpus(t, "FuzzHello", helloSeeds(), func(t *testing.T, s fuzzSeed) {
		if err := checkHello(t, s.in); (err == nil) != (s.end == nil) {
			t.Fatalf("parseHello: %v, want %v", err, s.end)
		}
	})
}
