package netio

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/netio-go/netio/ofi"
)

// Addresses: Addr, the address of an endpoint, and how Dial's and Listen's
// address becomes the libfabric entry they use: the port checked, the NIC
// chosen, and, when libfabric finds nothing, why, in the net package's
// words.

// Addr is the address of a netio endpoint: a libfabric provider and an IP
// address and port, or the provider's own form of address (Name). String
// gives what Dial accepts.
type Addr struct {
	// Provider is the libfabric provider, e.g. "tcp" or "verbs".
	Provider string
	// AddrPort is the IP address and port.
	AddrPort netip.AddrPort
	// Name is the address as the provider prints it, for reliable-datagram
	// providers ("fi_shm://7227:0:0", "fi_sockaddr_in://127.0.0.1:5000");
	// empty for connected ones, which use AddrPort.
	Name string
}

// Network returns the provider name, which is what Dial takes as network.
func (a *Addr) Network() string { return a.Provider }

// String returns host:port.
func (a *Addr) String() string {
	if a == nil {
		return "<nil>"
	}
	if a.Name != "" {
		return a.Name
	}
	return a.AddrPort.String()
}

// Checking Dial's and Listen's address, and saying in the net package's
// words why libfabric found nothing for it.
//
// libfabric's fi_getinfo answers "No data available" (FI_ENODATA) whatever
// the cause, an unknown provider or a host that does not resolve, and it
// takes a port as a 16-bit number without complaint, so that 70000
// silently becomes 4464. The port
// is therefore checked before libfabric sees it (checkPort), and when
// fi_getinfo finds nothing the cause is looked for afterwards
// (lookupError), so a working Dial pays for no second lookup.

// UnknownProviderError is the error, wrapped in a *net.OpError, of a Dial
// or Listen whose network names no libfabric provider that netio can use
// on this machine.
type UnknownProviderError struct {
	// Provider is the name asked for.
	Provider string
	// Available are the providers netio could use instead, sorted.
	Available []string
}

// Error names the provider and those available, e.g.
// `unknown provider "x" (available: sockets, tcp)`.
func (e *UnknownProviderError) Error() string {
	avail := "none"
	if len(e.Available) > 0 {
		avail = strings.Join(e.Available, ", ")
	}
	return fmt.Sprintf("unknown provider %q (available: %s)", e.Provider, avail)
}

// checkPort accepts a port as a decimal number from 0 to 65535, or empty
// (port 0), and otherwise returns the net package's error for it.
// Service names ("http") are not accepted: libfabric's providers do not
// all resolve them.
func checkPort(port string) error {
	if port == "" {
		return nil
	}
	n := 0
	for _, c := range []byte(port) {
		if c < '0' || c > '9' {
			return &net.AddrError{Err: "invalid port", Addr: port}
		}
		if n = n*10 + int(c-'0'); n > 65535 {
			return &net.AddrError{Err: "invalid port", Addr: port}
		}
	}
	return nil
}

// lookupTimeout bounds the host lookup of lookupError when the caller's
// context has no earlier deadline.
const lookupTimeout = 5 * time.Second

// lookupError explains err, fi_getinfo's failure for a, in the net
// package's words: the provider is unknown (*UnknownProviderError), the
// host does not resolve (the resolver's *net.DNSError, IsNotFound for a
// name that does not exist). Otherwise, or for another error than
// FI_ENODATA, it returns err.
func (a *args) lookupError(ctx context.Context, err error) error {
	if !errors.Is(err, ofi.ENODATA) {
		return err
	}
	if avail := availableProviders(); !slices.Contains(avail, a.provider) {
		return &UnknownProviderError{Provider: a.provider, Available: avail}
	}
	if _, perr := netip.ParseAddr(a.host); perr != nil {
		ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
		defer cancel()
		if _, lerr := net.DefaultResolver.LookupHost(ctx, a.host); lerr != nil {
			return lerr
		}
	}
	return err
}

// availableProviders lists, sorted, the providers netio can use here: those
// offering the endpoints it needs, less the versions known to busy-poll.
func availableProviders() []string {
	l, err := ofi.GetInfo(ofi.Hints{})
	if err != nil {
		return nil
	}
	defer l.Free()
	var names []string
	for _, i := range l.Entries {
		names = append(names, i.Provider())
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// Choosing the NIC. A host with several NICs has one libfabric domain per
// device (verbs: mlx5_0, mlx5_1; tcp and sockets: one per interface, lo,
// eth0), and fi_getinfo puts first whichever it likes. Config.Domain
// names the one to use; providers do not all filter on the name they are
// given (tcp 1.17 ignores it), so the entries are filtered here.

// WithDomain sets Config.Domain: the libfabric domain (a NIC such as
// mlx5_1, or for tcp and sockets an interface such as eth0) that the
// connections use. `netio info` lists the domains of each provider.
func WithDomain(name string) Option {
	return func(c *Config) error {
		c.Domain = name
		if name == "" {
			return invalid("empty domain name")
		}
		return nil
	}
}

// UnknownDomainError is the error, wrapped in a *net.OpError, of a Dial
// or Listen whose Config.Domain names no domain of the provider.
type UnknownDomainError struct {
	// Provider is the provider asked for; Domain the name asked for.
	Provider, Domain string
	// Available are the provider's domains on this machine, sorted.
	Available []string
}

// Error names the domain and those available, e.g.
// `provider tcp has no domain "mlx5_9" (available: eth0, lo)`.
func (e *UnknownDomainError) Error() string {
	avail := "none"
	if len(e.Available) > 0 {
		avail = strings.Join(e.Available, ", ")
	}
	return fmt.Sprintf("provider %s has no domain %q (available: %s)", e.Provider, e.Domain, avail)
}

// getInfo asks libfabric for the endpoints of a's provider matching h and
// returns them with the entry to use: the first, or with Config.Domain
// the first of that domain. A listener on every address (an unspecified
// host) with a domain listens on the domain's address instead. The
// caller frees the list.
func (a *args) getInfo(ctx context.Context, h ofi.Hints) (*ofi.InfoList, *ofi.Info, error) {
	h.Provider, h.Domain = a.provider, a.cfg.Domain
	infos, err := ofi.GetInfo(h)
	if err != nil && a.cfg.Domain == "" {
		return nil, nil, a.lookupError(ctx, err)
	}
	if err == nil {
		for _, i := range infos.Entries {
			if a.cfg.Domain == "" || i.DomainName() == a.cfg.Domain {
				return infos, i, nil
			}
		}
		infos.Free()
	}
	domains := providerDomains(a.provider)
	addrs, ok := domains[a.cfg.Domain]
	if !ok {
		if len(domains) == 0 && err != nil {
			return nil, nil, a.lookupError(ctx, err)
		}
		names := make([]string, 0, len(domains))
		for d := range domains {
			names = append(names, d)
		}
		slices.Sort(names)
		return nil, nil, &UnknownDomainError{Provider: a.provider, Domain: a.cfg.Domain, Available: names}
	}
	// Ask again from the domain's address, of the family of the host (a
	// name: IPv4): a listener on every address listens on it, a dialer
	// connects from it.
	ip, perr := netip.ParseAddr(a.host)
	if i := slices.IndexFunc(addrs, func(d netip.Addr) bool { return d.Is4() == (perr != nil || ip.Is4()) }); i >= 0 {
		switch {
		case h.Source && perr == nil && ip.IsUnspecified():
			h.Node = addrs[i].String()
		case !h.Source:
			h.SourceAddr = addrs[i]
		}
	}
	if h.Node != a.host || h.SourceAddr.IsValid() {
		if infos, err = ofi.GetInfo(h); err == nil {
			for _, i := range infos.Entries {
				if i.DomainName() == a.cfg.Domain {
					return infos, i, nil
				}
			}
			infos.Free()
		}
	}
	return nil, nil, fmt.Errorf("domain %q of provider %s (addresses %v) does not reach %s", a.cfg.Domain, a.provider, addrs, a.host)
}

// providerDomains lists the domains of provider on this machine, each
// with its addresses.
func providerDomains(provider string) map[string][]netip.Addr {
	l, err := ofi.GetInfo(ofi.Hints{Provider: provider})
	if err != nil {
		return nil
	}
	defer l.Free()
	out := map[string][]netip.Addr{}
	for _, i := range l.Entries {
		addrs := out[i.DomainName()]
		if ap, ok := i.SourceAddr(); ok && ap.Addr().IsValid() {
			addrs = append(addrs, ap.Addr())
		}
		out[i.DomainName()] = addrs
	}
	return out
}
