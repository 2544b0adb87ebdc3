//go:build cgo && linux

package ofi

/*
#include "ofi.h"
*/
import "C"

import (
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// EventKind says what an event-queue entry reports.
type EventKind int

// The connection-management events netio handles.
const (
	EventConnReq   EventKind = iota + 1 // a peer asks to connect to a passive endpoint
	EventConnected                      // a connection is established
	EventShutdown                       // the peer shut the connection down
	EventError                          // an asynchronous error (refused, unreachable...)
	EventOther                          // any other event, ignored by netio
)

func (k EventKind) String() string {
	switch k {
	case EventConnReq:
		return "FI_CONNREQ"
	case EventConnected:
		return "FI_CONNECTED"
	case EventShutdown:
		return "FI_SHUTDOWN"
	case EventError:
		return "error"
	}
	return "other"
}

// maxCMData is the most private data libfabric carries on any provider here.
const maxCMData = 256

// Event is one entry read from an event queue.
type Event struct {
	Kind EventKind
	// Context is the token given to OpenEndpoint or OpenPassiveEndpoint for
	// the endpoint the event is about (0 if none).
	Context uint64
	// Info is set for EventConnReq: it must be handed to OpenEndpoint and
	// Accept, or to Reject, and then freed.
	Info *Info
	// Err is set for EventError.
	Err *AsyncError

	data  [maxCMData]byte
	ndata int
	fid   uintptr
}

// PrivateData is the connection data the peer sent with connect or accept,
// or, on an EventError for a rejected connection, with the reject.
// It is valid until the Event is reused.
func (e *Event) PrivateData() []byte { return e.data[:e.ndata] }

// EQ is an event queue (fi_eq) with a file-descriptor wait object: it
// reports connection requests, established connections, shutdowns and
// connection errors for the endpoints bound to it.
//
// Events name their endpoint by fid. An event may still be queued when its
// endpoint is closed and its memory reused, so the queue never follows the
// fid: it keeps its own table of the endpoints bound to it, and closing an
// endpoint drops that endpoint's queued events at once (see purge).
type EQ struct {
	c       *C.struct_fid_eq
	buf     unsafe.Pointer // C memory: fi_eq_cm_entry plus private data
	fd      int
	tokens  map[uintptr]uint64 // bound endpoints' fids and tokens
	backlog []Event            // events read ahead by purge
	sockets *requestWatch      // the sockets in the wait set (WatchSockets), or nil
	passive bool               // a passive endpoint is bound: reads may accept sockets
	prof    *profile           // its fabric's (profile.go), for connection requests
}

// OpenEQ opens an event queue of the given depth on f.
func (f *Fabric) OpenEQ(size int) (*EQ, error) {
	q := &EQ{tokens: map[uintptr]uint64{}, prof: f.prof}
	var ret C.int
	noInherit(func() { ret = C.netio_eq_open(f.c, C.size_t(size), &q.c) })
	if err := check("fi_eq_open", ret); err != nil {
		return nil, err
	}
	var fd C.int
	if err := check("fi_control(FI_GETWAIT)", C.netio_getwait_fd(&q.c.fid, &fd)); err != nil {
		C.netio_close(&q.c.fid)
		return nil, err
	}
	q.fd = int(fd)
	q.buf = C.calloc(1, C.sizeof_struct_fi_eq_cm_entry+maxCMData)
	return q, nil
}

func (q *EQ) fid() uintptr { return uintptr(unsafe.Pointer(&q.c.fid)) }

func (q *EQ) accepts() bool { return q.passive }

// FD is the wait file descriptor: readable when the queue may have events.
// It belongs to the queue; do not close it.
func (q *EQ) FD() int { return q.fd }

// Read reads one event into ev. It returns false with a nil error when the
// queue is empty. Events of endpoints already closed are skipped.
func (q *EQ) Read(ev *Event) (bool, error) {
	if q.c == nil {
		return false, &Error{Op: "fi_eq_read", Err: EBADF}
	}
	if len(q.backlog) > 0 {
		*ev = q.backlog[0]
		q.backlog = q.backlog[1:]
		return true, nil
	}
	for {
		var ok bool
		var fid uintptr
		var err error
		if q.passive {
			noInherit(func() { ok, fid, err = q.readRaw(ev) })
		} else {
			ok, fid, err = q.readRaw(ev)
		}
		if !ok || err != nil {
			return ok, err
		}
		if q.claim(ev, fid) {
			return true, nil
		}
	}
}

// claim resolves the event's fid to its endpoint's token; an event of an
// endpoint no longer bound is dropped (a request's info freed).
func (q *EQ) claim(ev *Event, fid uintptr) bool {
	tok, ok := q.tokens[fid]
	if !ok {
		if ev.Info != nil {
			ev.Info.Free()
			ev.Info = nil
		}
		return false
	}
	ev.Context = tok
	ev.fid = fid
	return true
}

func (q *EQ) readRaw(ev *Event) (bool, uintptr, error) {
	res := C.netio_eq_read(q.c, q.buf, C.sizeof_struct_fi_eq_cm_entry+maxCMData)
	n, event, fid, info := res.n, res.event, res.fid, res.info
	*ev = Event{}
	switch {
	case n == -C.FI_EAGAIN:
		return false, 0, nil
	case n == -C.FI_EAVAIL:
		return q.readErr(ev)
	case n < 0:
		return false, 0, &Error{Op: "fi_eq_read", Err: Errno(-n)}
	}
	switch event {
	case C.FI_CONNREQ:
		ev.Kind = EventConnReq
		ev.Info = &Info{c: info, owned: true, prof: q.prof}
	case C.FI_CONNECTED:
		ev.Kind = EventConnected
	case C.FI_SHUTDOWN:
		ev.Kind = EventShutdown
	default:
		ev.Kind = EventOther
	}
	if d := int(n) - C.sizeof_struct_fi_eq_cm_entry; d > 0 && event != C.FI_SHUTDOWN {
		ev.ndata = copy(ev.data[:], unsafe.Slice((*byte)(unsafe.Add(q.buf, C.sizeof_struct_fi_eq_cm_entry)), d))
	}
	return true, uintptr(fid), nil
}

func (q *EQ) readErr(ev *Event) (bool, uintptr, error) {
	var fid C.uint64_t
	var e, pe C.int
	var msg [128]C.char
	var datalen C.size_t
	n := C.netio_eq_readerr(q.c, &fid, &e, &pe, &msg[0], C.size_t(len(msg)), q.buf, maxCMData, &datalen)
	if n == -C.FI_EAGAIN {
		return false, 0, nil
	}
	if n < 0 {
		return false, 0, &Error{Op: "fi_eq_readerr", Err: Errno(-n)}
	}
	ev.Kind = EventError
	ev.Err = &AsyncError{Err: Errno(e), ProvErrno: int(pe), ProvMsg: C.GoString(&msg[0])}
	ev.ndata = copy(ev.data[:], unsafe.Slice((*byte)(q.buf), int(datalen)))
	return true, uintptr(fid), nil
}

// bind records an endpoint bound to the queue.
func (q *EQ) bind(fid uintptr, token uint64) { q.tokens[fid] = token }

// purge forgets a closed endpoint and drops its events already queued, so
// that a new endpoint at the same address never receives them. Other
// events are kept, in order, for Read.
func (q *EQ) purge(fid uintptr) {
	if q.c == nil {
		return
	}
	delete(q.tokens, fid)
	kept := q.backlog[:0]
	for _, ev := range q.backlog {
		if ev.fid != fid {
			kept = append(kept, ev)
		}
	}
	q.backlog = kept
	for {
		var ev Event
		ok, f, err := q.readRaw(&ev)
		if !ok || err != nil {
			return
		}
		if q.claim(&ev, f) {
			q.backlog = append(q.backlog, ev)
		}
	}
}

// Pending reports whether events read ahead wait in the queue's backlog:
// they do not show on the wait fd.
func (q *EQ) Pending() bool { return len(q.backlog) > 0 }

// WatchSockets lets Settle find the sockets of the tcp provider's
// connecting endpoints in the queue's wait set. Call it before any
// endpoint is bound.
func (q *EQ) WatchSockets() error {
	w, err := newRequestWatch(q.fd)
	if err != nil {
		return err
	}
	q.sockets = w
	return nil
}

// Settle aborts the connections of the queue's connecting endpoints
// whose peer closed, when the wait fd stayed readable after a round of
// reads with nothing to read. At end of file during the connection
// handshake the tcp provider can take the thread's stale errno for "try
// again" and keep the socket, readable for ever (see requests.go), and the
// thread that reads the queue would spin until the connection's own
// timeout; aborted, the socket's next read fails, and the provider ends
// that connection with an error event.
func (q *EQ) Settle() {
	if q.sockets == nil {
		return
	}
	p := []unix.PollFd{{Fd: int32(q.fd), Events: unix.POLLIN}}
	if n, err := unix.Poll(p, 0); err == nil && n > 0 {
		q.sockets.track(time.Now())
	}
}

// Close closes the queue; the endpoints bound to it must be closed first.
func (q *EQ) Close() error {
	if q.c == nil {
		return nil
	}
	err := check("fi_close(eq)", C.netio_close(&q.c.fid))
	if q.sockets != nil {
		q.sockets.close()
		q.sockets = nil
	}
	C.free(q.buf)
	q.c, q.buf = nil, nil
	return err
}
