//go:build cgo && linux

package ofi

/*
#include "ofi.h"
*/
import "C"

import (
	"strconv"
	"syscall"
)

// Errno is a libfabric error number (positive, as in fi_errno.h). Numbers
// below 256 are POSIX errnos, so errors.Is(err, syscall.ECONNREFUSED) works
// on them; numbers from 256 up are libfabric's own (FI_ETRUNC, FI_EAVAIL...).
type Errno int

// libfabric error numbers netio handles by name.
const (
	EAGAIN       = Errno(C.FI_EAGAIN)
	ECANCELED    = Errno(C.FI_ECANCELED)
	ECONNREFUSED = Errno(C.FI_ECONNREFUSED)
	ECONNRESET   = Errno(C.FI_ECONNRESET)
	ENOTCONN     = Errno(C.FI_ENOTCONN)
	ENODATA      = Errno(C.FI_ENODATA)
	ENOKEY       = Errno(C.FI_ENOKEY)
	ETIMEDOUT    = Errno(C.FI_ETIMEDOUT)
	EBUSY        = Errno(C.FI_EBUSY)
	EADDRINUSE   = Errno(C.FI_EADDRINUSE)
	EAVAIL       = Errno(C.FI_EAVAIL)
	ETRUNC       = Errno(C.FI_ETRUNC)
	EOTHER       = Errno(C.FI_EOTHER)
	EBADF        = Errno(C.FI_EBADF) // the object was closed
	EINVAL       = Errno(C.FI_EINVAL)
)

func (e Errno) Error() string {
	if s, ok := profileErrno(e); ok {
		return s
	}
	return C.GoString(C.fi_strerror(C.int(e)))
}

// Is makes errors.Is(err, syscall.Errno) work for the POSIX range.
func (e Errno) Is(target error) bool {
	if t, ok := target.(syscall.Errno); ok {
		return e < C.FI_ERRNO_OFFSET && syscall.Errno(e) == t
	}
	return false
}

// Timeout reports whether the error is a time-out, as net.Error asks.
func (e Errno) Timeout() bool { return e == ETIMEDOUT }

// Error is a failed libfabric call: which call, and the error it returned.
type Error struct {
	Op  string // the libfabric function, e.g. "fi_connect"
	Err error  // an Errno, or a *CompletionError for asynchronous failures
}

func (e *Error) Error() string { return "ofi: " + e.Op + ": " + e.Err.Error() }

// Unwrap returns the underlying error, so errors.Is and errors.As see the Errno.
func (e *Error) Unwrap() error { return e.Err }

// check turns a libfabric return code (0 or a negative errno) into an error.
func check(op string, ret C.int) error {
	if ret >= 0 {
		return nil
	}
	return &Error{Op: op, Err: Errno(-ret)}
}

func checkSize(op string, ret C.ssize_t) error {
	if ret >= 0 {
		return nil
	}
	return &Error{Op: op, Err: Errno(-ret)}
}

// AsyncError is an error entry read from an event or completion queue:
// the operation failed after it was posted.
type AsyncError struct {
	Err       Errno  // the libfabric error
	ProvErrno int    // the provider's own error number, 0 if none
	ProvMsg   string // the provider's text for ProvErrno, may be empty
}

func (e *AsyncError) Error() string {
	s := e.Err.Error()
	if e.ProvErrno != 0 {
		s += " (provider errno " + strconv.Itoa(e.ProvErrno)
		if e.ProvMsg != "" {
			s += ": " + e.ProvMsg
		}
		s += ")"
	}
	return s
}

// Unwrap returns the libfabric Errno.
func (e *AsyncError) Unwrap() error { return e.Err }
