package netio

import (
	"errors"
	"fmt"
	"syscall"
)

// rejectFailedMarker rejects a peer whose connection the listener could
// not set up for another reason than its limits (an error of the fabric,
// counted in ListenerStats.Failed): the dialer is told it failed, not
// that the listener is full.
const rejectFailedMarker = "NTIO-REJECT-FAILED"

// errAcceptFailed is wrapped, with ErrRejected, by the dialer's error
// when the listener failed to set the connection up.
var errAcceptFailed = errors.New("the listener failed to set up the connection (see its Stats().Failed)")

// rejectDataFor is the reject that tells the peer why its accepted
// request could not be set up: a limit that may pass (registered memory,
// descriptors, memory), or a failure.
func rejectDataFor(err error) []byte {
	if errors.Is(err, ErrMemoryLimit) || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) || errors.Is(err, syscall.ENOMEM) {
		return rejectLimitData
	}
	return []byte(rejectFailedMarker)
}

// acceptFailedError is the dialer's error for rejectFailedMarker.
func acceptFailedError() error { return fmt.Errorf("%w: %w", ErrRejected, errAcceptFailed) }
