package netio

import (
	"crypto/rand"
	"encoding/binary"
	"time"

	"github.com/netio-go/netio/internal/admit"
	"github.com/netio-go/netio/internal/wire"
)

// DefaultKey is the key a Listen or Dial with no key options uses: the
// test binary's default key file, made on first use.
func DefaultKey() []byte {
	var c Config
	if err := c.resolveKey(); err != nil {
		panic(err)
	}
	return c.Key
}

// SealedRequest is hello with the authenticator a dialer holding the
// default key adds: what a hand-made peer that has the key sends. A hello
// shorter than netio's is returned as it is.
func SealedRequest(hello []byte) []byte {
	if len(hello) < wire.HelloSize {
		return hello
	}
	data := append(append([]byte(nil), hello[:wire.HelloSize]...), make([]byte, wire.AuthTrailer)...)
	data[7] |= wire.FlagKeyed
	binary.LittleEndian.PutUint64(data[wire.HelloSize:], uint64(time.Now().UnixNano()))
	rand.Read(data[wire.HelloSize+wire.AuthTimeSize : wire.HelloSize+wire.AuthTimeSize+wire.AuthNonceSize])
	mac := admit.MAC(DefaultKey(), admit.LabelRequest, data[:wire.AuthRequestSize-wire.AuthMACSize])
	copy(data[wire.AuthRequestSize-wire.AuthMACSize:], mac[:])
	return data
}

// SealedAccept is hello with the proof a listener holding the default key
// adds to its accept of request (the request's private data): what a
// hand-made listener that has the key answers. A request without an
// authenticator gets hello as it is.
func SealedAccept(hello, request []byte) []byte {
	if len(hello) < wire.HelloSize || len(request) < wire.AuthRequestSize {
		return hello
	}
	data := append([]byte(nil), hello[:wire.HelloSize]...)
	data[7] |= wire.FlagKeyed
	mac := admit.MAC(DefaultKey(), admit.LabelAccept, data, request[wire.HelloSize:wire.AuthRequestSize])
	return append(data, mac[:]...)
}

// AcceptSize is the size of a keyed accept's private data.
const AcceptSize = wire.AuthAcceptSize

// HoldConnManager blocks the thread that reads l's connection requests
// until the returned function is called; it returns once the thread is
// held.
func HoldConnManager(l *Listener) (release func()) {
	held, done := make(chan struct{}), make(chan struct{})
	l.ac.cm.r.SubmitFunc(func() {
		close(held)
		<-done
	})
	<-held
	return func() { close(done) }
}
