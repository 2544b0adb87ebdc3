//go:build cgo && linux

package ofi

/*
#include <malloc.h>

static size_t netio_c_heap_in_use(void) {
	struct mallinfo2 mi = mallinfo2();
	return mi.uordblks + mi.hblkhd;
}
*/
import "C"

// CHeapInUse reports the bytes the C allocator has handed out and not taken
// back (glibc's mallinfo2: in-use chunks plus those mapped on their own):
// libfabric's own memory, its endpoints, queues and buffer pools, which the
// Go runtime's statistics do not see. A long run watches it, next to the Go
// runtime's figures and RegionsResident, to tell a leak in the provider from
// memory that tools such as the race detector map for themselves.
func CHeapInUse() uint64 { return uint64(C.netio_c_heap_in_use()) }
