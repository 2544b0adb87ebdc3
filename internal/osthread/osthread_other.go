//go:build !linux

// Package osthread names the calling OS thread, for what Linux keeps per
// thread rather than per process.
package osthread

// ID is 0: nothing here is per thread, and netio's entry points fail
// before any thread is named.
func ID() int { return 0 }
