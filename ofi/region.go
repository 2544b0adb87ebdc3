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
	"unsafe"

	"golang.org/x/sys/unix"
)

// Region is memory that libfabric may read and write after a call returns:
// mmap'd outside the Go heap (so cgo's pointer rules hold and the garbage
// collector never moves it) and registered with a domain, as verbs requires
// (FI_MR_LOCAL) and other providers accept.
type Region struct {
	mem  []byte
	mr   *C.struct_fid_mr
	desc unsafe.Pointer // C pointer from fi_mr_desc, passed back on every post (the profile's record, under it)
	prof bool           // registered under the verbs profile (profile.go)
}

// NewRegion maps size bytes of anonymous memory and registers them with d
// for sending and receiving. Pages are not touched here: the first write
// faults them in (in the writer's goroutine, not the reactor), and
// providers that pin memory (verbs) fault them at registration.
func (d *Domain) NewRegion(size int) (*Region, error) {
	if size <= 0 {
		return nil, fmt.Errorf("ofi: region size %d", size)
	}
	mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, &Error{Op: "mmap", Err: err}
	}
	r := &Region{mem: mem, prof: d.prof != nil}
	live.add(r)
	var key uint64
	if !d.provKeys {
		// Without FI_MR_PROV_KEY the requested key is the key, and two
		// regions of one domain must not share it.
		key = d.nextKey.Add(1)
	}
	var ret C.int
	if r.prof {
		ret = C.netio_prof_mr_reg(d.c, unsafe.Pointer(&mem[0]), C.size_t(size), C.FI_SEND|C.FI_RECV, C.uint64_t(key), &r.mr, &r.desc)
	} else {
		ret = C.netio_mr_reg(d.c, unsafe.Pointer(&mem[0]), C.size_t(size), C.FI_SEND|C.FI_RECV, C.uint64_t(key), &r.mr, &r.desc)
	}
	if err := check("fi_mr_reg", ret); err != nil {
		live.remove(r)
		unix.Munmap(mem)
		return nil, err
	}
	return r, nil
}

// Bytes is the region's memory. It stays valid until Close.
func (r *Region) Bytes() []byte { return r.mem }

// Len is the region's size in bytes.
func (r *Region) Len() int { return len(r.mem) }

// Deregister removes the region from its domain but keeps its memory
// readable until Close, for slices of it that are still in use after the
// endpoints and the domain have gone. No operation may still use it.
func (r *Region) Deregister() error {
	if r.mr == nil {
		return nil
	}
	var err error
	if r.prof {
		err = check("fi_close(mr)", C.netio_prof_mr_close(r.mr, r.desc))
	} else {
		err = check("fi_close(mr)", C.netio_close(&r.mr.fid))
	}
	r.mr, r.desc = nil, nil
	return err
}

// Close deregisters and unmaps the region. No operation may still use it:
// close the endpoints that posted into it and drain their queues first.
func (r *Region) Close() error {
	err := r.Deregister()
	if r.mem != nil {
		live.remove(r)
		if e := unix.Munmap(r.mem); e != nil && err == nil {
			err = &Error{Op: "munmap", Err: e}
		}
		r.mem = nil
	}
	return err
}

// live are the regions mapped now, for RegionsResident.
var live regionSet

type regionSet struct {
	mu sync.Mutex
	m  map[*Region]struct{}
}

func (s *regionSet) add(r *Region) {
	s.mu.Lock()
	if s.m == nil {
		s.m = map[*Region]struct{}{}
	}
	s.m[r] = struct{}{}
	s.mu.Unlock()
}

func (s *regionSet) remove(r *Region) {
	s.mu.Lock()
	delete(s.m, r)
	s.mu.Unlock()
}

// RegionsResident reports how many bytes of the regions mapped now are in
// memory, and how large they are in all. On providers that do not pin
// memory (tcp) a region's pages come in as they are first written, so a
// long-lived connection's share of the process's resident memory grows
// until its buffers have all been used once: a long run's memory check
// tells that growth, bounded by the regions' size, from a leak.
func RegionsResident() (resident, mapped uint64) {
	page := os.Getpagesize()
	live.mu.Lock()
	defer live.mu.Unlock()
	var vec []byte
	for r := range live.m {
		n := (len(r.mem) + page - 1) / page
		if cap(vec) < n {
			vec = make([]byte, n)
		}
		vec = vec[:n]
		mapped += uint64(len(r.mem))
		if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&r.mem[0])), uintptr(len(r.mem)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
			continue
		}
		for _, v := range vec {
			if v&1 != 0 {
				resident += uint64(page)
			}
		}
	}
	return resident, mapped
}
