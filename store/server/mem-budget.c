// SPDX-License-Identifier: MIT
/*
 * store/server/mem-budget.c — the upload memory budget (store/server/mem-budget.h).
 *
 * Why: a profile's decoded size is not bounded by its body. 7,000 samples of 4,096 frames
 * gzip to 426 KB and decode to 230 MB of location ids; eight such uploads at once took the
 * collector to 4 GiB. The reader counts everything first (pass 1), so what it will allocate
 * is known before it allocates: that is asked here, on top of the request's body.
 *
 * Large requests may take only 3/4 of the budget together: the last quarter stays for
 * requests of at most MEM_SMALL bytes (the fleet's ordinary profiles decode to ~1 MB), so that
 * a few large uploads that fill the budget do not turn every device away with a 503.
 */
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>

#include "store/server/mem-budget.h"

#define MiB	  (1024 * 1024)
#define MEM_SMALL (2 * MiB)

const char *const mem_refusal_names[MEM_REFUSED__N] = {
	[MEM_REFUSED_REQUEST] = "request",
	[MEM_REFUSED_GLOBAL] = "global",
	[MEM_REFUSED_QUERY] = "query",
	[MEM_REFUSED_QUERY_GLOBAL] = "query_global",
};

void mem_budget__init(struct mem_budget *b, size_t limit, size_t per_request, size_t per_query,
		      unsigned query_ms)
{
	b->limit = limit;
	b->per_request = per_request < limit ? per_request : limit;
	b->per_query = per_query < limit ? per_query : limit;
	b->query_ms = query_ms;
	atomic_init(&b->used, 0);
	atomic_init(&b->peak, 0);
	for (int i = 0; i < MEM_REFUSED__N; i++)
		atomic_init(&b->refused[i], 0);
	atomic_init(&b->query_timeouts, 0);
}

static void note_peak(struct mem_budget *b, size_t used)
{
	size_t peak = atomic_load(&b->peak);

	while (used > peak && !atomic_compare_exchange_weak(&b->peak, &peak, used))
		;
}

static int refuse_request(struct mem_charge *c, size_t total, char *err, size_t errlen)
{
	struct mem_budget *b = c->b;

	atomic_fetch_add(&b->refused[c->query ? MEM_REFUSED_QUERY : MEM_REFUSED_REQUEST], 1);
	if (c->query)
		snprintf(err, errlen, "the query needs more than %zu MiB to decode, merge and "
			 "render its profiles, over the %zu MiB a query may take (--query-mem): "
			 "narrow the time range or the selector", (total + MiB - 1) / MiB,
			 b->per_query / MiB);
	else
		snprintf(err, errlen, "its body and decoding need more than %zu MiB, over the %zu "
			 "MiB a request may take (--request-mem)", (total + MiB - 1) / MiB,
			 b->per_request / MiB);
	return -EFBIG;
}

/* Takes more bytes of b for a request whose total becomes total: 0 or -EAGAIN. */
static int take_global(struct mem_charge *c, size_t more, size_t total, char *err,
		       size_t errlen)
{
	struct mem_budget *b = c->b;
	size_t cap = total > MEM_SMALL ? b->limit / 4 * 3 : b->limit;
	size_t used = atomic_load(&b->used);

	do {
		if (used + more > cap) {
			atomic_fetch_add(&b->refused[c->query ? MEM_REFUSED_QUERY_GLOBAL
							      : MEM_REFUSED_GLOBAL], 1);
			snprintf(err, errlen, "the collector's memory for uploads and queries "
				 "(%zu MiB, --decode-mem) is momentarily taken by other requests; "
				 "retry later", b->limit / MiB);
			return -EAGAIN;
		}
	} while (!atomic_compare_exchange_weak(&b->used, &used, used + more));
	note_peak(b, used + more);
	return 0;
}

void mem_budget__hold(struct mem_budget *b, size_t bytes)
{
	note_peak(b, atomic_fetch_add(&b->used, bytes) + bytes);
}

void mem_budget__unhold(struct mem_budget *b, size_t bytes)
{
	atomic_fetch_sub(&b->used, bytes);
}

int mem_charge__reserve(void *ctx, size_t total, char *err, size_t errlen)
{
	struct mem_charge *c = ctx;
	size_t held = c->held;

	total = total > SIZE_MAX - c->base ? SIZE_MAX : total + c->base;
	if (!c->b || total <= held)
		return 0;
	return mem_charge__take(c, total - held, err, errlen);
}

int mem_charge__take(void *ctx, size_t bytes, char *err, size_t errlen)
{
	struct mem_charge *c = ctx;
	size_t held, total, bound;
	int e;

	if (!c->b || !bytes)
		return 0;
	bound = c->query ? c->b->per_query : c->b->per_request;
	held = atomic_load(&c->held);
	do {
		total = bytes > SIZE_MAX - held ? SIZE_MAX : held + bytes;
		if (total > bound)
			return refuse_request(c, total, err, errlen);
	} while (!atomic_compare_exchange_weak(&c->held, &held, total));
	e = take_global(c, bytes, total, err, errlen);
	if (e)
		atomic_fetch_sub(&c->held, bytes);
	return e;
}

void mem_charge__give(void *ctx, size_t bytes)
{
	struct mem_charge *c = ctx;
	size_t held = atomic_load(&c->held);

	do {
		if (bytes > held)
			bytes = held;
	} while (!atomic_compare_exchange_weak(&c->held, &held, held - bytes));
	if (c->b && bytes)
		atomic_fetch_sub(&c->b->used, bytes);
}

void mem_charge__release_to(struct mem_charge *c, size_t keep)
{
	size_t held = atomic_load(&c->held);

	/*
	 * A large request's pieces under the mmap threshold stay in its thread's arena when
	 * freed, and with a thread per connection (up to 16 arenas) the next large request
	 * rarely finds them: RSS crept 10 to 15 MiB past the budget over collector-attack's
	 * phases. Large requests are rare, so giving their memory back costs little.
	 */
	if (held > keep) {
		mem_charge__give(c, held - keep);
		if (held - keep >= MEM_SMALL)
			malloc_trim(0);
	}
	if (c->base > keep)
		c->base = keep;
	if (!keep)
		c->query = false; /* the connection's next request is its own */
}
