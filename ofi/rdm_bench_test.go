//go:build cgo && linux

package ofi_test

import (
	"errors"
	"testing"
	"time"

	"github.com/netio-go/netio/internal/ofipair"
	"github.com/netio-go/netio/ofi"
)

// The RDM benchmarks measure bare libfabric, one goroutine busy-polling
// both ends in one process, on shm and tcp;ofi_rxm next to connected tcp
// endpoints (FI_EP_MSG): the floor each provider gives netio.

// rdmPair opens two nodes on h and inserts each in the other's AV.
func rdmPair(b *testing.B, h ofi.RDMHints) (x, y *rdmNode, toY, toX ofi.FIAddr) {
	x, y = openRDM(b, h, 256), openRDM(b, h, 256)
	var err error
	if toY, err = x.av.Insert(y.name); err != nil {
		b.Fatal(err)
	}
	if toX, err = y.av.Insert(x.name); err != nil {
		b.Fatal(err)
	}
	return x, y, toY, toX
}

func BenchmarkRoundTrip64(b *testing.B) {
	for _, h := range rdmProviders {
		b.Run(h.Provider, func(b *testing.B) {
			x, y, toY, toX := rdmPair(b, h)
			both := []*rdmNode{x, y}
			const tag = 1
			recv := []ofi.RDMSegment{{Len: 64, Token: 100, Tag: tag, Peer: ofi.AddrUnspec}}
			for _, n := range both {
				if _, err := n.ep.PostTaggedRecv(n.region, recv); err != nil {
					b.Fatal(err)
				}
			}
			sendX := []ofi.RDMSegment{{Offset: 4096, Len: 64, Token: 1, Tag: tag, Peer: toY}}
			sendY := []ofi.RDMSegment{{Offset: 4096, Len: 64, Token: 1, Tag: tag, Peer: toX}}
			// The first sends wait for the peers to be mapped or connected.
			x.send(b, both, true, sendX, 0)
			x.await(b, both, 1)
			y.await(b, both, 100)
			if _, err := y.ep.PostTaggedRecv(y.region, recv); err != nil {
				b.Fatal(err)
			}
			y.send(b, both, true, sendY, 0)
			y.await(b, both, 1)
			x.await(b, both, 100)
			if _, err := x.ep.PostTaggedRecv(x.region, recv); err != nil {
				b.Fatal(err)
			}
			var comps [8]ofi.TaggedCompletion
			hop := func(from, to *rdmNode, seg []ofi.RDMSegment) {
				if _, err := from.ep.PostTaggedSend(from.region, seg, from.info.InjectSize()); err != nil {
					b.Fatal(err)
				}
				for got := false; !got; {
					from.cq.Read(comps[:])
					n, err := to.cq.Read(comps[:])
					if err != nil {
						b.Fatal(err)
					}
					for _, c := range comps[:n] {
						if c.Flags&ofi.FlagRecv != 0 {
							got = true
							if _, err := to.ep.PostTaggedRecv(to.region, recv); err != nil {
								b.Fatal(err)
							}
						}
					}
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				hop(x, y, sendX)
				hop(y, x, sendY)
			}
		})
	}
	b.Run("tcp-msg", func(b *testing.B) {
		recv := []ofi.Segment{{Offset: 0, Len: 64, Token: 1}}
		p, err := ofipair.New(ofipair.Options{RegionSize: 8192, ServerRecv: recv})
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		if _, err := p.Client.Endpoint.PostRecv(p.Client.Region, recv); err != nil {
			b.Fatal(err)
		}
		send := []ofi.Segment{{Offset: 4096, Len: 64}}
		var comps [8]ofi.Completion
		hop := func(from, to *ofipair.Side) {
			if _, err := from.Endpoint.PostSendInject(from.Region, send, p.Client.Info.InjectSize()); err != nil {
				b.Fatal(err)
			}
			for got := false; !got; {
				from.CQ.Read(comps[:])
				n, err := to.CQ.Read(comps[:])
				if err != nil {
					b.Fatal(err)
				}
				for _, c := range comps[:n] {
					if c.Flags&ofi.FlagRecv != 0 {
						got = true
						if _, err := to.Endpoint.PostRecv(to.Region, recv); err != nil {
							b.Fatal(err)
						}
					}
				}
			}
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			hop(&p.Client, &p.Server)
			hop(&p.Server, &p.Client)
		}
	})
}

// streamWindow is how many 1 MiB messages may be in flight: never more
// than the receiver has posted.
const streamWindow = 4

func BenchmarkStream1MiB(b *testing.B) {
	for _, h := range rdmProviders {
		b.Run(h.Provider, func(b *testing.B) {
			x, y, toY, _ := rdmPair(b, h)
			both := []*rdmNode{x, y}
			recv := make([]ofi.RDMSegment, 1)
			for i := 0; i < streamWindow; i++ {
				recv[0] = ofi.RDMSegment{Offset: uint64(i * mib), Len: mib, Token: uint64(i), Tag: 1, Peer: ofi.AddrUnspec}
				if _, err := y.ep.PostTaggedRecv(y.region, recv); err != nil {
					b.Fatal(err)
				}
			}
			first := []ofi.RDMSegment{{Offset: 0, Len: 64, Token: 99, Tag: 2, Peer: toY}}
			x.send(b, both, true, first, 0) // maps or connects the peer; tag 2 is never received
			seg := make([]ofi.RDMSegment, 1)
			var comps [streamWindow]ofi.TaggedCompletion
			run := func(n int) {
				sent, received, completed := 0, 0, 0
				deadline := time.Now().Add(time.Minute)
				for received < n {
					for sent < n && sent-completed < streamWindow && sent-received < streamWindow {
						seg[0] = ofi.RDMSegment{Offset: uint64(sent%streamWindow) * mib, Len: mib, Token: uint64(sent % streamWindow), Tag: 1, Peer: toY}
						k, err := x.ep.PostTaggedSend(x.region, seg, 0)
						if err != nil && !errors.Is(err, ofi.EAGAIN) {
							b.Fatal(err)
						}
						sent += k
						if k == 0 {
							break
						}
					}
					k, err := x.cq.Read(comps[:])
					if err != nil {
						b.Fatal(err)
					}
					completed += k
					k, err = y.cq.Read(comps[:])
					if err != nil {
						b.Fatal(err)
					}
					for i := 0; i < k; i++ {
						recv[0] = ofi.RDMSegment{Offset: comps[i].Token * mib, Len: mib, Token: comps[i].Token, Tag: 1, Peer: ofi.AddrUnspec}
						if _, err := y.ep.PostTaggedRecv(y.region, recv); err != nil {
							b.Fatal(err)
						}
					}
					received += k
					if time.Now().After(deadline) {
						b.Fatalf("stalled at %d of %d", received, n)
					}
				}
				for completed < sent {
					k, _ := x.cq.Read(comps[:])
					completed += k
				}
			}
			run(20)
			b.SetBytes(mib)
			b.ReportAllocs()
			b.ResetTimer()
			run(b.N)
		})
	}
	b.Run("tcp-msg", func(b *testing.B) {
		var recvs []ofi.Segment
		for i := 0; i < streamWindow; i++ {
			recvs = append(recvs, ofi.Segment{Offset: uint64(i * mib), Len: mib, Token: uint64(i)})
		}
		p, err := ofipair.New(ofipair.Options{RegionSize: streamWindow * mib, ServerRecv: recvs})
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		seg := make([]ofi.Segment, 1)
		var comps [streamWindow]ofi.Completion
		run := func(n int) {
			sent, received, completed := 0, 0, 0
			deadline := time.Now().Add(time.Minute)
			for received < n {
				for sent < n && sent-completed < streamWindow && sent-received < streamWindow {
					seg[0] = ofi.Segment{Offset: uint64(sent%streamWindow) * mib, Len: mib, Token: uint64(sent % streamWindow)}
					if _, err := p.Client.Endpoint.PostSend(p.Client.Region, seg); err != nil {
						b.Fatal(err)
					}
					sent++
				}
				k, err := p.Client.CQ.Read(comps[:])
				if err != nil {
					b.Fatal(err)
				}
				completed += k
				k, err = p.Server.CQ.Read(comps[:])
				if err != nil {
					b.Fatal(err)
				}
				for i := 0; i < k; i++ {
					seg[0] = ofi.Segment{Offset: comps[i].Token * mib, Len: mib, Token: comps[i].Token}
					if _, err := p.Server.Endpoint.PostRecv(p.Server.Region, seg); err != nil {
						b.Fatal(err)
					}
				}
				received += k
				if time.Now().After(deadline) {
					b.Fatalf("stalled at %d of %d", received, n)
				}
			}
			for completed < sent {
				k, _ := p.Client.CQ.Read(comps[:])
				completed += k
			}
		}
		run(20)
		b.SetBytes(mib)
		b.ReportAllocs()
		b.ResetTimer()
		run(b.N)
	})
}
