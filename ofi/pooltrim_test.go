//go:build cgo && linux

package ofi_test

import (
	"testing"
	"time"

	"github.com/netio-go/netio/internal/ofipair"
	"github.com/netio-go/netio/ofi"
)

// On libfabric 1.17's tcp provider a connected pair's queues and guard
// contexts are trimmed, so one exchange no longer makes each side's
// transfer pools resident at 459 KB apiece, and a burst of sends larger
// than a trimmed chunk still completes, in order, through a grown pool.
func TestPoolTrim(t *testing.T) {
	if v := ofi.LibraryVersion(); v.Major() != 1 || v.Minor() != 17 {
		t.Skipf("libfabric %d.%d: pools are trimmed on 1.17 only", v.Major(), v.Minor())
	}
	const n, size = 200, 256 // n > the trimmed chunk, sizes above the inject limit
	var recvs []ofi.Segment
	for i := 0; i < n; i++ {
		recvs = append(recvs, ofi.Segment{Offset: uint64(i * size), Len: size, Token: uint64(i)})
	}
	before, heapBefore := ofi.TrimmedPools(), ofi.CHeapInUse()
	p, err := ofipair.New(ofipair.Options{RegionSize: n * size, ServerRecv: recvs})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	// A queue and a guard context on each side.
	if got := ofi.TrimmedPools() - before; got != 4 {
		t.Fatalf("%d pools trimmed for a pair, want 4", got)
	}
	var sends []ofi.Segment
	for i := 0; i < n; i++ {
		b := p.Client.Region.Bytes()[i*size : (i+1)*size]
		for j := range b {
			b[j] = byte(i)
		}
		sends = append(sends, ofi.Segment{Offset: uint64(i * size), Len: size, Token: uint64(i)})
	}
	if k, err := p.Client.Endpoint.PostSend(p.Client.Region, sends); k != n || err != nil {
		t.Fatalf("PostSend: %d, %v", k, err)
	}
	got, sent := make([]ofi.Completion, n), make([]ofi.Completion, n)
	var ns, nr int
	for deadline := time.Now().Add(hangTimeout); (ns < n || nr < n) && time.Now().Before(deadline); {
		k, err := p.Client.CQ.Read(sent[ns:])
		if err != nil {
			t.Fatal(err)
		}
		ns += k
		if k, err = p.Server.CQ.Read(got[nr:]); err != nil {
			t.Fatal(err)
		}
		nr += k
	}
	if ns != n || nr != n {
		t.Fatalf("%d sends and %d receives completed, want %d", ns, nr, n)
	}
	for i, c := range got {
		if c.Token != uint64(i) || c.Len != size || p.Server.Region.Bytes()[i*size] != byte(i) {
			t.Fatalf("receive %d: %+v", i, c)
		}
	}
	// Untrimmed, the two sides' four pools alone were 4 × 459 KB.
	if grew := int64(ofi.CHeapInUse()) - int64(heapBefore); grew > 1<<20 {
		t.Errorf("C heap grew %d KB for one pair, want well under the 1.8 MB of untrimmed pools", grew>>10)
	}
}
