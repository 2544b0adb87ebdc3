//go:build cgo && linux

package ofi

/*
#include "rdm.h"
*/
import "C"

import (
	"errors"
	"unsafe"
)

// TaggedCompletion is one entry of an RDMCQ, laid out as libfabric's
// struct fi_cq_tagged_entry so that a batch is read straight into a Go
// slice in one cgo call.
type TaggedCompletion struct {
	Token uint64  // the token the operation was posted with (UnknownToken: none)
	Flags uint64  // FlagSend, FlagRecv, FlagTagged, FlagMsg...
	Len   uint64  // bytes received (receives only)
	buf   uintptr // unused by netio
	Data  uint64  // remote CQ data, when FlagRemoteCQData is set
	Tag   uint64  // the message's tag (tagged receives only)
}

var _ [unsafe.Sizeof(TaggedCompletion{}) - C.sizeof_struct_fi_cq_tagged_entry]byte
var _ [C.sizeof_struct_fi_cq_tagged_entry - unsafe.Sizeof(TaggedCompletion{})]byte

// Completion flags of tagged and untagged messages.
const (
	FlagTagged = uint64(C.FI_TAGGED)
	FlagMsg    = uint64(C.FI_MSG)
)

// UnknownToken is the token of a completion whose context is not one of
// the queue's: libfabric reported an operation netio did not post.
const UnknownToken = uint64(C.NETIO_FOREIGN_TOKEN)

// TaggedCompletionError is a failed operation read from an RDMCQ.
type TaggedCompletionError struct {
	CompletionError
	Tag uint64
}

// RDMCQ is a completion queue for reliable-datagram endpoints
// (FI_CQ_FORMAT_TAGGED) with the context arena its endpoints post from.
// It has a wait file descriptor when the provider gives one; shm and opx
// give none (fi_cq_open with FI_WAIT_FD fails with FI_ENOSYS), and such a
// queue must be polled.
type RDMCQ struct {
	c     *C.struct_fid_cq
	arena *C.netio_arena
	fd    int
}

// OpenRDMCQ opens a completion queue of the given depth on d, with
// contexts slots for the operations in flight on every endpoint bound to
// it (sends that wait for a completion and posted receives). It asks for
// a wait descriptor and, where the provider has none, opens the queue
// without one (HasFD reports which).
func (d *Domain) OpenRDMCQ(size, contexts int) (*RDMCQ, error) {
	if size <= 0 || contexts <= 0 || contexts >= 1<<31 {
		return nil, errors.New("ofi: OpenRDMCQ: size and contexts must be positive")
	}
	q := &RDMCQ{fd: -1}
	ret := C.netio_rdm_cq_open(d.c, C.size_t(size), C.FI_WAIT_FD, &q.c)
	if ret == 0 {
		var fd C.int
		if C.netio_getwait_fd(&q.c.fid, &fd) == 0 {
			q.fd = int(fd)
		} else {
			// Opened, but without a descriptor to give (a provider that
			// ignores wait_obj): start again without one.
			C.netio_close(&q.c.fid)
			ret = -C.FI_ENOSYS
		}
	}
	if ret == -C.FI_ENOSYS || ret == -C.FI_EINVAL || ret == -C.FI_EOPNOTSUPP {
		// shm (and efa with its shm transfers) refuse FI_WAIT_FD; a real
		// mistake in the attributes fails again here.
		ret = C.netio_rdm_cq_open(d.c, C.size_t(size), C.FI_WAIT_NONE, &q.c)
	}
	if err := check("fi_cq_open", ret); err != nil {
		return nil, err
	}
	if q.arena = C.netio_arena_new(C.uint32_t(contexts)); q.arena == nil {
		C.netio_close(&q.c.fid)
		return nil, &Error{Op: "calloc", Err: Errno(C.FI_ENOMEM)}
	}
	return q, nil
}

func (q *RDMCQ) fid() uintptr { return uintptr(unsafe.Pointer(&q.c.fid)) }

// accepts reports that testing the queue never accepts connections: a
// completion queue makes no descriptors when fi_trywait tests it.
func (q *RDMCQ) accepts() bool { return false }

// HasFD reports whether the queue has a wait descriptor. A queue without
// one must not be put in a WaitList: the reactor polls it instead.
func (q *RDMCQ) HasFD() bool { return q.fd >= 0 }

// FD is the wait file descriptor, or -1. It belongs to the queue.
func (q *RDMCQ) FD() int { return q.fd }

// InFlight is how many context slots are held by operations whose
// completion has not been read.
func (q *RDMCQ) InFlight() int { return int(q.arena.in_use) }

// Orphaned is how many context slots are held by operations of endpoints
// already closed, whose completions have not been read (and on some
// providers never will be).
func (q *RDMCQ) Orphaned() int {
	if q.arena == nil {
		return 0
	}
	return int(C.netio_rdm_in_flight(q.arena, nil))
}

// Read reads up to len(out) completions in one call; 0 with a nil error
// means the queue is empty. It also drives the provider's progress. When
// an error entry is at the head of the queue it returns EAVAIL (wrapped in
// *Error); call ReadError.
func (q *RDMCQ) Read(out []TaggedCompletion) (int, error) {
	return q.read(out, nil)
}

// ReadFrom is Read, and also stores in src[i] the FIAddr of the sender of
// out[i] (receives only; AddrNotAvail when the sender is not in the
// address vector, or the provider lacks Info.SourceAddressing). src must
// be at least as long as out.
func (q *RDMCQ) ReadFrom(out []TaggedCompletion, src []FIAddr) (int, error) {
	if len(src) < len(out) {
		return 0, errors.New("ofi: ReadFrom: fewer addresses than completions")
	}
	if len(out) == 0 {
		return 0, nil
	}
	return q.read(out, src)
}

func (q *RDMCQ) read(out []TaggedCompletion, src []FIAddr) (int, error) {
	if q.c == nil {
		return 0, &Error{Op: "fi_cq_read", Err: EBADF}
	}
	if len(out) == 0 {
		return 0, nil
	}
	var sp *C.fi_addr_t
	if src != nil {
		sp = (*C.fi_addr_t)(unsafe.Pointer(&src[0]))
	}
	n := C.netio_rdm_cq_read(q.c, q.arena, (*C.struct_fi_cq_tagged_entry)(unsafe.Pointer(&out[0])), sp, C.size_t(len(out)))
	switch {
	case n >= 0:
		return int(n), nil
	case n == -C.FI_EAGAIN:
		return 0, nil
	}
	return 0, &Error{Op: "fi_cq_read", Err: Errno(-n)}
}

// ReadError reads the error entry at the head of the queue, freeing its
// context slot. It returns false when there is none.
func (q *RDMCQ) ReadError(e *TaggedCompletionError) (bool, error) {
	if q.c == nil {
		return false, &Error{Op: "fi_cq_readerr", Err: EBADF}
	}
	var tok, flags, length, tag C.uint64_t
	var er, pe C.int
	var msg [128]C.char
	n := C.netio_rdm_cq_readerr(q.c, q.arena, &tok, &flags, &length, &tag, &er, &pe, &msg[0], C.size_t(len(msg)))
	if n == -C.FI_EAGAIN {
		return false, nil
	}
	if n < 0 {
		return false, &Error{Op: "fi_cq_readerr", Err: Errno(-n)}
	}
	if er < 0 {
		er = -er // shm 1.17 reports a truncation as -FI_ETRUNC
	}
	*e = TaggedCompletionError{Tag: uint64(tag), CompletionError: CompletionError{
		Token: uint64(tok), Flags: uint64(flags), Len: uint64(length),
		AsyncError: AsyncError{Err: Errno(er), ProvErrno: int(pe)}}}
	if pe != 0 {
		e.ProvMsg = C.GoString(&msg[0])
	}
	return true, nil
}

// Close closes the queue and frees its context arena. The endpoints bound
// to it must be closed first.
func (q *RDMCQ) Close() error {
	if q.c == nil {
		return nil
	}
	err := check("fi_close(cq)", C.netio_close(&q.c.fid))
	q.c = nil
	C.netio_arena_free(q.arena)
	q.arena = nil
	return err
}
