package netio

import "net/netip"

// Addr is the address of a netio endpoint: a libfabric provider and an IP
// address and port. String gives a host:port that Dial accepts.
type Addr struct {
	// Provider is the libfabric provider, e.g. "tcp" or "verbs".
	Provider string
	// AddrPort is the IP address and port.
	AddrPort netip.AddrPort
}

// Network returns the provider name, which is what Dial takes as network.
func (a *Addr) Network() string { return a.Provider }

// String returns host:port.
func (a *Addr) String() string {
	if a == nil {
		return "<nil>"
	}
	return a.AddrPort.String()
}
