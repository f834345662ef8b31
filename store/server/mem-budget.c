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
#include <stdint.h>
#include <stdio.h>

#include "store/server/mem-budget.h"

#define MiB	  (1024 * 1024)
#define MEM_SMALL (2 * MiB)

const char *const mem_refusal_names[MEM_REFUSED__N] = {
	[MEM_REFUSED_REQUEST] = "request",
	[MEM_REFUSED_GLOBAL] = "global",
};

void mem_budget__init(struct mem_budget *b, size_t limit, size_t per_request)
{
	b->limit = limit;
	b->per_request = per_request < limit ? per_request : limit;
	atomic_init(&b->used, 0);
	atomic_init(&b->peak, 0);
	for (int i = 0; i < MEM_REFUSED__N; i++)
		atomic_init(&b->refused[i], 0);
}

static void note_peak(struct mem_budget *b, size_t used)
{
	size_t peak = atomic_load(&b->peak);

	while (used > peak && !atomic_compare_exchange_weak(&b->peak, &peak, used))
		;
}

int mem_charge__reserve(void *ctx, size_t total, char *err, size_t errlen)
{
	struct mem_charge *c = ctx;
	struct mem_budget *b = c->b;
	size_t more, used, cap;

	total = total > SIZE_MAX - c->base ? SIZE_MAX : total + c->base;
	if (!b || total <= c->held)
		return 0;
	if (total > b->per_request) {
		atomic_fetch_add(&b->refused[MEM_REFUSED_REQUEST], 1);
		snprintf(err, errlen, "its body and decoding need more than %zu MiB, over the %zu "
			 "MiB a request may take (--request-mem)", (total + MiB - 1) / MiB,
			 b->per_request / MiB);
		return -EFBIG;
	}
	more = total - c->held;
	cap = total > MEM_SMALL ? b->limit / 4 * 3 : b->limit;
	used = atomic_load(&b->used);
	do {
		if (used + more > cap) {
			atomic_fetch_add(&b->refused[MEM_REFUSED_GLOBAL], 1);
			snprintf(err, errlen, "the collector's memory for uploads (%zu MiB, "
				 "--decode-mem) is momentarily taken by other uploads; retry later",
				 b->limit / MiB);
			return -EAGAIN;
		}
	} while (!atomic_compare_exchange_weak(&b->used, &used, used + more));
	note_peak(b, used + more);
	c->held = total;
	return 0;
}

void mem_charge__release_to(struct mem_charge *c, size_t keep)
{
	if (c->b && c->held > keep)
		atomic_fetch_sub(&c->b->used, c->held - keep);
	if (c->held > keep)
		c->held = keep;
	if (c->base > c->held)
		c->base = c->held;
}
