// Package hosts holds netio's multi-host tests: processes in network
// namespaces joined by veth pairs, as separate machines would be, whose
// links are cut (ip link set down) and impaired (tc netem delay and loss,
// or iptables loss where the kernel has no netem). They are behind the
// build tag hosts and run with `make test-hosts`; they need root and
// iproute2, and skip with a message where namespaces cannot be made.
//
// The package has no code of its own: it is the tests.
package hosts
