//go:build !linux

package doorbell

import "github.com/netio-go/netio/ofi"

// newEventfd fails: netio's entry points fail before any doorbell is made.
func newEventfd() (int, error) { return -1, ofi.Unsupported() }
