/* SPDX-License-Identifier: MIT */
/*
 * store/server/mem-budget.h — the memory uploads may take: a bound per request (--request-mem)
 * and one for all requests together (--decode-mem). A request's body is charged by the server
 * before it is read (its Content-Length; --max-body when chunked), then the decode of its
 * profile by the API before the reader allocates (pprof_read_limits.reserve); all of it is
 * given back when the request is answered. Debug-file uploads (--max-debuginfo) are not
 * charged: they have their own bound, and come from build hosts, not devices.
 *
 * Connections hold their fixed cost in it too (mem_budget__hold()): 256 authenticated
 * connections are ~24 MiB of TLS and HTTP buffers, which would otherwise come on top.
 *
 * Queries share the global bound: what a merge or render of stored profiles decodes, merges and
 * renders is taken from it too (mem_charge__take(), from the merge's threads), under a bound of
 * its own per request (--query-mem), and a query stops at its time bound (--query-timeout).
 */
#ifndef EDGEPROF_STORE_MEM_BUDGET_H
#define EDGEPROF_STORE_MEM_BUDGET_H

#include <stdbool.h>

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

enum mem_refusal {
	MEM_REFUSED_REQUEST, MEM_REFUSED_GLOBAL,	/* uploads: 413, 503 */
	MEM_REFUSED_QUERY, MEM_REFUSED_QUERY_GLOBAL,	/* queries: 413, 503 */
	MEM_REFUSED__N
};
extern const char *const mem_refusal_names[MEM_REFUSED__N];

struct mem_budget {
	size_t limit;		/* all requests together */
	size_t per_request;	/* one upload (never above limit) */
	size_t per_query;	/* one query (never above limit) */
	unsigned query_ms;	/* a query's time bound (0 = none) */
	atomic_size_t used, peak;
	atomic_uint_fast64_t refused[MEM_REFUSED__N];
	atomic_uint_fast64_t query_timeouts;	/* queries stopped at query_ms */
};

/* One request's share: what it holds of b. */
struct mem_charge {
	struct mem_budget *b;
	atomic_size_t held;	/* taken from several threads by a query's merge */
	size_t base;	/* what reserve()'s totals are on top of: the body, for a decode */
	bool query;	/* under b->per_query (mem_charge__query()) */
};

void mem_budget__init(struct mem_budget *b, size_t limit, size_t per_request, size_t per_query,
		      unsigned query_ms);
/* From now on c is a query's: bound by per_query, refusals counted and worded as a query's. */
static inline void mem_charge__query(struct mem_charge *c)
{
	c->query = true;
}
/*
 * pprof_budget.take / .give with ctx a struct mem_charge: bytes more (or back), from any
 * thread; the same answers as reserve().
 */
int mem_charge__take(void *ctx, size_t bytes, char *err, size_t errlen);
void mem_charge__give(void *ctx, size_t bytes);
/*
 * pprof_read_limits.reserve with ctx a struct mem_charge: 0 when the charge may hold total
 * bytes (taken from the budget), -EFBIG when total is over the per-request bound, -EAGAIN when
 * the budget is momentarily too full; err says which, with the figures.
 */
int mem_charge__reserve(void *ctx, size_t total, char *err, size_t errlen);
/* Starts reserve()'s totals from what c holds now (a decode after its body). */
static inline void mem_charge__mark(struct mem_charge *c)
{
	c->base = c->held;
}
/*
 * A connection's fixed cost, held for its life: taken whatever the budget holds, never
 * refused (--max-conns bounds it), so that decodes see only what connections leave.
 */
void mem_budget__hold(struct mem_budget *b, size_t bytes);
void mem_budget__unhold(struct mem_budget *b, size_t bytes);
void mem_charge__release_to(struct mem_charge *c, size_t keep);	/* back down to keep bytes */
static inline void mem_charge__release(struct mem_charge *c)	/* gives back all it holds */
{
	mem_charge__release_to(c, 0);
}

#endif /* EDGEPROF_STORE_MEM_BUDGET_H */
