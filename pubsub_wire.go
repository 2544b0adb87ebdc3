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
// Farewell, from the publisher, as the payload of the link's FIN
// (kindFin) when it ends the link itself (Close, Shutdown, a subscriber
// cut loose as slow):
//
//	[0]     version: farewellVersion
//	[1]     reason: farewellClosed or farewellSlow
//	[2]     flags: farewellPartial when the subscriber holds more tags
//	        than the entries list
//	[3:8]   zero
//	[8:16]  the publisher's incarnation
//	[16:]   entries, 16 bytes each: a tag and the sequence number its next
//	        message would have had
//
// A subscriber that reaches the end of the link's data compares each
// entry with what it received: the difference is what it missed. A FIN
// from before the farewell has no payload, and a farewell of a later
// version is taken as a farewell that lists nothing.
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

	farewellHeader   = 16
	farewellEntry    = 16
	farewellVersion  = 1
	tagsPerFarewell  = (ctlPayloadMax - farewellHeader) / farewellEntry
	farewellClosed   = 1 // the publisher closed (Close or Shutdown)
	farewellSlow     = 2 // the subscriber was cut loose as slow
	farewellPartial  = 1 // flag: the entries are not every tag the subscriber holds
	farewellReasonOK = farewellSlow
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

// farewell is the publisher's last word on a link.
type farewell struct {
	reason      uint8 // farewellClosed or farewellSlow; 0 from a later version
	partial     bool  // some of the subscriber's tags are not listed
	incarnation uint64
	finals      []finalSeq
}

// finalSeq is a tag and the sequence number its next message would have
// had: a subscriber that received less missed the rest.
type finalSeq struct{ tag, next uint64 }

func (f *farewell) marshal() []byte {
	b := make([]byte, farewellHeader+farewellEntry*len(f.finals))
	b[0] = farewellVersion
	b[1] = f.reason
	if f.partial {
		b[2] = farewellPartial
	}
	binary.LittleEndian.PutUint64(b[8:], f.incarnation)
	for i, e := range f.finals {
		binary.LittleEndian.PutUint64(b[farewellHeader+farewellEntry*i:], e.tag)
		binary.LittleEndian.PutUint64(b[farewellHeader+farewellEntry*i+8:], e.next)
	}
	return b
}

// parseFarewell reads a farewell. One of a later version, which this side
// cannot read, is a farewell that lists nothing: the loss it would have
// told stays unknown.
func parseFarewell(b []byte) (farewell, error) {
	if len(b) < farewellHeader || (len(b)-farewellHeader)%farewellEntry != 0 {
		return farewell{}, fmt.Errorf("%w: farewell of %d bytes", ErrProtocol, len(b))
	}
	if b[0] != farewellVersion {
		return farewell{partial: true}, nil
	}
	if b[1] == 0 || b[1] > farewellReasonOK {
		return farewell{}, fmt.Errorf("%w: farewell with unknown reason %d", ErrProtocol, b[1])
	}
	n := (len(b) - farewellHeader) / farewellEntry
	f := farewell{reason: b[1], partial: b[2]&farewellPartial != 0, incarnation: binary.LittleEndian.Uint64(b[8:]), finals: make([]finalSeq, n)}
	for i := range f.finals {
		f.finals[i] = finalSeq{binary.LittleEndian.Uint64(b[farewellHeader+farewellEntry*i:]), binary.LittleEndian.Uint64(b[farewellHeader+farewellEntry*i+8:])}
	}
	return f, nil
}
