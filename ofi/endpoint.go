//go:build cgo && linux

package ofi

/*
#include "ofi.h"
*/
import "C"

import (
	"fmt"
	"net/netip"
	"unsafe"
)

// PassiveEndpoint listens for connection requests (fi_passive_ep). Its
// requests arrive on the EQ it is bound to as EventConnReq.
type PassiveEndpoint struct {
	c     *C.struct_fid_pep
	token uint64
	eq    *EQ
	tcp   bool // the tcp provider's: Listen guards its connection manager (cmguard.go)
}

// OpenPassiveEndpoint opens a passive endpoint for info (from GetInfo with
// Source set). libfabric binds the port here, so Addr reports the real port
// even before Listen; token comes back as Event.Context.
func (f *Fabric) OpenPassiveEndpoint(info *Info, token uint64) (*PassiveEndpoint, error) {
	p := &PassiveEndpoint{token: token, tcp: needsGuard(info)}
	if err := check("fi_passive_ep", C.netio_passive_ep(f.c, info.c, &p.c, C.uint64_t(token))); err != nil {
		return nil, err
	}
	return p, nil
}

// Bind attaches the event queue that will report connection requests.
func (p *PassiveEndpoint) Bind(q *EQ) error {
	if err := check("fi_pep_bind", C.fi_pep_bind(p.c, &q.c.fid, 0)); err != nil {
		return err
	}
	p.eq = q
	q.bind(uintptr(unsafe.Pointer(&p.c.fid)), p.token)
	return nil
}

// Listen starts accepting connection requests.
func (p *PassiveEndpoint) Listen() error {
	if err := check("fi_listen", C.fi_listen(p.c)); err != nil {
		return err
	}
	if p.tcp {
		return p.guardCM()
	}
	return nil
}

// Addr is the bound local address.
func (p *PassiveEndpoint) Addr() (netip.AddrPort, error) { return getname("fi_getname", &p.c.fid) }

// Reject refuses a connection request, sending data to the peer, and frees
// the request. Every request must be accepted or rejected.
func (p *PassiveEndpoint) Reject(req *Info, data []byte) error {
	d, n := cbytes(data)
	defer C.free(d)
	err := check("fi_reject", C.fi_reject(p.c, req.c.handle, d, n))
	req.Free()
	return err
}

// Close closes the passive endpoint.
func (p *PassiveEndpoint) Close() error {
	if p.c == nil {
		return nil
	}
	fid := uintptr(unsafe.Pointer(&p.c.fid))
	err := check("fi_close(pep)", C.netio_close(&p.c.fid))
	p.c = nil
	if p.eq != nil {
		p.eq.purge(fid)
	}
	return err
}

// Endpoint is an active, connection-oriented endpoint (fi_endpoint with
// FI_EP_MSG).
type Endpoint struct {
	c     *C.struct_fid_ep
	rx    *C.struct_fid_ep // where receives are posted: c, or the guard's context
	guard *guard           // tcp only (guard.go)
	token uint64
	eq    *EQ
}

// OpenEndpoint opens an endpoint: from a GetInfo entry to connect, or from
// a connection request's Info to accept. token comes back as the Context of
// the endpoint's events.
func (d *Domain) OpenEndpoint(info *Info, token uint64) (*Endpoint, error) {
	e := &Endpoint{token: token}
	if err := check("fi_endpoint", C.netio_endpoint(d.c, info.c, &e.c, C.uint64_t(token))); err != nil {
		return nil, err
	}
	e.rx = e.c
	if needsGuard(info) {
		g, err := openGuard(d, info, e.c)
		if err != nil {
			C.netio_close(&e.c.fid)
			return nil, err
		}
		e.guard, e.rx = g, g.srx
	}
	return e, nil
}

// BindEQ attaches the event queue for the endpoint's connection events.
func (e *Endpoint) BindEQ(q *EQ) error {
	if err := check("fi_ep_bind(eq)", C.fi_ep_bind(e.c, &q.c.fid, 0)); err != nil {
		return err
	}
	e.eq = q
	q.bind(uintptr(unsafe.Pointer(&e.c.fid)), e.token)
	return nil
}

// BindCQ attaches a completion queue for sends and receives. On tcp it
// also receives completions carrying TrapToken (see TrapToken).
func (e *Endpoint) BindCQ(q *CQ) error {
	if e.guard != nil {
		if err := e.guard.bindCQ(q); err != nil {
			return err
		}
	}
	return check("fi_ep_bind(cq)", C.fi_ep_bind(e.c, &q.c.fid, C.FI_TRANSMIT|C.FI_RECV))
}

// Enable makes the endpoint usable; receives may be posted after it.
func (e *Endpoint) Enable() error { return check("fi_enable", C.fi_enable(e.c)) }

// Connect starts connecting to info's destination, sending data (at most 55
// bytes to work on every provider). The outcome arrives on the EQ:
// EventConnected, or EventError (refused, unreachable). Nothing may be sent
// before EventConnected: on tcp that crashes inside the provider.
func (e *Endpoint) Connect(info *Info, data []byte) error {
	d, n := cbytes(data)
	defer C.free(d)
	return check("fi_connect", C.netio_connect(e.c, info.c, d, n))
}

// Accept accepts the connection request the endpoint was opened from,
// sending data to the peer. EventConnected follows on the EQ.
func (e *Endpoint) Accept(data []byte) error {
	d, n := cbytes(data)
	defer C.free(d)
	return check("fi_accept", C.fi_accept(e.c, d, n))
}

// Shutdown shuts the connection down; the peer gets EventShutdown. Sends
// not yet completed may be lost: wait for their completions first.
func (e *Endpoint) Shutdown() error { return check("fi_shutdown", C.fi_shutdown(e.c, 0)) }

// LocalAddr is the endpoint's local address.
func (e *Endpoint) LocalAddr() (netip.AddrPort, error) { return getname("fi_getname", &e.c.fid) }

// PeerAddr is the connected peer's address.
func (e *Endpoint) PeerAddr() (netip.AddrPort, error) {
	var buf [128]byte
	n := C.size_t(len(buf))
	if err := check("fi_getpeer", C.netio_getpeer(e.c, unsafe.Pointer(&buf[0]), &n)); err != nil {
		return netip.AddrPort{}, err
	}
	return decodeName("fi_getpeer", buf[:], int(n))
}

// Segment is one buffer of a batch post: Len bytes at Offset in a Region,
// reported on completion with Token. Its layout matches the C side's.
type Segment struct {
	Offset, Len, Token uint64
}

var _ [unsafe.Sizeof(Segment{}) - C.sizeof_netio_segment]byte
var _ [C.sizeof_netio_segment - unsafe.Sizeof(Segment{})]byte

// PostRecv posts a receive for each segment of r, in one cgo call. It
// returns how many were posted; on verbs a full receive queue shows as
// EAGAIN after a partial batch.
func (e *Endpoint) PostRecv(r *Region, segs []Segment) (int, error) {
	if err := r.checkSegments(segs); err != nil || len(segs) == 0 {
		return 0, err
	}
	res := C.netio_post_recvs(e.rx, (*C.char)(unsafe.Pointer(&r.mem[0])), r.desc, (*C.netio_segment)(unsafe.Pointer(&segs[0])), C.size_t(len(segs)))
	return int(res.posted), checkSize("fi_recv", res.ret)
}

// PostSend posts a send of each segment of r, in one cgo call, and returns
// how many were posted. The memory must stay untouched until each send's
// completion.
func (e *Endpoint) PostSend(r *Region, segs []Segment) (int, error) {
	return e.PostSendInject(r, segs, 0)
}

// PostSendInject is PostSend, but segments of at most inject bytes go with
// fi_inject (inject at most Info.InjectSize): their data is copied before
// the call returns and they complete without a completion entry, so the
// caller counts them done at once. A completion is a write and a read on
// the queue's wait descriptor on the tcp provider, about 7 µs on a small
// VM where a system call costs 1-3 µs.
func (e *Endpoint) PostSendInject(r *Region, segs []Segment, inject int) (int, error) {
	if err := r.checkSegments(segs); err != nil || len(segs) == 0 {
		return 0, err
	}
	res := C.netio_post_sends(e.c, (*C.char)(unsafe.Pointer(&r.mem[0])), r.desc, (*C.netio_segment)(unsafe.Pointer(&segs[0])), C.size_t(len(segs)), C.uint64_t(max(inject, 0)))
	return int(res.posted), checkSize("fi_send", res.ret)
}

// PostSendTail posts one send of seg's bytes of r followed by tail, in
// one message: a header from a registered region and a payload sent from
// where it lies, without copying it in. Only where Info.NeedsRegistration
// is false (tail has no descriptor) and Info.SendIOVLimit is at least 2.
// tail's memory is the provider's until the send's completion (or until
// the endpoint is closed): the caller keeps it untouched and, for Go
// memory, pinned (runtime.Pinner) for that long.
func (e *Endpoint) PostSendTail(r *Region, seg Segment, tail []byte) error {
	if err := r.checkSegments([]Segment{seg}); err != nil {
		return err
	}
	if len(tail) == 0 {
		return fmt.Errorf("ofi: PostSendTail with an empty tail")
	}
	ret := C.netio_send_tail(e.c, (*C.char)(unsafe.Pointer(&r.mem[seg.Offset])), C.size_t(seg.Len), r.desc, unsafe.Pointer(&tail[0]), C.size_t(len(tail)), C.uint64_t(seg.Token))
	return checkSize("fi_sendv", ret)
}

func (r *Region) checkSegments(segs []Segment) error {
	size := uint64(len(r.mem))
	for i := range segs {
		if s := &segs[i]; s.Offset > size || s.Len > size-s.Offset {
			return fmt.Errorf("ofi: segment [%d, +%d) outside a region of %d bytes", s.Offset, s.Len, size)
		}
	}
	return nil
}

// Close closes the endpoint. Receives still posted complete as ECANCELED
// on its completion queue, which must be drained before the queue or the
// regions are closed.
func (e *Endpoint) Close() error {
	if e.c == nil {
		return nil
	}
	fid := uintptr(unsafe.Pointer(&e.c.fid))
	err := check("fi_close(ep)", C.netio_close(&e.c.fid))
	e.c, e.rx = nil, nil
	if e.guard != nil {
		if gerr := e.guard.close(); err == nil {
			err = gerr
		}
		e.guard = nil
	}
	if e.eq != nil {
		// Its queued events must go before another endpoint can be
		// allocated at the same address.
		e.eq.purge(fid)
	}
	return err
}

func getname(op string, fid *C.struct_fid) (netip.AddrPort, error) {
	var buf [128]byte
	n := C.size_t(len(buf))
	if err := check(op, C.netio_getname(fid, unsafe.Pointer(&buf[0]), &n)); err != nil {
		return netip.AddrPort{}, err
	}
	return decodeName(op, buf[:], int(n))
}

func decodeName(op string, buf []byte, n int) (netip.AddrPort, error) {
	if n > len(buf) {
		n = len(buf)
	}
	a, ok := sockaddr(unsafe.Pointer(&buf[0]), n)
	if !ok {
		return netip.AddrPort{}, &Error{Op: op, Err: Errno(C.FI_EADDRNOTAVAIL)}
	}
	return a, nil
}

// cbytes copies data into C memory for calls that may keep it past their return.
func cbytes(data []byte) (unsafe.Pointer, C.size_t) {
	if len(data) == 0 {
		return nil, 0
	}
	return C.CBytes(data), C.size_t(len(data))
}
