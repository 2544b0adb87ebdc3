//go:build cgo && linux

package ofi

import (
	"os"
	"strconv"
	"strings"
	"sync"
)

// shm (libfabric 1.17) maps a peer of the same process as that peer's own
// region, which it finds by name in a list it never prunes. An address
// naming an endpoint of this process that has closed therefore resolves
// to memory the close unmapped, and fi_av_insert reads it (SIGSEGV inside
// the provider). This process's open shm endpoints are kept here, and an
// insert naming any other address of this process is refused, as a closed
// port refuses a connection.
var shmLocal struct {
	mu   sync.Mutex
	open map[string]bool // raw addresses of this process's open endpoints
}

// ShmRegion returns, for an shm address (fi_shm://<pid>:<uid>:<index>),
// the name of its region in /dev/shm and the pid of the process that made
// it; ok is false for any other address.
func (a Address) ShmRegion() (name string, pid int, ok bool) {
	if a.format != AddrFormatStr {
		return "", 0, false
	}
	name, ok = strings.CutPrefix(strings.TrimRight(a.raw, "\x00"), "fi_shm://")
	pidText, _, cut := strings.Cut(name, ":")
	pid, err := strconv.Atoi(pidText)
	if !ok || !cut || err != nil || pid <= 0 || strings.ContainsRune(name, '/') {
		return "", 0, false
	}
	return name, pid, true
}

// shmOpened records the name of an shm endpoint of this process.
func shmOpened(a Address) {
	shmLocal.mu.Lock()
	defer shmLocal.mu.Unlock()
	if shmLocal.open == nil {
		shmLocal.open = map[string]bool{}
	}
	shmLocal.open[a.raw] = true
}

// shmClosed forgets an endpoint's name before the endpoint closes.
func shmClosed(a Address) {
	shmLocal.mu.Lock()
	defer shmLocal.mu.Unlock()
	delete(shmLocal.open, a.raw)
}

// shmClosedLocal reports whether a names an shm endpoint of this process
// that is not open (closed, or never opened).
func shmClosedLocal(a Address) bool {
	if _, pid, ok := a.ShmRegion(); !ok || pid != os.Getpid() {
		return false
	}
	shmLocal.mu.Lock()
	defer shmLocal.mu.Unlock()
	return !shmLocal.open[a.raw]
}
