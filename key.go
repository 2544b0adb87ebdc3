package netio

import (
	"fmt"

	"github.com/netio-go/netio/internal/admit"
	"github.com/netio-go/netio/internal/keyfile"
	"github.com/netio-go/netio/internal/wire"
)

// Admission with a pre-shared key (Config.Key): internal/admit seals and
// checks connection requests and accepts, internal/keyfile reads and makes
// the key files; here are the key's options, where a connection's key
// comes from, and the errors a dialer sees.
const (
	minKeySize = keyfile.MinSize
	maxKeySize = keyfile.MaxSize
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

// KeyFileEnv names the environment variable that, when set, names the key
// file used when Config has neither Key nor KeyFile.
const KeyFileEnv = keyfile.Env

// ErrNoKey is wrapped by the error of a Listen, Dial, ListenPublisher or
// Subscribe that could not read its key file, or make the default one;
// the error names the file and what to do.
var ErrNoKey = keyfile.ErrNoKey

// DefaultKeyFile returns the path of the per-user key file:
// netio/key in the user's configuration directory (os.UserConfigDir:
// $XDG_CONFIG_HOME, or ~/.config). It is what Listen, Dial,
// ListenPublisher and Subscribe use, creating it if missing, when Config
// has no Key or KeyFile and $NETIO_KEY_FILE is unset. DefaultKeyFile only
// names it.
func DefaultKeyFile() (string, error) { return keyfile.Default() }

// ReadKeyFile reads the key held in the file at path: its content, less
// the line end of a text file (what 'openssl rand -hex 32 > file' or an
// editor writes), 16 to 64 bytes. The file must be readable by its owner
// only (mode 0600 or 0400): a key others can read admits them too.
func ReadKeyFile(path string) ([]byte, error) { return keyfile.Read(path) }

// WriteKeyFile writes a new random key to the file at path, mode 0600,
// replacing the key there if any, and making its directory if missing.
// Peers that hold the old key no longer connect: copy the new file to
// them. An empty path means DefaultKeyFile.
func WriteKeyFile(path string) (string, error) { return keyfile.Write(path) }

// EnsureKeyFile returns the path of the key file that Listen and Dial use
// with no key options ($NETIO_KEY_FILE, or DefaultKeyFile), making the
// default one if it is missing, and whether it made it.
func EnsureKeyFile() (path string, created bool, err error) { return keyfile.Ensure() }

// keySource says where a connection's key came from, for the errors that
// tell a user why a peer turned it away.
type keySource string

const (
	keyFromConfig   keySource = "Config.Key"
	keyFromInsecure keySource = "none: Config.Insecure"
)

// resolveKey fills in c.Key from its key file when c has neither a key
// nor Insecure, and records where the key came from.
func (c *Config) resolveKey() error {
	switch {
	case c.Insecure:
		c.keySource = keyFromInsecure
		return nil
	case len(c.Key) > 0:
		c.keySource = keyFromConfig
		return nil
	}
	key, source, err := keyfile.Resolve(c.KeyFile)
	if err != nil {
		return err
	}
	c.Key, c.keySource = key, keySource(source)
	return nil
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
