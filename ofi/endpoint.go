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
	c      *C.struct_fid_pep
	info   *C.struct_fi_info // what it was opened from, kept until Close
	token  uint64
	eq     *EQ
	tcp    bool // the tcp provider's: Listen guards its connection manager (cmguard.go)
	cmData int  // private data a reject carries at most; 0: the provider does not say
	prof   *profile
}

// OpenPassiveEndpoint opens a passive endpoint for info (from GetInfo with
// Source set). libfabric binds the port here, so Addr reports the real port
// even before Listen; token comes back as Event.Context.
func (f *Fabric) OpenPassiveEndpoint(info *Info, token uint64) (*PassiveEndpoint, error) {
	kept, err := keepInfo(info)
	if err != nil {
		return nil, err
	}
	p := &PassiveEndpoint{info: kept, token: token, tcp: needsGuard(info), prof: f.prof}
	var ret C.int
	noInherit(func() { ret = C.netio_passive_ep(f.c, kept, &p.c, C.uint64_t(token)) })
	if err := check("fi_passive_ep", ret); err != nil {
		freeKept(&p.info)
		return nil, err
	}
	p.cmData = cmDataSize(&p.c.fid, f.prof)
	return p, nil
}

// Info is the entry the passive endpoint was opened from. It stays valid
// until Close; do not free it.
func (p *PassiveEndpoint) Info() *Info { return &Info{c: p.info, prof: p.prof} }

// Bind attaches the event queue that will report connection requests.
func (p *PassiveEndpoint) Bind(q *EQ) error {
	if err := check("fi_pep_bind", C.fi_pep_bind(p.c, &q.c.fid, 0)); err != nil {
		return err
	}
	p.eq = q
	q.passive = true
	q.bind(uintptr(unsafe.Pointer(&p.c.fid)), p.token)
	return nil
}

// Listen starts accepting connection requests.
func (p *PassiveEndpoint) Listen() error {
	var ret C.int
	noInherit(func() { ret = C.fi_listen(p.c) })
	if err := check("fi_listen", ret); err != nil {
		return err
	}
	if p.tcp {
		return p.guardCM()
	}
	return nil
}

// Addr is the bound local address.
func (p *PassiveEndpoint) Addr() (netip.AddrPort, error) { return getname("fi_getname", &p.c.fid) }

// CMDataSize is the most private data a reject carries (and, on every
// provider netio knows, a request or an accept): what the provider
// answers to FI_OPT_CM_DATA_SIZE, at most the verbs profile's limit under
// it; 0 when the provider does not say.
func (p *PassiveEndpoint) CMDataSize() int { return p.cmData }

// Reject refuses a connection request, sending data to the peer (at most
// CMDataSize bytes: more is an error, and the request is rejected without
// data), and frees the request. Every request must be accepted or
// rejected.
func (p *PassiveEndpoint) Reject(req *Info, data []byte) error {
	tooLong := checkCMData("fi_reject", data, p.cmData, p.prof)
	if tooLong != nil {
		data = nil
	}
	d, n := cbytes(data)
	defer C.free(d)
	err := check("fi_reject", C.fi_reject(p.c, req.c.handle, d, n))
	req.Free()
	if err == nil {
		err = tooLong
	}
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
	freeKept(&p.info)
	if p.eq != nil {
		p.eq.purge(fid)
	}
	return err
}

// cmDataSize asks the provider how much private data fid's connection
// messages carry (FI_OPT_CM_DATA_SIZE), capped by prof; 0 when neither
// says.
func cmDataSize(fid *C.struct_fid, prof *profile) int {
	var size C.size_t
	n := 0
	if C.netio_cm_data_size(fid, &size) == 0 {
		n = int(size)
	}
	if prof != nil && (n == 0 || n > prof.cmData) {
		n = prof.cmData
	}
	return n
}

// checkCMData checks that data fits the max bytes of private data of a
// connection message (0: no known limit).
func checkCMData(op string, data []byte, max int, prof *profile) error {
	if max == 0 || len(data) <= max {
		return nil
	}
	if prof != nil && max == prof.cmData {
		return &Error{Op: op, Err: &ProfileError{Err: EINVAL, Detail: fmt.Sprintf("%d bytes of connection data, over the %d verbs carries", len(data), max)}}
	}
	return &Error{Op: op, Err: fmt.Errorf("%d bytes of connection data, over the provider's %d (FI_OPT_CM_DATA_SIZE): %w", len(data), max, EINVAL)}
}

// Endpoint is an active, connection-oriented endpoint (fi_endpoint with
// FI_EP_MSG).
type Endpoint struct {
	c      *C.struct_fid_ep
	info   *C.struct_fi_info // what it was opened from, kept until Close
	rx     *C.struct_fid_ep  // where receives are posted: c, or the guard's context
	guard  *guard            // tcp only (guard.go)
	prof   *C.netio_prof_ep  // under the verbs profile (profile.go), else nil
	pinfo  *profile
	token  uint64
	eq     *EQ
	cmData int // private data a connect or accept carries at most; 0: unknown
}

// OpenEndpoint opens an endpoint: from a GetInfo entry to connect, or from
// a connection request's Info to accept. token comes back as the Context of
// the endpoint's events.
func (d *Domain) OpenEndpoint(info *Info, token uint64) (*Endpoint, error) {
	kept, err := keepInfo(info)
	if err != nil {
		return nil, err
	}
	e := &Endpoint{info: kept, token: token, pinfo: d.prof}
	var ret C.int
	noInherit(func() { ret = C.netio_endpoint(d.c, kept, &e.c, C.uint64_t(token)) })
	if err := check("fi_endpoint", ret); err != nil {
		freeKept(&e.info)
		return nil, err
	}
	e.rx = e.c
	fail := func(err error) (*Endpoint, error) {
		C.netio_close(&e.c.fid)
		if e.prof != nil {
			C.netio_prof_ep_closed(e.prof)
		}
		freeKept(&e.info)
		return nil, err
	}
	if d.prof != nil {
		limits := &Info{c: kept, prof: d.prof}
		e.prof = C.netio_prof_ep_new(e.c, C.uint32_t(limits.TxSize()), C.uint32_t(limits.RxSize()), C.uint32_t(limits.InjectSize()))
		if e.prof == nil {
			return fail(&Error{Op: "fi_endpoint", Err: Errno(C.FI_ENOMEM)})
		}
	}
	if needsGuard(info) {
		var g *guard
		noInherit(func() { g, err = openGuard(d, info, e.c, e.prof) })
		if err != nil {
			return fail(err)
		}
		e.guard, e.rx = g, g.srx
		if e.prof != nil {
			C.netio_prof_ep_set_rx(e.prof, g.srx, 1)
		}
	}
	e.cmData = cmDataSize(&e.c.fid, d.prof)
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
	if err := check("fi_ep_bind(cq)", C.fi_ep_bind(e.c, &q.c.fid, C.FI_TRANSMIT|C.FI_RECV)); err != nil {
		return err
	}
	if e.prof != nil && q.prof != nil {
		C.netio_prof_ep_bind_cq(e.prof, q.prof)
	}
	return nil
}

// Enable makes the endpoint usable; receives may be posted after it.
func (e *Endpoint) Enable() error {
	var ret C.int
	noInherit(func() { ret = C.fi_enable(e.c) })
	return check("fi_enable", ret)
}

// CMDataSize is the most private data Connect and Accept carry: what the
// provider answers to FI_OPT_CM_DATA_SIZE (256 bytes on tcp, 55 on verbs),
// at most the verbs profile's 55 under it; 0 when the provider does not
// say.
func (e *Endpoint) CMDataSize() int { return e.cmData }

// Connect starts connecting to info's destination, sending data (at most
// CMDataSize bytes; 55 work on every provider). The outcome arrives on
// the EQ: EventConnected, or EventError (refused, unreachable). Nothing
// may be sent before EventConnected: on tcp that crashes inside the
// provider.
func (e *Endpoint) Connect(info *Info, data []byte) error {
	if err := checkCMData("fi_connect", data, e.cmData, e.pinfo); err != nil {
		return err
	}
	d, n := cbytes(data)
	defer C.free(d)
	var ret C.int
	noInherit(func() { ret = C.netio_connect(e.c, info.c, d, n) })
	return check("fi_connect", ret)
}

// Accept accepts the connection request the endpoint was opened from,
// sending data to the peer (at most CMDataSize bytes). EventConnected
// follows on the EQ.
func (e *Endpoint) Accept(data []byte) error {
	if err := checkCMData("fi_accept", data, e.cmData, e.pinfo); err != nil {
		return err
	}
	d, n := cbytes(data)
	defer C.free(d)
	var ret C.int
	noInherit(func() { ret = C.fi_accept(e.c, d, n) })
	return check("fi_accept", ret)
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
	base, seg := (*C.char)(unsafe.Pointer(&r.mem[0])), (*C.netio_segment)(unsafe.Pointer(&segs[0]))
	if e.prof != nil {
		res := C.netio_prof_post_recvs(e.prof, base, r.desc, seg, C.size_t(len(segs)))
		return int(res.posted), profileError("fi_recv", e.prof, res.ret)
	}
	res := C.netio_post_recvs(e.rx, base, r.desc, seg, C.size_t(len(segs)))
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
	base, seg := (*C.char)(unsafe.Pointer(&r.mem[0])), (*C.netio_segment)(unsafe.Pointer(&segs[0]))
	if e.prof != nil {
		res := C.netio_prof_post_sends(e.prof, base, r.desc, seg, C.size_t(len(segs)), C.uint64_t(max(inject, 0)))
		return int(res.posted), profileError("fi_send", e.prof, res.ret)
	}
	res := C.netio_post_sends(e.c, base, r.desc, seg, C.size_t(len(segs)), C.uint64_t(max(inject, 0)))
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
	if e.prof != nil {
		return profileError("fi_sendv", e.prof, C.netio_prof_send_tail(e.prof, C.size_t(len(tail))))
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
	if e.prof != nil {
		C.netio_prof_ep_closed(e.prof)
		e.prof = nil
	}
	freeKept(&e.info)
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
