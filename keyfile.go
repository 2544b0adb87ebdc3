package netio

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"
	"unicode/utf8"
)

// A key by default: with no Config.Key, Config.KeyFile or Config.Insecure,
// netio takes its key from the file named by $NETIO_KEY_FILE or, when that
// is unset, from a per-user file that it makes on first use, as Erlang's
// distribution does with its cookie. Processes of one user on one host, or
// on hosts that share the home directory, then admit each other with no
// configuration, and nobody else.

// KeyFileEnv names the environment variable that, when set, names the key
// file used when Config has neither Key nor KeyFile.
const KeyFileEnv = "NETIO_KEY_FILE"

// ErrNoKey is wrapped by the error of a Listen, Dial, ListenPublisher or
// Subscribe that could not read its key file, or make the default one;
// the error names the file and what to do.
var ErrNoKey = errors.New("netio: no key")

// DefaultKeyFile returns the path of the per-user key file:
// netio/key in the user's configuration directory (os.UserConfigDir:
// $XDG_CONFIG_HOME, or ~/.config). It is what Listen, Dial,
// ListenPublisher and Subscribe use, creating it if missing, when Config
// has no Key or KeyFile and $NETIO_KEY_FILE is unset. DefaultKeyFile only
// names it.
func DefaultKeyFile() (string, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("%w: no configuration directory for the default key file (%v): set $%s to a key file, or set HOME", ErrNoKey, err, KeyFileEnv)
	}
	return filepath.Join(dir, "netio", "key"), nil
}

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
	path, how, create := c.KeyFile, "Config.KeyFile", false
	if path == "" {
		if path = os.Getenv(KeyFileEnv); path != "" {
			how = "$" + KeyFileEnv
		} else {
			var err error
			if path, err = DefaultKeyFile(); err != nil {
				return err
			}
			how, create = "the default", true
		}
	}
	key, err := loadKeyFile(path, create)
	if err != nil {
		return err
	}
	c.Key = key
	c.keySource = keySource(fmt.Sprintf("key file %s (%s)", path, how))
	return nil
}

// ReadKeyFile reads the key held in the file at path: its content, less
// the line end of a text file (what 'openssl rand -hex 32 > file' or an
// editor writes), 16 to 64 bytes. The file must be readable by its owner
// only (mode 0600 or 0400): a key others can read admits them too.
func ReadKeyFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: key file %s does not exist: copy the key file of the peers to it, or write a new key with 'netio key -file %s'", ErrNoKey, path, path)
		}
		return nil, fmt.Errorf("%w: reading key file: %w", ErrNoKey, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%w: reading key file: %w", ErrNoKey, err)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("%w: key file %s can be read by other users (mode %#o): run chmod 600 %s", ErrNoKey, path, perm, path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxKeySize+3)) // a key, a line end and one more
	if err != nil {
		return nil, fmt.Errorf("%w: reading key file: %w", ErrNoKey, err)
	}
	key := trimTextNewline(b)
	if n := len(key); n < minKeySize || n > maxKeySize {
		return nil, fmt.Errorf("%w: key file %s holds %d bytes, not a key of %d to %d: write a new one with 'netio key -new -file %s', or copy the peers' key file", ErrNoKey, path, n, minKeySize, maxKeySize, path)
	}
	return key, nil
}

// trimTextNewline drops the line end of a key file written as text, so
// that it is the same key whether or not the editor added one. A binary
// key (head -c 32 /dev/urandom) is kept byte for byte, even if it ends in
// a newline byte.
func trimTextNewline(b []byte) []byte {
	t := bytes.TrimSuffix(bytes.TrimSuffix(b, []byte("\n")), []byte("\r"))
	if len(t) == len(b) || !utf8.Valid(t) {
		return b
	}
	for _, c := range t {
		if c < 0x20 || c == 0x7f {
			return b
		}
	}
	return t
}

// loadKeyFile reads the key file at path; with create, a missing one is
// made first.
func loadKeyFile(path string, create bool) ([]byte, error) {
	if create {
		if _, err := os.Stat(path); err != nil {
			if _, err := createKeyFile(path); err != nil {
				return nil, fmt.Errorf("%w: cannot create the key file %s: %w; set $%s to a key file you can read, or give one with WithKeyFile", ErrNoKey, path, err, KeyFileEnv)
			}
		}
	}
	key, err := ReadKeyFile(path)
	for i := 0; err != nil && i < 50 && beingWritten(path); i++ {
		// Another process made it without a hard link (fallback of
		// createKeyFile) and is still writing: a few milliseconds.
		time.Sleep(2 * time.Millisecond)
		key, err = ReadKeyFile(path)
	}
	return key, err
}

// beingWritten reports whether path is an empty file made in the last
// second: one that createKeyFile's fallback is writing.
func beingWritten(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Size() == 0 && time.Since(st.ModTime()) < time.Second
}

// newKeyText is a new random key as a key file holds it: 32 random bytes
// in hex, and a line end.
func newKeyText() []byte {
	var k [32]byte
	rand.Read(k[:])
	return append([]byte(hex.EncodeToString(k[:])), '\n')
}

// createKeyFile makes a key file with a new random key at path, if none is
// there, and reports whether it did: processes that start together race
// to make it, and all of them then read the one that won. The key is
// written to a file of its own and linked into place, so that no reader
// sees a file half written and no writer replaces another's key.
func createKeyFile(path string) (made bool, err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false, err
	}
	tmp, err := writeTempKey(dir)
	if err != nil {
		return false, err
	}
	defer os.Remove(tmp)
	err = os.Link(tmp, path)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrExist):
		return false, nil
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.EOPNOTSUPP), errors.Is(err, syscall.ENOTSUP), errors.Is(err, syscall.ENOSYS):
		// A file system without hard links: create in place, exclusively.
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		_, err = f.Write(newKeyText())
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err == nil, err
	}
	return false, err
}

// writeTempKey writes a new key into a new file in dir, mode 0600, and
// returns its path.
func writeTempKey(dir string) (string, error) {
	f, err := os.CreateTemp(dir, ".key-*")
	if err != nil {
		return "", err
	}
	_, err = f.Write(newKeyText())
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// WriteKeyFile writes a new random key to the file at path, mode 0600,
// replacing the key there if any, and making its directory if missing.
// Peers that hold the old key no longer connect: copy the new file to
// them. An empty path means DefaultKeyFile.
func WriteKeyFile(path string) (string, error) {
	if path == "" {
		var err error
		if path, err = DefaultKeyFile(); err != nil {
			return "", err
		}
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	tmp, err := writeTempKey(dir)
	if err != nil {
		return "", err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return "", err
	}
	return path, nil
}

// EnsureKeyFile returns the path of the key file that Listen and Dial use
// with no key options ($NETIO_KEY_FILE, or DefaultKeyFile), making the
// default one if it is missing, and whether it made it.
func EnsureKeyFile() (path string, created bool, err error) {
	if path = os.Getenv(KeyFileEnv); path != "" {
		_, err = ReadKeyFile(path)
		return path, false, err
	}
	if path, err = DefaultKeyFile(); err != nil {
		return "", false, err
	}
	if _, err := os.Stat(path); err != nil {
		if created, err = createKeyFile(path); err != nil {
			return path, false, fmt.Errorf("%w: cannot create the key file %s: %w", ErrNoKey, path, err)
		}
	}
	_, err = loadKeyFile(path, false)
	return path, created, err
}
