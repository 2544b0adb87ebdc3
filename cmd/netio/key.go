package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"unicode/utf8"

	"github.com/netio-go/netio"
)

// keyFile is the -key-file flag: the pre-shared key (netio.Config.Key)
// that every command which connects or listens can require. The key is
// read from a file, never given on the command line, where every user of
// the machine could read it in the process list.
type keyFile struct {
	path string
	key  []byte
}

func (k *keyFile) String() string {
	if k == nil {
		return ""
	}
	return k.path
}

// Set reads and checks the key when the flag is parsed, so that a bad
// file is a usage error before anything connects.
func (k *keyFile) Set(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	key := trimTextNewline(b)
	if err := netio.WithKey(key)(new(netio.Config)); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if len(key) == 0 {
		return fmt.Errorf("%s: %w", path, errEmptyKey)
	}
	k.path, k.key = path, key
	return nil
}

var errEmptyKey = errors.New("the file is empty: a key is 16 to 64 bytes")

// trimTextNewline drops the line end of a key file written as text (the
// output of 'openssl rand -hex 32', or an editor's), so that it is the
// same key whether or not the editor added one. A binary key (head -c 32
// /dev/urandom) is kept byte for byte, even if it ends in a newline byte.
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

// options are the netio options of the key: none without -key-file.
func (k *keyFile) options() []netio.Option {
	if len(k.key) == 0 {
		return nil
	}
	return []netio.Option{netio.WithKey(k.key)}
}

// keyFlag adds -key-file.
func keyFlag(fs *flag.FlagSet) *keyFile {
	k := new(keyFile)
	fs.Var(k, "key-file", "`path` of a file holding a pre-shared key of 16 to 64 bytes (a text file's line end is not part of it, e.g. 'openssl rand -hex 32 > key'): a listener then admits only peers with the same key, and a dialer connects only to a listener that proves it has it; both sides must use it (default: no key)")
	return k
}
