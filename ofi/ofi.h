// Small C helpers for the ofi package: libfabric's API is made of static
// inline functions and void* contexts; these keep the conversions in one
// place so that the Go side passes only integers and C handles.
#ifndef NETIO_OFI_H
#define NETIO_OFI_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include "profile.h"

static inline uint32_t netio_api_version(void) { return FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION); }

// netio_segment describes one buffer of a batch: an offset and length
// within a registered region, and the 64-bit token reported on completion.
typedef struct {
	uint64_t offset;
	uint64_t len;
	uint64_t token;
} netio_segment;

// netio_hints makes the hints of fi_getinfo; domain and src (a sockaddr
// of srclen bytes) may be NULL.
static inline struct fi_info *netio_hints(const char *prov, const char *domain, const void *src, size_t srclen, uint32_t addr_format, uint64_t caps, int mr_mode, uint64_t mode) {
	struct fi_info *h = fi_allocinfo();
	if (!h) return NULL;
	h->caps = caps;
	h->mode = mode;
	h->ep_attr->type = FI_EP_MSG;
	h->domain_attr->mr_mode = mr_mode;
	h->domain_attr->threading = FI_THREAD_DOMAIN;
	if (prov) h->fabric_attr->prov_name = strdup(prov);
	if (domain) h->domain_attr->name = strdup(domain);
	if (src && srclen) {
		h->src_addr = malloc(srclen);
		if (!h->src_addr) { fi_freeinfo(h); return NULL; }
		memcpy(h->src_addr, src, srclen);
		h->src_addrlen = srclen;
		h->addr_format = addr_format;
	}
	return h;
}

static inline int netio_fabric(struct fi_info *info, struct fid_fabric **f) {
	return fi_fabric(info->fabric_attr, f, NULL);
}

static inline int netio_passive_ep(struct fid_fabric *f, struct fi_info *info, struct fid_pep **pep, uint64_t ctx) {
	return fi_passive_ep(f, info, pep, (void *)(uintptr_t)ctx);
}

static inline int netio_endpoint(struct fid_domain *d, struct fi_info *info, struct fid_ep **ep, uint64_t ctx) {
	return fi_endpoint(d, info, ep, (void *)(uintptr_t)ctx);
}

static inline int netio_eq_open(struct fid_fabric *f, size_t size, struct fid_eq **eq) {
	struct fi_eq_attr attr = {0};
	attr.size = size;
	attr.wait_obj = FI_WAIT_FD;
	return fi_eq_open(f, &attr, eq, NULL);
}

static inline int netio_cq_open(struct fid_domain *d, size_t size, struct fid_cq **cq) {
	struct fi_cq_attr attr = {0};
	attr.size = size;
	attr.format = FI_CQ_FORMAT_DATA;
	attr.wait_obj = FI_WAIT_FD;
	return fi_cq_open(d, &attr, cq, NULL);
}

static inline int netio_getwait_fd(struct fid *fid, int *fd) {
	return fi_control(fid, FI_GETWAIT, fd);
}

// netio_eq_result is returned by value: out-parameters would make cgo
// move Go variables to the heap on every call.
typedef struct {
	ssize_t n;
	uint32_t event;
	uint64_t fid;
	struct fi_info *info;
} netio_eq_result;

// netio_eq_read reads one event into buf (an entry plus private data) and
// returns the fid it is about as a number. The fid is never dereferenced:
// an event may outlive the endpoint it names.
static inline netio_eq_result netio_eq_read(struct fid_eq *eq, void *buf, size_t len) {
	netio_eq_result r = {0};
	r.n = fi_eq_read(eq, &r.event, buf, len, 0);
	if (r.n < 0) return r;
	struct fi_eq_cm_entry *e = buf;
	r.fid = (uint64_t)(uintptr_t)e->fid;
	r.info = e->info;
	return r;
}

// netio_eq_readerr reads an error entry; the peer's data (a reject's
// private data) is copied into buf and its length returned in *datalen.
static inline ssize_t netio_eq_readerr(struct fid_eq *eq, uint64_t *ctx, /* the fid, as a number */ int *err, int *prov_errno, char *msg, size_t msglen, void *buf, size_t buflen, size_t *datalen) {
	struct fi_eq_err_entry e;
	memset(&e, 0, sizeof e);
	ssize_t n = fi_eq_readerr(eq, &e, 0);
	if (n < 0) return n;
	*datalen = 0;
	if (e.err_data && e.err_data_size) {
		*datalen = e.err_data_size < buflen ? e.err_data_size : buflen;
		memcpy(buf, e.err_data, *datalen);
	}
	*ctx = (uint64_t)(uintptr_t)e.fid;
	*err = e.err;
	*prov_errno = e.prov_errno;
	msg[0] = 0;
	if (e.prov_errno) {
		const char *s = fi_eq_strerror(eq, e.prov_errno, e.err_data, NULL, 0);
		if (s) { strncpy(msg, s, msglen - 1); msg[msglen - 1] = 0; }
	}
	return n;
}

// netio_cq_readerr_entry reads one error entry of cq into e, with the
// provider's text for it in msg.
static inline ssize_t netio_cq_readerr_entry(struct fid_cq *cq, struct fi_cq_err_entry *e, char *msg, size_t msglen) {
	memset(e, 0, sizeof *e);
	ssize_t n = fi_cq_readerr(cq, e, 0);
	if (n < 0) return n;
	msg[0] = 0;
	if (e->prov_errno) {
		const char *s = fi_cq_strerror(cq, e->prov_errno, e->err_data, NULL, 0);
		if (s) { strncpy(msg, s, msglen - 1); msg[msglen - 1] = 0; }
	}
	return n;
}

static inline ssize_t netio_cq_readerr(struct fid_cq *cq, uint64_t *ctx, uint64_t *flags, uint64_t *len, int *err, int *prov_errno, char *msg, size_t msglen) {
	struct fi_cq_err_entry e;
	ssize_t n = netio_cq_readerr_entry(cq, &e, msg, msglen);
	if (n < 0) return n;
	*ctx = (uint64_t)(uintptr_t)e.op_context;
	*flags = e.flags;
	*len = e.len;
	*err = e.err;
	*prov_errno = e.prov_errno;
	return n;
}

static inline int netio_connect(struct fid_ep *ep, struct fi_info *info, const void *data, size_t len) {
	return fi_connect(ep, info->dest_addr, data, len);
}

static inline int netio_mr_reg(struct fid_domain *d, void *buf, size_t len, uint64_t access, uint64_t key, struct fid_mr **mr, void **desc) {
	int ret = fi_mr_reg(d, buf, len, access, 0, key, 0, mr, NULL);
	if (ret == 0) *desc = fi_mr_desc(*mr);
	return ret;
}

// netio_post_result says how many operations of a batch were posted and,
// if the batch stopped early, why (a negative fi_errno). Returned by value
// so that the Go side passes no pointer to a Go variable.
typedef struct {
	ssize_t ret;
	size_t posted;
} netio_post_result;

// netio_post_recvs posts n receives in one call, stopping at the first
// failure.
static inline netio_post_result netio_post_recvs(struct fid_ep *ep, char *base, void *desc, const netio_segment *segs, size_t n) {
	netio_post_result r = {0, 0};
	for (; r.posted < n; r.posted++) {
		const netio_segment *s = &segs[r.posted];
		r.ret = fi_recv(ep, base + s->offset, s->len, desc, 0, (void *)(uintptr_t)s->token);
		if (r.ret) break;
	}
	return r;
}

// netio_post_sends is netio_post_recvs for sends. Segments of at most
// inject bytes go with fi_inject: copied before it returns, no completion.
static inline netio_post_result netio_post_sends(struct fid_ep *ep, char *base, void *desc, const netio_segment *segs, size_t n, uint64_t inject) {
	netio_post_result r = {0, 0};
	for (; r.posted < n; r.posted++) {
		const netio_segment *s = &segs[r.posted];
		if (inject && s->len <= inject)
			r.ret = fi_inject(ep, base + s->offset, s->len, 0);
		else
			r.ret = fi_send(ep, base + s->offset, s->len, desc, 0, (void *)(uintptr_t)s->token);
		if (r.ret) break;
	}
	return r;
}

// netio_send_tail posts one send of head_len bytes at head, in a region
// with descriptor desc, followed by tail_len bytes at tail, memory of no
// region: only for providers that do not need local registration. The
// iovec array is the provider's to copy during the call; the memory it
// points at stays in use until the send's completion.
static inline ssize_t netio_send_tail(struct fid_ep *ep, char *head, size_t head_len, void *desc, void *tail, size_t tail_len, uint64_t token) {
	struct iovec iov[2] = {{head, head_len}, {tail, tail_len}};
	void *descs[2] = {desc, NULL};
	return fi_sendv(ep, iov, descs, 2, 0, (void *)(uintptr_t)token);
}

// The verbs profile's posts (profile.c): as above, with every buffer
// checked against the region of its descriptor (rec, the profile's record
// of it) and the queues' depths counted.
netio_post_result netio_prof_post_recvs(netio_prof_ep *pe, char *base, void *rec, const netio_segment *segs, size_t n);
netio_post_result netio_prof_post_sends(netio_prof_ep *pe, char *base, void *rec, const netio_segment *segs, size_t n, uint64_t inject);
ssize_t netio_prof_send_tail(netio_prof_ep *pe, size_t tail_len);

// netio_cm_data_size asks the provider how much private data a
// connection request, accept or reject of fid carries; a negative return
// means it does not say.
static inline int netio_cm_data_size(struct fid *fid, size_t *size) {
	size_t len = sizeof *size;
	return fi_getopt(fid, FI_OPT_ENDPOINT, FI_OPT_CM_DATA_SIZE, size, &len);
}

static inline ssize_t netio_cq_read(struct fid_cq *cq, void *buf, size_t count) {
	return fi_cq_read(cq, buf, count);
}

static inline int netio_trywait(struct fid_fabric *f, uintptr_t *fids, int count) {
	return fi_trywait(f, (struct fid **)fids, count);
}

static inline int netio_getname(struct fid *fid, void *addr, size_t *len) {
	return fi_getname(fid, addr, len);
}

static inline int netio_getpeer(struct fid_ep *ep, void *addr, size_t *len) {
	return fi_getpeer(ep, addr, len);
}

static inline int netio_close(struct fid *fid) { return fi_close(fid); }

// netio_srx_open opens a shared receive context holding up to size
// receives (see Endpoint's guard).
static inline int netio_srx_open(struct fid_domain *d, size_t size, struct fid_ep **srx) {
	struct fi_rx_attr attr;
	memset(&attr, 0, sizeof attr);
	attr.size = size;
	return fi_srx_context(d, &attr, srx, NULL);
}

// netio_post_trap posts a tagged receive that matches every tag.
static inline ssize_t netio_post_trap(struct fid_ep *srx, void *buf, size_t len, uint64_t token) {
	return fi_trecv(srx, buf, len, NULL, 0, 0, ~(uint64_t)0, (void *)(uintptr_t)token);
}

#endif
