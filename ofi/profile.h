// The verbs profile's C side (profile.c; see profile.go): registered
// regions known by their descriptor, queue depths counted per endpoint and
// completion queue, every post checked, and the strict-credit trap.
#ifndef NETIO_PROFILE_H
#define NETIO_PROFILE_H

#include <stdint.h>
#include <stddef.h>
#include <rdma/fabric.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>

// Error numbers of netio's own for what the profile catches, above
// libfabric's (FI_ERRNO_OFFSET 256 and its few hundred).
enum {
	NETIO_EPROF_BASE = 0x10000,
	NETIO_EPROF_DESC,    // no descriptor, an unknown one, or a buffer outside its region
	NETIO_EPROF_INJECT,  // fi_inject over the inject size
	NETIO_EPROF_CQ,      // more operations in flight than the completion queue holds
	NETIO_EPROF_NORECV,  // a message arrived with no receive posted for it
	NETIO_EPROF_AGAIN,   // a queue is full: the caller sees FI_EAGAIN, as on verbs
};

// The token the trap's completions carry (ofi.ProfileTrapToken).
#define NETIO_PROF_TRAP_TOKEN (~(uint64_t)1)

typedef struct netio_prof_cq netio_prof_cq;
typedef struct netio_prof_ep netio_prof_ep;

int netio_prof_mr_reg(struct fid_domain *d, void *buf, size_t len, uint64_t access, uint64_t key, struct fid_mr **mr, void **rec);
int netio_prof_mr_close(struct fid_mr *mr, void *rec);

netio_prof_cq *netio_prof_cq_new(size_t size);
ssize_t netio_prof_cq_read(netio_prof_cq *pc, struct fid_cq *cq, void *buf, size_t count);
ssize_t netio_prof_cq_readerr(netio_prof_cq *pc, struct fid_cq *cq, uint64_t *ctx, uint64_t *flags, uint64_t *len, int *err, int *prov_errno, char *msg, size_t msglen);
void netio_prof_cq_free(netio_prof_cq *pc);

netio_prof_ep *netio_prof_ep_new(struct fid_ep *ep, uint32_t tx, uint32_t rx, uint32_t inject);
void netio_prof_ep_set_rx(netio_prof_ep *pe, struct fid_ep *rx, int trap);
void netio_prof_ep_bind_cq(netio_prof_ep *pe, netio_prof_cq *pc);
void netio_prof_ep_closed(netio_prof_ep *pe);
const char *netio_prof_ep_msg(netio_prof_ep *pe);
ssize_t netio_prof_post_trap(netio_prof_ep *pe, struct fid_ep *srx, void *buf, size_t len, uint64_t token);

#endif
