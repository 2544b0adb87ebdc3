//go:build !cgo || !linux

// Package ofi is netio's binding to libfabric. This build has no
// libfabric: it was made without cgo or for a system other than Linux, and
// every call that would reach libfabric fails with an error that
// errors.Is errors.ErrUnsupported. The declarations here mirror the real
// binding's, so that programs importing netio still compile (editors,
// cross-builds, go vet on any GOOS).
package ofi

import (
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"time"
)

// errUnsupported names what this build lacks.
var errUnsupported = fmt.Errorf("netio needs cgo and libfabric on Linux, and this program was built %s: %w", missing(), errors.ErrUnsupported)

func missing() string {
	switch {
	case runtime.GOOS != "linux":
		return "for " + runtime.GOOS
	default:
		return "with CGO_ENABLED=0"
	}
}

// Unsupported is the error every call of this build returns.
func Unsupported() error { return errUnsupported }

// APIVersion is the libfabric API version netio asks for.
var APIVersion = MakeVersion(1, 17)

// ErrSpinningProvider is never returned by this build.
var ErrSpinningProvider = errors.New("ofi: provider version busy-polls")

// TrapToken is the token of the guard's trap.
const TrapToken = ^uint64(0)

// Version is a libfabric version: major in the high 16 bits.
type Version uint32

// MakeVersion builds a Version.
func MakeVersion(major, minor int) Version { return Version(uint32(major)<<16 | uint32(minor)&0xffff) }

// Major is the major number.
func (v Version) Major() int { return int(v >> 16) }

// Minor is the minor number.
func (v Version) Minor() int { return int(v & 0xffff) }

func (v Version) String() string { return fmt.Sprintf("%d.%d", v.Major(), v.Minor()) }

// LibraryVersion is zero: no libfabric is linked.
func LibraryVersion() Version { return 0 }

// CHeapInUse is zero: there is no C allocator in this build.
func CHeapInUse() uint64 { return 0 }

// TrimmedPools reports 0: this build has no libfabric pools to trim.
func TrimmedPools() uint64 { return 0 }

// RegionsResident is zero: no region can be mapped.
func RegionsResident() (resident, mapped uint64) { return 0, 0 }

// Errno is a libfabric error number.
type Errno int

// The libfabric error numbers netio handles by name (fi_errno.h).
const (
	EAGAIN       Errno = 11
	ECANCELED    Errno = 125
	ECONNREFUSED Errno = 111
	ECONNRESET   Errno = 104
	ENOTCONN     Errno = 107
	ENODATA      Errno = 61
	ENOKEY       Errno = 126
	ETIMEDOUT    Errno = 110
	EBUSY        Errno = 16
	EADDRINUSE   Errno = 98
	EAVAIL       Errno = 259
	ETRUNC       Errno = 265
	EOTHER       Errno = 256
	EBADF        Errno = 9
	EINVAL       Errno = 22
)

func (e Errno) Error() string { return fmt.Sprintf("libfabric error %d", int(e)) }

// Timeout reports whether the error is a time-out.
func (e Errno) Timeout() bool { return e == ETIMEDOUT }

// Error is a failed libfabric call.
type Error struct {
	Op  string
	Err error
}

func (e *Error) Error() string { return "ofi: " + e.Op + ": " + e.Err.Error() }

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// AsyncError is an error entry read from an event or completion queue.
type AsyncError struct {
	Err         Errno
	ProvErrno   int
	ProvMessage string
}

func (e *AsyncError) Error() string { return e.Err.Error() }

// Unwrap returns the libfabric Errno.
func (e *AsyncError) Unwrap() error { return e.Err }

// Completion flags netio looks at.
const (
	FlagSend         = uint64(1) << 11
	FlagRecv         = uint64(1) << 10
	FlagRemoteCQData = uint64(1) << 24
)

// Completion is one entry of a completion queue.
type Completion struct {
	Token uint64
	Flags uint64
	Len   uint64
	buf   uintptr
	Data  uint64
}

// CompletionError is a failed operation read from a completion queue.
type CompletionError struct {
	Token uint64
	Flags uint64
	Len   uint64
	AsyncError
}

// EventKind says what an event-queue entry reports.
type EventKind int

// The connection-management events netio handles.
const (
	EventConnReq EventKind = iota + 1
	EventConnected
	EventShutdown
	EventError
	EventOther
)

func (k EventKind) String() string { return fmt.Sprintf("event %d", int(k)) }

// Event is one entry read from an event queue.
type Event struct {
	Kind    EventKind
	Context uint64
	Info    *Info
	Err     *AsyncError
}

// PrivateData is nil: no event is ever read in this build.
func (e *Event) PrivateData() []byte { return nil }

// Hints select the providers and endpoints GetInfo returns.
type Hints struct {
	Provider      string
	Node, Service string
	Source        bool
	Domain        string
	SourceAddr    netip.Addr
}

// Segment is a piece of a Region.
type Segment struct {
	Offset, Len, Token uint64
}

// Waiter is a queue fi_trywait can take.
type Waiter interface{ waitable() }

// WaitList is a list of queues for TryWait.
type WaitList struct{ n int }

// Reset empties the list.
func (w *WaitList) Reset() { w.n = 0 }

// Add adds q.
func (w *WaitList) Add(q Waiter) { w.n++ }

// Len is the number of queues in the list.
func (w *WaitList) Len() int { return w.n }

// The objects of the binding; none can be opened in this build.
type (
	Info            struct{}
	InfoList        struct{ Entries []*Info }
	Fabric          struct{}
	Domain          struct{}
	EQ              struct{}
	CQ              struct{}
	Region          struct{}
	Endpoint        struct{}
	PassiveEndpoint struct{}
	ListenQueue     struct{}
)

func (*EQ) waitable() {}
func (*CQ) waitable() {}

// GetInfo fails: this build has no libfabric.
func GetInfo(h Hints) (*InfoList, error) { return nil, errUnsupported }

// OpenFabric fails: this build has no libfabric.
func OpenFabric(info *Info) (*Fabric, error) { return nil, errUnsupported }

func (q *CQ) Close() error {
	return errUnsupported
}

func (q *CQ) FD() int {
	return 0
}

func (q *CQ) Read(out []Completion) (int, error) {
	return 0, errUnsupported
}

func (q *CQ) ReadError(e *CompletionError) (bool, error) {
	return false, errUnsupported
}

func (d *Domain) Close() error {
	return errUnsupported
}

func (d *Domain) NewRegion(size int) (*Region, error) {
	return nil, errUnsupported
}

func (d *Domain) OpenCQ(size int) (*CQ, error) {
	return nil, errUnsupported
}

func (d *Domain) OpenEndpoint(info *Info, token uint64) (*Endpoint, error) {
	return nil, errUnsupported
}

func (q *EQ) Close() error {
	return errUnsupported
}

func (q *EQ) FD() int {
	return 0
}

func (q *EQ) Pending() bool {
	return false
}

func (q *EQ) Read(ev *Event) (bool, error) {
	return false, errUnsupported
}

func (q *EQ) Settle() {}

func (q *EQ) WatchSockets() error {
	return errUnsupported
}

func (e *Endpoint) Accept(data []byte) error {
	return errUnsupported
}

func (e *Endpoint) BindCQ(q *CQ) error {
	return errUnsupported
}

func (e *Endpoint) BindEQ(q *EQ) error {
	return errUnsupported
}

func (e *Endpoint) Close() error {
	return errUnsupported
}

func (e *Endpoint) Connect(info *Info, data []byte) error {
	return errUnsupported
}

func (e *Endpoint) Enable() error {
	return errUnsupported
}

func (e *Endpoint) LocalAddr() (netip.AddrPort, error) {
	return netip.AddrPort{}, errUnsupported
}

func (e *Endpoint) PeerAddr() (netip.AddrPort, error) {
	return netip.AddrPort{}, errUnsupported
}

func (e *Endpoint) PostRecv(r *Region, segs []Segment) (int, error) {
	return 0, errUnsupported
}

func (e *Endpoint) PostSend(r *Region, segs []Segment) (int, error) {
	return 0, errUnsupported
}

func (e *Endpoint) PostSendInject(r *Region, segs []Segment, inject int) (int, error) {
	return 0, errUnsupported
}

func (e *Endpoint) PostSendTail(r *Region, seg Segment, tail []byte) error {
	return errUnsupported
}

func (e *Endpoint) Shutdown() error {
	return errUnsupported
}

func (f *Fabric) Close() error {
	return errUnsupported
}

func (f *Fabric) OpenDomain(info *Info) (*Domain, error) {
	return nil, errUnsupported
}

func (f *Fabric) OpenEQ(size int) (*EQ, error) {
	return nil, errUnsupported
}

func (f *Fabric) OpenListenQueue(info *Info, size int, token uint64) (q *ListenQueue, err error) {
	return nil, errUnsupported
}

func (f *Fabric) OpenPassiveEndpoint(info *Info, token uint64) (*PassiveEndpoint, error) {
	return nil, errUnsupported
}

func (f *Fabric) TryWait(w *WaitList) (bool, error) {
	return false, errUnsupported
}

func (i *Info) DestAddr() (netip.AddrPort, bool) {
	return netip.AddrPort{}, false
}

func (i *Info) DomainName() string {
	return ""
}

func (i *Info) FabricName() string {
	return ""
}

func (i *Info) Free() {}

func (i *Info) InjectSize() int {
	return 0
}

func (i *Info) MRMode() uint64 {
	return 0
}

func (i *Info) MaxMsgSize() uint64 {
	return 0
}

func (i *Info) NeedsRegistration() bool {
	return false
}

// PinsMemory is false: nothing is registered in this build.
func (i *Info) PinsMemory() bool { return false }

func (i *Info) Provider() string {
	return ""
}

func (i *Info) ProviderKeys() bool {
	return false
}

func (i *Info) ProviderVersion() Version {
	return 0
}

func (i *Info) RxSize() int {
	return 0
}

func (i *Info) SendIOVLimit() int {
	return 0
}

func (i *Info) SourceAddr() (netip.AddrPort, bool) {
	return netip.AddrPort{}, false
}

func (i *Info) Spins() bool {
	return false
}

func (i *Info) String() string {
	return ""
}

func (i *Info) TxSize() int {
	return 0
}

func (l *InfoList) Free() {}

func (q *ListenQueue) AbortAll() {}

func (q *ListenQueue) Addr() (netip.AddrPort, error) {
	return netip.AddrPort{}, errUnsupported
}

func (q *ListenQueue) Bound(maxAge time.Duration, maxPending int) {}

// Info is nil: no queue is ever opened in this build.
func (q *ListenQueue) Info() *Info { return nil }

func (q *ListenQueue) Close() error {
	return errUnsupported
}

func (q *ListenQueue) FD() int {
	return 0
}

func (q *ListenQueue) Read(ev *Event) (bool, error) {
	return false, errUnsupported
}

func (q *ListenQueue) Reject(req *Info, data []byte) error {
	return errUnsupported
}

func (q *ListenQueue) Settle() {}

func (q *ListenQueue) Status() (aborted uint64, pending int, next time.Time) {
	return 0, 0, time.Time{}
}

func (q *ListenQueue) Sweep() {}

func (q *ListenQueue) TryWait() (bool, error) {
	return false, errUnsupported
}

func (p *PassiveEndpoint) Addr() (netip.AddrPort, error) {
	return netip.AddrPort{}, errUnsupported
}

func (p *PassiveEndpoint) Bind(q *EQ) error {
	return errUnsupported
}

func (p *PassiveEndpoint) Close() error {
	return errUnsupported
}

func (p *PassiveEndpoint) Listen() error {
	return errUnsupported
}

func (p *PassiveEndpoint) Reject(req *Info, data []byte) error {
	return errUnsupported
}

func (r *Region) Bytes() []byte {
	return nil
}

func (r *Region) Close() error {
	return errUnsupported
}

func (r *Region) Deregister() error {
	return errUnsupported
}

func (r *Region) Len() int {
	return 0
}

// ProfileEnv is the environment variable that switches a profile on.
const ProfileEnv = "NETIO_PROFILE"

// ActiveProfile fails: this build has no libfabric to profile.
func ActiveProfile() (string, error) { return "", errUnsupported }
