package netio_test

import (
	"cmp"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/netio-go/netio"
)

// testNetwork is the provider of the tests that hold on every provider
// (pair's connections, the net.Conn conformance suite, publish/subscribe):
// $NETIO_TEST_PROVIDER, or tcp. make test runs a subset of them on
// sockets with it; the others, which reach into tcp (raw sockets, forged
// headers), always run on tcp.
var testNetwork = cmp.Or(os.Getenv("NETIO_TEST_PROVIDER"), "tcp")

// testOnRDM is whether testNetwork has reliable-datagram endpoints only
// (shm, tcp;ofi_rxm): addresses are the provider's own, printed by the
// listener, and a process's links to one peer share one endpoint.
var testOnRDM = testNetwork == "shm" || strings.HasSuffix(testNetwork, ";ofi_rxm")

// skipOnRDM skips a test that holds on tcp only, saying why.
func skipOnRDM(t testing.TB, why string) {
	t.Helper()
	if testOnRDM {
		t.Skipf("not on %s: %s", testNetwork, why)
	}
}

// ownConn returns the address and options that gives subscription i of a process
// a connection of its own to a publisher on testNetwork: another address
// of the host on tcp (the publisher listens on 0.0.0.0), the other mode
// on a reliable-datagram provider, where a publisher has one address and
// so this process at most two connections to it.
func ownConn(t testing.TB, p *netio.Publisher, i int) (addr string, opts []netio.Option) {
	t.Helper()
	if testOnRDM {
		if i > 1 {
			t.Fatalf("ownConn %d: at most two connections to one publisher on %s", i, testNetwork)
		}
		return p.Addr().String(), []netio.Option{netio.WithMode(modes()[i])}
	}
	return fmt.Sprintf("127.0.0.%d:%d", i+1, p.Addr().(*netio.Addr).AddrPort.Port()), nil
}

// ownConnListenAddr is where a publisher listens whose subscribers
// ownConn spreads over connections: every address of the host on tcp.
func ownConnListenAddr() string {
	if testOnRDM {
		return "127.0.0.1:0" // a wildcard is refused: it would print as no address to dial
	}
	return "0.0.0.0:0"
}
