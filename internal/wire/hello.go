package wire

import (
	"encoding/binary"
	"fmt"
	"strconv"
)

// Hello is the private data of a connection request and of its accept:
// each side states what it posts for the other. It fits the 55 bytes verbs
// carries, also with a key's authenticator after it:
//
//	[0:4]   "NTIO"
//	[4]     protocol level
//	[5]     mode: 0 LowLatency, 1 HighThroughput
//	[6]     role of the sender (zero in hellos from before publish/subscribe)
//	[7]     flags: FlagKeyed
//	[8:12]  receive buffers posted for the peer
//	[12:16] bytes per receive buffer, header included
//	[16:24] largest message accepted
//
// A keyed hello is followed by an authenticator (package admission):
//
//	request (52 bytes): hello[0:24] | time[24:32] | nonce[32:36] | mac[36:52]
//	accept  (40 bytes): hello[0:24] | mac[24:40]
type Hello struct {
	Version    uint8
	Mode       uint8
	Role       Role
	Flags      uint8
	Window     uint32
	BufferSize uint32
	MaxMessage uint64

	// Auth is a keyed request's authenticator, which the accept is bound
	// to; set by the listener's admission, not by ParseHello.
	Auth [AuthTrailer]byte
}

const (
	helloMagic = "NTIO"
	// HelloSize is the length of a hello without an authenticator.
	HelloSize = 24
	// ProtocolLevel 2 added heartbeats (KindHeartbeat) and keyed hellos
	// (byte 7): a level-1 peer would end a connection at its first
	// heartbeat, so the two refuse each other at the handshake instead.
	// Level 3 sends LowLatency messages in pages instead of KindData
	// fragments, which a level-2 peer would refuse at the first message.
	ProtocolLevel = 3

	// FlagKeyed in byte 7 of a hello: an authenticator follows.
	FlagKeyed = 1

	AuthTimeSize  = 8
	AuthNonceSize = 4
	AuthMACSize   = 16
	// AuthTrailer is what follows the hello in a keyed request.
	AuthTrailer     = AuthTimeSize + AuthNonceSize + AuthMACSize
	AuthRequestSize = HelloSize + AuthTrailer
	AuthAcceptSize  = HelloSize + AuthMACSize
)

// The ranges a peer's hello must keep to: netio's own Config limits, so
// that no peer makes a connection commit more than a Config could.
const (
	MaxMode       = 1 // HighThroughput
	MinWindow     = 4
	MaxWindow     = 4096
	MinBufferSize = 4 << 10
	MaxBufferSize = 128 << 20
)

// Role is what one end of a link is. A link joins a connection end to a
// connection end, or a subscriber to a publisher.
type Role uint8

const (
	RoleConn Role = iota
	RoleSubscriber
	RolePublisher
)

var roleNames = [...]string{"connection", "subscriber", "publisher"}

func (r Role) String() string {
	if int(r) < len(roleNames) {
		return roleNames[r]
	}
	return "role(" + strconv.Itoa(int(r)) + ")"
}

// Peer is the role the other end must have.
func (r Role) Peer() Role {
	switch r {
	case RoleSubscriber:
		return RolePublisher
	case RolePublisher:
		return RoleSubscriber
	}
	return RoleConn
}

// The private data of a netio listener's reject, so that a dialer can tell
// why it was turned away from a closed port.
const (
	// RejectMarker: the listener is full or closing.
	RejectMarker = "NTIO-REJECT"
	// RejectModeMarker: the peer asked for the other mode.
	RejectModeMarker = "NTIO-REJECT-MODE"
	// RejectRoleMarker: a peer of the wrong role (a Dial to a publisher,
	// a subscriber to a plain listener).
	RejectRoleMarker = "NTIO-REJECT-ROLE"
	// RejectLimitMarker: the listener cannot take the peer now: it holds
	// Config.MaxConns connections, or the process's registered memory or
	// file descriptors would not suffice.
	RejectLimitMarker = "NTIO-REJECT-LIMIT"
	// RejectAuthMarker: the request failed admission. The dialer is not
	// told why, as a guessing peer should learn nothing.
	RejectAuthMarker = "NTIO-REJECT-AUTH"
)

// Marshal is h's 24 bytes, without an authenticator.
func (h *Hello) Marshal() []byte {
	b := make([]byte, HelloSize)
	copy(b, helloMagic)
	b[4] = h.Version
	b[5] = h.Mode
	b[6] = byte(h.Role)
	b[7] = h.Flags
	binary.LittleEndian.PutUint32(b[8:], h.Window)
	binary.LittleEndian.PutUint32(b[12:], h.BufferSize)
	binary.LittleEndian.PutUint64(b[16:], h.MaxMessage)
	return b
}

// ParseHello reads a peer's hello and checks it against the protocol's
// ranges; what follows its 24 bytes is not looked at.
func ParseHello(b []byte) (Hello, error) {
	if len(b) < HelloSize || string(b[:4]) != helloMagic {
		return Hello{}, fmt.Errorf("%w: not a netio peer (bad handshake of %d bytes)", ErrProtocol, len(b))
	}
	h := Hello{
		Version:    b[4],
		Mode:       b[5],
		Role:       Role(b[6]),
		Flags:      b[7],
		Window:     binary.LittleEndian.Uint32(b[8:]),
		BufferSize: binary.LittleEndian.Uint32(b[12:]),
		MaxMessage: binary.LittleEndian.Uint64(b[16:]),
	}
	switch {
	case h.Version != ProtocolLevel:
		return h, fmt.Errorf("%w: peer speaks protocol %d, not %d", ErrProtocol, h.Version, ProtocolLevel)
	case h.Window < MinWindow || h.Window > MaxWindow:
		return h, fmt.Errorf("%w: peer window %d out of range", ErrProtocol, h.Window)
	case h.BufferSize < MinBufferSize || h.BufferSize > MaxBufferSize:
		return h, fmt.Errorf("%w: peer buffer size %d out of range", ErrProtocol, h.BufferSize)
	case h.Mode > MaxMode:
		return h, fmt.Errorf("%w: peer asks for unknown mode %d", ErrProtocol, h.Mode)
	case h.Role > RolePublisher:
		return h, fmt.Errorf("%w: peer is of unknown role %d", ErrProtocol, h.Role)
	case h.MaxMessage == 0:
		return h, fmt.Errorf("%w: peer accepts no messages", ErrProtocol)
	}
	return h, nil
}
