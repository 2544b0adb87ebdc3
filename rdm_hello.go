package netio

import (
	"encoding/binary"
	"fmt"
)

// The set-up messages of links on reliable-datagram endpoints: the only
// untagged messages netio sends there. The MSG path's hello, with its
// key proof, travels inside them as the connection request's and the
// accept's private data do on tcp; around it, what a connection manager
// tells an endpoint of its own on MSG: who sent it (the dialer's address,
// which RDM completions do not give), and which link of each side it is
// for.
//
//	0  "NRDM"
//	4  kind (rdmRequest, rdmAccept, rdmReject)
//	5  the sender's link id (u32, little endian)
//	9  the receiver's link id (0 in a request)
//	13 the length of the sender's address (u16; requests only)
//	15 the address (as ofi.ParseAddress reads it), then the hello
type rdmHello struct {
	kind     uint8
	from, to uint32
	addr     string // the dialer's own address (requests)
	data     []byte // the sealed hello, or a rejection's marker
}

const (
	rdmRequest = 1 + iota
	rdmAccept
	rdmReject
)

const (
	rdmHelloMagic  = "NRDM"
	rdmHelloHeader = 15
	// rdmHelloSize bounds a set-up message: the hello window's buffers
	// are this large. A peer never sends more untagged (docs/rdm.md: on
	// shm a larger one would not fail the receive).
	rdmHelloSize = 512
)

func (m *rdmHello) marshal(b []byte) ([]byte, error) {
	n := rdmHelloHeader + len(m.addr) + len(m.data)
	if n > rdmHelloSize || n > len(b) {
		return nil, fmt.Errorf("netio: set-up message of %d bytes, limit %d", n, rdmHelloSize)
	}
	b = b[:n]
	copy(b, rdmHelloMagic)
	b[4] = m.kind
	binary.LittleEndian.PutUint32(b[5:], m.from)
	binary.LittleEndian.PutUint32(b[9:], m.to)
	binary.LittleEndian.PutUint16(b[13:], uint16(len(m.addr)))
	copy(b[rdmHelloHeader:], m.addr)
	copy(b[rdmHelloHeader+len(m.addr):], m.data)
	return b, nil
}

// parseRDMHello reads a set-up message; data points into b.
func parseRDMHello(b []byte) (rdmHello, error) {
	if len(b) < rdmHelloHeader || string(b[:4]) != rdmHelloMagic {
		return rdmHello{}, fmt.Errorf("%w: not a netio set-up message (%d bytes)", ErrProtocol, len(b))
	}
	m := rdmHello{kind: b[4], from: binary.LittleEndian.Uint32(b[5:]), to: binary.LittleEndian.Uint32(b[9:])}
	n := int(binary.LittleEndian.Uint16(b[13:]))
	if n > len(b)-rdmHelloHeader {
		return rdmHello{}, fmt.Errorf("%w: set-up message with an address of %d bytes in %d", ErrProtocol, n, len(b))
	}
	switch {
	case m.kind < rdmRequest || m.kind > rdmReject:
		return rdmHello{}, fmt.Errorf("%w: set-up message of kind %d", ErrProtocol, m.kind)
	case m.from == 0 || m.from > rdmMaxID:
		return rdmHello{}, fmt.Errorf("%w: set-up message from link %d", ErrProtocol, m.from)
	case m.kind == rdmRequest && (n == 0 || m.to != 0):
		return rdmHello{}, fmt.Errorf("%w: a request without its address, or to a link", ErrProtocol)
	}
	m.addr = string(b[rdmHelloHeader : rdmHelloHeader+n])
	m.data = b[rdmHelloHeader+n:]
	return m, nil
}
