package wire

import (
	"encoding/binary"
	"fmt"
)

// Publish/subscribe's control messages travel in-band on the subscriber's
// link, as the link's owner's control messages, each at most
// ControlPayloadMax bytes; a request with more tags goes in several.
//
// Subscribe and unsubscribe, from the subscriber (KindSubscribe,
// KindUnsubscribe):
//
//	[0:4]  request id, chosen by the subscriber
//	[4]    policy (subscribe only)
//	[5:8]  zero
//	[8:]   tags, 8 bytes each
//
// Acknowledgement, from the publisher, once the tags are in (or out of)
// its table (KindAck):
//
//	[0:4]   request id
//	[4]     flags: AckRefused when the request was not applied
//	[5:8]   zero
//	[8:16]  the publisher's incarnation: random, new at every start
//	[16:]   entries, 16 bytes each: a tag and its next sequence number
//
// A refused acknowledgement has no entries: a subscriber from before the
// flag waits for its tags in vain and its Subscribe times out, rather than
// taking tags it does not have for subscribed.
//
// Farewell, from the publisher, as the payload of the link's FIN
// (KindFin) when it ends the link itself (Close, Shutdown, a subscriber
// cut loose as slow):
//
//	[0]     version: FarewellVersion
//	[1]     reason: FarewellClosed or FarewellSlow
//	[2]     flags: FarewellPartial when the subscriber holds more tags
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

// ControlPayloadMax is the largest control payload: it fits the smallest
// receive buffer any peer posts (MinBufferSize) behind the header.
const ControlPayloadMax = MinBufferSize - HeaderSize

const (
	RequestHeader = 8
	AckHeader     = 16
	AckEntry      = 16
	// TagsPerRequest and TagsPerAck are how many tags fit one message.
	TagsPerRequest = (ControlPayloadMax - RequestHeader) / 8
	TagsPerAck     = (ControlPayloadMax - AckHeader) / AckEntry

	// AckRefused: the request would have taken the subscriber past the
	// publisher's Config.MaxTags, and none of its tags were added.
	AckRefused = 1

	// MaxPolicy is the last of netio's policies (DropNewest): a request's
	// policy byte is at most this.
	MaxPolicy = 2

	FarewellHeader   = 16
	FarewellEntry    = 16
	FarewellVersion  = 1
	TagsPerFarewell  = (ControlPayloadMax - FarewellHeader) / FarewellEntry
	FarewellClosed   = 1 // the publisher closed (Close or Shutdown)
	FarewellSlow     = 2 // the subscriber was cut loose as slow
	FarewellPartial  = 1 // flag: the entries are not every tag the subscriber holds
	farewellReasonOK = FarewellSlow
)

// Request is a subscribe or unsubscribe message.
type Request struct {
	ID     uint32
	Policy uint8
	Tags   []uint64
}

func (r *Request) Marshal() []byte {
	b := make([]byte, RequestHeader+8*len(r.Tags))
	binary.LittleEndian.PutUint32(b, r.ID)
	b[4] = r.Policy
	for i, t := range r.Tags {
		binary.LittleEndian.PutUint64(b[RequestHeader+8*i:], t)
	}
	return b
}

func ParseRequest(b []byte) (Request, error) {
	if len(b) < RequestHeader || (len(b)-RequestHeader)%8 != 0 {
		return Request{}, fmt.Errorf("%w: subscription request of %d bytes", ErrProtocol, len(b))
	}
	r := Request{ID: binary.LittleEndian.Uint32(b), Policy: b[4]}
	if r.Policy > MaxPolicy {
		return Request{}, fmt.Errorf("%w: unknown policy %d", ErrProtocol, b[4])
	}
	r.Tags = make([]uint64, (len(b)-RequestHeader)/8)
	for i := range r.Tags {
		r.Tags[i] = binary.LittleEndian.Uint64(b[RequestHeader+8*i:])
	}
	return r, nil
}

// Ack is the publisher's answer to a request.
type Ack struct {
	ID          uint32
	Refused     bool
	Incarnation uint64
	Tags        []uint64
	Next        []uint64 // per tag: the sequence number of its next message
}

func (a *Ack) Marshal() []byte {
	b := make([]byte, AckHeader+AckEntry*len(a.Tags))
	binary.LittleEndian.PutUint32(b, a.ID)
	if a.Refused {
		b[4] = AckRefused
	}
	binary.LittleEndian.PutUint64(b[8:], a.Incarnation)
	for i, t := range a.Tags {
		binary.LittleEndian.PutUint64(b[AckHeader+AckEntry*i:], t)
		binary.LittleEndian.PutUint64(b[AckHeader+AckEntry*i+8:], a.Next[i])
	}
	return b
}

func ParseAck(b []byte) (Ack, error) {
	if len(b) < AckHeader || (len(b)-AckHeader)%AckEntry != 0 {
		return Ack{}, fmt.Errorf("%w: acknowledgement of %d bytes", ErrProtocol, len(b))
	}
	n := (len(b) - AckHeader) / AckEntry
	a := Ack{ID: binary.LittleEndian.Uint32(b), Refused: b[4]&AckRefused != 0, Incarnation: binary.LittleEndian.Uint64(b[8:]), Tags: make([]uint64, n), Next: make([]uint64, n)}
	for i := 0; i < n; i++ {
		a.Tags[i] = binary.LittleEndian.Uint64(b[AckHeader+AckEntry*i:])
		a.Next[i] = binary.LittleEndian.Uint64(b[AckHeader+AckEntry*i+8:])
	}
	return a, nil
}

// Farewell is the publisher's last word on a link.
type Farewell struct {
	Reason      uint8 // FarewellClosed or FarewellSlow; 0 from a later version
	Partial     bool  // some of the subscriber's tags are not listed
	Incarnation uint64
	Finals      []FinalSeq
}

// FinalSeq is a tag and the sequence number its next message would have
// had: a subscriber that received less missed the rest.
type FinalSeq struct{ Tag, Next uint64 }

func (f *Farewell) Marshal() []byte {
	b := make([]byte, FarewellHeader+FarewellEntry*len(f.Finals))
	b[0] = FarewellVersion
	b[1] = f.Reason
	if f.Partial {
		b[2] = FarewellPartial
	}
	binary.LittleEndian.PutUint64(b[8:], f.Incarnation)
	for i, e := range f.Finals {
		binary.LittleEndian.PutUint64(b[FarewellHeader+FarewellEntry*i:], e.Tag)
		binary.LittleEndian.PutUint64(b[FarewellHeader+FarewellEntry*i+8:], e.Next)
	}
	return b
}

// ParseFarewell reads a farewell. One of a later version, which this side
// cannot read, is a farewell that lists nothing: the loss it would have
// told stays unknown.
func ParseFarewell(b []byte) (Farewell, error) {
	if len(b) < FarewellHeader || (len(b)-FarewellHeader)%FarewellEntry != 0 {
		return Farewell{}, fmt.Errorf("%w: farewell of %d bytes", ErrProtocol, len(b))
	}
	if b[0] != FarewellVersion {
		return Farewell{Partial: true}, nil
	}
	if b[1] == 0 || b[1] > farewellReasonOK {
		return Farewell{}, fmt.Errorf("%w: farewell with unknown reason %d", ErrProtocol, b[1])
	}
	n := (len(b) - FarewellHeader) / FarewellEntry
	f := Farewell{Reason: b[1], Partial: b[2]&FarewellPartial != 0, Incarnation: binary.LittleEndian.Uint64(b[8:]), Finals: make([]FinalSeq, n)}
	for i := range f.Finals {
		f.Finals[i] = FinalSeq{binary.LittleEndian.Uint64(b[FarewellHeader+FarewellEntry*i:]), binary.LittleEndian.Uint64(b[FarewellHeader+FarewellEntry*i+8:])}
	}
	return f, nil
}
