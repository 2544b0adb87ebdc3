//go:build cgo && linux

package ofi

/*
#include "ofi.h"
*/
import "C"

import (
	"unsafe"
)

// The guard keeps libfabric's tcp provider away from a crash that any peer
// can trigger. The provider hands every incoming message to a handler
// chosen by an opcode in the peer's header. For a tagged message (opcode 1)
// the handler calls through the endpoint's shared receive context without
// checking that there is one (prov/tcp/src/tcpx_progress.c, tcpx_op_tagged:
// only an assert, compiled out in release builds; upstream's xnet_op_tagged
// still reads the same way in 2026). netio never sends tagged messages and
// never asked for FI_TAGGED, so its endpoints have no such context, and a
// 16-byte header with opcode 1 made fi_cq_read jump through a NULL pointer
// (SIGSEGV at 0x78, the offset of match_tag_rx) on the reactor thread,
// taking the whole process down.
//
// The guard gives each tcp endpoint a shared receive context of its own,
// which is where its receives are posted (nothing else changes: completions
// still go to the endpoint's queue), and posts on it one tagged receive
// that matches every tag. A forged tagged message then lands in that trap:
// it completes, or fails as truncated, with TrapToken, and the owner of
// the endpoint closes that one connection.
//
// What the guard cannot stop: an acknowledgement header (opcode 0, op_data
// 2, size 16) when no send awaits one makes the same provider pop an empty
// list (tcpx_handle_ack, also assert-only) and crash. No receive or send
// netio could post makes that list non-empty, so only admission keeps such
// a peer out: netio's connection key, checked before the provider reads a
// single data byte of the connection, and required by default.

// TrapToken is the token of the guard's trap: a completion (or completion
// error) carrying it means the peer sent a tagged message, which netio
// never does. Callers must not post operations with this token.
const TrapToken = ^uint64(0)

// trapSize is large enough for any tagged header the provider strips; a
// larger forged payload fails as truncated, which is just as good.
const trapSize = 64

// guard is an endpoint's private shared receive context and its trap.
type guard struct {
	srx  *C.struct_fid_ep
	trap unsafe.Pointer // C memory: the provider may write it until srx is closed
}

// needsGuard reports whether endpoints of info need the guard: those of
// the tcp provider itself (not of a utility provider layered on it).
func needsGuard(info *Info) bool { return info.Provider() == "tcp" }

// openGuard opens the guard for an endpoint of info that will post at most
// rxDepth receives, and binds the endpoint to it. pe is the endpoint's
// state under the verbs profile, or nil.
func openGuard(d *Domain, info *Info, ep *C.struct_fid_ep, pe *C.netio_prof_ep) (*guard, error) {
	g := &guard{}
	// One more than the receive queue for the trap, and under the
	// profile one for its strict-credit trap.
	size := info.RxSize() + 1
	if pe != nil {
		size++
	}
	if err := check("fi_srx_context", C.netio_srx_open(d.c, C.size_t(size), &g.srx)); err != nil {
		return nil, err
	}
	if trimsPools(info) {
		trimSRXPool(g, size)
	}
	if err := check("fi_ep_bind(srx)", C.fi_ep_bind(ep, &g.srx.fid, 0)); err != nil {
		g.close()
		return nil, err
	}
	g.trap = C.calloc(1, trapSize)
	var ret C.ssize_t
	if pe != nil {
		ret = C.netio_prof_post_trap(pe, g.srx, g.trap, trapSize, C.uint64_t(TrapToken))
	} else {
		ret = C.netio_post_trap(g.srx, g.trap, trapSize, C.uint64_t(TrapToken))
	}
	if err := checkSize("fi_trecv", ret); err != nil {
		g.close()
		return nil, err
	}
	return g, nil
}

// bindCQ sends the context's own reports (receives cancelled at close) to
// the endpoint's completion queue.
func (g *guard) bindCQ(q *CQ) error {
	return check("fi_ep_bind(srx, cq)", C.fi_ep_bind(g.srx, &q.c.fid, C.FI_RECV))
}

// close closes the context, after its endpoint: receives still queued on
// it complete as ECANCELED on the bound queue. Only then is the trap's
// memory free.
func (g *guard) close() error {
	var err error
	if g.srx != nil {
		err = check("fi_close(srx)", C.netio_close(&g.srx.fid))
		g.srx = nil
	}
	if g.trap != nil {
		C.free(g.trap)
		g.trap = nil
	}
	return err
}
