// The verbs profile's checks, in C so that a batch is checked inside the
// one cgo call that posts it. See profile.go for what it checks and why.
#include <pthread.h>
#include <stdio.h>
#include "ofi.h"

// A registered region as the profile knows it. Under the profile the
// descriptor netio passes with a post is a pointer to one of these; the
// provider's own descriptor is inside.
typedef struct {
	char *base;
	size_t len;
	uint64_t access;
	void *desc;
} netio_prof_mr;

// The regions registered now, by the address of their record: a post
// whose descriptor is not among them names no region at all (closed, or
// never registered). Open addressing with linear probing; TOMB marks a
// removed slot.
#define TOMB ((void *)1)
static struct {
	pthread_mutex_t mu;
	void **slot;
	size_t cap, used, live;
} reg = {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0, 0};

static size_t reg_hash(void *p, size_t cap) {
	uint64_t x = (uint64_t)(uintptr_t)p;
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	return (size_t)x & (cap - 1);
}

static int reg_grow(void) {
	size_t cap = reg.cap ? reg.cap * 2 : 64;
	while (reg.live * 2 >= cap) cap *= 2;
	void **slot = calloc(cap, sizeof *slot);
	if (!slot) return -FI_ENOMEM;
	for (size_t i = 0; i < reg.cap; i++) {
		void *p = reg.slot[i];
		if (!p || p == TOMB) continue;
		size_t h = reg_hash(p, cap);
		while (slot[h]) h = (h + 1) & (cap - 1);
		slot[h] = p;
	}
	free(reg.slot);
	reg.slot = slot;
	reg.cap = cap;
	reg.used = reg.live;
	return 0;
}

static int reg_add(void *p) {
	pthread_mutex_lock(&reg.mu);
	int ret = 0;
	if ((reg.used + 1) * 2 > reg.cap) ret = reg_grow();
	if (ret == 0) {
		size_t h = reg_hash(p, reg.cap);
		while (reg.slot[h] && reg.slot[h] != TOMB) h = (h + 1) & (reg.cap - 1);
		if (!reg.slot[h]) reg.used++;
		reg.slot[h] = p;
		reg.live++;
	}
	pthread_mutex_unlock(&reg.mu);
	return ret;
}

// reg_find returns p if it is a registered region's record, else NULL;
// it never dereferences p.
static netio_prof_mr *reg_find(void *p) {
	netio_prof_mr *found = NULL;
	if (!p || p == TOMB) return NULL;
	pthread_mutex_lock(&reg.mu);
	if (reg.cap) {
		for (size_t h = reg_hash(p, reg.cap);; h = (h + 1) & (reg.cap - 1)) {
			void *s = reg.slot[h];
			if (!s) break;
			if (s == p) { found = p; break; }
		}
	}
	pthread_mutex_unlock(&reg.mu);
	return found;
}

static void reg_remove(void *p) {
	pthread_mutex_lock(&reg.mu);
	if (reg.cap) {
		for (size_t h = reg_hash(p, reg.cap);; h = (h + 1) & (reg.cap - 1)) {
			void *s = reg.slot[h];
			if (!s) break;
			if (s == p) { reg.slot[h] = TOMB; reg.live--; break; }
		}
	}
	pthread_mutex_unlock(&reg.mu);
}

int netio_prof_mr_reg(struct fid_domain *d, void *buf, size_t len, uint64_t access, uint64_t key, struct fid_mr **mr, void **rec) {
	netio_prof_mr *m = calloc(1, sizeof *m);
	if (!m) return -FI_ENOMEM;
	int ret = fi_mr_reg(d, buf, len, access, 0, key, 0, mr, NULL);
	if (ret) { free(m); return ret; }
	m->base = buf;
	m->len = len;
	m->access = access;
	m->desc = fi_mr_desc(*mr);
	if ((ret = reg_add(m)) != 0) {
		fi_close(&(*mr)->fid);
		free(m);
		return ret;
	}
	*rec = m;
	return 0;
}

int netio_prof_mr_close(struct fid_mr *mr, void *rec) {
	reg_remove(rec);
	free(rec);
	return fi_close(&mr->fid);
}

// An operation in flight, as its context: the token netio posted it with,
// and whose queues it counts against.
enum { OP_SEND, OP_RECV, OP_TRAP, OP_SENTINEL };

typedef struct netio_prof_op {
	uint64_t token;
	netio_prof_ep *ep;
	netio_prof_cq *cq; // the queue it was counted against, or NULL
	int kind;
	struct netio_prof_op *prev, *next; // in ep->ops
} netio_prof_op;

struct netio_prof_cq {
	size_t size, out; // entries; operations in flight that will complete here
	netio_prof_ep *eps; // endpoints bound to it, for netio_prof_cq_free
	int have_err;     // err holds an error entry read ahead
	struct fi_cq_err_entry err;
	char errmsg[128];
};

struct netio_prof_ep {
	struct fid_ep *ep, *rx;
	netio_prof_cq *cq;
	netio_prof_ep *next; // in cq->eps
	uint32_t tx_max, rx_max, inject_max;
	uint32_t tx_out, rx_out;
	uint64_t live;      // operations not completed yet, sentinels included
	netio_prof_op *ops; // those operations
	int closed;
	int trap;                // the strict-credit trap is armed on rx
	netio_prof_op *sentinel; // the posted sentinel, or NULL
	char sentinel_buf[64];
	char msg[256]; // what the last refused post broke
};

netio_prof_cq *netio_prof_cq_new(size_t size) {
	netio_prof_cq *pc = calloc(1, sizeof *pc);
	if (pc) pc->size = size;
	return pc;
}

netio_prof_ep *netio_prof_ep_new(struct fid_ep *ep, uint32_t tx, uint32_t rx, uint32_t inject) {
	netio_prof_ep *pe = calloc(1, sizeof *pe);
	if (!pe) return NULL;
	pe->ep = pe->rx = ep;
	pe->tx_max = tx;
	pe->rx_max = rx;
	pe->inject_max = inject;
	return pe;
}

void netio_prof_ep_set_rx(netio_prof_ep *pe, struct fid_ep *rx, int trap) {
	pe->rx = rx;
	pe->trap = trap;
}

static void ep_unlink_free(netio_prof_ep *pe) {
	if (pe->cq) {
		for (netio_prof_ep **p = &pe->cq->eps; *p; p = &(*p)->next) {
			if (*p == pe) { *p = pe->next; break; }
		}
	}
	free(pe);
}

void netio_prof_ep_bind_cq(netio_prof_ep *pe, netio_prof_cq *pc) {
	if (pe->cq) return;
	pe->cq = pc;
	pe->next = pc->eps;
	pc->eps = pe;
}

// netio_prof_ep_closed is called once the endpoint (and its receive
// context) are closed: the state goes when its last operation has
// completed, or with its queue.
void netio_prof_ep_closed(netio_prof_ep *pe) {
	pe->closed = 1;
	pe->sentinel = NULL;
	if (pe->live == 0) ep_unlink_free(pe);
}

const char *netio_prof_ep_msg(netio_prof_ep *pe) { return pe->msg; }

static netio_prof_op *op_new(netio_prof_ep *pe, int kind, uint64_t token) {
	netio_prof_op *op = malloc(sizeof *op);
	if (!op) return NULL;
	op->token = token;
	op->ep = pe;
	op->cq = NULL;
	op->kind = kind;
	op->prev = NULL;
	op->next = pe->ops;
	if (pe->ops) pe->ops->prev = op;
	pe->ops = op;
	pe->live++;
	return op;
}

// op_posted counts a posted operation against its endpoint's queues.
static void op_posted(netio_prof_op *op) {
	netio_prof_ep *pe = op->ep;
	if (op->kind == OP_SEND) pe->tx_out++;
	if (op->kind == OP_RECV) pe->rx_out++;
	if ((op->kind == OP_SEND || op->kind == OP_RECV) && pe->cq) {
		op->cq = pe->cq;
		op->cq->out++;
	}
}

// op_done releases a completed (or never posted) operation; it returns
// the token, and *kind says what the operation was.
static uint64_t op_done(netio_prof_op *op, int posted, int *kind) {
	netio_prof_ep *pe = op->ep;
	uint64_t token = op->token;
	*kind = op->kind;
	if (posted) {
		if (op->kind == OP_SEND) pe->tx_out--;
		if (op->kind == OP_RECV) pe->rx_out--;
		if (op->cq) op->cq->out--;
	}
	if (pe->sentinel == op) pe->sentinel = NULL;
	if (op->prev) op->prev->next = op->next; else pe->ops = op->next;
	if (op->next) op->next->prev = op->prev;
	free(op);
	if (--pe->live == 0 && pe->closed) ep_unlink_free(pe);
	return token;
}

// check_buf checks that [p, p+len) lies in the region whose record is
// rec (m: rec as reg_find found it), registered for access.
static int check_buf(netio_prof_ep *pe, const char *op, char *p, size_t len, void *rec, netio_prof_mr *m, uint64_t access) {
	if (!rec) {
		snprintf(pe->msg, sizeof pe->msg, "%s of %zu bytes at %p without a memory descriptor: verbs requires local memory to be registered (FI_MR_LOCAL)", op, len, (void *)p);
		return -NETIO_EPROF_DESC;
	}
	if (!m) {
		snprintf(pe->msg, sizeof pe->msg, "%s of %zu bytes at %p with descriptor %p, which names no registered region (closed, or never registered)", op, len, (void *)p, rec);
		return -NETIO_EPROF_DESC;
	}
	if (p < m->base || len > m->len || (size_t)(p - m->base) > m->len - len) {
		snprintf(pe->msg, sizeof pe->msg, "%s of [%p, +%zu) with the descriptor of the region [%p, +%zu): the buffer is not inside the region its descriptor belongs to", op, (void *)p, len, (void *)m->base, m->len);
		return -NETIO_EPROF_DESC;
	}
	if ((m->access & access) != access) {
		snprintf(pe->msg, sizeof pe->msg, "%s from a region registered without %s access", op, access == FI_SEND ? "FI_SEND" : "FI_RECV");
		return -NETIO_EPROF_DESC;
	}
	return 0;
}

// rearm puts the sentinel back behind the receives just posted: the
// provider matches receives in order, so a message that finds every
// receive of netio's taken lands in the sentinel, and the trap fires when
// its completion is read. The one posted before is cancelled (its
// ECANCELED completion is dropped by netio_prof_cq_read); if a message
// took it meanwhile, its completion fires the trap all the same.
static void rearm(netio_prof_ep *pe) {
	if (!pe->trap || pe->closed) return;
	if (pe->sentinel) {
		fi_cancel(&pe->rx->fid, pe->sentinel);
		pe->sentinel = NULL;
	}
	netio_prof_op *op = op_new(pe, OP_SENTINEL, NETIO_PROF_TRAP_TOKEN);
	if (!op) return;
	if (fi_recv(pe->rx, pe->sentinel_buf, sizeof pe->sentinel_buf, NULL, 0, op)) {
		int kind;
		op_done(op, 0, &kind);
		return;
	}
	pe->sentinel = op;
}

netio_post_result netio_prof_post_recvs(netio_prof_ep *pe, char *base, void *rec, const netio_segment *segs, size_t n) {
	netio_post_result r = {0, 0};
	netio_prof_mr *m = reg_find(rec);
	for (; r.posted < n; r.posted++) {
		const netio_segment *s = &segs[r.posted];
		char *p = base + s->offset;
		if ((r.ret = check_buf(pe, "fi_recv", p, s->len, rec, m, FI_RECV)) != 0) break;
		if (pe->rx_out >= pe->rx_max) {
			snprintf(pe->msg, sizeof pe->msg, "receive queue full: %u receives posted, the endpoint's rx_attr size", pe->rx_out);
			r.ret = -NETIO_EPROF_AGAIN;
			break;
		}
		if (pe->cq && pe->cq->out >= pe->cq->size) {
			snprintf(pe->msg, sizeof pe->msg, "fi_recv would make %zu operations in flight on a completion queue of %zu entries: on verbs it could overrun, which is fatal", pe->cq->out + 1, pe->cq->size);
			r.ret = -NETIO_EPROF_CQ;
			break;
		}
		netio_prof_op *op = op_new(pe, OP_RECV, s->token);
		if (!op) { r.ret = -FI_ENOMEM; break; }
		r.ret = fi_recv(pe->rx, p, s->len, m->desc, 0, op);
		if (r.ret) {
			int kind;
			op_done(op, 0, &kind);
			break;
		}
		op_posted(op);
	}
	if (r.posted) rearm(pe);
	return r;
}

netio_post_result netio_prof_post_sends(netio_prof_ep *pe, char *base, void *rec, const netio_segment *segs, size_t n, uint64_t inject) {
	netio_post_result r = {0, 0};
	netio_prof_mr *m = reg_find(rec);
	for (; r.posted < n; r.posted++) {
		const netio_segment *s = &segs[r.posted];
		char *p = base + s->offset;
		int injected = inject && s->len <= inject;
		if ((r.ret = check_buf(pe, injected ? "fi_inject" : "fi_send", p, s->len, rec, m, FI_SEND)) != 0) break;
		if (injected) {
			if (s->len > pe->inject_max) {
				snprintf(pe->msg, sizeof pe->msg, "fi_inject of %zu bytes, over the endpoint's inject size of %u", (size_t)s->len, pe->inject_max);
				r.ret = -NETIO_EPROF_INJECT;
				break;
			}
			// Copied before it returns: it holds no queue entry after.
			if ((r.ret = fi_inject(pe->ep, p, s->len, 0)) != 0) break;
			continue;
		}
		if (pe->tx_out >= pe->tx_max) {
			snprintf(pe->msg, sizeof pe->msg, "transmit queue full: %u sends in flight, the endpoint's tx_attr size", pe->tx_out);
			r.ret = -NETIO_EPROF_AGAIN;
			break;
		}
		if (pe->cq && pe->cq->out >= pe->cq->size) {
			// The verbs provider counts its queue's free entries and
			// answers EAGAIN when none is left.
			snprintf(pe->msg, sizeof pe->msg, "completion queue full: %zu operations in flight on a queue of %zu entries", pe->cq->out, pe->cq->size);
			r.ret = -NETIO_EPROF_AGAIN;
			break;
		}
		netio_prof_op *op = op_new(pe, OP_SEND, s->token);
		if (!op) { r.ret = -FI_ENOMEM; break; }
		r.ret = fi_send(pe->ep, p, s->len, m->desc, 0, op);
		if (r.ret) {
			int kind;
			op_done(op, 0, &kind);
			break;
		}
		op_posted(op);
	}
	return r;
}

ssize_t netio_prof_send_tail(netio_prof_ep *pe, size_t tail_len) {
	snprintf(pe->msg, sizeof pe->msg, "fi_sendv of %zu bytes from memory of no registered region: verbs requires local memory to be registered (FI_MR_LOCAL)", tail_len);
	return -NETIO_EPROF_DESC;
}

ssize_t netio_prof_post_trap(netio_prof_ep *pe, struct fid_ep *srx, void *buf, size_t len, uint64_t token) {
	netio_prof_op *op = op_new(pe, OP_TRAP, token);
	if (!op) return -FI_ENOMEM;
	ssize_t ret = fi_trecv(srx, buf, len, NULL, 0, 0, ~(uint64_t)0, op);
	if (ret) {
		int kind;
		op_done(op, 0, &kind);
	}
	return ret;
}

// trap_entry makes the error entry of a fired trap.
static void trap_entry(netio_prof_cq *pc, uint64_t len) {
	memset(&pc->err, 0, sizeof pc->err);
	pc->err.op_context = (void *)(uintptr_t)NETIO_PROF_TRAP_TOKEN;
	pc->err.flags = FI_RECV | FI_MSG;
	pc->err.len = len;
	pc->err.err = NETIO_EPROF_NORECV;
	pc->errmsg[0] = 0;
	pc->have_err = 1;
}

// read_ahead reads the error entry at the head of cq into pc: the
// profile's own (a cancelled sentinel) is dropped and 0 returned; 1 when
// an entry for the caller is held.
static ssize_t read_ahead(netio_prof_cq *pc, struct fid_cq *cq) {
	struct fi_cq_err_entry e;
	memset(&e, 0, sizeof e);
	ssize_t n = fi_cq_readerr(cq, &e, 0);
	if (n < 0) return n;
	netio_prof_op *op = e.op_context;
	int kind = OP_SEND;
	if (op) e.op_context = (void *)(uintptr_t)op_done(op, 1, &kind);
	if (kind == OP_SENTINEL) {
		if (e.err == FI_ECANCELED) return 0;
		trap_entry(pc, e.len); // a message too large for the sentinel
		return 1;
	}
	pc->err = e;
	pc->errmsg[0] = 0;
	if (e.prov_errno) {
		const char *s = fi_cq_strerror(cq, e.prov_errno, e.err_data, NULL, 0);
		if (s) { strncpy(pc->errmsg, s, sizeof pc->errmsg - 1); pc->errmsg[sizeof pc->errmsg - 1] = 0; }
	}
	pc->err.err_data = NULL;
	pc->have_err = 1;
	return 1;
}

// netio_prof_cq_read is fi_cq_read that gives netio its tokens back,
// counts the operations done, hides the sentinel's cancellations, and
// turns a sentinel's completion into the trap's error entry.
ssize_t netio_prof_cq_read(netio_prof_cq *pc, struct fid_cq *cq, void *buf, size_t count) {
	struct fi_cq_data_entry *e = buf;
	for (;;) {
		if (pc->have_err) return -FI_EAVAIL;
		ssize_t n = fi_cq_read(cq, e, count);
		if (n == -FI_EAVAIL) {
			ssize_t r = read_ahead(pc, cq);
			if (r < 0) return r;
			continue;
		}
		if (n <= 0) return n;
		size_t out = 0;
		for (ssize_t i = 0; i < n; i++) {
			int kind = OP_SEND;
			netio_prof_op *op = e[i].op_context;
			uint64_t token = op ? op_done(op, 1, &kind) : 0;
			if (kind == OP_SENTINEL) {
				if (!pc->have_err) trap_entry(pc, e[i].len);
				continue;
			}
			e[out] = e[i];
			e[out].op_context = (void *)(uintptr_t)token;
			out++;
		}
		if (out > 0) return out;
	}
}

ssize_t netio_prof_cq_readerr(netio_prof_cq *pc, struct fid_cq *cq, uint64_t *ctx, uint64_t *flags, uint64_t *len, int *err, int *prov_errno, char *msg, size_t msglen) {
	while (!pc->have_err) {
		ssize_t r = read_ahead(pc, cq);
		if (r < 0) return r;
	}
	pc->have_err = 0;
	*ctx = (uint64_t)(uintptr_t)pc->err.op_context;
	*flags = pc->err.flags;
	*len = pc->err.len;
	*err = pc->err.err;
	*prov_errno = pc->err.prov_errno;
	strncpy(msg, pc->errmsg, msglen - 1);
	msg[msglen - 1] = 0;
	return 1;
}

// netio_prof_cq_free frees the queue's state after fi_close, and that of
// the closed endpoints whose operations will now never complete.
void netio_prof_cq_free(netio_prof_cq *pc) {
	netio_prof_ep *pe = pc->eps;
	while (pe) {
		netio_prof_ep *next = pe->next;
		pe->cq = NULL;
		pe->next = NULL;
		if (pe->closed) {
			for (netio_prof_op *op = pe->ops; op;) {
				netio_prof_op *n = op->next;
				free(op);
				op = n;
			}
			free(pe);
		} else {
			for (netio_prof_op *op = pe->ops; op; op = op->next) op->cq = NULL;
		}
		pe = next;
	}
	free(pc);
}
