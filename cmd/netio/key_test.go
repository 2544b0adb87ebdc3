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
