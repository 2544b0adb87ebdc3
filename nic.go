package netio

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/netio-go/netio/ofi"
)

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
