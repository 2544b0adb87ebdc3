//go:build cgo && linux

package ofi

/*
#include <pthread.h>

// netio_spin_unlocked is this C library's value of a free spin lock (1 on
// x86-64 glibc, 0 elsewhere).
static inline int netio_spin_unlocked(void) {
	pthread_spinlock_t l;
	pthread_spin_init(&l, PTHREAD_PROCESS_SHARED);
	int v = *(volatile int *)&l;
	pthread_spin_destroy(&l);
	return v;
}

static inline void netio_spin_lock(void *p) { pthread_spin_lock((pthread_spinlock_t *)p); }
*/
import "C"

import (
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A process killed while it holds the spin lock of its shm region (shm
// takes it to read its queue) leaves it held for ever, and shm spins on
// that lock inside every send to it (libfabric 1.17): the reactor thread
// would stop, and every connection of the process with it. So an AV maps
// the first page of each peer region of another process read-only, and a
// send looks at the lock first and enters the provider only when it is
// free. Held by a live peer for longer than a few microseconds, the send
// is refused for now (EAGAIN); held and the peer's process gone (its
// pidfd readable), it is refused with ECONNRESET: that peer's link ends,
// the others run on.

// shm 1.17's region header: version (SMR_VERSION, 4) in its first byte,
// the spin lock at byte 24.
const (
	shmRegionVersion = 4
	shmLockOffset    = 24
	// shmLockPatience is how many looks at a held lock a send makes
	// before it asks whether the peer's process is still there: a few
	// microseconds, longer than a live peer holds it to read its queue.
	shmLockPatience = 4096
)

var shmUnlocked = int32(C.netio_spin_unlocked())

// shmPeerGuard watches the region lock of a peer of another process.
type shmPeerGuard struct {
	page  []byte // the region's first page, read-only
	pidfd int    // the peer's process; -1 when it could not be opened
}

// openShmGuard maps the header of the region that address (fi_shm://<pid>:
// <uid>:<index>) names. It returns nil where it cannot watch: an address
// of this process (its lock is ours), a region of another layout, no
// /dev/shm.
func openShmGuard(a Address) *shmPeerGuard {
	name, pid, ok := a.ShmRegion()
	if !ok || pid == os.Getpid() {
		return nil
	}
	fd, err := unix.Open("/dev/shm/"+name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	page, err := unix.Mmap(fd, 0, unix.Getpagesize(), unix.PROT_READ, unix.MAP_SHARED)
	unix.Close(fd)
	if err != nil {
		return nil
	}
	if page[0] != shmRegionVersion {
		unix.Munmap(page)
		return nil
	}
	g := &shmPeerGuard{page: page, pidfd: -1}
	if pfd, err := unix.PidfdOpen(pid, 0); err == nil {
		unix.CloseOnExec(pfd)
		g.pidfd = pfd
	}
	return g
}

func (g *shmPeerGuard) close() {
	unix.Munmap(g.page)
	if g.pidfd >= 0 {
		unix.Close(g.pidfd)
	}
}

// check tells whether a send to the peer may go now: nil when its lock is
// free (it may still be taken in the instants before the provider takes
// it), errPeerStuck when the lock is held and the peer's process has
// exited, EAGAIN when a live peer holds it (the link waits its turn, as
// for a full queue, instead of the reactor spinning inside the provider).
func (g *shmPeerGuard) check(name string) error {
	lock := (*int32)(unsafe.Pointer(&g.page[shmLockOffset]))
	for range shmLockPatience {
		if atomic.LoadInt32(lock) == shmUnlocked {
			return nil
		}
	}
	if g.pidfd >= 0 {
		fds := []unix.PollFd{{Fd: int32(g.pidfd), Events: unix.POLLIN}}
		if n, err := unix.Poll(fds, 0); err == nil && n > 0 && fds[0].Revents&unix.POLLIN != 0 {
			return &Error{Op: name, Err: errPeerStuck}
		}
	}
	return &Error{Op: name, Err: EAGAIN}
}

// errPeerStuck is the error of a send refused by a guard.
var errPeerStuck = fmt.Errorf("%w (the shm peer's process exited holding its region's lock)", ECONNRESET)

// holdShmLock takes the spin lock of the shm region named a, of this
// process, and never lets it go: what a process killed while reading its
// queue leaves. For tests.
func holdShmLock(a Address) error {
	name, _, ok := a.ShmRegion()
	if !ok {
		return fmt.Errorf("ofi: %v is not an shm address", a)
	}
	fd, err := unix.Open("/dev/shm/"+name, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	page, err := unix.Mmap(fd, 0, unix.Getpagesize(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return err
	}
	C.netio_spin_lock(unsafe.Pointer(&page[shmLockOffset]))
	return nil
}

// guard returns the guard of peer, if it has one.
func (v *AV) guard(peer FIAddr) *shmPeerGuard {
	if uint64(peer) < uint64(len(v.guards)) {
		return v.guards[peer]
	}
	return nil
}

// watch starts guarding the shm peer a, inserted as fi.
func (v *AV) watch(a Address, fi FIAddr) {
	g := openShmGuard(a)
	if g == nil || uint64(fi) > 1<<20 {
		return
	}
	for uint64(len(v.guards)) <= uint64(fi) {
		v.guards = append(v.guards, nil)
	}
	if old := v.guards[fi]; old != nil {
		old.close()
	}
	v.guards[fi] = g
}

// unwatch stops guarding fi.
func (v *AV) unwatch(fi FIAddr) {
	if g := v.guard(fi); g != nil {
		g.close()
		v.guards[fi] = nil
	}
}

// checkPeers tells whether the sends in segs may go now (shmPeerGuard.
// check), looking at each peer once.
func (v *AV) checkPeers(name string, segs []RDMSegment) error {
	last := AddrUnspec
	for i := range segs {
		if p := segs[i].Peer; p != last {
			last = p
			if g := v.guard(p); g != nil {
				if err := g.check(name); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
