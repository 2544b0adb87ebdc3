// Package osthread names the calling OS thread, for what Linux keeps per
// thread rather than per process: a thread's nice value, say, which a
// goroutine locked to its thread (runtime.LockOSThread) may set for
// itself alone.
package osthread

import "golang.org/x/sys/unix"

// ID is the calling thread's id (gettid(2)).
func ID() int { return unix.Gettid() }
