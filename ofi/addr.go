//go:build cgo && linux

package ofi

/*
#include "ofi.h"
*/
import "C"

import (
	"encoding/binary"
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"
)

// encodeSockaddr encodes a (port 0) as a struct sockaddr_in or
// sockaddr_in6, with its libfabric address format.
func encodeSockaddr(a netip.Addr) ([]byte, C.uint32_t) {
	if a.Is4() || a.Is4In6() {
		b := make([]byte, unix.SizeofSockaddrInet4)
		*(*uint16)(unsafe.Pointer(&b[0])) = unix.AF_INET
		ip := a.Unmap().As4()
		copy(b[4:8], ip[:])
		return b, C.FI_SOCKADDR_IN
	}
	b := make([]byte, unix.SizeofSockaddrInet6)
	*(*uint16)(unsafe.Pointer(&b[0])) = unix.AF_INET6
	ip := a.As16()
	copy(b[8:24], ip[:])
	return b, C.FI_SOCKADDR_IN6
}

// sockaddr decodes a struct sockaddr_in or sockaddr_in6 held in C memory.
func sockaddr(p unsafe.Pointer, n int) (netip.AddrPort, bool) {
	if p == nil || n < 2 {
		return netip.AddrPort{}, false
	}
	b := unsafe.Slice((*byte)(p), n)
	family := *(*uint16)(p) // host byte order, as the kernel stores it
	switch family {
	case unix.AF_INET:
		if n < unix.SizeofSockaddrInet4 {
			return netip.AddrPort{}, false
		}
		port := binary.BigEndian.Uint16(b[2:4])
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), port), true
	case unix.AF_INET6:
		if n < unix.SizeofSockaddrInet6 {
			return netip.AddrPort{}, false
		}
		port := binary.BigEndian.Uint16(b[2:4])
		a := netip.AddrFrom16([16]byte(b[8:24]))
		return netip.AddrPortFrom(a.Unmap(), port), true
	}
	return netip.AddrPort{}, false
}
