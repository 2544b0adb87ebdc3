//go:build cgo && linux

package ofi

/*
#include "rdm.h"
*/
import "C"

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// FIAddr names a peer in an address vector (libfabric's fi_addr_t).
type FIAddr uint64

// Special FIAddr values.
const (
	AddrUnspec   = FIAddr(C.FI_ADDR_UNSPEC)   // any peer (receives)
	AddrNotAvail = FIAddr(C.FI_ADDR_NOTAVAIL) // a sender not in the address vector
)

// AddrFormat is the format of a provider's addresses (FI_SOCKADDR_IN,
// FI_ADDR_STR...).
type AddrFormat uint32

// Address formats netio prints and parses by name.
const (
	AddrFormatSockaddrIn  = AddrFormat(C.FI_SOCKADDR_IN)
	AddrFormatSockaddrIn6 = AddrFormat(C.FI_SOCKADDR_IN6)
	AddrFormatStr         = AddrFormat(C.FI_ADDR_STR)
)

// Address is an endpoint's address in its provider's own format: what
// fi_getname returns and fi_av_insert takes. It is comparable, so it may
// key a map.
type Address struct {
	format AddrFormat
	raw    string
}

// MakeAddress makes an Address of the given format from its bytes.
func MakeAddress(format AddrFormat, b []byte) Address { return Address{format, string(b)} }

// Format is the address's format.
func (a Address) Format() AddrFormat { return a.format }

// Bytes are the address in the provider's format.
func (a Address) Bytes() []byte { return []byte(a.raw) }

// IsZero reports whether a is the zero Address.
func (a Address) IsZero() bool { return a.raw == "" }

// String prints the address as libfabric does (fi_av_straddr) for the
// formats it knows: "fi_shm://1234:0:0" (FI_ADDR_STR: the address is its
// own text), "fi_sockaddr_in://127.0.0.1:5000",
// "fi_sockaddr_in6://[::1]:5000". Other formats print as
// "ofi-raw://<format>/<hex bytes>". ParseAddress reads all of them back.
func (a Address) String() string {
	switch a.format {
	case AddrFormatStr:
		return strings.TrimRight(a.raw, "\x00")
	case AddrFormatSockaddrIn, AddrFormatSockaddrIn6:
		if a.check() == nil {
			b := []byte(a.raw)
			port := strconv.Itoa(int(binary.BigEndian.Uint16(b[2:4])))
			if a.format == AddrFormatSockaddrIn {
				return "fi_sockaddr_in://" + netip.AddrFrom4([4]byte(b[4:8])).String() + ":" + port
			}
			return "fi_sockaddr_in6://[" + netip.AddrFrom16([16]byte(b[8:24])).String() + "]:" + port
		}
	}
	return "ofi-raw://" + strconv.FormatUint(uint64(a.format), 10) + "/" + hex.EncodeToString([]byte(a.raw))
}

// AddrPort is the IP address and port of a sockaddr address.
func (a Address) AddrPort() (netip.AddrPort, bool) {
	if a.format != AddrFormatSockaddrIn && a.format != AddrFormatSockaddrIn6 || a.raw == "" {
		return netip.AddrPort{}, false
	}
	b := []byte(a.raw)
	return sockaddr(unsafe.Pointer(&b[0]), len(b))
}

// ParseAddress reads an address printed by Address.String. Any other
// "scheme://..." text is taken as an FI_ADDR_STR address (shm's
// "fi_shm://..."), which its provider parses.
func ParseAddress(s string) (Address, error) {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok || scheme == "" || rest == "" {
		return Address{}, fmt.Errorf("ofi: address %q is not of the form scheme://address", s)
	}
	switch scheme {
	case "fi_sockaddr_in", "fi_sockaddr_in6":
		ap, err := netip.ParseAddrPort(rest)
		if err != nil {
			return Address{}, fmt.Errorf("ofi: address %q: %v", s, err)
		}
		if ap.Addr().Zone() != "" {
			return Address{}, fmt.Errorf("ofi: address %q: zones are not supported", s)
		}
		if scheme == "fi_sockaddr_in" {
			if !ap.Addr().Is4() {
				return Address{}, fmt.Errorf("ofi: address %q: not IPv4", s)
			}
			b := make([]byte, unix.SizeofSockaddrInet4)
			binary.NativeEndian.PutUint16(b[0:], unix.AF_INET)
			binary.BigEndian.PutUint16(b[2:], ap.Port())
			a4 := ap.Addr().As4()
			copy(b[4:], a4[:])
			return Address{AddrFormatSockaddrIn, string(b)}, nil
		}
		if !ap.Addr().Is6() {
			return Address{}, fmt.Errorf("ofi: address %q: not IPv6", s)
		}
		b := make([]byte, unix.SizeofSockaddrInet6)
		binary.NativeEndian.PutUint16(b[0:], unix.AF_INET6)
		binary.BigEndian.PutUint16(b[2:], ap.Port())
		a16 := ap.Addr().As16()
		copy(b[8:], a16[:])
		return Address{AddrFormatSockaddrIn6, string(b)}, nil
	case "ofi-raw":
		f, h, ok := strings.Cut(rest, "/")
		format, err := strconv.ParseUint(f, 10, 32)
		if !ok || err != nil {
			return Address{}, fmt.Errorf("ofi: address %q: want ofi-raw://<format>/<hex>", s)
		}
		switch AddrFormat(format) {
		case AddrFormatSockaddrIn, AddrFormatSockaddrIn6, AddrFormatStr:
			return Address{}, fmt.Errorf("ofi: address %q: format %d has its own text form", s, format)
		}
		b, err := hex.DecodeString(h)
		if err != nil || len(b) == 0 {
			return Address{}, fmt.Errorf("ofi: address %q: bad hex bytes", s)
		}
		return Address{AddrFormat(format), string(b)}, nil
	}
	if strings.IndexByte(s, 0) >= 0 {
		return Address{}, fmt.Errorf("ofi: address %q holds a NUL byte", s)
	}
	return Address{AddrFormatStr, s + "\x00"}, nil
}

// AV is an address vector of type FI_AV_TABLE: the peers an RDM endpoint
// may send to, each named by the FIAddr its insertion returned.
type AV struct {
	c      *C.struct_fid_av
	format AddrFormat
	guards []*shmPeerGuard // by FIAddr: shm peers of other processes (shmguard.go)
}

// OpenAV opens an address vector on d for about count peers (it grows
// beyond), holding addresses of info's format.
func (d *Domain) OpenAV(info *Info, count int) (*AV, error) {
	v := &AV{format: info.AddrFormat()}
	if err := check("fi_av_open", C.netio_av_open(d.c, C.size_t(max(count, 1)), &v.c)); err != nil {
		return nil, err
	}
	return v, nil
}

// Insert adds a peer's address and returns its FIAddr. An address of
// another format than the provider's is refused before the provider reads
// it: a peer's hello is network input. So is an shm address of this
// process that names no open endpoint (ECONNREFUSED; shmLocal says why).
func (v *AV) Insert(a Address) (FIAddr, error) {
	if v.c == nil {
		return AddrNotAvail, &Error{Op: "fi_av_insert", Err: EBADF}
	}
	if a.format != v.format || a.raw == "" {
		return AddrNotAvail, fmt.Errorf("ofi: address %v is not of the provider's format %d", a, v.format)
	}
	if err := a.check(); err != nil {
		return AddrNotAvail, err
	}
	if shmClosedLocal(a) {
		return AddrNotAvail, &Error{Op: "fi_av_insert", Err: ECONNREFUSED}
	}
	b := C.CBytes([]byte(a.raw))
	defer C.free(b)
	var out C.fi_addr_t
	n := C.netio_av_insert(v.c, b, &out)
	if n < 0 {
		return AddrNotAvail, &Error{Op: "fi_av_insert", Err: Errno(-n)}
	}
	if n != 1 {
		return AddrNotAvail, &Error{Op: "fi_av_insert", Err: Errno(C.FI_EADDRNOTAVAIL)}
	}
	v.watch(a, FIAddr(out)) // shm peers of other processes only
	return FIAddr(out), nil
}

// check refuses addresses the provider would misread: a sockaddr of the
// wrong family or size, a string without its terminating NUL.
func (a Address) check() error {
	switch a.format {
	case AddrFormatStr:
		if i := strings.IndexByte(a.raw, 0); i != len(a.raw)-1 {
			return fmt.Errorf("ofi: string address %q is not one NUL-terminated string", a.raw)
		}
	case AddrFormatSockaddrIn, AddrFormatSockaddrIn6:
		size, family := unix.SizeofSockaddrInet4, uint16(unix.AF_INET)
		if a.format == AddrFormatSockaddrIn6 {
			size, family = unix.SizeofSockaddrInet6, unix.AF_INET6
		}
		if len(a.raw) != size || binary.NativeEndian.Uint16([]byte(a.raw[:2])) != family {
			return fmt.Errorf("ofi: malformed socket address %x", a.raw)
		}
	}
	return nil
}

// Remove removes a peer; its FIAddr may be handed out again.
func (v *AV) Remove(addr FIAddr) error {
	if v.c == nil {
		return &Error{Op: "fi_av_remove", Err: EBADF}
	}
	v.unwatch(addr)
	return check("fi_av_remove", C.netio_av_remove(v.c, C.fi_addr_t(addr)))
}

// Lookup returns the address inserted as addr.
func (v *AV) Lookup(addr FIAddr) (Address, error) {
	if v.c == nil {
		return Address{}, &Error{Op: "fi_av_lookup", Err: EBADF}
	}
	var buf [256]byte
	n := C.size_t(len(buf))
	if err := check("fi_av_lookup", C.netio_av_lookup(v.c, C.fi_addr_t(addr), unsafe.Pointer(&buf[0]), &n)); err != nil {
		return Address{}, err
	}
	if int(n) > len(buf) {
		return Address{}, &Error{Op: "fi_av_lookup", Err: Errno(C.FI_ETOOSMALL)}
	}
	return Address{v.format, string(buf[:n])}, nil
}

// StrAddr is the provider's own printable form of a (fi_av_straddr).
func (v *AV) StrAddr(a Address) string {
	if v.c == nil || a.raw == "" {
		return ""
	}
	b := C.CBytes([]byte(a.raw))
	defer C.free(b)
	var buf [256]C.char
	C.netio_av_straddr(v.c, b, &buf[0], C.size_t(len(buf)))
	return C.GoString(&buf[0])
}

// Close closes the address vector, after the endpoints bound to it.
func (v *AV) Close() error {
	if v.c == nil {
		return nil
	}
	err := check("fi_av_close", C.netio_close(&v.c.fid))
	v.c = nil
	for _, g := range v.guards {
		if g != nil {
			g.close()
		}
	}
	v.guards = nil
	return err
}
