/* SPDX-License-Identifier: MIT */
/*
 * store/ring/rollup.h — time-bucketed rollups per series, so that an hour of a fleet renders from a
 * few hundred merged profiles instead of tens of thousands of raw ones.
 *
 * A series is service + type + device + the whole label set. Once a bucket (bucket_s seconds,
 * aligned to the epoch) has closed (its end + grace has passed), a background thread merges the
 * bucket's raw records of each series into one profile and appends it to the same ring file as
 * a record with the STORE_F_ROLLUP flag: CRC-checked, found again by the scan at restart,
 * overwritten with the ring like everything else. Its metadata is the series' own (so selectors
 * match it as they match the raws), its time the bucket start, its value the sum of the raws',
 * and its key "rollup/<bucket_s>/<count>/<seq sum>" names the raw records it covers.
 *
 * The query planner (rollup__plan) uses a rollup for each (series, bucket) wholly inside the
 * query range, and raw records for the partial edges and for buckets without rollup. When a
 * rollup is read, its key is checked against the raws the index holds now (count and sum of
 * seqs); a late upload into a closed bucket, an evicted raw or a changed bucket size makes them
 * differ, and then that bucket is merged from its raws instead: the values are always those of
 * merging the raw records.
 *
 * A group is every series of one (service, type). Once the bucket (or span) rollups of all its
 * series are built, the compactor merges them into one group rollup (STORE_F_ROLLUP_GROUP,
 * empty device and labels, value = how many raws it covers, same key scheme + "/g"). The
 * planner reads it for a whole bucket or span when the query selected exactly that many raws of
 * the group there, that is every series (the UI's default: a whole service); the loader checks
 * the key's seq sum as for any rollup. Seqs only grow and the ring evicts the oldest, so a
 * selection of the same count and seq sum is the very set the rollup covers.
 *
 * Compiled in with CONFIG_COLLECTOR_ROLLUP; without it the planner is the identity (raws only).
 */
#ifndef EDGEPROF_STORE_ROLLUP_H
#define EDGEPROF_STORE_ROLLUP_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "pprof/pprof.h"
#include "store/store-int.h"

/*
 * What the compactor reads and appends: the ring backend's own records, given by the backend
 * (store/ring/store-ring.c) as this table, so that rollup.c includes nothing of the backend
 * and calls point one way: store.c -> store-ring.c -> rollup.c -> (the table).
 */
struct rollup_ring {
	void *ctx;
	int (*put)(void *ctx, const struct record_meta *meta, const void *payload, size_t len,
		   uint64_t *seq_out, bool *duplicate);
	int (*get)(void *ctx, uint64_t seq, struct record_meta *meta, void **payload, size_t *len);
	int (*list)(void *ctx, const struct store_query *q, store_entry_fn cb, void *cb_ctx);
	int (*read_profile)(void *ctx, uint64_t seq, const struct pprof_budget *b,
			    struct pprof_profile **p, char *err, size_t errlen);
};

/* One entry selected by a merge query, as the planner needs it (rollups included). */
struct plan_entry {
	uint64_t seq, time_ns;
	uint64_t bucket, span;	/* filled by plan_entries__sort() */
	const void *service, *type, *device, *labels; /* interned by the index: series identity */
	uint8_t level;		/* 0 raw, 1 bucket rollup, 2 span rollup */
	bool group;		/* a group rollup: every series of (service, type) */
	bool taken;		/* planned through a group rollup (rollup__plan) */
	uint64_t covers;	/* group rollup: how many raws it covers (its record's value) */
};

/* A span rollup covers this many buckets (an hour of 5-minute buckets), built from theirs. */
#define ROLLUP_SPAN_BUCKETS 12

/* RINGFILE_F_USER_MASK bits of rollup records: never listed, only merged. */
#define STORE_F_ROLLUP		0x0100
#define STORE_F_ROLLUP_SPAN	0x0200	/* with STORE_F_ROLLUP: a span rollup */
#define STORE_F_ROLLUP_GROUP	0x0400	/* with STORE_F_ROLLUP: of a group, not a series */

static inline uint8_t rollup_level(uint16_t flags)
{
	return !(flags & STORE_F_ROLLUP) ? 0 : (flags & STORE_F_ROLLUP_SPAN) ? 2 : 1;
}

/* The plan_entry of an index entry (the index's strings are interned: pointers compare). */
static inline struct plan_entry plan_entry_of(uint64_t seq, uint64_t time_ns, uint16_t flags,
					      int64_t value, const void *service,
					      const void *type, const void *device,
					      const void *labels)
{
	bool group = (flags & STORE_F_ROLLUP) && (flags & STORE_F_ROLLUP_GROUP);

	return (struct plan_entry){ .seq = seq, .time_ns = time_ns, .service = service,
				    .type = type, .device = device, .labels = labels,
				    .level = rollup_level(flags), .group = group,
				    .covers = group && value > 0 ? (uint64_t)value : 0 };
}

/* A record to read: a raw profile (n == 0) or a rollup covering raws[first .. first + n). */
struct merge_item {
	uint64_t seq;
	uint64_t seq_sum;	/* rollup: sum of the raw seqs it must cover */
	size_t first, n;
};

struct merge_plan {
	struct merge_item *items;
	size_t n_items;
	uint64_t *raws;		/* the raw seqs behind rollup items */
	size_t n_raws;
	size_t n_profiles;	/* raw profiles the plan stands for */
};

void merge_plan__free(struct merge_plan *pl);

/*
 * Plans a merge of entries e[0..n) (sorted here) for the range [from_ns, to_ns]: 0 or -ENOMEM.
 * In store/ring/rollup-plan.c, always built.
 * With bucket_s == 0 every raw entry is its own item and rollups are ignored.
 */
int rollup__plan(struct plan_entry *e, size_t n, uint64_t from_ns, uint64_t to_ns,
		 unsigned bucket_s, struct merge_plan *out);


/*
 * Sorts entries by series, span, bucket (bucket_s > 0), level, seq; and finds the end of the
 * (series, span) or (series, bucket) group that starts at i.
 */
void plan_entries__sort(struct plan_entry *e, size_t n, unsigned bucket_s);
size_t plan_entries__group_end(const struct plan_entry *e, size_t n, size_t i, bool by_span);

/* The same by (service, type) groups: every series of a group together. */
void plan_entries__sort_by_group(struct plan_entry *e, size_t n, unsigned bucket_s);
size_t plan_entries__group_run_end(const struct plan_entry *e, size_t n, size_t i, bool by_span);

/* The compactor's knobs are store/store.h's struct rollup_opts (store_opts.rollup). */
struct rollup_opts;

#ifdef CONFIG_COLLECTOR_ROLLUP
struct rollup;

/* Starts the compactor thread on ring (NULL + errno on error). */
struct rollup *rollup__start(const struct rollup_ring *ring, const struct rollup_opts *o);
void rollup__stop(struct rollup *r); /* joins the thread; NULL-safe */
void rollup__stats(struct rollup *r, struct store_stats *st);
unsigned rollup__bucket_s(const struct rollup *r);

/*
 * Loads a rollup item: the rollup record when it still covers exactly the planned raws, else
 * the merge of those raws. 0 or -errno with err filled. *used_rollup says which.
 */
int rollup__load(const struct rollup_ring *ring, const struct merge_plan *pl,
		 const struct merge_item *it, const struct pprof_budget *b,
		 struct pprof_profile **p, bool *used_rollup, char *err, size_t errlen);
#else
struct rollup;

static inline struct rollup *rollup__start(const struct rollup_ring *ring,
					   const struct rollup_opts *o)
{
	(void)ring;
	(void)o;
	return NULL;
}
static inline void rollup__stop(struct rollup *r) { (void)r; }
static inline void rollup__stats(struct rollup *r, struct store_stats *st)
{
	(void)r;
	(void)st;
}
static inline unsigned rollup__bucket_s(const struct rollup *r)
{
	(void)r;
	return 0;
}
static inline int rollup__load(const struct rollup_ring *ring, const struct merge_plan *pl,
			       const struct merge_item *it, const struct pprof_budget *b,
			       struct pprof_profile **p, bool *used_rollup, char *err,
			       size_t errlen)
{
	(void)b;
	(void)ring;
	(void)pl;
	(void)it;
	(void)p;
	(void)used_rollup;
	snprintf(err, errlen, "rollups are not compiled in");
	return -ENOTSUP;
}
#endif /* CONFIG_COLLECTOR_ROLLUP */

#endif /* EDGEPROF_STORE_ROLLUP_H */
