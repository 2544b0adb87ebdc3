package page

import (
	"fmt"

	"github.com/netio-go/netio/internal/wire"
)

// A page is the 16-byte header (kind wire.KindPage) followed by records,
// each an 8-byte little-endian length and that many bytes:
//
//	header{kind: wire.KindPage, fragLen: payload bytes, msgLen: continuation}
//	[continuation bytes][len][msg][len][msg]...
//
// A message larger than what is left of a page goes on in the next pages.
// The header's msgLen field then counts the bytes at the start of the page
// that continue the previous page's last message, so a receiver can check
// every page against the lengths it has read so far: a length that lies
// shows up at the next page boundary at the latest. A length prefix never
// straddles two pages; a page with less than PrefixSize bytes left is sent
// as it is.
//
// Tagged pages (kind wire.KindTagged) are the pages of publish/subscribe:
// each record's length is followed by the message's tag and its sequence
// number, both 8 bytes little-endian, before the message:
//
//	[continuation bytes][len][tag][seq][msg][len][tag][seq][msg]...
//
// Packed pages are sealed by the sender's packing rule instead of when full
// or flushed; their layout is the same.
type Format struct {
	Kind   uint8
	Prefix int  // bytes before a record's message
	Packed bool // sealed by the packing rule, not left to fill
}

const (
	PrefixSize       = 8                  // a record's length
	TaggedPrefixSize = PrefixSize + 8 + 8 // and its tag and sequence number
)

// Plain is the format of HighThroughput connections.
var Plain = Format{Kind: wire.KindPage, Prefix: PrefixSize}

// Packed is the format of LowLatency connections.
var Packed = Format{Kind: wire.KindPage, Prefix: PrefixSize, Packed: true}

// Tagged is the format of publish/subscribe links, packed to a LowLatency
// subscriber.
func Tagged(packed bool) Format {
	return Format{Kind: wire.KindTagged, Prefix: TaggedPrefixSize, Packed: packed}
}

// Pad is what a page holds besides one message: its header and the
// message's prefix. A buffer of a message's size plus Pad carries the
// message whole in one page (docs/decisions/page-pad.md).
func (f Format) Pad() int { return wire.HeaderSize + f.Prefix }

// Writer returns a writer of pages of at most payloadMax bytes after the
// header.
func (f Format) Writer(payloadMax int) *Writer { return &Writer{f: f, payloadMax: payloadMax} }

// Reader returns the reader of pages of format f.
func (f Format) Reader() Reader { return Reader{prefix: f.Prefix} }

// Check vets a received page's header, already known to match the length
// received; its records are checked by the reader, which decodes them.
func (f Format) Check(h wire.Header) error {
	switch {
	case h.Kind != f.Kind && f.Kind == wire.KindPage:
		return fmt.Errorf("%w: publish/subscribe page on a connection", wire.ErrProtocol)
	case h.Kind != f.Kind:
		return fmt.Errorf("%w: message of kind %d on a publish/subscribe link", wire.ErrProtocol, h.Kind)
	case h.MsgLen > uint64(h.FragLen):
		return fmt.Errorf("%w: page continues %d bytes but holds %d", wire.ErrProtocol, h.MsgLen, h.FragLen)
	}
	return nil
}
