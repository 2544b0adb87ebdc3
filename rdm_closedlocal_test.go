//go:build linux

package netio_test

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/internal/shmfence"
)

// A Dial or Subscribe to an shm listener or publisher of this process
// that has closed is refused, and does not reach the provider: shm would
// read the closed endpoint's unmapped region (a SIGSEGV inside
// fi_av_insert when a subscriber reconnected to a closed publisher). The
// range is held unreadable here, as a later mapping may leave it, so that
// the crash does not depend on the address layout.
func TestRDMDialClosedLocalShm(t *testing.T) {
	const network = "shm"
	ln := rdmListen(t, network, "")
	addr := ln.Addr().String()
	p, err := netio.ListenPublisher(network, "")
	if err != nil {
		t.Fatal(err)
	}
	pubAddr := p.Addr().String()
	var ranges []shmfence.Range
	for _, a := range []string{addr, pubAddr} {
		r, ok, err := shmfence.Find(a)
		if err != nil || !ok {
			t.Fatalf("no mapping of %s: %v", a, err)
		}
		ranges = append(ranges, r)
	}
	ln.Close()
	p.Close()
	// Nothing else holds the engine: it stops and closes the endpoints.
	eventually(t, "the closed endpoints' regions unmapped", func() bool {
		_, ok1, _ := shmfence.Find(addr)
		_, ok2, _ := shmfence.Find(pubAddr)
		return !ok1 && !ok2
	})
	for _, r := range ranges {
		if release, err := r.Hold(); err == nil {
			defer release()
		} else {
			t.Logf("a closed region's range was taken again (%v): the provider would not crash here", err)
		}
	}
	c, err := netio.Dial(network, addr)
	if err == nil {
		c.Close()
	}
	var oe *net.OpError
	if !errors.Is(err, syscall.ECONNREFUSED) || !errors.As(err, &oe) || oe.Op != "dial" {
		t.Fatalf("Dial to a closed listener of this process: %v, want a dial *net.OpError with ECONNREFUSED", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), hangTimeout)
	defer cancel()
	s, err := netio.Subscribe(ctx, network, pubAddr, []uint64{1})
	if err == nil {
		s.Close()
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("Subscribe to a closed publisher of this process: %v, want ECONNREFUSED", err)
	}
}
