package netio

import (
	"fmt"

	"github.com/netio-go/netio/internal/admit"
	"github.com/netio-go/netio/internal/wire"
)

// Admission with a pre-shared key (Config.Key): internal/admit seals and
// checks connection requests and accepts; here are the key's option and
// the errors a dialer sees.
const (
	minKeySize = 16
	maxKeySize = 64
)

var rejectAuthData = []byte(wire.RejectAuthMarker)

// checkKey checks Config.Key: none, or 16 to 64 bytes.
func checkKey(key []byte) error {
	if n := len(key); n != 0 && (n < minKeySize || n > maxKeySize) {
		return invalid("key of %d bytes: want %d to %d", n, minKeySize, maxKeySize)
	}
	return nil
}

// WithKey sets Config.Key to a copy of key.
func WithKey(key []byte) Option {
	return func(c *Config) error {
		c.Key = nil
		if len(key) > 0 {
			c.Key = append([]byte(nil), key...) // the caller may reuse its slice
		}
		return checkKey(key)
	}
}

// authError is a dial's failed admission: the listener turned this side
// away, or could not prove it holds the key. It wraps ErrRejected.
type authError struct {
	reason string
	// source says where this side's key came from; the dial sets it.
	source keySource
}

func (e *authError) Error() string {
	s := ErrRejected.Error() + ": authentication failed: " + e.reason
	if e.source != "" {
		s += " (this side's key: " + string(e.source) + ")"
	}
	return s
}

func (e *authError) Unwrap() error { return ErrRejected }

// errAuth is the dialer's error for a request the listener turned away
// at admission.
func errAuth(key []byte) error {
	if len(key) == 0 {
		return &authError{reason: "the listener requires a key and this side has none: drop Insecure here, or set it on the listener too"}
	}
	return &authError{reason: fmt.Sprintf("the listener does not take this side's key: the keys differ (give both sides the same key file), or the listener has no key (Insecure), or the clocks are more than %v apart", admit.Window)}
}

// openAccept checks, with a key, the listener's proof in the accept data,
// for the request whose trailer was reqAuth (admit.OpenAccept).
func openAccept(key, data []byte, reqAuth [wire.AuthTrailer]byte) error {
	if err := admit.OpenAccept(key, data, reqAuth); err != nil {
		return &authError{reason: err.Error()}
	}
	return nil
}

// replays is the process's record of the requests admitted within
// admit.Window, shared by all its listeners and publishers: a request sent
// to one of them cannot be replayed to another of the same process. (One
// recorded on its way to a different process that holds the same key can
// be replayed there once, within admit.Window: give each such process a key
// of its own where that matters.)
var replays = admit.NewReplayCache(admit.ReplayCacheSize)
