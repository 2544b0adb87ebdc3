package netio_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/ofi"
)

// rdmNetworks are the reliable-datagram providers the RDM tests run on,
// with the address each listens on.
var rdmNetworks = []struct{ network, listen string }{
	{"shm", ""},
	{"tcp;ofi_rxm", "127.0.0.1:0"},
}

// forEachRDMNetwork runs f on every RDM provider, skipping those this
// machine's libfabric lacks.
func forEachRDMNetwork(t *testing.T, f func(t *testing.T, network, listen string)) {
	for _, n := range rdmNetworks {
		t.Run(n.network, func(t *testing.T) { f(t, n.network, n.listen) })
	}
}

// rdmListen listens on network, or skips when the provider is absent.
func rdmListen(t testing.TB, network, address string, opts ...netio.Option) *netio.Listener {
	t.Helper()
	ln, err := netio.Listen(network, address, opts...)
	if errors.Is(err, ofi.ENODATA) {
		t.Skipf("provider %s: %v", network, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// rdmPair returns a connection dialed over network to a listener of its
// own, and its accepted end.
func rdmPair(t testing.TB, network, listen string, opts ...netio.Option) (client, server *netio.Conn, ln *netio.Listener) {
	t.Helper()
	ln = rdmListen(t, network, listen, opts...)
	client, err := netio.Dial(network, ln.Addr().String(), opts...)
	if err != nil {
		t.Fatalf("Dial %s: %v", ln.Addr(), err)
	}
	t.Cleanup(func() { client.Close() })
	return client, acceptOne(t, ln, hangTimeout), ln
}

func TestRDMDialListen(t *testing.T) {
	forEachRDMNetwork(t, func(t *testing.T, network, listen string) {
		c, s, ln := rdmPair(t, network, listen)
		addr := ln.Addr().String()
		if !strings.Contains(addr, "://") {
			t.Fatalf("listener address %q is not the provider's", addr)
		}
		if ln.Addr().Network() != network || c.RemoteAddr().String() != addr {
			t.Errorf("listener %s %s, dialer's remote %s", ln.Addr().Network(), addr, c.RemoteAddr())
		}
		if s.RemoteAddr().String() != c.LocalAddr().String() {
			t.Errorf("server sees %s, client is %s", s.RemoteAddr(), c.LocalAddr())
		}
		for _, size := range []int{0, 1, 64, 1000, 4096, 60000, 1 << 20} {
			msg := bytes.Repeat([]byte{byte(size)}, size)
			echo(t, c, s, msg)
			echo(t, s, c, msg)
		}
	})
}
