//go:build cgo && linux

package ofi

/*
#include "rdm.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"syscall"
	"unsafe"
)

// Reliable-datagram endpoints (FI_EP_RDM) reach the providers that have no
// connections: shm between the processes of one host, tcp;ofi_rxm, and the
// HPC fabrics (efa, cxi, opx, psm2/psm3). One endpoint talks to many peers,
// each named by an FIAddr from the endpoint's address vector (AV); links
// are told apart by tags. Every operation that completes gets a
// struct fi_context2 from the completion queue's context arena (C memory),
// so the providers that require FI_CONTEXT or FI_CONTEXT2 are served as
// well as the others, and no Go pointer is ever handed to the provider.

// RDMHints select the reliable-datagram endpoints GetRDMInfo returns.
type RDMHints struct {
	// Provider names the provider ("shm", "tcp;ofi_rxm", "efa"...); ""
	// accepts any.
	Provider string
	// Node and Service are the local address to bind, for providers that
	// take one (tcp;ofi_rxm: "127.0.0.1" and "0"); "" lets the provider
	// choose (shm names its endpoints after the process).
	Node, Service string
}

// rdmMRMode adds FI_MR_ENDPOINT to what GetInfo declares: RDMEndpoint.
// BindRegion binds and enables regions on providers that register memory
// per endpoint (cxi).
const rdmMRMode = supportedMRMode | C.FI_MR_ENDPOINT

// rdmModes are the modes netio honours on RDM endpoints: every operation
// that completes carries a context of its own in C memory (FI_CONTEXT,
// FI_CONTEXT2: psm2, psm3, opx), receives are always posted
// (FI_RX_CQ_DATA), and no operation passes an iovec array, so none has to
// outlive its call (FI_ASYNC_IOV: opx).
const rdmModes = C.FI_CONTEXT | C.FI_CONTEXT2 | C.FI_RX_CQ_DATA | C.FI_ASYNC_IOV

// GetRDMInfo asks libfabric for reliable-datagram endpoints with message
// and tagged-message capabilities, send-after-send ordering, an address
// vector of type FI_AV_TABLE and FI_THREAD_DOMAIN. A provider without
// FI_TAGGED is returned with untagged messages only (Info.Tagged).
func GetRDMInfo(h RDMHints) (*InfoList, error) {
	l, err := getRDMInfo(h, C.FI_MSG|C.FI_TAGGED|C.FI_SEND|C.FI_RECV)
	if errors.Is(err, ENODATA) {
		l, err = getRDMInfo(h, C.FI_MSG|C.FI_SEND|C.FI_RECV)
	}
	return l, err
}

func getRDMInfo(h RDMHints, caps C.uint64_t) (*InfoList, error) {
	prov := cstring(h.Provider)
	defer freeCString(prov)
	hints := C.netio_rdm_hints(prov, caps, rdmMRMode, rdmModes)
	if hints == nil {
		return nil, &Error{Op: "fi_allocinfo", Err: Errno(C.FI_ENOMEM)}
	}
	defer C.fi_freeinfo(hints)
	node, service := cstring(h.Node), cstring(h.Service)
	defer freeCString(node)
	defer freeCString(service)
	var flags C.uint64_t
	if h.Node != "" || h.Service != "" {
		flags = C.FI_SOURCE
	}
	var res *C.struct_fi_info
	if err := check("fi_getinfo", C.fi_getinfo(C.uint32_t(APIVersion), node, service, flags, hints, &res)); err != nil {
		return nil, err
	}
	l := &InfoList{head: res}
	for p := res; p != nil; p = p.next {
		if i := (&Info{c: p}); !i.Spins() {
			l.Entries = append(l.Entries, i)
		}
	}
	if len(l.Entries) == 0 {
		l.Free()
		return nil, &Error{Op: "fi_getinfo", Err: ENODATA}
	}
	return l, nil
}

// ReliableDatagram reports whether the entry describes FI_EP_RDM endpoints.
func (i *Info) ReliableDatagram() bool { return C.netio_info_ep_type(i.c) == C.FI_EP_RDM }

// Tagged reports whether the endpoints have tagged messages (FI_TAGGED).
func (i *Info) Tagged() bool { return C.netio_info_caps(i.c)&C.FI_TAGGED != 0 }

// SourceAddressing reports whether completions of received messages carry
// the sender's FIAddr (FI_SOURCE): RDMCQ.ReadFrom returns AddrNotAvail
// for every sender otherwise.
func (i *Info) SourceAddressing() bool { return C.netio_info_caps(i.c)&C.FI_SOURCE != 0 }

// NeedsContext reports whether the provider uses the operations' context
// memory (FI_CONTEXT or FI_CONTEXT2). netio provides it either way.
func (i *Info) NeedsContext() bool {
	return C.netio_info_mode(i.c)&(C.FI_CONTEXT|C.FI_CONTEXT2) != 0
}

// OrderedSends reports whether messages from one endpoint to another
// arrive in the order they were sent (FI_ORDER_SAS).
func (i *Info) OrderedSends() bool { return C.netio_info_tx_order(i.c)&C.FI_ORDER_SAS != 0 }

// EndpointRegistration reports whether memory is registered per endpoint
// (FI_MR_ENDPOINT): every Region must go through RDMEndpoint.BindRegion.
func (i *Info) EndpointRegistration() bool { return i.c.domain_attr.mr_mode&C.FI_MR_ENDPOINT != 0 }

// AddrFormat is the format of the provider's endpoint addresses.
func (i *Info) AddrFormat() AddrFormat { return AddrFormat(C.netio_info_addr_format(i.c)) }

// RDMEndpoint is a reliable-datagram endpoint bound to a completion queue
// (for sends and receives) and an address vector.
type RDMEndpoint struct {
	c          *C.struct_fid_ep
	cq         *RDMCQ
	av         *AV
	format     AddrFormat
	mrEndpoint bool
	shmName    Address // on shm: the name shmLocal holds while it is open
}

// OpenRDMEndpoint opens an endpoint of info (from GetRDMInfo), binds it to
// cq and av and enables it: receives may be posted at once.
func (d *Domain) OpenRDMEndpoint(info *Info, cq *RDMCQ, av *AV) (*RDMEndpoint, error) {
	if !info.ReliableDatagram() {
		return nil, fmt.Errorf("ofi: OpenRDMEndpoint with an entry that is not FI_EP_RDM")
	}
	e, err := d.openRDMEndpoint(info, cq, av)
	// shm names an endpoint's region <pid>:<uid>:<index>. A process killed
	// before it closed its endpoints leaves their regions in /dev/shm; one
	// whose pid comes round again finds its name taken by a region whose
	// owner (its own pid) is alive, and fi_enable fails with EBUSY after
	// removing it. The next index is free, or taken the same way.
	for tries := 0; err != nil && errors.Is(err, syscall.EBUSY) && info.Provider() == "shm" && tries < staleShmRetries; tries++ {
		e, err = d.openRDMEndpoint(info, cq, av)
	}
	return e, err
}

// staleShmRetries bounds the endpoints OpenRDMEndpoint opens again over
// regions a dead process of the same pid left.
const staleShmRetries = 64

func (d *Domain) openRDMEndpoint(info *Info, cq *RDMCQ, av *AV) (*RDMEndpoint, error) {
	e := &RDMEndpoint{cq: cq, av: av, format: info.AddrFormat(), mrEndpoint: info.EndpointRegistration()}
	if err := check("fi_endpoint", C.netio_endpoint(d.c, info.c, &e.c, 0)); err != nil {
		return nil, err
	}
	err := check("fi_ep_bind(cq)", C.netio_rdm_bind(e.c, &cq.c.fid, C.FI_TRANSMIT|C.FI_RECV))
	if err == nil {
		err = check("fi_ep_bind(av)", C.netio_rdm_bind(e.c, &av.c.fid, 0))
	}
	if err == nil {
		err = check("fi_enable", C.fi_enable(e.c))
	}
	if err != nil {
		C.netio_close(&e.c.fid)
		return nil, err
	}
	if info.Provider() == "shm" {
		if e.shmName, err = e.Name(); err != nil {
			C.netio_close(&e.c.fid)
			return nil, err
		}
		shmOpened(e.shmName)
	}
	return e, nil
}

// Name is the endpoint's own address, which a peer inserts into its AV.
func (e *RDMEndpoint) Name() (Address, error) {
	var buf [256]byte
	n := C.size_t(len(buf))
	if err := check("fi_getname", C.netio_getname(&e.c.fid, unsafe.Pointer(&buf[0]), &n)); err != nil {
		return Address{}, err
	}
	if int(n) > len(buf) {
		return Address{}, &Error{Op: "fi_getname", Err: Errno(C.FI_ETOOSMALL)}
	}
	return Address{format: e.format, raw: string(buf[:n])}, nil
}

// BindRegion makes r usable by this endpoint on providers that register
// memory per endpoint (Info.EndpointRegistration); elsewhere it does
// nothing. r must be registered with the endpoint's domain.
func (e *RDMEndpoint) BindRegion(r *Region) error {
	if !e.mrEndpoint {
		return nil
	}
	return check("fi_mr_bind", C.netio_mr_bind_ep(r.mr, e.c))
}

// RDMSegment is one operation of a batch: Len bytes at Offset in a Region,
// reported on completion with Token. Peer is the destination of a send
// and, for a receive, the only sender it matches (AddrUnspec: any; only
// with FI_DIRECTED_RECV). A tagged receive matches the messages whose tag
// equals Tag in every bit not set in Ignore.
type RDMSegment struct {
	Offset, Len, Token uint64
	Tag, Ignore        uint64
	Peer               FIAddr
}

var _ [unsafe.Sizeof(RDMSegment{}) - C.sizeof_netio_rdm_segment]byte
var _ [C.sizeof_netio_rdm_segment - unsafe.Sizeof(RDMSegment{})]byte

// PostRecv posts an untagged receive for each segment, in one cgo call.
// It returns how many were posted; EAGAIN after a partial batch means the
// provider's queue or the completion queue's context arena is full.
func (e *RDMEndpoint) PostRecv(r *Region, segs []RDMSegment) (int, error) {
	return e.post(C.NETIO_OP_RECV, "fi_recv", r, segs, 0)
}

// PostTaggedRecv posts a tagged receive for each segment, in one cgo call.
func (e *RDMEndpoint) PostTaggedRecv(r *Region, segs []RDMSegment) (int, error) {
	return e.post(C.NETIO_OP_TRECV, "fi_trecv", r, segs, 0)
}

// PostSend posts an untagged send of each segment to its peer, in one cgo
// call. Segments of at most inject bytes (at most Info.InjectSize) go with
// fi_inject: copied before the call returns, done without a completion.
// The memory of the others stays untouched until their completion.
func (e *RDMEndpoint) PostSend(r *Region, segs []RDMSegment, inject int) (int, error) {
	return e.post(C.NETIO_OP_SEND, "fi_send", r, segs, inject)
}

// PostTaggedSend is PostSend with each segment's Tag.
func (e *RDMEndpoint) PostTaggedSend(r *Region, segs []RDMSegment, inject int) (int, error) {
	return e.post(C.NETIO_OP_TSEND, "fi_tsend", r, segs, inject)
}

func (e *RDMEndpoint) post(op C.int, name string, r *Region, segs []RDMSegment, inject int) (int, error) {
	if e.c == nil {
		return 0, &Error{Op: name, Err: EBADF}
	}
	if len(segs) == 0 {
		return 0, nil
	}
	size := uint64(len(r.mem))
	for i := range segs {
		if s := &segs[i]; s.Offset > size || s.Len > size-s.Offset {
			return 0, fmt.Errorf("ofi: segment [%d, +%d) outside a region of %d bytes", s.Offset, s.Len, size)
		}
	}
	if (op == C.NETIO_OP_SEND || op == C.NETIO_OP_TSEND) && e.av != nil && len(e.av.guards) > 0 {
		if err := e.av.checkPeers(name, segs); err != nil {
			return 0, err
		}
	}
	res := C.netio_rdm_post(e.c, e.cq.arena, op, (*C.char)(unsafe.Pointer(&r.mem[0])), r.desc,
		(*C.netio_rdm_segment)(unsafe.Pointer(&segs[0])), C.size_t(len(segs)), C.uint64_t(max(inject, 0)))
	return int(res.posted), checkSize(name, res.ret)
}

// Cancel asks the provider to cancel every operation of the endpoint still
// in flight with token (a link's receive window when the link closes). Each
// completes later as an ECANCELED error entry, or normally if it finished
// first. It returns how many operations it found. Read those entries
// before closing the endpoint (see Close). Sends are not cancelled on shm.
func (e *RDMEndpoint) Cancel(token uint64) int {
	if e.c == nil {
		return 0
	}
	return int(C.netio_rdm_cancel(e.c, e.cq.arena, C.uint64_t(token), 0))
}

// InFlight is how many operations posted on the endpoint hold a context
// slot: their completion has not been read yet.
func (e *RDMEndpoint) InFlight() int {
	if e.c == nil {
		return 0
	}
	return int(C.netio_rdm_in_flight(e.cq.arena, e.c))
}

// Close closes the endpoint. Operations still in flight keep their
// context slots, counted by RDMCQ.Orphaned, until the provider reports
// them: shm reports posted receives as ECANCELED on later reads;
// tcp;ofi_rxm reports nothing, nor does shm for a send to a peer that died,
// and those slots stay taken until the queue is closed. To get a link's
// receives back, Cancel them and read their ECANCELED entries before
// closing: on tcp;ofi_rxm, closing with cancellations not yet read crashed
// inside the provider.
func (e *RDMEndpoint) Close() error {
	if e.c == nil {
		return nil
	}
	if e.shmName.raw != "" {
		shmClosed(e.shmName)
	}
	err := check("fi_close(ep)", C.netio_close(&e.c.fid))
	C.netio_rdm_orphan(e.cq.arena, e.c)
	e.c = nil
	return err
}
