//go:build cgo && linux

package ofi

/*
#include "ofi.h"
*/
import "C"

import (
	"errors"
	"net/netip"
	"strings"
	"sync"
	"unsafe"
)

// Hints select the providers and endpoints GetInfo returns. netio always
// asks for reliable connected endpoints (FI_EP_MSG) with send/receive
// messaging, FI_THREAD_DOMAIN, and declares every memory-registration mode
// it honours (local registration of mmap'd buffers with descriptors,
// provider keys, virtual addresses), so that providers such as verbs that
// require them are offered too.
type Hints struct {
	// Provider names the provider ("tcp", "verbs", "sockets", "tcp;ofi_rxm"...);
	// "" accepts any.
	Provider string
	// Node and Service are the host and port. For a listener they are the
	// local address to bind (Source is true); for a connection the peer.
	Node, Service string
	// Source says Node and Service are a local address (FI_SOURCE).
	Source bool
	// Domain asks for the entries of one domain (a NIC such as mlx5_1, or
	// for tcp an interface such as eth0); "" accepts any. Providers do
	// not all filter on it: check DomainName of what comes back.
	Domain string
	// SourceAddr, when valid, is the local address a connection is made
	// from (not with Source, where Node is that address): the provider
	// then picks the domain that address belongs to.
	SourceAddr netip.Addr
}

// The memory registration modes netio supports: it registers every buffer
// (FI_MR_LOCAL), only registers memory it allocated (FI_MR_ALLOCATED), and
// passes whatever key and address the provider chooses.
const supportedMRMode = C.FI_MR_LOCAL | C.FI_MR_VIRT_ADDR | C.FI_MR_ALLOCATED | C.FI_MR_PROV_KEY

// Info is one entry returned by GetInfo or carried by a connection request:
// a provider, fabric, domain and endpoint description. An Info obtained from
// GetInfo belongs to its InfoList; one from a connection request must be
// passed to Accept (through OpenEndpoint) or Reject and then freed.
type Info struct {
	c     *C.struct_fi_info
	owned bool     // freed by Free (connection requests); list entries are freed with the list
	prof  *profile // the profile objects made from it follow (profile.go), or nil
}

// InfoList is the result of GetInfo; Free releases every Info in it.
type InfoList struct {
	head    *C.struct_fi_info
	Entries []*Info
}

// ErrSpinningProvider is returned by GetInfo when the only matching
// providers are versions known to spin: their wait objects never let a
// thread sleep, so an idle reactor would burn a core.
var ErrSpinningProvider = errors.New("ofi: provider version busy-polls (libfabric 'net' before 1.19 or 'tcp' 1.18); upgrade libfabric or pick another provider")

// GetInfo asks libfabric for the endpoints matching h. Entries whose
// provider version is known to spin (see Spins) are dropped.
func GetInfo(h Hints) (*InfoList, error) {
	prof, err := currentProfile()
	if err != nil {
		return nil, err
	}
	prov, dom := cstring(h.Provider), cstring(h.Domain)
	defer freeCString(prov)
	defer freeCString(dom)
	var src []byte
	var format C.uint32_t
	if h.SourceAddr.IsValid() {
		src, format = encodeSockaddr(h.SourceAddr)
	}
	srcC, srcLen := cbytes(src)
	defer C.free(srcC)
	hints := C.netio_hints(prov, dom, srcC, srcLen, format, C.FI_MSG|C.FI_SEND|C.FI_RECV, supportedMRMode, C.FI_RX_CQ_DATA)
	if hints == nil {
		return nil, &Error{Op: "fi_allocinfo", Err: Errno(C.FI_ENOMEM)}
	}
	defer C.fi_freeinfo(hints)
	node, service := cstring(h.Node), cstring(h.Service)
	defer freeCString(node)
	defer freeCString(service)
	var flags C.uint64_t
	if h.Source {
		flags |= C.FI_SOURCE
	}
	var res *C.struct_fi_info
	if err := check("fi_getinfo", C.fi_getinfo(C.uint32_t(APIVersion), node, service, flags, hints, &res)); err != nil {
		return nil, err
	}
	l := &InfoList{head: res}
	spinning := 0
	for p := res; p != nil; p = p.next {
		i := &Info{c: p, prof: prof}
		if i.Spins() {
			spinning++
			continue
		}
		l.Entries = append(l.Entries, i)
	}
	if len(l.Entries) == 0 {
		l.Free()
		if spinning > 0 {
			return nil, ErrSpinningProvider
		}
		return nil, &Error{Op: "fi_getinfo", Err: ENODATA}
	}
	return l, nil
}

// Free releases the list; its entries must not be used afterwards.
func (l *InfoList) Free() {
	if l.head != nil {
		C.fi_freeinfo(l.head)
		l.head = nil
		l.Entries = nil
	}
}

// keepInfo returns a deep copy of i for an object opened from it to keep
// until it is closed: providers may keep pointers into the fi_info they
// were opened with (the sockets provider copies the struct and reads its
// attributes when a connection request arrives), so the caller's list
// must be free to go as soon as the call returns.
func keepInfo(i *Info) (*C.struct_fi_info, error) {
	c := C.fi_dupinfo(i.c)
	if c == nil {
		return nil, &Error{Op: "fi_dupinfo", Err: Errno(C.FI_ENOMEM)}
	}
	return c, nil
}

// freeKept frees what keepInfo returned; nil is allowed.
func freeKept(c **C.struct_fi_info) {
	if *c != nil {
		C.fi_freeinfo(*c)
		*c = nil
	}
}

// Free releases an Info that came with a connection request.
func (i *Info) Free() {
	if i.owned && i.c != nil {
		C.fi_freeinfo(i.c)
		i.c = nil
	}
}

// Provider is the provider's name, e.g. "tcp" or "tcp;ofi_rxm".
func (i *Info) Provider() string { return C.GoString(i.c.fabric_attr.prov_name) }

// ProviderVersion is the provider's own version.
func (i *Info) ProviderVersion() Version { return Version(i.c.fabric_attr.prov_version) }

// FabricName is the fabric's name (for tcp, a subnet such as "127.0.0.0/8").
func (i *Info) FabricName() string { return C.GoString(i.c.fabric_attr.name) }

// DomainName is the domain's name (for tcp, an interface such as "lo").
func (i *Info) DomainName() string { return C.GoString(i.c.domain_attr.name) }

// MRMode is the memory registration mode the provider requires (under
// the verbs profile, verbs' mode).
func (i *Info) MRMode() uint64 {
	if i.prof != nil {
		return uint64(i.c.domain_attr.mr_mode) | verbsMRMode
	}
	return uint64(i.c.domain_attr.mr_mode)
}

// NeedsRegistration reports whether local buffers must be registered
// (FI_MR_LOCAL): then every buffer of a post must lie in a Region, as on
// verbs.
func (i *Info) NeedsRegistration() bool { return i.MRMode()&C.FI_MR_LOCAL != 0 }

// PinsMemory reports whether registering memory pins it, so that the
// process's locked-memory limit (RLIMIT_MEMLOCK) bounds what it may
// register: on providers that need local registration (verbs), and under
// the verbs profile.
func (i *Info) PinsMemory() bool { return i.NeedsRegistration() }

// ProviderKeys reports whether the provider chooses memory keys (FI_MR_PROV_KEY).
func (i *Info) ProviderKeys() bool { return i.MRMode()&C.FI_MR_PROV_KEY != 0 }

// realProviderKeys is ProviderKeys as the provider itself says: under the
// profile the keys asked of it must still be distinct.
func (i *Info) realProviderKeys() bool { return i.c.domain_attr.mr_mode&C.FI_MR_PROV_KEY != 0 }

// TxSize is the depth of the transmit queue.
func (i *Info) TxSize() int {
	return i.clamp(int(i.c.tx_attr.size), func(p *profile) int { return p.tx })
}

// RxSize is the depth of the receive queue.
func (i *Info) RxSize() int {
	return i.clamp(int(i.c.rx_attr.size), func(p *profile) int { return p.rx })
}

// InjectSize is the largest message fi_inject accepts.
func (i *Info) InjectSize() int {
	return i.clamp(int(i.c.tx_attr.inject_size), func(p *profile) int { return p.inject })
}

// clamp returns v, or the profile's limit when that is smaller.
func (i *Info) clamp(v int, limit func(*profile) int) int {
	if i.prof == nil {
		return v
	}
	return clampTo(v, limit(i.prof))
}

// SendIOVLimit is how many pieces of memory one send may gather.
func (i *Info) SendIOVLimit() int { return int(i.c.tx_attr.iov_limit) }

// MaxMsgSize is the largest message one send may carry.
func (i *Info) MaxMsgSize() uint64 { return uint64(i.c.ep_attr.max_msg_size) }

// SourceAddr is the local address of the entry, if it has one.
func (i *Info) SourceAddr() (netip.AddrPort, bool) {
	return sockaddr(unsafe.Pointer(i.c.src_addr), int(i.c.src_addrlen))
}

// DestAddr is the peer address of the entry, if it has one.
func (i *Info) DestAddr() (netip.AddrPort, bool) {
	return sockaddr(unsafe.Pointer(i.c.dest_addr), int(i.c.dest_addrlen))
}

// Spins reports whether this provider version is known to busy-poll: the
// 'net' provider before 1.19 and 'tcp' 1.18 (the same code renamed) return
// 0 from fi_trywait yet never let the wait fd settle.
func (i *Info) Spins() bool {
	name, _, _ := strings.Cut(i.Provider(), ";")
	v := i.ProviderVersion()
	switch name {
	case "net":
		return v < MakeVersion(119, 0)
	case "tcp":
		return v >= MakeVersion(118, 0) && v < MakeVersion(119, 0)
	}
	return false
}

var tostrMu sync.Mutex // fi_tostr returns a static buffer

// String is fi_tostr's description of the entry.
func (i *Info) String() string {
	tostrMu.Lock()
	defer tostrMu.Unlock()
	return C.GoString(C.fi_tostr(unsafe.Pointer(i.c), C.FI_TYPE_INFO))
}
