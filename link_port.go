package netio

import "github.com/netio-go/netio/ofi"

// linkPort is where a link posts its operations: a connected endpoint of
// its own (*ofi.Endpoint, FI_EP_MSG, with a queue of its own that the link
// reads), or its share of a reliable-datagram endpoint (rdmPeer, FI_EP_RDM:
// one endpoint and queue for many links, whose completions the endpoint's
// owner hands to each link by token). Everything above it (credits,
// framing, packing, queues, close) is the same on both.
type linkPort interface {
	// PostRecv posts the link's receive buffers, in one batch.
	PostRecv(r *ofi.Region, segs []ofi.Segment) (int, error)
	// PostSendInject posts sends to the peer, in one batch; those of at
	// most inject bytes complete at once, without a completion.
	PostSendInject(r *ofi.Region, segs []ofi.Segment, inject int) (int, error)
	// PostSendTail sends seg followed by tail in one message (only where
	// linkSizes.lend allows it).
	PostSendTail(r *ofi.Region, seg ofi.Segment, tail []byte) error
}

var _ linkPort = (*ofi.Endpoint)(nil)

// postRecv, postSend and postSendTail post on the link's own endpoint
// with a direct call, the MSG fast path as it was, or through its port.

func (r *linkResources) postRecv(rg *ofi.Region, segs []ofi.Segment) (int, error) {
	if r.ep != nil {
		return r.ep.PostRecv(rg, segs)
	}
	return r.port.PostRecv(rg, segs)
}

func (r *linkResources) postSend(rg *ofi.Region, segs []ofi.Segment, inject int) (int, error) {
	if r.ep != nil {
		return r.ep.PostSendInject(rg, segs, inject)
	}
	return r.port.PostSendInject(rg, segs, inject)
}

func (r *linkResources) postSendTail(rg *ofi.Region, seg ofi.Segment, tail []byte) error {
	if r.ep != nil {
		return r.ep.PostSendTail(rg, seg, tail)
	}
	return r.port.PostSendTail(rg, seg, tail)
}
