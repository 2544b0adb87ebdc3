//go:build !cgo || !linux

package netio_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/netio-go/netio"
)

// A build without cgo, or for another system, compiles, and every entry
// point fails with an error that says what is missing.
func TestUnsupported(t *testing.T) {
	calls := map[string]func() error{
		"Listen": func() error { _, err := netio.Listen("tcp", "127.0.0.1:0"); return err },
		"Dial":   func() error { _, err := netio.Dial("tcp", "127.0.0.1:1"); return err },
		"DialContext": func() error {
			_, err := netio.DialContext(context.Background(), "tcp", "127.0.0.1:1")
			return err
		},
		"ListenPublisher": func() error { _, err := netio.ListenPublisher("tcp", "127.0.0.1:0"); return err },
		"Subscribe": func() error {
			_, err := netio.Subscribe(context.Background(), "tcp", "127.0.0.1:1", []uint64{1})
			return err
		},
	}
	for name, call := range calls {
		err := call()
		t.Logf("%s: %v", name, err)
		if err == nil {
			t.Errorf("%s: no error", name)
			continue
		}
		if !errors.Is(err, errors.ErrUnsupported) || !strings.Contains(err.Error(), "netio needs cgo and libfabric on Linux") {
			t.Errorf("%s: %v, want an error that errors.Is errors.ErrUnsupported and names cgo, libfabric and Linux", name, err)
		}
	}
}
