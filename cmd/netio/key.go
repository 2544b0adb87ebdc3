package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/netio-go/netio"
)

// keyFile holds the -key-file and -insecure flags: the pre-shared key
// (netio.Config.KeyFile) every command that connects or listens requires,
// or none. Without either, netio's default key file is used: the same for
// every process of the user, so two commands on one host connect with no
// flag at all. The key is read from a file, never given on the command
// line, where every user of the machine could read it in the process list.
type keyFile struct {
	path     string
	insecure bool
}

func (k *keyFile) String() string {
	if k == nil {
		return ""
	}
	return k.path
}

// Set checks the key file when the flag is parsed, so that a bad file is
// a usage error before anything connects; netio reads it again to use it.
func (k *keyFile) Set(path string) error {
	if _, err := netio.ReadKeyFile(path); err != nil {
		return err
	}
	k.path = path
	return nil
}

// options are the netio options of the flags: none without either, which
// means netio's default key file.
func (k *keyFile) options() []netio.Option {
	var opts []netio.Option
	if k.path != "" {
		opts = append(opts, netio.WithKeyFile(k.path))
	}
	if k.insecure {
		opts = append(opts, netio.WithInsecure())
	}
	return opts
}

// keyFlag adds -key-file and -insecure.
func keyFlag(fs *flag.FlagSet) *keyFile {
	k := new(keyFile)
	fs.Var(k, "key-file", "`path` of the pre-shared key file (16 to 64 bytes, mode 0600; a text file's line end is not part of the key): a listener admits only peers with the same key, and a dialer connects only to a listener that proves it has it (default: $NETIO_KEY_FILE, or ~/.config/netio/key, made on first use: see 'netio key')")
	fs.BoolVar(&k.insecure, "insecure", false, "use no key, on both sides: any host that reaches the port connects, and a hostile peer can then crash the process through libfabric's tcp provider; only where every host that can reach the port is trusted")
	return k
}

const keyUsage = `usage: netio key [-file path] [-new]

Print the path of the key file that netio commands and programs use when
given no key, making it with a new random key (mode 0600) if it does not
exist yet. With -new, write a new key there, replacing the old one: peers
that hold the old key no longer connect. The file is $NETIO_KEY_FILE when
set, or else ~/.config/netio/key ($XDG_CONFIG_HOME/netio/key).

Processes that share the file connect; every other peer is turned away
before libfabric reads anything it sends. To let another host in, give it
the same file, for example:

  ssh otherhost 'mkdir -p ~/.config/netio'
  scp -p ~/.config/netio/key otherhost:.config/netio/key

Hosts that share the home directory share the file already. -insecure on
both sides turns keys off (see 'netio ping -h').
`

func keyMain(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("key", keyUsage, stderr)
	path := fs.String("file", "", "the key file to write or make (default: $NETIO_KEY_FILE, or ~/.config/netio/key)")
	renew := fs.Bool("new", false, "write a new key even if the file exists, replacing its key")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	var err error
	switch {
	case *renew:
		var p string
		if p, err = netio.WriteKeyFile(pathOrEnv(*path)); err == nil {
			fmt.Fprintf(stderr, "wrote a new key to %s: copy it to every peer\n", p)
			fmt.Fprintln(stdout, p)
		}
	case *path != "":
		err = ensureAt(*path, stdout, stderr)
	default:
		var p string
		var made bool
		if p, made, err = netio.EnsureKeyFile(); err == nil {
			reportKey(p, made, stdout, stderr)
		}
	}
	if err != nil {
		return failed(stderr, "key", err)
	}
	return exitOK
}

// pathOrEnv is path, or $NETIO_KEY_FILE when path is empty (and then
// WriteKeyFile's default when that is unset too).
func pathOrEnv(path string) string {
	if path == "" {
		return os.Getenv(netio.KeyFileEnv)
	}
	return path
}

// ensureAt makes a key file at path unless one is there, and checks it.
func ensureAt(path string, stdout, stderr io.Writer) error {
	made := false
	if _, err := os.Stat(path); os.IsNotExist(err) {
		if _, err := netio.WriteKeyFile(path); err != nil {
			return err
		}
		made = true
	}
	if _, err := netio.ReadKeyFile(path); err != nil {
		return err
	}
	reportKey(path, made, stdout, stderr)
	return nil
}

func reportKey(path string, made bool, stdout, stderr io.Writer) {
	if made {
		fmt.Fprintf(stderr, "made a new key in %s\n", path)
	} else {
		fmt.Fprintf(stderr, "the key is in %s\n", path)
	}
	fmt.Fprintln(stdout, path)
}
