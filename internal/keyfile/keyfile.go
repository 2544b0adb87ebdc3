// Package keyfile reads, makes and writes the files that hold netio's
// pre-shared key, and finds the one to use when a Config names no key:
// the file named by $NETIO_KEY_FILE or, when that is unset, a per-user
// file made on first use, as Erlang's distribution does with its cookie.
// Processes of one user on one host, or on hosts that share the home
// directory, then admit each other with no configuration, and nobody else.
//
// The root package exports these as ReadKeyFile, WriteKeyFile,
// EnsureKeyFile, DefaultKeyFile, KeyFileEnv and ErrNoKey; the messages
// name those.
package keyfile

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

// A key is MinSize to MaxSize bytes.
const (
	MinSize = 16
	MaxSize = 64
)

// Env names the environment variable that, when set, names the key file
// used when Config has neither Key nor KeyFile.
const Env = "NETIO_KEY_FILE"

// ErrNoKey is wrapped by every error of a key file that could not be read
// or made.
var ErrNoKey = errors.New("netio: no key")

// Default returns the path of the per-user key file: netio/key in the
// user's configuration directory (os.UserConfigDir). It only names it.
func Default() (string, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("%w: no configuration directory for the default key file (%v): set $%s to a key file, or set HOME", ErrNoKey, err, Env)
	}
	return filepath.Join(dir, "netio", "key"), nil
}

// Resolve reads the key a Config with no key of its own uses: from
// configured (Config.KeyFile) if not empty, else from $NETIO_KEY_FILE,
// else from Default, made first if missing. source says which file and
// why, for the errors that tell a user why a peer turned the key away.
func Resolve(configured string) (key []byte, source string, err error) {
	path, how, create := configured, "Config.KeyFile", false
	if path == "" {
		if path = os.Getenv(Env); path != "" {
			how = "$" + Env
		} else {
			if path, err = Default(); err != nil {
				return nil, "", err
			}
			how, create = "the default", true
		}
	}
	if key, err = load(path, create); err != nil {
		return nil, "", err
	}
	return key, fmt.Sprintf("key file %s (%s)", path, how), nil
}

// Read reads the key held in the file at path: its content, less the line
// end of a text file (what 'openssl rand -hex 32 > file' or an editor
// writes), MinSize to MaxSize bytes. The file must be readable by its
// owner only (mode 0600 or 0400): a key others can read admits them too.
func Read(path string) ([]byte, error) {
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
	b, err := io.ReadAll(io.LimitReader(f, MaxSize+3)) // a key, a line end and one more
	if err != nil {
		return nil, fmt.Errorf("%w: reading key file: %w", ErrNoKey, err)
	}
	key := trimTextNewline(b)
	if n := len(key); n < MinSize || n > MaxSize {
		return nil, fmt.Errorf("%w: key file %s holds %d bytes, not a key of %d to %d: write a new one with 'netio key -new -file %s', or copy the peers' key file", ErrNoKey, path, n, MinSize, MaxSize, path)
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

// load reads the key file at path; with create, a missing one is made
// first.
func load(path string, create bool) ([]byte, error) {
	if create {
		if _, err := os.Stat(path); err != nil {
			if _, err := createFile(path); err != nil {
				return nil, fmt.Errorf("%w: cannot create the key file %s: %w; set $%s to a key file you can read, or give one with WithKeyFile", ErrNoKey, path, err, Env)
			}
		}
	}
	key, err := Read(path)
	for i := 0; err != nil && i < 50 && beingWritten(path); i++ {
		// Another process made it without a hard link (fallback of
		// createFile) and is still writing: a few milliseconds.
		time.Sleep(2 * time.Millisecond)
		key, err = Read(path)
	}
	return key, err
}

// beingWritten reports whether path is an empty file made in the last
// second: one that createFile's fallback is writing.
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

// createFile makes a key file with a new random key at path, if none is
// there, and reports whether it did: processes that start together race
// to make it, and all of them then read the one that won. The key is
// written to a file of its own and linked into place, so that no reader
// sees a file half written and no writer replaces another's key.
func createFile(path string) (made bool, err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false, err
	}
	tmp, err := writeTemp(dir)
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

// writeTemp writes a new key into a new file in dir, mode 0600, and
// returns its path.
func writeTemp(dir string) (string, error) {
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

// Write writes a new random key to the file at path, mode 0600, replacing
// the key there if any, and making its directory if missing. An empty
// path means Default.
func Write(path string) (string, error) {
	if path == "" {
		var err error
		if path, err = Default(); err != nil {
			return "", err
		}
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	tmp, err := writeTemp(dir)
	if err != nil {
		return "", err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return "", err
	}
	return path, nil
}

// Ensure returns the path of the key file used with no key options
// ($NETIO_KEY_FILE, or Default), making the default one if it is missing,
// and whether it made it.
func Ensure() (path string, created bool, err error) {
	if path = os.Getenv(Env); path != "" {
		_, err = Read(path)
		return path, false, err
	}
	if path, err = Default(); err != nil {
		return "", false, err
	}
	if _, err := os.Stat(path); err != nil {
		if created, err = createFile(path); err != nil {
			return path, false, fmt.Errorf("%w: cannot create the key file %s: %w", ErrNoKey, path, err)
		}
	}
	_, err = load(path, false)
	return path, created, err
}
