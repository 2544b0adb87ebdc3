package netio_test

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/netio-go/netio"
)

// A key by default: with no key options every Listen and Dial uses the
// user's key file, made on first use. The test binary's is in a temporary
// directory of its own (internal/testkey), as on a fresh machine.

// The default key file is made on first use: random, 64 hex digits and a
// line end, readable by its owner only, where DefaultKeyFile says.
func TestDefaultKeyFile(t *testing.T) {
	ln := listenT(t)
	c, s := dialAccept(t, ln)
	echo(t, c, s, []byte("with the default key"))

	path, err := netio.DefaultKeyFile()
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "netio", "key"); path != want {
		t.Errorf("DefaultKeyFile() = %s, want %s", path, want)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v, want 0600", st.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^[0-9a-f]{64}\n$`).Match(b) {
		t.Errorf("key file holds %q, want 64 hex digits and a line end", b)
	}
	if got, made, err := netio.EnsureKeyFile(); got != path || made || err != nil {
		t.Errorf("EnsureKeyFile() = %s, %v, %v; want the existing %s", got, made, err, path)
	}
}

// Peers without the key are refused, and the error says why and where
// this side's key came from.
func TestPeerWithoutKeyRefused(t *testing.T) {
	ln := listenT(t)
	_, err := netio.Dial("tcp", ln.Addr().String(), netio.WithInsecure())
	wantRejected(t, "Dial without a key", err)
	if msg := err.Error(); !strings.Contains(msg, "requires a key") || !strings.Contains(msg, "Insecure") {
		t.Errorf("Dial without a key: %q does not say the listener requires one", msg)
	}
	other := otherKeyFile(t)
	_, err = netio.Dial("tcp", ln.Addr().String(), netio.WithKeyFile(other))
	wantRejected(t, "Dial with another key", err)
	if msg := err.Error(); !strings.Contains(msg, "keys differ") || !strings.Contains(msg, other) {
		t.Errorf("Dial with another key: %q does not say the keys differ and where this side's came from", msg)
	}
	if st := ln.Stats(); st.RejectedAuth != 2 {
		t.Errorf("listener stats %+v, want 2 rejected at admission", st)
	}
	// An insecure listener takes only insecure peers.
	open := listenT(t, netio.WithInsecure())
	_, err = netio.Dial("tcp", open.Addr().String())
	wantRejected(t, "Dial with the default key to an insecure listener", err)
	if msg := err.Error(); !strings.Contains(msg, "key file") {
		t.Errorf("Dial to an insecure listener: %q does not name this side's key file", msg)
	}
	c, s := dialAccept(t, open, netio.WithInsecure())
	echo(t, c, s, []byte("both insecure"))
	c, s = dialAccept(t, ln)
	echo(t, c, s, []byte("both with the default key"))
}

// otherKeyFile writes a key file that is not the default one.
func otherKeyFile(t *testing.T) string {
	t.Helper()
	path, err := netio.WriteKeyFile(filepath.Join(t.TempDir(), "other", "key"))
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// A process that cannot read or make its key fails with an error that
// names the file and says what to do; contradictory options are invalid.
func TestKeyFileProblems(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	t.Setenv(netio.KeyFileEnv, missing)
	_, err := netio.Listen("tcp", "127.0.0.1:0")
	if !errors.Is(err, netio.ErrNoKey) || !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), "netio key") {
		t.Errorf("Listen with $%s naming a missing file: %v; want ErrNoKey naming it and 'netio key'", netio.KeyFileEnv, err)
	}

	open := filepath.Join(dir, "readable")
	if err := os.WriteFile(open, []byte("0123456789abcdef0123456789abcdef\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = netio.Dial("tcp", "127.0.0.1:1", netio.WithKeyFile(open))
	if !errors.Is(err, netio.ErrNoKey) || !strings.Contains(err.Error(), "chmod 600 "+open) {
		t.Errorf("Dial with a key file others can read: %v; want ErrNoKey telling to chmod 600 it", err)
	}

	short := filepath.Join(dir, "short")
	if err := os.WriteFile(short, []byte("tiny\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = netio.Dial("tcp", "127.0.0.1:1", netio.WithKeyFile(short))
	if !errors.Is(err, netio.ErrNoKey) || !strings.Contains(err.Error(), short) {
		t.Errorf("Dial with a 4-byte key: %v; want ErrNoKey naming the file", err)
	}

	// A configuration directory that cannot be made (its parent is a file).
	blocker := filepath.Join(dir, "file")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(netio.KeyFileEnv, "")
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(blocker, "config"))
	_, err = netio.ListenPublisher("tcp", "127.0.0.1:0")
	if !errors.Is(err, netio.ErrNoKey) || !strings.Contains(err.Error(), "cannot create") || !strings.Contains(err.Error(), netio.KeyFileEnv) {
		t.Errorf("ListenPublisher with no way to make the key file: %v; want ErrNoKey saying so and naming $%s", err, netio.KeyFileEnv)
	}
	// Insecure needs no key file at all.
	ln := listenT(t, netio.WithInsecure())
	c, s := dialAccept(t, ln, netio.WithInsecure())
	echo(t, c, s, []byte("no key file needed"))

	for name, opts := range map[string][]netio.Option{
		"Insecure and a key":      {netio.WithInsecure(), netio.WithKey([]byte("0123456789abcdef"))},
		"Insecure and a key file": {netio.WithInsecure(), netio.WithKeyFile(open)},
		"a key and a key file":    {netio.WithKey([]byte("0123456789abcdef")), netio.WithKeyFile(open)},
	} {
		if _, err := netio.Dial("tcp", "127.0.0.1:1", opts...); !errors.Is(err, netio.ErrInvalidConfig) {
			t.Errorf("Dial with %s: %v; want ErrInvalidConfig", name, err)
		}
	}
}

// keyChildEnv makes the test binary a child of TestDefaultKeyAcrossProcesses.
const keyChildEnv = "NETIO_KEY_CHILD"

// TestDefaultKeyChild is the child's entry point; as a test of its own it
// does nothing. It listens with no key options (making the key file if it
// is the first), prints its address and its key's hash, then dials each
// address it reads on stdin and prints the outcome.
func TestDefaultKeyChild(t *testing.T) {
	if os.Getenv(keyChildEnv) == "" {
		return
	}
	ln, err := netio.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println("ERR", err)
		return
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.AcceptConn()
			if err != nil {
				return
			}
			go echoMessages(c)
		}
	}()
	sum := sha256.Sum256(netio.DefaultKey())
	fmt.Println("READY", ln.Addr(), hex.EncodeToString(sum[:8]))
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		c, err := netio.Dial("tcp", in.Text())
		if err != nil {
			fmt.Println("DIAL", strings.ReplaceAll(err.Error(), "\n", " "))
			continue
		}
		c.SetDeadline(time.Now().Add(hangTimeout))
		_, err = c.Write([]byte("ping"))
		if err == nil {
			_, err = c.ReadMessage(make([]byte, 16))
		}
		c.Close()
		fmt.Println("DIAL", err)
	}
}

// Processes started together with no key options, on a machine where no
// key file exists yet, race to make it, end up with the same key, and
// connect to each other; a process with a key file of its own is
// refused.
func TestDefaultKeyAcrossProcesses(t *testing.T) {
	fresh := t.TempDir() // no key file in it yet
	start := func(dir string) *child {
		cmd := exec.Command(os.Args[0], "-test.run=^TestDefaultKeyChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), keyChildEnv+"=1", "NETIO_TESTKEY_DIR="+dir, "XDG_CONFIG_HOME="+dir)
		return startChildCmd(t, cmd)
	}
	const n = 4
	var kids []*child
	for range n {
		kids = append(kids, start(fresh))
	}
	var addrs, keys []string
	for _, k := range kids {
		f := strings.Fields(k.waitFor(t, ""))
		if len(f) != 3 || f[0] != "READY" {
			t.Fatalf("child said %q", strings.Join(f, " "))
		}
		addrs, keys = append(addrs, f[1]), append(keys, f[2])
	}
	for i, k := range keys {
		if k != keys[0] {
			t.Fatalf("child %d made or read another key (%s) than child 0 (%s)", i, k, keys[0])
		}
	}
	for i, k := range kids {
		fmt.Fprintln(k.stdin, addrs[(i+1)%n])
		if l := k.waitFor(t, "DIAL"); l != "DIAL <nil>" {
			t.Errorf("child %d dialing child %d: %s", i, (i+1)%n, l)
		}
	}
	stranger := start(t.TempDir()) // a key of its own
	stranger.waitFor(t, "READY")
	fmt.Fprintln(stranger.stdin, addrs[0])
	if l := stranger.waitFor(t, "DIAL"); !strings.Contains(l, "authentication failed") {
		t.Errorf("a process with another key file dialing: %s; want an authentication failure", l)
	}
}
