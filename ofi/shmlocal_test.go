//go:build cgo && linux

package ofi_test

import (
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/netio-go/netio/internal/shmfence"
	"github.com/netio-go/netio/ofi"
)

// An shm address of this process whose endpoint has closed is refused
// at insertion. shm resolves such a name to the closed endpoint's
// unmapped region: here that range is held unreadable, as a later mapping
// may leave it, so an insert that reached the provider would crash (an
// endpoint's first peer is read at insertion).
func TestRDMShmInsertClosedLocal(t *testing.T) {
	a := openRDM(t, ofi.RDMHints{Provider: "shm"}, 16)
	b := openRDM(t, ofi.RDMHints{Provider: "shm"}, 16)
	c := openRDM(t, ofi.RDMHints{Provider: "shm"}, 16)
	r, ok, err := shmfence.Find(b.name.String())
	if err != nil || !ok {
		t.Fatalf("no mapping of %v: %v", b.name, err)
	}
	b.ep.Close()
	b.ep = nil
	if release, err := r.Hold(); err == nil {
		defer release()
	} else {
		t.Logf("the closed region's range was taken again (%v): the provider would not crash here", err)
	}
	if _, err := a.av.Insert(b.name); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("insert of a closed endpoint of this process: %v, want ECONNREFUSED", err)
	}
	if _, err := a.av.Insert(c.name); err != nil {
		t.Fatalf("insert of an open endpoint of this process: %v", err)
	}
	// A name of this process that was never opened is refused the same way.
	s := b.name.String()
	never, err := ofi.ParseAddress(s[:strings.LastIndexByte(s, ':')] + ":999999")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.av.Insert(never); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("insert of %v: %v, want ECONNREFUSED", never, err)
	}
}
