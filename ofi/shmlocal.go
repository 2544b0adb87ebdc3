//go:build cgo && linux

package ofi

import (
	"fmt"
	"os"
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
	mu     sync.Mutex
	prefix string          // "fi_shm://<pid>:<uid>:", this process's names
	open   map[string]bool // raw addresses of this process's open endpoints
}

func shmLocalPrefix() string {
	if shmLocal.prefix == "" {
		shmLocal.prefix = fmt.Sprintf("fi_shm://%d:%d:", os.Getpid(), os.Getuid())
	}
	return shmLocal.prefix
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
	if a.format != AddrFormatStr || !strings.HasPrefix(a.raw, "fi_shm://") {
		return false
	}
	shmLocal.mu.Lock()
	defer shmLocal.mu.Unlock()
	return strings.HasPrefix(a.raw, shmLocalPrefix()) && !shmLocal.open[a.raw]
}
