package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeKey writes content to a file of its own and returns the path.
func writeKey(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// A key file that cannot be a key is a usage error, before anything
// connects.
func TestKeyFileBad(t *testing.T) {
	for name, path := range map[string]string{
		"missing": filepath.Join(t.TempDir(), "none"),
		"short":   writeKey(t, "too short\n"),
		"empty":   writeKey(t, ""),
		"long":    writeKey(t, strings.Repeat("k", 65)),
	} {
		var out, errOut bytes.Buffer
		if code := run([]string{"ping", "-to", "127.0.0.1:1", "-key-file", path}, &out, &errOut); code != exitUsage || !strings.Contains(errOut.String(), "-key-file") {
			t.Errorf("%s key file: exit %d, stderr %q", name, code, errOut.String())
		}
	}
}

// A pong with a key answers only pings with the same key; the others fail
// in one line that says they were rejected.
func TestPingPongKey(t *testing.T) {
	key := writeKey(t, "0123456789abcdef0123456789abcdef\n")
	other := writeKey(t, "fedcba9876543210fedcba9876543210")
	pong := start("pong", "-listen", "127.0.0.1:0", "-key-file", key)
	addr := pong.addr(t)
	for name, args := range map[string][]string{
		"no key":    {"ping", "-to", addr, "-count", "10"},
		"other key": {"ping", "-to", addr, "-count", "10", "-key-file", other},
	} {
		var out, errOut bytes.Buffer
		if code := run(args, &out, &errOut); code != exitError || !strings.Contains(errOut.String(), "rejected") {
			t.Errorf("ping with %s: exit %d, stderr %q", name, code, errOut.String())
		}
	}
	// The same key, written without the line end.
	same := writeKey(t, "0123456789abcdef0123456789abcdef")
	ping := start("ping", "-to", addr, "-count", "100", "-key-file", same)
	ping.mustExit(t, exitOK)
	pong.mustExit(t, exitOK)
	if n := field(t, ping.stdout.String(), `(?m)^round trips +([0-9]+) in `); n != 100 {
		t.Errorf("%v round trips with the key, want 100", n)
	}
	// A keyed ping does not talk to a pong without one either.
	open := start("pong", "-listen", "127.0.0.1:0")
	openAddr := open.addr(t)
	var out, errOut bytes.Buffer
	if code := run([]string{"ping", "-to", openAddr, "-count", "10", "-key-file", key}, &out, &errOut); code != exitError || !strings.Contains(errOut.String(), "rejected") {
		t.Errorf("keyed ping to a keyless pong: exit %d, stderr %q", code, errOut.String())
	}
	ping = start("ping", "-to", openAddr, "-count", "10")
	ping.mustExit(t, exitOK)
	open.mustExit(t, exitOK)
}

// send/recv and pub/sub take the key too.
func TestSendRecvPubSubKey(t *testing.T) {
	key := writeKey(t, "0123456789abcdef0123456789abcdef")
	recv := start("recv", "-listen", "127.0.0.1:0", "-mode", "ht", "-key-file", key)
	send := start("send", "-to", recv.addr(t), "-mode", "ht", "-count", "500", "-key-file", key)
	send.mustExit(t, exitOK)
	recv.mustExit(t, exitOK)
	if n := field(t, recv.stdout.String(), `(?m)^received +([0-9]+) messages`); n != 500 {
		t.Errorf("recv with the key: %v messages, want 500", n)
	}

	pub := start("pub", "-listen", "127.0.0.1:0", "-tag", "4", "-count", "300", "-key-file", key)
	addr := pub.addr(t)
	var out, errOut bytes.Buffer
	if code := run([]string{"sub", "-to", addr, "-tag", "4", "-count", "300"}, &out, &errOut); code != exitError || !strings.Contains(errOut.String(), "rejected") {
		t.Errorf("sub without the key: exit %d, stderr %q", code, errOut.String())
	}
	sub := start("sub", "-to", addr, "-tag", "4", "-count", "300", "-key-file", key)
	sub.mustExit(t, exitOK)
	pub.mustExit(t, exitOK)
	if n := field(t, sub.stdout.String(), `(?m)^received +([0-9]+) messages`); n != 300 {
		t.Errorf("sub with the key: %v messages, want 300", n)
	}
}

// netio key makes the default key file on first use and prints its path;
// -new writes a new key; -file works on another file.
func TestKeyCommand(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", dir)
	t.Setenv("NETIO_KEY_FILE", "")
	want := filepath.Join(dir, "netio", "key")
	key := func(args ...string) (path, note string) {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := run(append([]string{"key"}, args...), &out, &errOut); code != exitOK {
			t.Fatalf("netio key %v: exit %d, stderr %q", args, code, errOut.String())
		}
		return strings.TrimSpace(out.String()), errOut.String()
	}
	path, note := key()
	if path != want || !strings.Contains(note, "made a new key") {
		t.Fatalf("netio key on a fresh machine: %q, %q; want %s made", path, note, want)
	}
	first, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v %v, want 0600", st.Mode().Perm(), err)
	}
	if path, note = key(); path != want || !strings.Contains(note, "the key is in") {
		t.Fatalf("netio key again: %q, %q; want the same file, kept", path, note)
	}
	if again, _ := os.ReadFile(path); !bytes.Equal(again, first) {
		t.Fatal("netio key replaced an existing key")
	}
	if path, _ = key("-new"); path != want {
		t.Fatalf("netio key -new wrote %q, want %s", path, want)
	}
	if renewed, _ := os.ReadFile(path); bytes.Equal(renewed, first) {
		t.Fatal("netio key -new left the key as it was")
	}
	other := filepath.Join(t.TempDir(), "shared", "key")
	if path, _ = key("-file", other); path != other {
		t.Fatalf("netio key -file %s printed %q", other, path)
	}
	if _, err := os.Stat(other); err != nil {
		t.Fatal(err)
	}
	// The help shows how to share the key.
	var out, errOut bytes.Buffer
	run([]string{"help"}, &out, &errOut)
	if !strings.Contains(out.String(), "scp -p ~/.config/netio/key") {
		t.Errorf("netio help does not show how to share the key:\n%s", out.String())
	}
}

// -insecure on both sides connects without a key; on one side only, the
// other side's refusal says which.
func TestInsecureFlag(t *testing.T) {
	pong := start("pong", "-listen", "127.0.0.1:0", "-insecure")
	addr := pong.addr(t)
	var out, errOut bytes.Buffer
	if code := run([]string{"ping", "-to", addr, "-count", "10"}, &out, &errOut); code != exitError || !strings.Contains(errOut.String(), "rejected") {
		t.Errorf("ping with the default key to an insecure pong: exit %d, stderr %q", code, errOut.String())
	}
	ping := start("ping", "-to", addr, "-count", "10", "-insecure")
	ping.mustExit(t, exitOK)
	pong.mustExit(t, exitOK)

	keyed := start("pong", "-listen", "127.0.0.1:0")
	keyedAddr := keyed.addr(t)
	out.Reset()
	errOut.Reset()
	if code := run([]string{"ping", "-to", keyedAddr, "-count", "10", "-insecure"}, &out, &errOut); code != exitError || !strings.Contains(errOut.String(), "Insecure") {
		t.Errorf("insecure ping to a pong with the default key: exit %d, stderr %q", code, errOut.String())
	}
	ping = start("ping", "-to", keyedAddr, "-count", "10")
	ping.mustExit(t, exitOK)
	keyed.mustExit(t, exitOK)
}
