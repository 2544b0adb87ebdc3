//go:build cgo && linux

package ofi

/*
#include "ofi.h"
*/
import "C"

import (
	"fmt"
	"os"
	"sync"
)

// The verbs profile makes a provider that forgives (tcp) behave as verbs
// does, so that code tested on tcp is right on InfiniBand and RoCE, which
// the test machines do not have. It is switched on by the environment,
// $NETIO_PROFILE=verbs, read when GetInfo is called: every object made
// from an Info it returned follows the profile, and nothing changes for
// the others. Under it:
//
//   - The Info reports verbs' memory registration mode (FI_MR_LOCAL,
//     FI_MR_VIRT_ADDR, FI_MR_ALLOCATED, FI_MR_PROV_KEY), so that callers
//     take the path they take on verbs: every buffer registered, none sent
//     from unregistered memory (PostSendTail fails).
//   - Queue depths and the inject size are clamped to verbs' defaults
//     (the provider's own when smaller), and enforced: a post past the
//     transmit or receive queue's depth, or one that would leave the
//     completion queue too small for the operations in flight, fails
//     with EAGAIN (verbs' answer); an inject over the inject size fails.
//   - Every post is checked in C, inside the call that posts the batch:
//     it has a descriptor, the descriptor names a registered region, and
//     the whole buffer lies inside that region.
//   - Connection data is capped at the 55 bytes verbs carries.
//   - The strict-credit trap: a message that arrives when no receive is
//     posted for it fails the connection (ENORECV), as on iWARP, where
//     InfiniBand and RoCE would make the sender retry until one is posted
//     and a sender that does not keep to its credits only stalls. The
//     trap is a small receive the profile keeps posted behind the
//     caller's (cancelled and posted again after each batch): the
//     provider matches receives in order, so only a message that found
//     every one of the caller's receives taken lands in it. tcp only
//     (it needs the guard's shared receive context, guard.go).
//
// What it costs: a hash lookup and a few counters per post, an allocation
// per operation, and a cancel and a repost per batch of receives; none of
// it without the profile.

// ProfileEnv is the environment variable that switches a profile on:
// "verbs", or empty for none.
const ProfileEnv = "NETIO_PROFILE"

// profile is the set of limits a profile enforces.
type profile struct {
	name   string
	tx, rx int // queue depths, at most
	inject int // fi_inject size, at most
	cmData int // connection private data, at most
}

// verbsProfile holds the verbs provider's defaults (libfabric 1.17,
// prov/verbs: FI_VERBS_TX_SIZE and FI_VERBS_RX_SIZE 384; its inline size
// is asked for 256 and is often less on the device, 64 is common), and
// rdma_cm's 56 bytes of connection data less the provider's 1-byte header.
var verbsProfile = &profile{name: "verbs", tx: 384, rx: 384, inject: 64, cmData: 55}

// The profile GetInfo applies; tests set it directly.
var profileState struct {
	once sync.Once
	p    *profile
	err  error
}

// currentProfile returns the profile $NETIO_PROFILE asks for.
func currentProfile() (*profile, error) {
	profileState.once.Do(func() {
		switch v := os.Getenv(ProfileEnv); v {
		case "":
		case "verbs":
			profileState.p = verbsProfile
		default:
			profileState.err = fmt.Errorf("ofi: $%s=%q: unknown profile (want verbs, or empty for none)", ProfileEnv, v)
		}
	})
	return profileState.p, profileState.err
}

// ActiveProfile names the profile in force ("verbs"), or "" for none. An
// unknown $NETIO_PROFILE is an error, which GetInfo returns too.
func ActiveProfile() (string, error) {
	p, err := currentProfile()
	if p == nil {
		return "", err
	}
	return p.name, err
}

// Profile names the profile objects made from the entry follow, or "".
func (i *Info) Profile() string {
	if i.prof == nil {
		return ""
	}
	return i.prof.name
}

// verbsMRMode is the registration mode the verbs provider returns.
const verbsMRMode = C.FI_MR_LOCAL | C.FI_MR_VIRT_ADDR | C.FI_MR_ALLOCATED | C.FI_MR_PROV_KEY

// Errors of netio's own, beyond libfabric's numbers, for what the
// profile catches.
const (
	// EBADDESC: a post with no descriptor, with one that names no
	// registered region, or of a buffer outside its descriptor's region.
	// Verbs fails such an operation with a protection error.
	EBADDESC = Errno(C.NETIO_EPROF_DESC)
	// EINJECT: an inject larger than the endpoint's inject size.
	EINJECT = Errno(C.NETIO_EPROF_INJECT)
	// ECQOVERRUN: a receive that could leave more operations in flight
	// than the completion queue holds; on verbs the queue overruns, which
	// ends every endpoint bound to it.
	ECQOVERRUN = Errno(C.NETIO_EPROF_CQ)
	// ENORECV: a message arrived with no receive posted for it.
	ENORECV = Errno(C.NETIO_EPROF_NORECV)
)

// ProfileTrapToken is the token of the completion error that reports the
// strict-credit trap (ENORECV). Callers must not post with it.
const ProfileTrapToken = uint64(C.NETIO_PROF_TRAP_TOKEN)

// profileErrno returns the text of the profile's errors.
func profileErrno(e Errno) (string, bool) {
	switch e {
	case EBADDESC:
		return "memory not registered, or outside its descriptor's region", true
	case EINJECT:
		return "inject over the inject size", true
	case ECQOVERRUN:
		return "completion queue could overrun", true
	case ENORECV:
		return "verbs profile: a message arrived with no receive posted for it " +
			"(iWARP ends the connection; InfiniBand and RoCE make the sender retry until one is posted)", true
	}
	return "", false
}

// ProfileError is a post the verbs profile refused: what verbs would
// refuse, or fail on later. Err is what verbs returns (EAGAIN for a full
// queue, so that errors.Is(err, EAGAIN) holds as on verbs) or one of the
// profile's own errors (EBADDESC...); Detail says what was wrong.
type ProfileError struct {
	Err    Errno
	Detail string
}

func (e *ProfileError) Error() string { return "verbs profile: " + e.Detail }

// Unwrap returns Err.
func (e *ProfileError) Unwrap() error { return e.Err }

// profileError turns a profiled post's return into an error: pe's message
// says what the profile refused.
func profileError(op string, pe *C.netio_prof_ep, ret C.ssize_t) error {
	switch {
	case ret >= 0:
		return nil
	case ret == -C.NETIO_EPROF_AGAIN:
		return &Error{Op: op, Err: &ProfileError{Err: EAGAIN, Detail: C.GoString(C.netio_prof_ep_msg(pe))}}
	case -ret > C.NETIO_EPROF_BASE:
		return &Error{Op: op, Err: &ProfileError{Err: Errno(-ret), Detail: C.GoString(C.netio_prof_ep_msg(pe))}}
	}
	return &Error{Op: op, Err: Errno(-ret)}
}

// clampTo returns v, or limit when that is smaller.
func clampTo(v, limit int) int {
	if limit > 0 && v > limit {
		return limit
	}
	return v
}
