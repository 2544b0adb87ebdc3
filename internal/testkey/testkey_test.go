package testkey

import (
	"os"
	"runtime"
	"testing"
)

// Isolate points the user configuration directory at a new, empty
// directory, hides $NETIO_KEY_FILE, hands the directory to child
// processes, and removes it on restore; a child keeps its parent's.
func TestIsolate(t *testing.T) {
	t.Setenv("NETIO_KEY_FILE", "/nonexistent/key")
	t.Setenv("XDG_CONFIG_HOME", "/nonexistent/config")
	t.Setenv(dirEnv, "")
	t.Setenv("GOENV", "/nonexistent/goenv") // set: Isolate leaves it alone
	os.Unsetenv(dirEnv)

	restore := Isolate()
	dir := os.Getenv("XDG_CONFIG_HOME")
	if dir == "/nonexistent/config" || os.Getenv(dirEnv) != dir {
		t.Fatalf("XDG_CONFIG_HOME %q, %s %q: want one new directory in both", dir, dirEnv, os.Getenv(dirEnv))
	}
	// Elsewhere os.UserConfigDir does not read $XDG_CONFIG_HOME.
	if cfg, err := os.UserConfigDir(); runtime.GOOS == "linux" && (err != nil || cfg != dir) {
		t.Fatalf("os.UserConfigDir: %q, %v; want %q", cfg, err, dir)
	}
	if _, set := os.LookupEnv("NETIO_KEY_FILE"); set {
		t.Fatal("NETIO_KEY_FILE still set")
	}
	if got := os.Getenv("GOENV"); got != "/nonexistent/goenv" {
		t.Fatalf("GOENV changed to %q", got)
	}
	if ents, err := os.ReadDir(dir); err != nil || len(ents) != 0 {
		t.Fatalf("the new directory: %d entries, %v; want empty", len(ents), err)
	}

	// A child process of the isolated binary: same directory, kept.
	os.Setenv("XDG_CONFIG_HOME", "/elsewhere")
	os.Setenv("NETIO_KEY_FILE", "/nonexistent/key")
	Isolate()()
	if got := os.Getenv("XDG_CONFIG_HOME"); got != dir {
		t.Fatalf("in a child: XDG_CONFIG_HOME %q, want the parent's %q", got, dir)
	}
	if _, set := os.LookupEnv("NETIO_KEY_FILE"); set {
		t.Fatal("in a child: NETIO_KEY_FILE still set")
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("a child's restore removed its parent's directory: %v", err)
	}

	restore()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("restore left %s: %v", dir, err)
	}
}
