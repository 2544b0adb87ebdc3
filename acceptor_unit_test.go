package netio

import (
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/netio-go/netio/internal/wire"
	"github.com/netio-go/netio/ofi"
)

// A request the listener could not set up is rejected as a limit only
// when a limit was the cause; a fabric's error is reported as a failure.
func TestRejectDataFor(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("%w: 8 MiB more", ErrMemoryLimit), wire.RejectLimitMarker},
		{&ofi.Error{Op: "fi_endpoint", Err: syscall.EMFILE}, wire.RejectLimitMarker},
		{&ofi.Error{Op: "fi_fabric", Err: ofi.EINVAL}, rejectFailedMarker},
	} {
		if got := string(rejectDataFor(c.err)); got != c.want {
			t.Errorf("%v: rejected with %q, want %q", c.err, got, c.want)
		}
	}
	if err := acceptFailedError(); !errors.Is(err, ErrRejected) || errors.Is(err, errAtLimit) {
		t.Errorf("%v: want ErrRejected, not at a limit", err)
	}
}
