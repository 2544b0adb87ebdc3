//go:build !linux

package netio

import "github.com/netio-go/netio/ofi"

func gettid() int { return 0 }

func newEventfd() (int, error) { return -1, ofi.Unsupported() }
