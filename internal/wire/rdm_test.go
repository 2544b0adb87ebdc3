package wire

import (
	"bytes"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRDMHelloRoundTrip(t *testing.T) {
	for _, m := range []RDMHello{
		{Kind: RDMRequest, From: 1, Bell: 100, NetNS: 4026531840, Proc: 0x1234567890abcdef, Addr: "fi_shm://7227:0:0", Data: []byte("hello")},
		{Kind: RDMAccept, From: RDMMaxID, To: 9, Bell: RDMNoBell, Data: []byte{}},
		{Kind: RDMAccept, From: 5, To: 9, Proc: 7, Addr: "fi_shm://7227:0:3", Data: []byte("sealed")},
		{Kind: RDMReject, From: 3, To: 4, Data: []byte{0xff}},
	} {
		b, err := m.Marshal(make([]byte, RDMHelloSize))
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseRDMHello(b)
		if err != nil {
			t.Fatalf("%+v: %v", m, err)
		}
		if diff := cmp.Diff(m, got); diff != "" {
			t.Fatalf("round trip (-sent +read):\n%s", diff)
		}
	}
}

func TestRDMHelloRefused(t *testing.T) {
	valid, err := (&RDMHello{Kind: RDMRequest, From: 1, Addr: "a", Data: []byte("x")}).Marshal(make([]byte, RDMHelloSize))
	if err != nil {
		t.Fatal(err)
	}
	with := func(i int, v byte) []byte { b := bytes.Clone(valid); b[i] = v; return b }
	for name, b := range map[string][]byte{
		"empty":            nil,
		"short":            valid[:rdmHelloHeader-1],
		"magic":            with(0, 'X'),
		"kind-0":           with(4, 0),
		"kind-4":           with(4, RDMReject+1),
		"from-0":           append(with(5, 0)[:5], append([]byte{0, 0, 0, 0}, valid[9:]...)...),
		"from-too-large":   append(bytes.Clone(valid[:5]), append([]byte{0, 0, 0, 0x40}, valid[9:]...)...),
		"request-to-link":  with(9, 1),
		"address-overruns": with(33, 200),
		"request-no-addr":  append(with(33, 0)[:33], 0, 0),
		"reject-with-addr": with(4, RDMReject),
	} {
		if _, err := ParseRDMHello(b); !errors.Is(err, ErrProtocol) {
			t.Errorf("%s: %v, want ErrProtocol", name, err)
		}
	}
	if _, err := (&RDMHello{Kind: RDMAccept, From: 1, Data: make([]byte, RDMHelloSize)}).Marshal(make([]byte, 2*RDMHelloSize)); err == nil {
		t.Error("a set-up message over RDMHelloSize was written")
	}
}

// FuzzParseRDMHello: whatever the bytes, the decoder returns a message that
// marshals back to them, or ErrProtocol; it never panics.
func FuzzParseRDMHello(f *testing.F) {
	b, _ := (&RDMHello{Kind: RDMRequest, From: 1, Addr: "fi_shm://1:0:0", Data: []byte("hello")}).Marshal(make([]byte, RDMHelloSize))
	f.Add(b)
	b, _ = (&RDMHello{Kind: RDMAccept, From: 2, To: 1, Addr: "fi_shm://1:0:4", Data: []byte("sealed")}).Marshal(make([]byte, RDMHelloSize))
	f.Add(b)
	f.Add([]byte("NRDM"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseRDMHello(b)
		if err != nil {
			if !errors.Is(err, ErrProtocol) {
				t.Fatalf("%v, not ErrProtocol", err)
			}
			return
		}
		if len(b) > RDMHelloSize {
			return // read, though no netio peer writes one
		}
		again, err := m.Marshal(make([]byte, RDMHelloSize))
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("read %+v from %x; it writes back as %x (%v)", m, b, again, err)
		}
	})
}
