package netio_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/netio-go/netio"
)

// A port is a decimal number from 0 to 65535: anything else fails before
// libfabric sees it (which would take 70000 as 4464), with the net
// package's "invalid port" in a *net.OpError.
func TestInvalidPort(t *testing.T) {
	for _, port := range []string{"70000", "65536", "99999", "-1", "+80", "http", "5000x", "0x10", "1e3", "18446744073709551617"} {
		addr := "127.0.0.1:" + port
		for op, f := range map[string]func() error{
			"listen": func() error {
				ln, err := netio.Listen("tcp", addr)
				if err == nil {
					ln.Close()
				}
				return err
			},
			"dial": func() error {
				c, err := netio.Dial("tcp", addr)
				if err == nil {
					c.Close()
				}
				return err
			},
		} {
			err := f()
			var op1 *net.OpError
			var ae *net.AddrError
			if !errors.As(err, &op1) || op1.Op != op || !errors.As(err, &ae) || ae.Err != "invalid port" || ae.Addr != port {
				t.Errorf("%s %s: %v, want a *net.OpError wrapping a *net.AddrError: invalid port", op, addr, err)
				continue
			}
			if want := op + " tcp " + addr + ": address " + port + ": invalid port"; err.Error() != want {
				t.Errorf("%s %s: %q, want %q", op, addr, err, want)
			}
		}
	}
}

// The edges of the port range are accepted.
func TestValidPortEdges(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:0", "127.0.0.1:", "127.0.0.1:00000"} {
		ln, err := netio.Listen("tcp", addr)
		if err != nil {
			t.Errorf("listen %s: %v", addr, err)
			continue
		}
		ln.Close()
	}
	// Nothing listens on 65535 (or the dial happens to succeed): either
	// way the port was taken as it is, not refused as invalid.
	c, err := netio.Dial("tcp", "127.0.0.1:65535")
	if err == nil {
		c.Close()
	} else if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("dial 127.0.0.1:65535: %v, want connection refused", err)
	}
}

// A host that does not resolve is the net package's *net.DNSError with
// IsNotFound, not libfabric's "No data available".
func TestNoSuchHost(t *testing.T) {
	const host = "no-such-host.invalid" // RFC 6761: never resolves
	for op, f := range map[string]func() error{
		"dial": func() error {
			_, err := netio.DialContext(context.Background(), "tcp", host+":5000")
			return err
		},
		"listen": func() error {
			_, err := netio.Listen("tcp", host+":0")
			return err
		},
	} {
		err := f()
		var oe *net.OpError
		var dnsErr *net.DNSError
		if !errors.As(err, &oe) || oe.Op != op || !errors.As(err, &dnsErr) {
			t.Errorf("%s %s: %v, want a *net.OpError wrapping a *net.DNSError", op, host, err)
			continue
		}
		if !dnsErr.IsNotFound || dnsErr.Name != host || !strings.HasSuffix(err.Error(), "no such host") {
			t.Errorf("%s %s: %q (%+v), want no such host", op, host, err, *dnsErr)
		}
	}
}

// An unknown provider is named as such, with the providers netio can use.
func TestUnknownProvider(t *testing.T) {
	for op, f := range map[string]func() error{
		"dial": func() error {
			_, err := netio.Dial("no-such-provider", "127.0.0.1:5000")
			return err
		},
		"listen": func() error {
			_, err := netio.Listen("no-such-provider", "127.0.0.1:0")
			return err
		},
	} {
		err := f()
		var oe *net.OpError
		var up *netio.UnknownProviderError
		if !errors.As(err, &oe) || oe.Op != op || oe.Net != "no-such-provider" || !errors.As(err, &up) {
			t.Errorf("%s: %v, want a *net.OpError wrapping an *UnknownProviderError", op, err)
			continue
		}
		if up.Provider != "no-such-provider" || !strings.Contains(err.Error(), `unknown provider "no-such-provider" (available: `) {
			t.Errorf("%s: %q", op, err)
		}
		found := false
		for _, p := range up.Available {
			found = found || p == "tcp"
		}
		if !found {
			t.Errorf("%s: available %q, want tcp among them", op, up.Available)
		}
	}
}

func TestUnknownProviderErrorText(t *testing.T) {
	for _, tt := range []struct {
		err  netio.UnknownProviderError
		want string
	}{
		{netio.UnknownProviderError{Provider: "x", Available: []string{"sockets", "tcp"}}, `unknown provider "x" (available: sockets, tcp)`},
		{netio.UnknownProviderError{Provider: "x"}, `unknown provider "x" (available: none)`},
	} {
		if diff := cmp.Diff(tt.want, tt.err.Error()); diff != "" {
			t.Errorf("Error() (-want +got):\n%s", diff)
		}
	}
}
