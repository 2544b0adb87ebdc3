//go:build cgo && linux

package ofi

/*
#include "ofi.h"
*/
import "C"

import (
	"unsafe"
)

// Completion is one entry of a completion queue, laid out exactly as
// libfabric's struct fi_cq_data_entry so that a batch is read straight into
// a Go slice in one cgo call. It holds no Go pointers.
type Completion struct {
	Token uint64  // the token the operation was posted with
	Flags uint64  // FlagSend, FlagRecv, ...
	Len   uint64  // bytes received (receives only)
	buf   uintptr // unused by netio
	Data  uint64  // remote CQ data, when FlagRemoteCQData is set
}

// Completion flags netio looks at.
const (
	FlagSend         = uint64(C.FI_SEND)
	FlagRecv         = uint64(C.FI_RECV)
	FlagRemoteCQData = uint64(C.FI_REMOTE_CQ_DATA)
)

// The Go layout must match C's, or Read would scribble.
var _ [unsafe.Sizeof(Completion{}) - C.sizeof_struct_fi_cq_data_entry]byte
var _ [C.sizeof_struct_fi_cq_data_entry - unsafe.Sizeof(Completion{})]byte

// CompletionError is a failed operation read from a completion queue.
type CompletionError struct {
	Token uint64 // the token the operation was posted with
	Flags uint64 // FlagSend or FlagRecv
	Len   uint64
	AsyncError
}

// CQ is a completion queue (fi_cq, FI_CQ_FORMAT_DATA) with a
// file-descriptor wait object.
type CQ struct {
	c    *C.struct_fid_cq
	fd   int
	prof *C.netio_prof_cq // under the verbs profile (profile.go), else nil
}

// OpenCQ opens a completion queue of the given depth on d.
func (d *Domain) OpenCQ(size int) (*CQ, error) {
	q := &CQ{}
	var ret C.int
	noInherit(func() { ret = C.netio_cq_open(d.c, C.size_t(size), &q.c) })
	if err := check("fi_cq_open", ret); err != nil {
		return nil, err
	}
	var fd C.int
	if err := check("fi_control(FI_GETWAIT)", C.netio_getwait_fd(&q.c.fid, &fd)); err != nil {
		C.netio_close(&q.c.fid)
		return nil, err
	}
	q.fd = int(fd)
	if trimsPools(&Info{c: d.info}) {
		trimCQPool(q)
	}
	if d.prof != nil {
		if q.prof = C.netio_prof_cq_new(C.size_t(size)); q.prof == nil {
			C.netio_close(&q.c.fid)
			return nil, &Error{Op: "fi_cq_open", Err: Errno(C.FI_ENOMEM)}
		}
	}
	return q, nil
}

func (q *CQ) fid() uintptr { return uintptr(unsafe.Pointer(&q.c.fid)) }

func (q *CQ) accepts() bool { return false }

// FD is the wait file descriptor. It belongs to the queue; do not close it.
func (q *CQ) FD() int { return q.fd }

// Read reads up to len(out) completions in one call and returns how many it
// read; 0 with a nil error means the queue is empty. It is also what drives
// progress on providers with manual progress, so call it whenever the wait
// fd fires even when nothing is expected. When an error entry is at the
// head of the queue it returns EAVAIL (wrapped in *Error); call ReadError.
func (q *CQ) Read(out []Completion) (int, error) {
	if q.c == nil {
		return 0, &Error{Op: "fi_cq_read", Err: EBADF}
	}
	if len(out) == 0 {
		return 0, nil
	}
	var n C.ssize_t
	if q.prof != nil {
		n = C.netio_prof_cq_read(q.prof, q.c, unsafe.Pointer(&out[0]), C.size_t(len(out)))
	} else {
		n = C.netio_cq_read(q.c, unsafe.Pointer(&out[0]), C.size_t(len(out)))
	}
	switch {
	case n >= 0:
		return int(n), nil
	case n == -C.FI_EAGAIN:
		return 0, nil
	}
	return 0, &Error{Op: "fi_cq_read", Err: Errno(-n)}
}

// ReadError reads the error entry at the head of the queue. It returns
// false when there is none.
func (q *CQ) ReadError(e *CompletionError) (bool, error) {
	var tok, flags, length C.uint64_t
	var er, pe C.int
	var msg [128]C.char
	var n C.ssize_t
	if q.prof != nil {
		n = C.netio_prof_cq_readerr(q.prof, q.c, &tok, &flags, &length, &er, &pe, &msg[0], C.size_t(len(msg)))
	} else {
		n = C.netio_cq_readerr(q.c, &tok, &flags, &length, &er, &pe, &msg[0], C.size_t(len(msg)))
	}
	if n == -C.FI_EAGAIN {
		return false, nil
	}
	if n < 0 {
		return false, &Error{Op: "fi_cq_readerr", Err: Errno(-n)}
	}
	*e = CompletionError{Token: uint64(tok), Flags: uint64(flags), Len: uint64(length),
		AsyncError: AsyncError{Err: Errno(er), ProvErrno: int(pe)}}
	if pe != 0 {
		e.ProvMsg = C.GoString(&msg[0])
	}
	return true, nil
}

// drainProfiled reads what is left on a profiled queue, so that the
// profile's record of the operations goes with them.
func (q *CQ) drainProfiled() {
	var buf [16]Completion
	for i := 0; i < 64; i++ {
		n := C.netio_prof_cq_read(q.prof, q.c, unsafe.Pointer(&buf[0]), C.size_t(len(buf)))
		if n == -C.FI_EAVAIL {
			var ce CompletionError
			if ok, _ := q.ReadError(&ce); !ok {
				return
			}
			continue
		}
		if n <= 0 {
			return
		}
	}
}

// Close closes the queue. Endpoints bound to it must be closed first, and
// the queue drained: fi_close on a queue still in use frees part of it and
// returns FI_EBUSY.
func (q *CQ) Close() error {
	if q.c == nil {
		return nil
	}
	if q.prof != nil {
		q.drainProfiled()
	}
	err := check("fi_close(cq)", C.netio_close(&q.c.fid))
	q.c = nil
	if q.prof != nil {
		C.netio_prof_cq_free(q.prof)
		q.prof = nil
	}
	return err
}
