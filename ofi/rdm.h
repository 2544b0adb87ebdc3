// C helpers for reliable-datagram (FI_EP_RDM) endpoints: hints, address
// vectors, batch posts of tagged and untagged operations, and the context
// arena that gives every operation a struct fi_context2 in C memory.
#ifndef NETIO_RDM_H
#define NETIO_RDM_H

#include "ofi.h"

// netio_rdm_hints asks for reliable-datagram endpoints with the given
// capabilities, the memory-registration modes and context modes netio
// honours, and send-after-send ordering (the framing of a link relies on
// messages between two endpoints arriving in the order they were sent).
static inline struct fi_info *netio_rdm_hints(const char *prov, uint64_t caps, int mr_mode, uint64_t mode) {
	struct fi_info *h = fi_allocinfo();
	if (!h) return NULL;
	h->caps = caps;
	h->mode = mode;
	h->ep_attr->type = FI_EP_RDM;
	h->domain_attr->mr_mode = mr_mode;
	h->domain_attr->threading = FI_THREAD_DOMAIN;
	h->domain_attr->av_type = FI_AV_TABLE;
	h->tx_attr->msg_order = FI_ORDER_SAS;
	h->rx_attr->msg_order = FI_ORDER_SAS;
	if (prov) h->fabric_attr->prov_name = strdup(prov);
	return h;
}

static inline uint64_t netio_info_mode(struct fi_info *i) { return i->mode; }
static inline uint64_t netio_info_caps(struct fi_info *i) { return i->caps; }
static inline uint64_t netio_info_tx_order(struct fi_info *i) { return i->tx_attr->msg_order; }
static inline uint32_t netio_info_addr_format(struct fi_info *i) { return i->addr_format; }
static inline int netio_info_ep_type(struct fi_info *i) { return i->ep_attr->type; }

// A context slot: the fi_context2 the provider may use while the
// operation is in flight, and the caller's token for it. Slots are handed
// out from a free list and taken back when the completion is read.
typedef struct {
	struct fi_context2 ctx; // first: the op context points here
	uint64_t token;
	struct fid_ep *owner; // the endpoint the operation was posted on
	uint32_t next; // free list link
	uint32_t used;
} netio_slot;

typedef struct {
	netio_slot *slots;
	uint32_t n, free_head, in_use;
} netio_arena;

#define NETIO_NO_SLOT 0xffffffffu

static inline netio_arena *netio_arena_new(uint32_t n) {
	netio_arena *a = calloc(1, sizeof *a);
	if (!a) return NULL;
	a->slots = calloc(n ? n : 1, sizeof *a->slots);
	if (!a->slots) { free(a); return NULL; }
	a->n = n;
	for (uint32_t i = 0; i < n; i++) a->slots[i].next = i + 1 < n ? i + 1 : NETIO_NO_SLOT;
	a->free_head = n ? 0 : NETIO_NO_SLOT;
	return a;
}

static inline void netio_arena_free(netio_arena *a) {
	if (!a) return;
	free(a->slots);
	free(a);
}

static inline netio_slot *netio_slot_get(netio_arena *a, struct fid_ep *owner, uint64_t token) {
	if (a->free_head == NETIO_NO_SLOT) return NULL;
	netio_slot *s = &a->slots[a->free_head];
	a->free_head = s->next;
	s->token = token;
	s->owner = owner;
	s->used = 1;
	a->in_use++;
	return s;
}

static inline void netio_slot_put(netio_arena *a, netio_slot *s) {
	s->used = 0;
	s->next = a->free_head;
	a->free_head = (uint32_t)(s - a->slots);
	a->in_use--;
}

// netio_slot_of maps an op context back to its slot, or NULL when the
// context is not one of the arena's slots in use.
static inline netio_slot *netio_slot_of(netio_arena *a, void *ctx) {
	uintptr_t p = (uintptr_t)ctx, base = (uintptr_t)a->slots;
	if (p < base || p >= base + (uintptr_t)a->n * sizeof(netio_slot)) return NULL;
	if ((p - base) % sizeof(netio_slot)) return NULL;
	netio_slot *s = (netio_slot *)ctx;
	return s->used ? s : NULL;
}

// netio_slot_release returns the token of the operation whose context is
// ctx and frees its slot; ctx that is no slot of the arena comes back as
// NETIO_FOREIGN_TOKEN.
#define NETIO_FOREIGN_TOKEN (~(uint64_t)0 - 1)
static inline uint64_t netio_slot_release(netio_arena *a, void *ctx) {
	netio_slot *s = netio_slot_of(a, ctx);
	if (!s) return NETIO_FOREIGN_TOKEN;
	uint64_t t = s->token;
	netio_slot_put(a, s);
	return t;
}

// netio_rdm_segment is one operation of a batch: a buffer in a registered
// region, the token reported on completion, the tag and ignore mask
// (tagged operations) and the peer (sends: the destination; receives:
// the source to match, or FI_ADDR_UNSPEC).
typedef struct {
	uint64_t offset;
	uint64_t len;
	uint64_t token;
	uint64_t tag;
	uint64_t ignore;
	uint64_t peer;
} netio_rdm_segment;

enum { NETIO_OP_RECV, NETIO_OP_TRECV, NETIO_OP_SEND, NETIO_OP_TSEND };

// netio_rdm_post posts n operations of one kind in one call, stopping at
// the first failure (-FI_EAGAIN when the arena has no free slot). Sends
// of at most inject bytes go with fi_inject/fi_tinject: no context, no
// completion.
static inline netio_post_result netio_rdm_post(struct fid_ep *ep, netio_arena *a, int op, char *base, void *desc, const netio_rdm_segment *segs, size_t n, uint64_t inject) {
	netio_post_result r = {0, 0};
	for (; r.posted < n; r.posted++) {
		const netio_rdm_segment *s = &segs[r.posted];
		void *buf = base + s->offset;
		if ((op == NETIO_OP_SEND || op == NETIO_OP_TSEND) && inject && s->len <= inject) {
			if (op == NETIO_OP_SEND)
				r.ret = fi_inject(ep, buf, s->len, s->peer);
			else
				r.ret = fi_tinject(ep, buf, s->len, s->peer, s->tag);
			if (r.ret) break;
			continue;
		}
		netio_slot *slot = netio_slot_get(a, ep, s->token);
		if (!slot) { r.ret = -FI_EAGAIN; break; }
		switch (op) {
		case NETIO_OP_RECV: r.ret = fi_recv(ep, buf, s->len, desc, s->peer, slot); break;
		case NETIO_OP_TRECV: r.ret = fi_trecv(ep, buf, s->len, desc, s->peer, s->tag, s->ignore, slot); break;
		case NETIO_OP_SEND: r.ret = fi_send(ep, buf, s->len, desc, s->peer, slot); break;
		default: r.ret = fi_tsend(ep, buf, s->len, desc, s->peer, s->tag, slot); break;
		}
		if (r.ret) { netio_slot_put(a, slot); break; }
	}
	return r;
}

// netio_rdm_cancel cancels every operation of ep still in flight with
// token (every one, if all is set); each completes later as an
// FI_ECANCELED error entry (or normally, if it finished first). Returns how
// many were asked to cancel.
static inline int netio_rdm_cancel(struct fid_ep *ep, netio_arena *a, uint64_t token, int all) {
	int k = 0;
	for (uint32_t i = 0; i < a->n; i++) {
		netio_slot *s = &a->slots[i];
		if (s->used && s->owner == ep && (all || s->token == token)) {
			fi_cancel(&ep->fid, s);
			k++;
		}
	}
	return k;
}

// netio_rdm_in_flight counts the slots held by operations of ep (NULL:
// of endpoints already closed).
static inline uint32_t netio_rdm_in_flight(netio_arena *a, struct fid_ep *ep) {
	uint32_t k = 0;
	for (uint32_t i = 0; i < a->n; i++)
		if (a->slots[i].used && a->slots[i].owner == ep) k++;
	return k;
}

// netio_rdm_orphan marks the slots of a closed endpoint as no one's: they
// stay taken until a completion names them (a provider may report the
// cancelled operations of a closed endpoint on a later read), and no new
// endpoint opened at the same address can claim them.
static inline uint32_t netio_rdm_orphan(netio_arena *a, struct fid_ep *ep) {
	uint32_t k = 0;
	for (uint32_t i = 0; i < a->n; i++)
		if (a->slots[i].used && a->slots[i].owner == ep) { a->slots[i].owner = NULL; k++; }
	return k;
}

static inline int netio_rdm_cq_open(struct fid_domain *d, size_t size, int wait_obj, struct fid_cq **cq) {
	struct fi_cq_attr attr = {0};
	attr.size = size;
	attr.format = FI_CQ_FORMAT_TAGGED;
	attr.wait_obj = wait_obj;
	return fi_cq_open(d, &attr, cq, NULL);
}

// netio_rdm_cq_read reads up to count entries, with their source
// addresses when src is not NULL, and replaces each op context by the
// token it was posted with, freeing the slots.
static inline ssize_t netio_rdm_cq_read(struct fid_cq *cq, netio_arena *a, struct fi_cq_tagged_entry *out, fi_addr_t *src, size_t count) {
	ssize_t n = src ? fi_cq_readfrom(cq, out, count, src) : fi_cq_read(cq, out, count);
	for (ssize_t i = 0; i < n; i++)
		out[i].op_context = (void *)(uintptr_t)netio_slot_release(a, out[i].op_context);
	return n;
}

static inline ssize_t netio_rdm_cq_readerr(struct fid_cq *cq, netio_arena *a, uint64_t *token, uint64_t *flags, uint64_t *len, uint64_t *tag, int *err, int *prov_errno, char *msg, size_t msglen) {
	// Without fi_cq_strerror: tcp;ofi_rxm 1.17 crashed inside it (SIGSEGV)
	// for an error entry with a provider errno; the text is the errno's.
	struct fi_cq_err_entry e;
	memset(&e, 0, sizeof e);
	ssize_t n = fi_cq_readerr(cq, &e, 0);
	if (n < 0) return n;
	msg[0] = 0;
	if (e.prov_errno) {
		const char *s = fi_strerror(e.prov_errno < 0 ? -e.prov_errno : e.prov_errno);
		if (s) { strncpy(msg, s, msglen - 1); msg[msglen - 1] = 0; }
	}
	*token = netio_slot_release(a, e.op_context);
	*flags = e.flags;
	*len = e.len;
	*tag = e.tag;
	*err = e.err;
	*prov_errno = e.prov_errno;
	return n;
}

static inline int netio_av_open(struct fid_domain *d, size_t count, struct fid_av **av) {
	struct fi_av_attr attr = {0};
	attr.type = FI_AV_TABLE;
	attr.count = count;
	return fi_av_open(d, &attr, av, NULL);
}

// netio_av_insert inserts one address; returns 1 on success.
static inline int netio_av_insert(struct fid_av *av, const void *addr, fi_addr_t *out) {
	return fi_av_insert(av, addr, 1, out, 0, NULL);
}

static inline int netio_av_remove(struct fid_av *av, fi_addr_t a) {
	return fi_av_remove(av, &a, 1, 0);
}

static inline int netio_av_lookup(struct fid_av *av, fi_addr_t a, void *addr, size_t *len) {
	return fi_av_lookup(av, a, addr, len);
}

// netio_av_straddr writes the provider's printable form of addr into buf
// (NUL-terminated, truncated to len).
static inline void netio_av_straddr(struct fid_av *av, const void *addr, char *buf, size_t len) {
	size_t n = len;
	if (!fi_av_straddr(av, addr, buf, &n)) buf[0] = 0;
	buf[len - 1] = 0;
}

static inline int netio_rdm_bind(struct fid_ep *ep, struct fid *obj, uint64_t flags) {
	return fi_ep_bind(ep, obj, flags);
}

// netio_mr_bind_ep binds a region to an endpoint and enables it, for
// providers that register memory per endpoint (FI_MR_ENDPOINT).
static inline int netio_mr_bind_ep(struct fid_mr *mr, struct fid_ep *ep) {
	int ret = fi_mr_bind(mr, &ep->fid, 0);
	if (ret) return ret;
	return fi_mr_enable(mr);
}

#endif
