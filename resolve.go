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
