package netio

import (
	"encoding/binary"
	"fmt"
	"strconv"
)

// Every libfabric message netio sends starts with a 16-byte header:
//
//	[0]     kind: kindPage, kindCredit, kindFin, kindHeartbeat...
//	[1]     flags: flagLast on control messages (a message whole);
//	        flagHalfClose on the FIN of CloseWrite
//	[2:4]   credits returned to the receiver of this header (uint16)
//	[4:8]   payload bytes (uint32)
//	[8:16]  in a page, the bytes continuing the previous page's message;
//	        in a control message, its payload bytes; in a heartbeat, the
//	        sender's heartbeat timeout in ms (uint64)
//
// Credits ride on every header, so traffic in one direction returns the
// credits of the other; a kindCredit message carries them alone when there
// is no such traffic. All fields are little-endian.
const headerSize = 16

const (
	// kindData = 1 was the LowLatency framing up to protocol level 2, a
	// message or a fragment of one per buffer; level 3 packs LowLatency
	// messages into pages too, and kind 1 is no kind of data any more.
	kindData   = 1
	kindCredit = 2
	kindFin    = 3 // the sender closed; nothing follows
	kindPage   = 4 // records of a HighThroughput connection (page.go)
	kindTagged = 5 // tagged records of a publish/subscribe link (page.go)

	// Control messages of publish/subscribe, with a payload (pubsub_wire.go).
	kindSubscribe   = 16
	kindUnsubscribe = 17
	kindAck         = 18

	flagLast = 1
	// flagHalfClose on a FIN says the sender closed only its writing side
	// (CloseWrite) and goes on reading: its peer's reader sees io.EOF at
	// once. A FIN without it comes from Close, whose shutdown follows
	// right after, and the reader sees the end with the link's.
	flagHalfClose = 2
)

// kindHeartbeat says the sender is alive: a header only (heartbeat.go).
const kindHeartbeat = 6

// dataKind reports whether kind carries messages for a reader, as opposed
// to the link's own control messages or its owner's.
func dataKind(kind uint8) bool { return kind == kindPage || kind == kindTagged }

type header struct {
	kind    uint8
	flags   uint8
	credits uint16
	fragLen uint32
	msgLen  uint64
}

func putHeader(b []byte, h header) {
	_ = b[headerSize-1]
	b[0] = h.kind
	b[1] = h.flags
	binary.LittleEndian.PutUint16(b[2:], h.credits)
	binary.LittleEndian.PutUint32(b[4:], h.fragLen)
	binary.LittleEndian.PutUint64(b[8:], h.msgLen)
}

func putCredits(b []byte, credits uint16) { binary.LittleEndian.PutUint16(b[2:], credits) }

func readHeader(b []byte) header {
	_ = b[headerSize-1]
	return header{
		kind:    b[0],
		flags:   b[1],
		credits: binary.LittleEndian.Uint16(b[2:]),
		fragLen: binary.LittleEndian.Uint32(b[4:]),
		msgLen:  binary.LittleEndian.Uint64(b[8:]),
	}
}

// hello is the private data of a connection request and of its accept: each
// side states what it posts for the other. It fits the 55 bytes verbs
// carries, also with a key's authenticator after it (admission.go).
type hello struct {
	version    uint8
	mode       Mode
	role       role   // what the sender is: a connection end, a subscriber, a publisher
	flags      uint8  // flagKeyed: an authenticator follows (admission.go)
	window     uint32 // receive buffers posted for the peer
	bufferSize uint32 // bytes per receive buffer, header included
	maxMessage uint64 // largest message accepted

	// auth is a keyed request's authenticator, which the accept is bound
	// to; set by the acceptor's admission, not by parseHello.
	auth [authTrailer]byte
}

// rejectMarker is the private data of a netio listener's reject, so that
// Dial can tell a full or closing listener from a closed port.
const rejectMarker = "NTIO-REJECT"

// rejectModeMarker rejects a peer in the other Mode.
const rejectModeMarker = "NTIO-REJECT-MODE"

// rejectRoleMarker rejects a peer of the wrong role: a Dial to a
// publisher, a subscriber to a plain listener.
const rejectRoleMarker = "NTIO-REJECT-ROLE"

// rejectLimitMarker rejects a peer the listener cannot take now: it holds
// Config.MaxConns connections, the process's registered memory or file
// descriptors would not suffice.
const rejectLimitMarker = "NTIO-REJECT-LIMIT"

// role is what one end of a link is. A link joins a connection end to a
// connection end, or a subscriber to a publisher; byte 6 of the hello,
// zero in hellos from before publish/subscribe.
type role uint8

const (
	roleConn role = iota
	roleSubscriber
	rolePublisher
)

var roleNames = [...]string{"connection", "subscriber", "publisher"}

func (r role) String() string {
	if int(r) < len(roleNames) {
		return roleNames[r]
	}
	return "role(" + strconv.Itoa(int(r)) + ")"
}

// peer is the role the other end must have.
func (r role) peer() role {
	switch r {
	case roleSubscriber:
		return rolePublisher
	case rolePublisher:
		return roleSubscriber
	}
	return roleConn
}

const (
	helloMagic = "NTIO"
	helloSize  = 24
	// protocolLevel 2 added heartbeats (kindHeartbeat) and keyed hellos
	// (byte 7): a level-1 peer would end a connection at its first
	// heartbeat, so the two refuse each other at the handshake instead.
	// Level 3 sends LowLatency messages in pages (packing.go) instead of
	// kindData fragments, which a level-2 peer would refuse at the first
	// message.
	protocolLevel = 3
)

func (h hello) marshal() []byte {
	b := make([]byte, helloSize)
	copy(b, helloMagic)
	b[4] = h.version
	b[5] = byte(h.mode)
	b[6] = byte(h.role)
	b[7] = h.flags
	binary.LittleEndian.PutUint32(b[8:], h.window)
	binary.LittleEndian.PutUint32(b[12:], h.bufferSize)
	binary.LittleEndian.PutUint64(b[16:], h.maxMessage)
	return b
}

func parseHello(b []byte) (hello, error) {
	if len(b) < helloSize || string(b[:4]) != helloMagic {
		return hello{}, fmt.Errorf("%w: not a netio peer (bad handshake of %d bytes)", ErrProtocol, len(b))
	}
	h := hello{
		version:    b[4],
		mode:       Mode(b[5]),
		role:       role(b[6]),
		flags:      b[7],
		window:     binary.LittleEndian.Uint32(b[8:]),
		bufferSize: binary.LittleEndian.Uint32(b[12:]),
		maxMessage: binary.LittleEndian.Uint64(b[16:]),
	}
	switch {
	case h.version != protocolLevel:
		return h, fmt.Errorf("%w: peer speaks protocol %d, not %d", ErrProtocol, h.version, protocolLevel)
	case h.window < minWindow || h.window > maxWindow:
		return h, fmt.Errorf("%w: peer window %d out of range", ErrProtocol, h.window)
	case h.bufferSize < minBufferSize || h.bufferSize > maxBufferSize:
		return h, fmt.Errorf("%w: peer buffer size %d out of range", ErrProtocol, h.bufferSize)
	case h.mode > HighThroughput:
		return h, fmt.Errorf("%w: peer asks for unknown mode %d", ErrProtocol, h.mode)
	case h.role > rolePublisher:
		return h, fmt.Errorf("%w: peer is of unknown role %d", ErrProtocol, h.role)
	case h.maxMessage == 0:
		return h, fmt.Errorf("%w: peer accepts no messages", ErrProtocol)
	}
	return h, nil
}
