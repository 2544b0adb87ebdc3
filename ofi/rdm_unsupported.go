//go:build !cgo || !linux

package ofi

import "net/netip"

// The reliable-datagram layer in a build without libfabric: the types
// exist, and nothing can be opened (GetRDMInfo fails).

type (
	// RDMHints select reliable-datagram endpoints.
	RDMHints struct{ Provider, Node, Service string }
	// FIAddr names a peer in an address vector.
	FIAddr uint64
	// Address is an endpoint's address.
	Address struct{}
	// AV is an address vector.
	AV struct{}
	// RDMCQ is a completion queue of reliable-datagram endpoints.
	RDMCQ struct{}
	// RDMEndpoint is a reliable-datagram endpoint.
	RDMEndpoint struct{}
	// RDMSegment is one operation of a batch.
	RDMSegment struct {
		Offset, Len, Token uint64
		Tag, Ignore        uint64
		Peer               FIAddr
	}
	// TaggedCompletion is one entry of an RDMCQ.
	TaggedCompletion struct{ Token, Flags, Len, Data, Tag uint64 }
	// TaggedCompletionError is a failed operation read from an RDMCQ.
	TaggedCompletionError struct {
		CompletionError
		Tag uint64
	}
)

// Special FIAddr values and tokens.
const (
	AddrUnspec   = ^FIAddr(0)
	AddrNotAvail = ^FIAddr(0)
	UnknownToken = ^uint64(0) - 1
)

func GetRDMInfo(h RDMHints) (*InfoList, error)                         { return nil, errUnsupported }
func ParseAddress(s string) (Address, error)                           { return Address{}, errUnsupported }
func (a Address) String() string                                       { return "" }
func (a Address) AddrPort() (netip.AddrPort, bool)                     { return netip.AddrPort{}, false }
func (a Address) ShmRegion() (name string, pid int, ok bool)           { return "", 0, false }
func (i *Info) Tagged() bool                                           { return false }
func (i *Info) OrderedSends() bool                                     { return false }
func (d *Domain) OpenRDMCQ(size, contexts int) (*RDMCQ, error)         { return nil, errUnsupported }
func (d *Domain) OpenAV(info *Info, count int) (*AV, error)            { return nil, errUnsupported }
func (v *AV) Insert(a Address) (FIAddr, error)                         { return 0, errUnsupported }
func (v *AV) Lookup(addr FIAddr) (Address, error)                      { return Address{}, errUnsupported }
func (v *AV) Remove(addr FIAddr) error                                 { return errUnsupported }
func (v *AV) Close() error                                             { return nil }
func (q *RDMCQ) waitable()                                             {}
func (q *RDMCQ) HasFD() bool                                           { return false }
func (q *RDMCQ) FD() int                                               { return -1 }
func (q *RDMCQ) InFlight() int                                         { return 0 }
func (q *RDMCQ) Read(out []TaggedCompletion) (int, error)              { return 0, errUnsupported }
func (q *RDMCQ) ReadError(e *TaggedCompletionError) (bool, error)      { return false, errUnsupported }
func (q *RDMCQ) Close() error                                          { return nil }
func (e *RDMEndpoint) Name() (Address, error)                          { return Address{}, errUnsupported }
func (e *RDMEndpoint) BindRegion(r *Region) error                      { return errUnsupported }
func (e *RDMEndpoint) PostRecv(r *Region, s []RDMSegment) (int, error) { return 0, errUnsupported }
func (e *RDMEndpoint) PostTaggedRecv(r *Region, s []RDMSegment) (int, error) {
	return 0, errUnsupported
}
func (e *RDMEndpoint) PostSend(r *Region, s []RDMSegment, inject int) (int, error) {
	return 0, errUnsupported
}
func (e *RDMEndpoint) PostTaggedSend(r *Region, s []RDMSegment, inject int) (int, error) {
	return 0, errUnsupported
}
func (e *RDMEndpoint) Cancel(token uint64) int { return 0 }
func (e *RDMEndpoint) Close() error            { return nil }
func (d *Domain) OpenRDMEndpoint(info *Info, cq *RDMCQ, av *AV) (*RDMEndpoint, error) {
	return nil, errUnsupported
}
