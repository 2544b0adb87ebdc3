package wire

import (
	"encoding/binary"
	"fmt"
)

// RDMHello is a set-up message of links on reliable-datagram endpoints:
// the only untagged messages netio sends there. The MSG path's hello, with
// its key proof, travels inside it as the connection request's and the
// accept's private data do on tcp; around it, what a connection manager
// tells an endpoint of its own on MSG: who sent it (the dialer's address,
// which RDM completions do not give), and which link of each side it is
// for. An accept may name the endpoint its link receives on, when that is
// not the listener's own (shm gives each accepted link an endpoint of its
// own: docs/rdm.md); the dialer's link sends there from then on.
//
//	0  "NRDM"
//	4  kind (RDMRequest, RDMAccept, RDMReject)
//	5  the sender's link id (u32, little endian)
//	9  the receiver's link id (0 in a request)
//	13 the sender's doorbell window in µs (u32; RDMNoBell: none)
//	17 the sender's network namespace (u64, its inode; 0: unknown)
//	25 the sender's process (u64, drawn at random once per process)
//	33 the length of the address (u16): the dialer's own in a request,
//	   the accepted link's endpoint in an accept (0: the listener's), none
//	   in a reject
//	35 the address (as ofi.ParseAddress reads it), then the hello
//
// The doorbell: a peer whose queue no descriptor reports (shm) listens on
// a datagram socket that a sender rings when it may be asleep; one that
// was sent to or rung within the window is still awake (docs/rdm.md).
// Rings reach only within a network namespace, hence its identity; a
// peer of the same process needs none (one reactor polls both ends).
type RDMHello struct {
	Kind     uint8
	From, To uint32
	Bell     uint32 // the sender's doorbell window in µs, or RDMNoBell
	NetNS    uint64 // the sender's network namespace
	Proc     uint64 // the sender's process
	Addr     string // the dialer's own address (requests), or the accepted link's endpoint (accepts, optional)
	Data     []byte // the sealed hello, or a rejection's marker
}

// RDMNoBell is RDMHello.Bell of a sender without a doorbell: its peers
// do not ring it, and it polls for their messages on a timer.
const RDMNoBell = 1<<32 - 1

// The kinds of RDMHello.
const (
	RDMRequest = 1 + iota
	RDMAccept
	RDMReject
)

const (
	rdmHelloMagic  = "NRDM"
	rdmHelloHeader = 35
	// RDMHelloSize bounds a set-up message: the buffers of an endpoint's
	// set-up window are this large, and a peer never sends more untagged
	// (on shm a larger one would not fail the receive).
	RDMHelloSize = 512
	// RDMMaxID is the largest link id: ids share a 64-bit completion
	// token with a buffer index.
	RDMMaxID = 1<<30 - 1
)

// Marshal writes m into b, which has room for RDMHelloSize bytes, and
// returns the message.
func (m *RDMHello) Marshal(b []byte) ([]byte, error) {
	n := rdmHelloHeader + len(m.Addr) + len(m.Data)
	if n > RDMHelloSize || n > len(b) || len(m.Addr) > 0xffff {
		return nil, fmt.Errorf("netio: set-up message of %d bytes, limit %d", n, RDMHelloSize)
	}
	b = b[:n]
	copy(b, rdmHelloMagic)
	b[4] = m.Kind
	binary.LittleEndian.PutUint32(b[5:], m.From)
	binary.LittleEndian.PutUint32(b[9:], m.To)
	binary.LittleEndian.PutUint32(b[13:], m.Bell)
	binary.LittleEndian.PutUint64(b[17:], m.NetNS)
	binary.LittleEndian.PutUint64(b[25:], m.Proc)
	binary.LittleEndian.PutUint16(b[33:], uint16(len(m.Addr)))
	copy(b[rdmHelloHeader:], m.Addr)
	copy(b[rdmHelloHeader+len(m.Addr):], m.Data)
	return b, nil
}

// ParseRDMHello reads a set-up message; Data points into b. Anything but a
// well-formed message is ErrProtocol.
func ParseRDMHello(b []byte) (RDMHello, error) {
	if len(b) < rdmHelloHeader || string(b[:4]) != rdmHelloMagic {
		return RDMHello{}, fmt.Errorf("%w: not a netio set-up message (%d bytes)", ErrProtocol, len(b))
	}
	m := RDMHello{Kind: b[4], From: binary.LittleEndian.Uint32(b[5:]), To: binary.LittleEndian.Uint32(b[9:]),
		Bell: binary.LittleEndian.Uint32(b[13:]), NetNS: binary.LittleEndian.Uint64(b[17:]), Proc: binary.LittleEndian.Uint64(b[25:])}
	n := int(binary.LittleEndian.Uint16(b[33:]))
	if n > len(b)-rdmHelloHeader {
		return RDMHello{}, fmt.Errorf("%w: set-up message with an address of %d bytes in %d", ErrProtocol, n, len(b))
	}
	switch {
	case m.Kind < RDMRequest || m.Kind > RDMReject:
		return RDMHello{}, fmt.Errorf("%w: set-up message of kind %d", ErrProtocol, m.Kind)
	case m.From == 0 || m.From > RDMMaxID:
		return RDMHello{}, fmt.Errorf("%w: set-up message from link %d", ErrProtocol, m.From)
	case m.Kind == RDMRequest && (n == 0 || m.To != 0):
		return RDMHello{}, fmt.Errorf("%w: a request without its address, or to a link", ErrProtocol)
	case m.Kind == RDMReject && n != 0:
		return RDMHello{}, fmt.Errorf("%w: a reject naming an address", ErrProtocol)
	}
	m.Addr = string(b[rdmHelloHeader : rdmHelloHeader+n])
	m.Data = b[rdmHelloHeader+n:]
	return m, nil
}
