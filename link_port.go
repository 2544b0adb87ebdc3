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
