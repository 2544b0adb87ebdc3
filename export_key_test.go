package netio

import (
	"crypto/rand"
	"encoding/binary"
	"time"
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
	if len(hello) < helloSize {
		return hello
	}
	data := append(append([]byte(nil), hello[:helloSize]...), make([]byte, authTrailer)...)
	data[7] |= flagKeyed
	binary.LittleEndian.PutUint64(data[helloSize:], uint64(time.Now().UnixNano()))
	rand.Read(data[helloSize+authTimeSize : helloSize+authTimeSize+authNonce])
	mac := authMAC(DefaultKey(), labelRequest, data[:authReqSize-authMACSize])
	copy(data[authReqSize-authMACSize:], mac[:])
	return data
}

// SealedAccept is hello with the proof a listener holding the default key
// adds to its accept of request (the request's private data): what a
// hand-made listener that has the key answers. A request without an
// authenticator gets hello as it is.
func SealedAccept(hello, request []byte) []byte {
	if len(hello) < helloSize || len(request) < authReqSize {
		return hello
	}
	data := append([]byte(nil), hello[:helloSize]...)
	data[7] |= flagKeyed
	mac := authMAC(DefaultKey(), labelAccept, data, request[helloSize:authReqSize])
	return append(data, mac[:]...)
}

// AcceptSize is the size of a keyed accept's private data.
const AcceptSize = authAccSize

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
