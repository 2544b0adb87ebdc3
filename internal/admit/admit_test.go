package admit

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/netio-go/netio/internal/wire"
)

var (
	testKey   = bytes.Repeat([]byte{0x5a}, 32)
	otherKey  = bytes.Repeat([]byte{0xa5}, 32)
	testHello = wire.Hello{Version: wire.ProtocolLevel, Mode: 1, Role: wire.RoleConn, Window: 8, BufferSize: 1 << 20, MaxMessage: 64 << 20}
	testNow   = time.Unix(1_700_000_000, 0)
)

func testGate(key []byte) *Checker {
	return &Checker{Key: key, Seen: NewReplayCache(ReplayCacheSize)}
}

func TestAuthRequestLayout(t *testing.T) {
	data, auth := SealRequest(testKey, testHello, testNow)
	if len(data) != wire.AuthRequestSize || len(data) > 55 {
		t.Fatalf("keyed request of %d bytes, want %d (and at most the 55 of verbs)", len(data), wire.AuthRequestSize)
	}
	h, err := wire.ParseHello(data)
	if err != nil {
		t.Fatal(err)
	}
	want := testHello
	want.Flags = wire.FlagKeyed
	if diff := cmp.Diff(want, h, cmp.AllowUnexported(wire.Hello{})); diff != "" {
		t.Fatalf("hello of a keyed request (-want +got):\n%s", diff)
	}
	if !bytes.Equal(auth[:], data[wire.HelloSize:]) {
		t.Fatalf("trailer %x, request ends with %x", auth, data[wire.HelloSize:])
	}
	// Without a key the request is the hello of before keys, byte for byte.
	plain, _ := SealRequest(nil, testHello, testNow)
	if !bytes.Equal(plain, testHello.Marshal()) || len(plain) != wire.HelloSize || plain[7] != 0 {
		t.Fatalf("keyless request %x, want the plain 24-byte hello %x", plain, testHello.Marshal())
	}
	// Two requests at the same instant differ in their nonce.
	again, _ := SealRequest(testKey, testHello, testNow)
	if bytes.Equal(again, data) {
		t.Fatal("two requests at the same time are identical: no nonce")
	}
}

func TestAuthRequestCheck(t *testing.T) {
	data, auth := SealRequest(testKey, testHello, testNow)
	got, err := testGate(testKey).Check(data, testNow)
	if err != nil {
		t.Fatalf("valid request: %v", err)
	}
	if got != auth {
		t.Fatalf("check returned trailer %x, want %x", got, auth)
	}

	tampered := func(i int) []byte {
		b := bytes.Clone(data)
		b[i] ^= 1
		return b
	}
	plain, _ := SealRequest(nil, testHello, testNow)
	for _, c := range []struct {
		name string
		key  []byte // the listener's
		data []byte
		now  time.Time
	}{
		{"wrong key", otherKey, data, testNow},
		{"no key sent", testKey, plain, testNow},
		{"key sent to a keyless listener", nil, data, testNow},
		{"mode changed", testKey, tampered(5), testNow},
		{"window changed", testKey, tampered(8), testNow},
		{"time changed", testKey, tampered(wire.HelloSize), testNow},
		{"nonce changed", testKey, tampered(wire.HelloSize + wire.AuthTimeSize), testNow},
		{"mac changed", testKey, tampered(wire.AuthRequestSize - 1), testNow},
		{"truncated", testKey, data[:wire.AuthRequestSize-1], testNow},
		{"too old", testKey, data, testNow.Add(Window + time.Millisecond)},
		{"from the future", testKey, data, testNow.Add(-Window - time.Millisecond)},
	} {
		if _, err := testGate(c.key).Check(c.data, c.now); !errors.Is(err, ErrAdmission) {
			t.Errorf("%s: check = %v, want a refusal", c.name, err)
		}
	}
	for _, d := range []time.Duration{-Window, Window} {
		if _, err := testGate(testKey).Check(data, testNow.Add(d)); err != nil {
			t.Errorf("request %v off the listener's clock: %v, want admitted", d, err)
		}
	}
	if _, err := testGate(nil).Check(plain, testNow); err != nil {
		t.Errorf("keyless request to a keyless listener: %v", err)
	}
}

func TestAuthReplay(t *testing.T) {
	g := testGate(testKey)
	data, _ := SealRequest(testKey, testHello, testNow)
	if _, err := g.Check(data, testNow); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Check(data, testNow.Add(time.Second)); !errors.Is(err, ErrAdmission) {
		t.Fatalf("replayed request: %v, want a refusal", err)
	}
	// Another listener of the same process shares the record.
	g2 := &Checker{Key: testKey, Seen: g.Seen}
	if _, err := g2.Check(data, testNow.Add(time.Second)); !errors.Is(err, ErrAdmission) {
		t.Fatalf("request replayed to another listener: %v, want a refusal", err)
	}
	// A fresh request of the same dialer is fine.
	fresh, _ := SealRequest(testKey, testHello, testNow.Add(time.Second))
	if _, err := g.Check(fresh, testNow.Add(time.Second)); err != nil {
		t.Fatalf("fresh request: %v", err)
	}
}

// The replay record stays bounded, and what it has to forget early is
// refused rather than let in again.
func TestReplayCacheBound(t *testing.T) {
	const limit = 4
	c := NewReplayCache(limit)
	now := testNow.UnixNano()
	mac := func(i byte) [wire.AuthMACSize]byte { return [wire.AuthMACSize]byte{i} }
	for i := byte(0); i < limit; i++ {
		if !c.Add(mac(i), now+int64(i), now) {
			t.Fatalf("entry %d refused", i)
		}
	}
	// Full: a newer one evicts the oldest, which can then not come back.
	if !c.Add(mac(10), now+10, now) {
		t.Fatal("newer entry refused when full")
	}
	if len(c.byAge) != limit || len(c.macs) != limit {
		t.Fatalf("%d entries (%d macs), limit %d", len(c.byAge), len(c.macs), limit)
	}
	if c.Add(mac(0), now, now) {
		t.Fatal("the evicted entry was let in again")
	}
	// Older than all kept when full: refused, nothing evicted.
	if c.Add(mac(20), now+1, now) {
		t.Fatal("an entry older than all kept was taken when full")
	}
	for _, i := range []byte{1, 2, 3, 10} {
		if c.Add(mac(i), now+int64(i), now) {
			t.Fatalf("entry %d let in twice", i)
		}
	}
	// Once the window has passed they are all forgotten.
	later := now + int64(Window) + 100
	if !c.Add(mac(30), later, later) {
		t.Fatal("fresh entry refused after the window")
	}
	if len(c.byAge) != 1 || len(c.macs) != 1 {
		t.Fatalf("%d entries after the window passed, want 1", len(c.byAge))
	}
}
