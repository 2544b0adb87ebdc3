// Package leakcheck is the TestMain shared by netio's packages: it fails
// the test binary when goroutines or file descriptors outlive the tests.
package leakcheck

import (
	"fmt"
	"net"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/netio-go/netio/internal/testkey"
	"github.com/netio-go/netio/ofi"
)

// Main runs the tests and exits non-zero if they leaked. libfabric opens a
// few descriptors of its own the first time it is used (provider
// initialisation, once per process), and so does Go's network poller; both
// are opened before counting. The tests run with netio's default key file
// in a temporary directory of their own (testkey.Isolate).
func Main(m *testing.M) {
	restore := testkey.Isolate()
	if ln, err := net.Listen("tcp", "127.0.0.1:0"); err == nil {
		ln.Close()
	}
	if l, err := ofi.GetInfo(ofi.Hints{Provider: "tcp", Node: "127.0.0.1", Service: "0", Source: true}); err == nil {
		l.Free()
	}
	before := fds()
	code := m.Run()
	// Goroutines and descriptors that are just finishing (a connection's
	// goroutines after Close, a child process's pipes) get up to grace to
	// go: a loaded machine may take its time, and a real leak stays.
	if code == 0 {
		err := goleak.Find()
		for deadline := time.Now().Add(grace); err != nil && time.Now().Before(deadline); {
			time.Sleep(100 * time.Millisecond)
			err = goleak.Find()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "leakcheck: goroutines leaked:", err)
			code = 1
		}
	}
	if code == 0 {
		var leaked []string
		for deadline := time.Now().Add(grace); ; time.Sleep(20 * time.Millisecond) {
			if leaked = diff(before, fds()); len(leaked) == 0 || time.Now().After(deadline) {
				break
			}
		}
		if len(leaked) > 0 {
			fmt.Fprintln(os.Stderr, "leakcheck: file descriptors leaked:", strings.Join(leaked, ", "))
			code = 1
		}
	}
	restore()
	os.Exit(code)
}

// grace is how long Main waits for goroutines and descriptors to go.
const grace = 20 * time.Second

func fds() map[string]string {
	m := map[string]string{}
	ents, _ := os.ReadDir("/proc/self/fd")
	for _, e := range ents {
		l, _ := os.Readlink("/proc/self/fd/" + e.Name())
		m[e.Name()] = l
	}
	return m
}

func diff(before, after map[string]string) []string {
	var out []string
	for fd, target := range after {
		if before[fd] != target {
			out = append(out, fd+" -> "+target)
		}
	}
	sort.Strings(out)
	return out
}
