// Package testkey keeps netio's test binaries away from the user's key:
// with no key options, netio reads, and on first use makes, a key file in
// the user's configuration directory, and a test run must neither write
// there nor depend on what is there.
package testkey

import (
	"fmt"
	"os"
	"path/filepath"
)

// dirEnv passes the directory to the test binary's own child processes
// (tests that re-execute it), so that they share the key of their parent
// as processes of one user do.
const dirEnv = "NETIO_TESTKEY_DIR"

// Isolate points netio's default key file at a new temporary
// configuration directory ($XDG_CONFIG_HOME, where os.UserConfigDir looks
// first) and unsets $NETIO_KEY_FILE, for this process and the processes it
// starts. As on a fresh machine, the key file does not exist yet: the
// first Listen or Dial makes it. The returned function removes the
// directory. In a child of an isolated test binary it keeps the parent's
// directory, and leaves it.
func Isolate() (restore func()) {
	if dir := os.Getenv(dirEnv); dir != "" {
		os.Setenv("XDG_CONFIG_HOME", dir)
		os.Unsetenv("NETIO_KEY_FILE")
		return func() {}
	}
	dir, err := os.MkdirTemp("", "netio-test-config-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "testkey:", err)
		os.Exit(2)
	}
	// The go command keeps its settings (go env -w) in the same
	// configuration directory: the tests that run it keep the user's.
	if os.Getenv("GOENV") == "" {
		if cfg, err := os.UserConfigDir(); err == nil {
			os.Setenv("GOENV", filepath.Join(cfg, "go", "env"))
		}
	}
	os.Setenv(dirEnv, dir)
	os.Setenv("XDG_CONFIG_HOME", dir)
	os.Unsetenv("NETIO_KEY_FILE")
	return func() { os.RemoveAll(dir) }
}
