package netio

import "golang.org/x/sys/unix"

// The Linux calls of the root package, kept here so that it also compiles
// elsewhere (sys_other.go), where netio's entry points fail instead.

func gettid() int { return unix.Gettid() }
