package netio_test

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"slices"
	"testing"

	"github.com/netio-go/netio"
)

// A domain that does not exist fails Listen and Dial with the provider's
// domains listed; naming lo, tcp's loopback domain, works both ways, and a
// listener on every address with it listens on lo's address.
func TestDomain(t *testing.T) {
	for op, f := range map[string]func() error{
		"listen": func() error {
			ln, err := netio.Listen("tcp", "127.0.0.1:0", netio.WithDomain("no-such-nic"))
			if err == nil {
				ln.Close()
			}
			return err
		},
		"dial": func() error {
			c, err := netio.Dial("tcp", "127.0.0.1:1", netio.WithDomain("no-such-nic"))
			if err == nil {
				c.Close()
			}
			return err
		},
	} {
		err := f()
		var op1 *net.OpError
		var de *netio.UnknownDomainError
		if !errors.As(err, &op1) || op1.Op != op || !errors.As(err, &de) {
			t.Fatalf("%s on domain no-such-nic: %v, want a *net.OpError wrapping an *UnknownDomainError", op, err)
		}
		if de.Provider != "tcp" || de.Domain != "no-such-nic" || !slices.Contains(de.Available, "lo") {
			t.Errorf("%s: %+v, want provider tcp, domain no-such-nic, lo among the available", op, de)
		}
	}

	ln, err := netio.Listen("tcp", ":0", netio.WithDomain("lo"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if a := ln.Addr().(*netio.Addr).AddrPort.Addr(); !a.IsLoopback() {
		t.Errorf("listener on every address with domain lo: bound to %v, want lo's address", a)
	}
	accepted := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			_, err = io.Copy(c, c)
			c.Close()
		}
		accepted <- err
	}()
	c, err := netio.Dial("tcp", ln.Addr().String(), netio.WithDomain("lo"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("echo: %q, %v", buf, err)
	}
	c.Close()
	if err := <-accepted; err != nil {
		t.Fatal(err)
	}
}

// A Dial with a domain connects from the domain's address, even to an
// address another domain (lo) would reach.
func TestDomainDialsFromIt(t *testing.T) {
	name, from := "", netip.Addr{}
	ifaces, _ := net.Interfaces()
	for _, ifc := range ifaces {
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Is4() && !p.Addr().IsLoopback() && ifc.Flags&net.FlagUp != 0 && from == (netip.Addr{}) {
				name, from = ifc.Name, p.Addr()
			}
		}
	}
	if name == "" {
		t.Skip("no interface with an IPv4 address besides loopback")
	}
	ln, err := netio.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			io.Copy(io.Discard, c)
			c.Close()
		}
	}()
	to := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), ln.Addr().(*netio.Addr).AddrPort.Port())
	c, err := netio.Dial("tcp", to.String(), netio.WithDomain(name))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := c.LocalAddr().(*netio.Addr).AddrPort.Addr(); got != from {
		t.Errorf("dial %v on domain %s: from %v, want %v", to, name, got, from)
	}
}
