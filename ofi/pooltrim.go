//go:build cgo && linux

package ofi

/*
#define _GNU_SOURCE
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>
#include <rdma/fabric.h>
#include <rdma/fi_endpoint.h>

// libfabric 1.17's struct ofi_bufpool (include/ofi_mem.h, release build):
// only the fields the trim reads and writes, in their order.
typedef struct {
	void *free_head, *free_tail;
	size_t entry_size, entry_cnt;
	void *region_table;
	size_t region_cnt, alloc_size, region_size;
	size_t size, alignment, max_cnt, chunk_cnt;
	void *alloc_fn, *free_fn, *init_fn, *context;
	int flags;
} netio_bufpool;

// Where the pool pointer sits: struct tcpx_cq is a struct util_cq (248
// bytes in 1.17's release build for x86-64) and then xfer_pool; struct
// tcpx_rx_ctx is a struct fid_ep, cq, two lists, match_tag_rx and then
// buf_pool.
enum {
	netio_cq_pool_off = 248,
	netio_srx_pool_off = sizeof(struct fid_ep) + sizeof(void *) + 4 * sizeof(void *) + sizeof(void *),
	netio_tcp_chunk = 1024,
};

// netio_read_self copies len bytes at src, answering 0 instead of faulting
// when src is not mapped: the trim reads through a pointer it has not yet
// validated.
static int netio_read_self(void *dst, const void *src, size_t len) {
	struct iovec l = {dst, len}, r = {(void *)src, len};
	return process_vm_readv(getpid(), &l, 1, &r, 1, 0) == (ssize_t)len;
}

// netio_trim_pool makes the untouched transfer pool behind obj grow by
// chunk entries instead of 1,024. It writes only when every field of the
// pool reads as a fresh 1.17 tcp transfer pool of max_cnt entries, and
// answers whether it did.
static int netio_trim_pool(void *obj, size_t off, size_t max_cnt, size_t chunk) {
	netio_bufpool *pool, p;
	if (!netio_read_self(&pool, (char *)obj + off, sizeof pool) || pool == NULL)
		return 0;
	if (((uintptr_t)pool & 7) || !netio_read_self(&p, pool, sizeof p))
		return 0;
	if (p.free_head || p.free_tail || p.entry_cnt || p.region_table || p.region_cnt ||
	    p.alloc_fn || p.free_fn || p.init_fn || p.context || p.flags ||
	    p.alignment != 16 || p.chunk_cnt != netio_tcp_chunk || p.max_cnt != max_cnt ||
	    p.size < 64 || p.size > 4096 || p.entry_size < p.size || p.entry_size % 16 ||
	    p.alloc_size != (netio_tcp_chunk + 1) * p.entry_size ||
	    p.region_size != netio_tcp_chunk * p.entry_size)
		return 0;
	pool->chunk_cnt = chunk;
	pool->alloc_size = (chunk + 1) * p.entry_size;
	pool->region_size = chunk * p.entry_size;
	return 1;
}

static int netio_trim_cq_pool(struct fid_cq *cq, size_t chunk) {
	return netio_trim_pool(cq, netio_cq_pool_off, 0, chunk);
}

static int netio_trim_srx_pool(struct fid_ep *srx, size_t max_cnt, size_t chunk) {
	return netio_trim_pool(srx, netio_srx_pool_off, max_cnt, chunk);
}
*/
import "C"

import "sync/atomic"

// libfabric 1.17's tcp provider gives every completion queue and every
// shared receive context a pool of transfer entries that grows 1,024
// entries (448 bytes each) at a time, all zeroed on the first operation:
// 459 KB resident per queue, twice per connection side (its queue and its
// guard's context), however few operations the connection has in flight.
// No attribute or variable sizes that chunk, so netio sets it on the
// fresh pool before the first operation: the pool then grows poolChunk
// entries at a time, as far as the operations in flight need
// (docs/scaling.md, "Memory per connection").
//
// The pool is found by its offset in the provider's private structures,
// so netio touches it only on libfabric 1.17 and only when every field
// there reads as such a fresh pool; anything else is left as it is, and
// costs memory, not correctness.
const poolChunk = 32

// trimmedPools counts the pools trimmed.
var trimmedPools atomic.Uint64

// TrimmedPools reports how many of the provider's transfer pools netio
// has trimmed since the process started.
func TrimmedPools() uint64 { return trimmedPools.Load() }

// trimsPools reports whether objects opened from info are the 1.17 tcp
// provider's, whose pools netio trims.
func trimsPools(info *Info) bool {
	v := LibraryVersion()
	return info.Provider() == "tcp" && v.Major() == 1 && v.Minor() == 17
}

func trimCQPool(q *CQ) {
	if C.netio_trim_cq_pool(q.c, poolChunk) == 1 {
		trimmedPools.Add(1)
	}
}

func trimSRXPool(g *guard, size int) {
	if C.netio_trim_srx_pool(g.srx, C.size_t(size), poolChunk) == 1 {
		trimmedPools.Add(1)
	}
}
