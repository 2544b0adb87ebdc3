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

	"github.com/netio-go/netio/ofi"
)

// Main runs the tests and exits non-zero if they leaked. libfabric opens a
// few descriptors of its own the first time it is used (provider
// initialisation, once per process), and so does Go's network poller; both
// are opened before counting.
func Main(m *testing.M) {
	if ln, err := net.Listen("tcp", "127.0.0.1:0"); err == nil {
		ln.Close()
	}
	if l, err := ofi.GetInfo(ofi.Hints{Provider: "tcp", Node: "127.0.0.1", Service: "0", Source: true}); err == nil {
		l.Free()
	}
	before := fds()
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "leakcheck: goroutines leaked:", err)
			code = 1
		}
	}
	if code == 0 {
		// Descriptors closed by goroutines that are just finishing get a moment.
		var leaked []string
		for i := 0; i < 50; i++ {
			if leaked = diff(before, fds()); len(leaked) == 0 {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if len(leaked) > 0 {
			fmt.Fprintln(os.Stderr, "leakcheck: file descriptors leaked:", strings.Join(leaked, ", "))
			code = 1
		}
	}
	os.Exit(code)
}

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
