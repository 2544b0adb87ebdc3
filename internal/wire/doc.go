// Package wire is netio's wire format: the header every libfabric message
// starts with, the kinds of message, the hello of a connection request and
// its accept, and the control messages of publish/subscribe. It does no
// I/O: it encodes and decodes bytes, and a decoder takes whatever a peer
// sent, never panics on it, and sizes nothing by a count the bytes claim.
package wire

import "errors"

// Errors of decoding what a peer sent. netio exports them under the same
// names: a connection that meets one ends with it.
var (
	// ErrProtocol: the peer broke the wire protocol.
	ErrProtocol = errors.New("netio: protocol violation")
	// ErrMessageTooLarge: a message above the largest one accepted.
	ErrMessageTooLarge = errors.New("netio: message too large")
)
