//go:build cgo && linux

package ofi

/*
#include "ofi.h"
*/
import "C"

import (
	"net/netip"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ListenQueue is a passive endpoint with an event queue of its own, on
// which its connection requests arrive. It lets one thread, other than
// the one that drives the endpoints and completion queues, read the
// requests: on the tcp provider, reading the queue is where the provider
// accepts sockets and reads what unauthenticated peers send (requests.go).
//
// Threads: Read, TryWait, Sweep and AbortAll run on one thread at a time,
// the queue's reader. Reject may be called on another thread at the same
// time: it touches only the request it answers (tcpx_pep_reject and
// vrb_msg_ep_reject use neither the passive endpoint's state nor the
// queue). Close runs once the reader has stopped, with no call on the
// queue between the reader's last Read and Close: a read after the
// passive endpoint is gone could make the provider finish a request of
// the freed endpoint.
type ListenQueue struct {
	fab   *Fabric
	pep   *PassiveEndpoint
	eq    *EQ
	wait  WaitList
	token uint64
	reqs  *requestWatch // tcp only
}

// OpenListenQueue opens a passive endpoint for info (from GetInfo with
// Source set) with an event queue of size entries, and starts listening.
// Its events carry token as their Context.
func (f *Fabric) OpenListenQueue(info *Info, size int, token uint64) (q *ListenQueue, err error) {
	q = &ListenQueue{fab: f, token: token}
	if q.eq, err = f.OpenEQ(size); err != nil {
		return nil, err
	}
	made := q // q is nil once an error is returned
	defer func() {
		if err != nil {
			if made.pep != nil {
				made.pep.Close()
			}
			made.eq.Close()
		}
	}()
	if q.pep, err = f.OpenPassiveEndpoint(info, token); err != nil {
		return nil, err
	}
	// Bound without PassiveEndpoint.Bind: closing it must not read the
	// queue (see Close).
	if err = check("fi_pep_bind", C.fi_pep_bind(q.pep.c, &q.eq.c.fid, 0)); err != nil {
		return nil, err
	}
	q.eq.bind(uintptr(unsafe.Pointer(&q.pep.c.fid)), token)
	q.eq.passive = true
	if err = q.pep.Listen(); err != nil {
		return nil, err
	}
	if q.pep.tcp {
		// Before anything reads the queue: nothing is accepted yet. It
		// holds a descriptor of its own, so that it still works in a
		// process out of them.
		if q.reqs, err = newRequestWatch(q.eq.FD()); err != nil {
			return nil, err
		}
	}
	q.wait.Add(q.eq)
	return q, nil
}

// Addr is the bound local address.
func (q *ListenQueue) Addr() (netip.AddrPort, error) { return q.pep.Addr() }

// Info is the entry the passive endpoint was opened from, valid until
// Close: the fabric and domain its connections are made on.
func (q *ListenQueue) Info() *Info { return q.pep.Info() }

// FD is the queue's wait descriptor: readable when it may have events. It
// belongs to the queue; do not close it.
func (q *ListenQueue) FD() int { return q.eq.FD() }

// Bound sets how long a connection request may take to arrive whole
// before Sweep aborts it, and how many may wait at once (beyond that, the
// oldest are aborted). tcp only: elsewhere the provider's connection
// manager holds no socket of netio's reach. Call it before the reader
// starts.
func (q *ListenQueue) Bound(maxAge time.Duration, maxPending int) {
	if q.reqs != nil {
		q.reqs.maxAge, q.reqs.maxPending = maxAge, maxPending
	}
}

// Read reads one event into ev, as EQ.Read does; false with a nil error
// when there is none.
func (q *ListenQueue) Read(ev *Event) (bool, error) {
	for {
		accepts := q.mayAccept()
		q.called()
		var ok bool
		var fid uintptr
		var err error
		if accepts {
			noInherit(func() { ok, fid, err = q.eq.readRaw(ev) })
			q.track()
		} else {
			ok, fid, err = q.eq.readRaw(ev)
		}
		if !ok || err != nil {
			return ok, err
		}
		if q.eq.claim(ev, fid) {
			return true, nil
		}
	}
}

// TryWait is fi_trywait on the queue: true when its reader may sleep on
// FD, false when events must be read first.
func (q *ListenQueue) TryWait() (bool, error) {
	accepts := q.mayAccept()
	q.called()
	// It peeks, which runs the provider's connection manager.
	if !accepts {
		return q.fab.tryWait(&q.wait)
	}
	var ok bool
	var err error
	noInherit(func() { ok, err = q.fab.tryWait(&q.wait) })
	q.track()
	return ok, err
}

func (q *ListenQueue) mayAccept() bool { return q.reqs != nil && q.reqs.mayAccept() }

// called notes a provider call on the queue: what the last scan saw may
// have changed.
func (q *ListenQueue) called() {
	if q.reqs != nil {
		q.reqs.fresh = false
	}
}

// track follows the request sockets after a call that may have accepted
// one. Where it cannot (out of descriptors, so nothing was accepted
// either), a request's reads stay bounded by the listening socket's
// receive timeout (cmguard.go).
func (q *ListenQueue) track() {
	if q.reqs != nil {
		q.reqs.track(time.Now())
	}
}

// Settle brings the pending requests up to date after a round of reads:
// the provider may have finished or dropped some, and a request whose peer
// closed can leave the queue's descriptor readable for ever (see
// requests.go) and is aborted. It looks only when requests are pending or
// the descriptor stayed readable with no connection to accept.
func (q *ListenQueue) Settle() {
	if q.reqs == nil || q.reqs.fresh {
		return
	}
	if len(q.reqs.pending) == 0 {
		if q.reqs.mayAccept() {
			return
		}
		p := []unix.PollFd{{Fd: int32(q.eq.FD()), Events: unix.POLLIN}}
		if n, err := unix.Poll(p, 0); err != nil || n == 0 {
			return
		}
	}
	q.track()
}

// Sweep aborts the requests that have not completed within Bound's time.
func (q *ListenQueue) Sweep() {
	if q.reqs != nil {
		now := time.Now()
		q.reqs.track(now)
		q.reqs.sweep(now)
	}
}

// Status returns how many requests the queue has aborted since it opened,
// how many are pending now, and when the oldest of those will be due
// (zero if none is), as of the last look.
func (q *ListenQueue) Status() (aborted uint64, pending int, next time.Time) {
	if q.reqs == nil {
		return 0, 0, time.Time{}
	}
	pending, next = q.reqs.status()
	return q.reqs.aborted, pending, next
}

// AbortAll aborts every request not completed yet: the listener is
// closing. The provider frees them on the next Read.
func (q *ListenQueue) AbortAll() {
	if q.reqs != nil {
		q.reqs.track(time.Now())
		q.reqs.abortAll()
	}
}

// Reject refuses a connection request read from the queue, sending data
// to the peer, and frees the request. It may run on another thread than
// the reader (see ListenQueue).
func (q *ListenQueue) Reject(req *Info, data []byte) error { return q.pep.Reject(req, data) }

// Close closes the passive endpoint and the queue. The queue's reader
// must have stopped, its last Read having found the queue empty (the
// requests read all answered). Requests the provider had accepted and not
// read whole are dropped: the provider would never read or close their
// sockets again, so Close closes them.
func (q *ListenQueue) Close() error {
	err := q.pep.Close()
	var orphans []int
	if q.reqs != nil {
		orphans = q.reqs.orphans()
		q.reqs.close()
	}
	if eerr := q.eq.Close(); err == nil {
		err = eerr
	}
	for _, fd := range orphans {
		unix.Close(fd)
	}
	return err
}
