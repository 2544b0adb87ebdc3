package keyfile

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// A text key file is the same key with or without its line end.
func TestTrimTextNewline(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"0123456789abcdef0123456789abcdef\n", "0123456789abcdef0123456789abcdef"},
		{"0123456789abcdef0123456789abcdef\r\n", "0123456789abcdef0123456789abcdef"},
		{"0123456789abcdef", "0123456789abcdef"},
		// Binary keys are kept whole, a final newline byte included.
		{"\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\n", "\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\n"},
		{"\xff\xfe0123456789abcde\n", "\xff\xfe0123456789abcde\n"},
		// Only one line end goes.
		{"0123456789abcdef\n\n", "0123456789abcdef\n\n"},
	} {
		if got := trimTextNewline([]byte(tc.in)); !bytes.Equal(got, []byte(tc.want)) {
			t.Errorf("trimTextNewline(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// writeFile writes content to a file of mode perm in a new directory.
func writeFile(t *testing.T, content string, perm os.FileMode) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(path, []byte(content), perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, perm); err != nil { // past the umask
		t.Fatal(err)
	}
	return path
}

// Read takes a key of 16 to 64 bytes from a file only its owner can read,
// and says what is wrong with any other, wrapping ErrNoKey.
func TestRead(t *testing.T) {
	const hexKey = "00112233445566778899aabbccddeeff"
	key, err := Read(writeFile(t, hexKey+"\n", 0o600))
	if err != nil || string(key) != hexKey {
		t.Fatalf("Read = %q, %v; want %q", key, err, hexKey)
	}
	if _, err := Read(writeFile(t, hexKey, 0o400)); err != nil {
		t.Errorf("mode 0400: %v", err)
	}
	for _, tc := range []struct {
		name, content string
		perm          os.FileMode
		want          string
	}{
		{"readable by the group", hexKey, 0o640, "can be read by other users (mode 0640): run chmod 600"},
		{"readable by all", hexKey, 0o644, "can be read by other users (mode 0644)"},
		{"too short", "0123456789abcde", 0o600, "holds 15 bytes, not a key of 16 to 64"},
		{"too long", strings.Repeat("a", 65), 0o600, "holds 65 bytes, not a key of 16 to 64"},
		{"empty", "", 0o600, "holds 0 bytes"},
	} {
		_, err := Read(writeFile(t, tc.content, tc.perm))
		if !errors.Is(err, ErrNoKey) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrNoKey saying %q", tc.name, err, tc.want)
		}
	}
	missing := filepath.Join(t.TempDir(), "none")
	if _, err := Read(missing); !errors.Is(err, ErrNoKey) || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("missing file: %v, want ErrNoKey saying it does not exist", err)
	}
}

// Processes that start together race to make the key file: exactly one
// makes it, mode 0600 in a directory of mode 0700, and all read its key.
func TestCreateRace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "netio", "key")
	const racers = 8
	made := make(chan bool, racers)
	keys := make(chan []byte, racers)
	var wg sync.WaitGroup
	for range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, err := createFile(path)
			if err != nil {
				t.Error(err)
			}
			made <- m
			key, err := load(path, false)
			if err != nil {
				t.Error(err)
			}
			keys <- key
		}()
	}
	wg.Wait()
	close(made)
	close(keys)
	n := 0
	for m := range made {
		if m {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d racers made the key file, want 1", n)
	}
	first := <-keys
	for k := range keys {
		if !bytes.Equal(k, first) {
			t.Errorf("racers read different keys: %q and %q", first, k)
		}
	}
	for p, want := range map[string]os.FileMode{path: 0o600, filepath.Dir(path): 0o700} {
		if st, err := os.Stat(p); err != nil || st.Mode().Perm() != want {
			t.Errorf("%s: %v, %v; want mode %#o", p, st.Mode().Perm(), err, want)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".key-*")); len(left) > 0 {
		t.Errorf("temporary files left behind: %v", left)
	}
}

// Write replaces the key in place; the file stays its owner's only.
func TestWriteReplaces(t *testing.T) {
	path := filepath.Join(t.TempDir(), "key")
	if _, err := Write(path); err != nil {
		t.Fatal(err)
	}
	old, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := Write(path); err != nil || got != path {
		t.Fatalf("Write = %q, %v", got, err)
	}
	key, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(key, old) || len(key) != 64 {
		t.Errorf("new key %q after %q: want another 32 bytes in hex", key, old)
	}
}

// Resolve takes Config.KeyFile first, then $NETIO_KEY_FILE, then the
// default file, which it makes; the source names the file and why.
func TestResolve(t *testing.T) {
	home := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", home)
	t.Setenv("HOME", home)
	t.Setenv(Env, "")
	def := filepath.Join(home, "netio", "key")

	key, source, err := Resolve("")
	if err != nil {
		t.Fatal(err)
	}
	if want := "key file " + def + " (the default)"; source != want {
		t.Errorf("source %q, want %q", source, want)
	}
	if again, _, err := Resolve(""); err != nil || !bytes.Equal(again, key) {
		t.Errorf("second Resolve: %q, %v; want the same key %q", again, err, key)
	}
	if path, created, err := Ensure(); err != nil || path != def || created {
		t.Errorf("Ensure = %q, %v, %v; want %q, not created", path, created, err, def)
	}

	const envKey, cfgKey = "0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"
	envFile, cfgFile := writeFile(t, envKey+"\n", 0o600), writeFile(t, cfgKey+"\n", 0o600)
	t.Setenv(Env, envFile)
	if key, source, err := Resolve(""); err != nil || string(key) != envKey || source != "key file "+envFile+" ($NETIO_KEY_FILE)" {
		t.Errorf("with $%s: %q from %q, %v", Env, key, source, err)
	}
	if key, source, err := Resolve(cfgFile); err != nil || string(key) != cfgKey || source != "key file "+cfgFile+" (Config.KeyFile)" {
		t.Errorf("with Config.KeyFile: %q from %q, %v", key, source, err)
	}
	// A named file is never made.
	missing := filepath.Join(t.TempDir(), "none")
	if _, _, err := Resolve(missing); !errors.Is(err, ErrNoKey) {
		t.Errorf("missing Config.KeyFile: %v, want ErrNoKey", err)
	}
	if _, err := os.Stat(missing); err == nil {
		t.Errorf("Resolve made the named file %s", missing)
	}
}

// Ensure makes the default key file when it is missing, and says so.
func TestEnsureMakes(t *testing.T) {
	home := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", home)
	t.Setenv("HOME", home)
	t.Setenv(Env, "")
	path, created, err := Ensure()
	if err != nil || !created || path != filepath.Join(home, "netio", "key") {
		t.Fatalf("Ensure = %q, %v, %v; want the default file, created", path, created, err)
	}
	if _, err := Read(path); err != nil {
		t.Error(err)
	}
}
