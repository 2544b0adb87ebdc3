package wire

import "encoding/binary"

// Every libfabric message netio sends starts with a 16-byte header:
//
//	[0]     kind: KindPage, KindCredit, KindFin, KindHeartbeat...
//	[1]     flags: FlagLast on control messages (a message whole);
//	        FlagHalfClose on the FIN of CloseWrite
//	[2:4]   credits returned to the receiver of this header (uint16)
//	[4:8]   payload bytes (uint32)
//	[8:16]  in a page, the bytes continuing the previous page's message;
//	        in a control message, its payload bytes; in a heartbeat, the
//	        sender's heartbeat timeout in ms (uint64)
//
// Credits ride on every header, so traffic in one direction returns the
// credits of the other; a KindCredit message carries them alone when there
// is no such traffic. All fields are little-endian.
const HeaderSize = 16

// Kinds of message.
const (
	// KindData = 1 was the LowLatency framing up to protocol level 2, a
	// message or a fragment of one per buffer; level 3 packs LowLatency
	// messages into pages too, and kind 1 is no kind of data any more.
	KindData      = 1
	KindCredit    = 2
	KindFin       = 3 // the sender closed; nothing follows
	KindPage      = 4 // records of a connection (package page)
	KindTagged    = 5 // tagged records of a publish/subscribe link (package page)
	KindHeartbeat = 6 // the sender is alive: a header only

	// Control messages of publish/subscribe, with a payload (pubsub.go).
	KindSubscribe   = 16
	KindUnsubscribe = 17
	KindAck         = 18
)

// Header flags.
const (
	FlagLast = 1
	// FlagHalfClose on a FIN says the sender closed only its writing side
	// (CloseWrite) and goes on reading: its peer's reader sees io.EOF at
	// once. A FIN without it comes from Close, whose shutdown follows
	// right after, and the reader sees the end with the link's.
	FlagHalfClose = 2
)

// DataKind reports whether kind carries messages for a reader, as opposed
// to the link's own control messages or its owner's.
func DataKind(kind uint8) bool { return kind == KindPage || kind == KindTagged }

// Header is a message's header.
type Header struct {
	Kind    uint8
	Flags   uint8
	Credits uint16
	FragLen uint32 // payload bytes
	MsgLen  uint64 // see HeaderSize
}

// PutHeader writes h at the start of b.
func PutHeader(b []byte, h Header) {
	_ = b[HeaderSize-1]
	b[0] = h.Kind
	b[1] = h.Flags
	binary.LittleEndian.PutUint16(b[2:], h.Credits)
	binary.LittleEndian.PutUint32(b[4:], h.FragLen)
	binary.LittleEndian.PutUint64(b[8:], h.MsgLen)
}

// PutCredits rewrites the credits of the header at the start of b.
func PutCredits(b []byte, credits uint16) { binary.LittleEndian.PutUint16(b[2:], credits) }

// ReadHeader reads the header at the start of b, which holds one.
func ReadHeader(b []byte) Header {
	_ = b[HeaderSize-1]
	return Header{
		Kind:    b[0],
		Flags:   b[1],
		Credits: binary.LittleEndian.Uint16(b[2:]),
		FragLen: binary.LittleEndian.Uint32(b[4:]),
		MsgLen:  binary.LittleEndian.Uint64(b[8:]),
	}
}
