//go:build linux

// Package shmfence lets tests keep the address range of an shm region
// that was unmapped unreadable, so that a stale pointer into it faults at
// once instead of reading whatever a later mapping puts there. The shm
// provider maps its endpoints' regions from /dev/shm; a test finds a
// region's range while it is mapped and fences it after it is gone.
package shmfence

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// Range is an address range of this process.
type Range struct{ lo, hi uintptr }

// Find returns the range this process maps for the shm region of address
// (fi_shm://<pid>:<uid>:<index> is /dev/shm/<pid>:<uid>:<index>).
func Find(address string) (Range, bool, error) {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return Range{}, false, err
	}
	file := "/dev/shm/" + strings.TrimSuffix(strings.TrimPrefix(address, "fi_shm://"), "\x00")
	sc := bufio.NewScanner(bytes.NewReader(maps))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 || f[5] != file {
			continue
		}
		var r Range
		if _, err := fmt.Sscanf(f[0], "%x-%x", &r.lo, &r.hi); err != nil {
			return Range{}, false, err
		}
		return r, true, nil
	}
	return Range{}, false, sc.Err()
}

// Hold maps r again, unreadable, if nothing took it since it was
// unmapped; release gives it back. It fails with EEXIST if something did.
func (r Range) Hold() (release func(), err error) {
	// Raw system calls: the range is not Go memory, and no pointer to it
	// is ever made.
	p, _, errno := unix.Syscall6(unix.SYS_MMAP, r.lo, r.hi-r.lo, unix.PROT_NONE,
		unix.MAP_ANON|unix.MAP_PRIVATE|unix.MAP_FIXED_NOREPLACE, ^uintptr(0), 0)
	if errno != 0 {
		return nil, errno
	}
	if p != r.lo { // a kernel without MAP_FIXED_NOREPLACE takes it as a hint
		unix.Syscall(unix.SYS_MUNMAP, p, r.hi-r.lo, 0)
		return nil, unix.EEXIST
	}
	return func() { unix.Syscall(unix.SYS_MUNMAP, r.lo, r.hi-r.lo, 0) }, nil
}
