package netio

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/netio-go/netio/internal/admit"
	"github.com/netio-go/netio/internal/wire"
)

// The authenticator's encoding and checks, without libfabric.

var (
	testKey   = bytes.Repeat([]byte{0x5a}, 32)
	otherKey  = bytes.Repeat([]byte{0xa5}, 32)
	testHello = wire.Hello{Version: wire.ProtocolLevel, Mode: uint8(HighThroughput), Role: wire.RoleConn, Window: 8, BufferSize: 1 << 20, MaxMessage: 64 << 20}
	testNow   = time.Unix(1_700_000_000, 0)
)

func TestAuthAccept(t *testing.T) {
	_, auth := admit.SealRequest(testKey, testHello, testNow)
	listener := testHello
	listener.Window = 16
	acc := admit.SealAccept(testKey, listener, auth)
	if len(acc) != wire.AuthAcceptSize || len(acc) > 55 {
		t.Fatalf("keyed accept of %d bytes, want %d", len(acc), wire.AuthAcceptSize)
	}
	if err := openAccept(testKey, acc, auth); err != nil {
		t.Fatalf("valid accept: %v", err)
	}
	h, err := wire.ParseHello(acc)
	if err != nil || h.Window != 16 || h.Flags != wire.FlagKeyed {
		t.Fatalf("accept's hello %+v, %v", h, err)
	}
	_, otherAuth := admit.SealRequest(testKey, testHello, testNow)
	flipped := bytes.Clone(acc)
	flipped[12] ^= 1
	plain := admit.SealAccept(nil, listener, auth)
	keyed := listener
	keyed.Flags = wire.FlagKeyed
	for _, c := range []struct {
		name string
		key  []byte
		data []byte
		auth [wire.AuthTrailer]byte
	}{
		{"wrong key", otherKey, acc, auth},
		{"another request's accept", testKey, acc, otherAuth},
		{"changed hello", testKey, flipped, auth},
		{"no proof", testKey, plain, auth},
		{"truncated", testKey, acc[:wire.AuthAcceptSize-1], auth},
		{"request's mac as proof", testKey, append(keyed.Marshal(), auth[wire.AuthTimeSize+wire.AuthNonceSize:]...), auth},
	} {
		if err := openAccept(c.key, c.data, c.auth); !errors.Is(err, ErrRejected) {
			t.Errorf("%s: %v, want ErrRejected", c.name, err)
		}
	}
	if err := openAccept(nil, plain, [wire.AuthTrailer]byte{}); err != nil {
		t.Errorf("keyless dialer: %v", err)
	}
}

func TestKeyOption(t *testing.T) {
	for _, c := range []struct {
		n  int
		ok bool
	}{{0, true}, {1, false}, {15, false}, {16, true}, {32, true}, {64, true}, {65, false}} {
		key := make([]byte, c.n)
		_, err := buildConfig([]Option{WithKey(key)})
		if ok := err == nil; ok != c.ok || (!ok && !errors.Is(err, ErrInvalidConfig)) {
			t.Errorf("WithKey(%d bytes): %v", c.n, err)
		}
		_, err = buildConfig([]Option{WithConfig(Config{Key: key})})
		if ok := err == nil; ok != c.ok || (!ok && !errors.Is(err, ErrInvalidConfig)) {
			t.Errorf("Config.Key of %d bytes: %v", c.n, err)
		}
	}
	key := bytes.Clone(testKey)
	c, err := buildConfig([]Option{WithKey(key)})
	if err != nil {
		t.Fatal(err)
	}
	key[0] ^= 0xff
	if !bytes.Equal(c.Key, testKey) {
		t.Fatal("WithKey kept the caller's slice: changing it changed the key")
	}
}
