package netio_test

import (
	"cmp"
	"os"
)

// testNetwork is the provider of the tests that hold on every provider
// (pair's connections, the net.Conn conformance suite, publish/subscribe):
// $NETIO_TEST_PROVIDER, or tcp. make test runs a subset of them on
// sockets with it; the others, which reach into tcp (raw sockets, forged
// headers), always run on tcp.
var testNetwork = cmp.Or(os.Getenv("NETIO_TEST_PROVIDER"), "tcp")
