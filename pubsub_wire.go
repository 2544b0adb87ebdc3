package netio

import (
	"encoding/binary"
	"fmt"
)

// Publish/subscribe's control messages travel in-band on the subscriber's
// link, as the link's owner control messages (link.sendOwnerControl), each
// at most ctlPayloadMax bytes; a request with more tags goes in several.
//
// Subscribe and unsubscribe, from the subscriber (kindSubscribe,
// kindUnsubscribe):
//
//	[0:4]  request id, chosen by the subscriber
//	[4]    policy (subscribe only)
//	[5:8]  zero
//	[8:]   tags, 8 bytes each
//
// Acknowledgement, from the publisher, once the tags are in (or out of)
// its table (kindAck):
//
//	[0:4]   request id
//	[4]     flags: ackRefused when the request was not applied
//	[5:8]   zero
//	[8:16]  the publisher's incarnation: random, new at every start
//	[16:]   entries, 16 bytes each: a tag and its next sequence number
//
// A refused acknowledgement has no entries: a subscriber from before the
// flag waits for its tags in vain and its Subscribe times out, rather than
// taking tags it does not have for subscribed.
//
// All little-endian.

// ctlPayloadMax is the largest control payload: it fits the smallest
// receive buffer any peer posts (minBufferSize) behind the header.
const ctlPayloadMax = minBufferSize - headerSize

const (
	requestHeader = 8
	ackHeader     = 16
	ackEntry      = 16
	// tagsPerRequest and tagsPerAck are how many tags fit one message.
	tagsPerRequest = (ctlPayloadMax - requestHeader) / 8
	tagsPerAck     = (ctlPayloadMax - ackHeader) / ackEntry

	// ackRefused: the request would have taken the subscriber past the
	// publisher's Config.MaxTags, and none of its tags were added.
	ackRefused = 1
)

// request is a subscribe or unsubscribe message.
type request struct {
	id     uint32
	policy Policy
	tags   []uint64
}

func (r *request) marshal() []byte {
	b := make([]byte, requestHeader+8*len(r.tags))
	binary.LittleEndian.PutUint32(b, r.id)
	b[4] = byte(r.policy)
	for i, t := range r.tags {
		binary.LittleEndian.PutUint64(b[requestHeader+8*i:], t)
	}
	return b
}

func parseRequest(b []byte) (request, error) {
	if len(b) < requestHeader || (len(b)-requestHeader)%8 != 0 {
		return request{}, fmt.Errorf("%w: subscription request of %d bytes", ErrProtocol, len(b))
	}
	r := request{id: binary.LittleEndian.Uint32(b), policy: Policy(b[4])}
	if r.policy > DropNewest {
		return request{}, fmt.Errorf("%w: unknown policy %d", ErrProtocol, b[4])
	}
	r.tags = make([]uint64, (len(b)-requestHeader)/8)
	for i := range r.tags {
		r.tags[i] = binary.LittleEndian.Uint64(b[requestHeader+8*i:])
	}
	return r, nil
}

// ack is the publisher's answer to a request.
type ack struct {
	id          uint32
	refused     bool
	incarnation uint64
	tags        []uint64
	next        []uint64 // per tag: the sequence number of its next message
}

func (a *ack) marshal() []byte {
	b := make([]byte, ackHeader+ackEntry*len(a.tags))
	binary.LittleEndian.PutUint32(b, a.id)
	if a.refused {
		b[4] = ackRefused
	}
	binary.LittleEndian.PutUint64(b[8:], a.incarnation)
	for i, t := range a.tags {
		binary.LittleEndian.PutUint64(b[ackHeader+ackEntry*i:], t)
		binary.LittleEndian.PutUint64(b[ackHeader+ackEntry*i+8:], a.next[i])
	}
	return b
}

func parseAck(b []byte) (ack, error) {
	if len(b) < ackHeader || (len(b)-ackHeader)%ackEntry != 0 {
		return ack{}, fmt.Errorf("%w: acknowledgement of %d bytes", ErrProtocol, len(b))
	}
	n := (len(b) - ackHeader) / ackEntry
	a := ack{id: binary.LittleEndian.Uint32(b), refused: b[4]&ackRefused != 0, incarnation: binary.LittleEndian.Uint64(b[8:]), tags: make([]uint64, n), next: make([]uint64, n)}
	for i := 0; i < n; i++ {
		a.tags[i] = binary.LittleEndian.Uint64(b[ackHeader+ackEntry*i:])
		a.next[i] = binary.LittleEndian.Uint64(b[ackHeader+ackEntry*i+8:])
	}
	return a, nil
}
