//go:build cgo && linux

package ofi

/*
#include "ofi.h"
*/
import "C"

import (
	"sync/atomic"
	"unsafe"
)

// Fabric is an opened libfabric fabric (fi_fabric): the root of one
// provider's objects.
type Fabric struct {
	c    *C.struct_fid_fabric
	info *C.struct_fi_info // what it was opened from, kept until Close
	prof *profile
}

// OpenFabric opens the fabric described by info.
func OpenFabric(info *Info) (*Fabric, error) {
	kept, err := keepInfo(info)
	if err != nil {
		return nil, err
	}
	f := &Fabric{info: kept, prof: info.prof}
	var ret C.int
	noInherit(func() { ret = C.netio_fabric(kept, &f.c) })
	if err := check("fi_fabric", ret); err != nil {
		freeKept(&f.info)
		return nil, err
	}
	return f, nil
}

// Close closes the fabric; everything opened from it must be closed first.
func (f *Fabric) Close() error {
	if f.c == nil {
		return nil
	}
	err := check("fi_close(fabric)", C.netio_close(&f.c.fid))
	f.c = nil
	freeKept(&f.info)
	return err
}

// Waiter is an object with a wait file descriptor that fi_trywait accepts:
// an *EQ or a *CQ.
type Waiter interface {
	fid() uintptr
	// accepts reports whether testing the queue may accept connections
	// (an event queue with a passive endpoint bound): such calls make
	// descriptors (cloexec.go).
	accepts() bool
}

// WaitList is a reusable list of event and completion queues to test with
// TryWait in one call.
type WaitList struct {
	fids    []uintptr
	accepts bool
}

// Reset empties the list, keeping its storage.
func (w *WaitList) Reset() { w.fids, w.accepts = w.fids[:0], false }

// Add appends q to the list.
func (w *WaitList) Add(q Waiter) {
	w.fids = append(w.fids, q.fid())
	w.accepts = w.accepts || q.accepts()
}

// Len is the number of queues in the list.
func (w *WaitList) Len() int { return len(w.fids) }

// TryWait calls fi_trywait on every queue of the list in one call. It
// reports true when the caller may block on the queues' wait fds, and false
// (with a nil error) when one of them has work pending and must be read
// first. On verbs this is also what re-arms completion notification.
func (f *Fabric) TryWait(w *WaitList) (ok bool, err error) {
	if w.accepts {
		noInherit(func() { ok, err = f.tryWait(w) })
		return ok, err
	}
	return f.tryWait(w)
}

// tryWait is TryWait without noInherit, for callers that hold it.
func (f *Fabric) tryWait(w *WaitList) (bool, error) {
	if len(w.fids) == 0 {
		return true, nil
	}
	ret := C.netio_trywait(f.c, (*C.uintptr_t)(unsafe.Pointer(&w.fids[0])), C.int(len(w.fids)))
	if ret == -C.FI_EAGAIN {
		return false, nil
	}
	if err := check("fi_trywait", ret); err != nil {
		return false, err
	}
	return true, nil
}

// Domain is an opened resource domain (fi_domain): one NIC, or for tcp one
// interface.
type Domain struct {
	c        *C.struct_fid_domain
	info     *C.struct_fi_info // what it was opened from, kept until Close
	provKeys bool              // the provider chooses the keys
	prof     *profile
	nextKey  atomic.Uint64
}

// OpenDomain opens the domain described by info on f. info may be a
// GetInfo entry or a connection request of f's passive endpoint.
func (f *Fabric) OpenDomain(info *Info) (*Domain, error) {
	kept, err := keepInfo(info)
	if err != nil {
		return nil, err
	}
	d := &Domain{info: kept, provKeys: info.realProviderKeys(), prof: f.prof}
	var ret C.int
	noInherit(func() { ret = C.fi_domain(f.c, kept, &d.c, nil) })
	if err := check("fi_domain", ret); err != nil {
		freeKept(&d.info)
		return nil, err
	}
	return d, nil
}

// Close closes the domain; its endpoints, queues and regions must be closed first.
func (d *Domain) Close() error {
	if d.c == nil {
		return nil
	}
	err := check("fi_close(domain)", C.netio_close(&d.c.fid))
	d.c = nil
	freeKept(&d.info)
	return err
}
