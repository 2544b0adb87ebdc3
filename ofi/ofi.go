//go:build cgo && linux

// Package ofi is a thin, typed binding to the parts of libfabric (OFI) that
// netio needs: discovery, fabrics and domains, connection-oriented (FI_EP_MSG)
// endpoints, event and completion queues with file-descriptor wait objects,
// and registered memory.
//
// It is the only package of netio that uses cgo, and no C type leaves it:
// objects are Go structs holding the C handles privately, operation contexts
// are plain 64-bit tokens, and data buffers always live in a Region (mmap'd
// memory registered with the domain), never on the Go heap, so libfabric may
// keep using them after a call returns without breaking cgo's pointer rules.
//
// The binding adds no locking: libfabric objects are opened with
// FI_THREAD_DOMAIN, and the caller must use each domain and everything made
// from it from one goroutine at a time (netio uses them only from its
// reactor). Close objects in dependency order: endpoints and passive
// endpoints, then (after draining) completion queues, memory regions, event
// queues, domains and fabrics.
package ofi

/*
#cgo LDFLAGS: -lfabric
#include "ofi.h"
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// Version is a libfabric API or provider version, as built by FI_VERSION.
type Version uint32

// MakeVersion returns the Version for major.minor.
func MakeVersion(major, minor int) Version { return Version(uint32(major)<<16 | uint32(minor)&0xffff) }

// Major returns the major part of v.
func (v Version) Major() int { return int(v >> 16) }

// Minor returns the minor part of v.
func (v Version) Minor() int { return int(v & 0xffff) }

func (v Version) String() string { return fmt.Sprintf("%d.%d", v.Major(), v.Minor()) }

// LibraryVersion returns the version of the libfabric library loaded at run
// time, which may be newer than the headers netio was built with.
func LibraryVersion() Version { return Version(C.fi_version()) }

// APIVersion is the libfabric API version netio asks for: the one of the
// headers it was compiled against.
var APIVersion = Version(C.netio_api_version())

func cstring(s string) *C.char {
	if s == "" {
		return nil
	}
	return C.CString(s)
}

func freeCString(p *C.char) {
	if p != nil {
		C.free(unsafe.Pointer(p))
	}
}
