// SPDX-License-Identifier: MIT
/*
 * store/ring/rollup-plan.c — which records a merge reads: rollups for the buckets wholly inside the
 * range, raw records for the rest (store/ring/rollup.h). Always built: without rollups compiled in
 * (bucket_s == 0) the plan is simply every raw record.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store/ring/rollup.h"

void merge_plan__free(struct merge_plan *pl)
{
	free(pl->items);
	free(pl->raws);
	memset(pl, 0, sizeof(*pl));
}

static int ptr_cmp(const void *a, const void *b)
{
	return a == b ? 0 : (uintptr_t)a < (uintptr_t)b ? -1 : 1;
}

/* A group rollup is a series of its own (even beside a real series without device or labels). */
static int series_cmp(const struct plan_entry *a, const struct plan_entry *b)
{
	int c = ptr_cmp(a->service, b->service);

	if (!c && a->group != b->group)
		return a->group ? 1 : -1;
	if (!c)
		c = ptr_cmp(a->type, b->type);
	if (!c)
		c = ptr_cmp(a->device, b->device);
	if (!c)
		c = ptr_cmp(a->labels, b->labels);
	return c;
}

static int u64_cmp(uint64_t a, uint64_t b)
{
	return a < b ? -1 : a > b;
}

/* Span, bucket, then raws before bucket rollups before span rollups, then seq. */
static int time_cmp(const struct plan_entry *a, const struct plan_entry *b)
{
	int c = u64_cmp(a->span, b->span);

	if (!c)
		c = u64_cmp(a->bucket, b->bucket);
	if (!c)
		c = u64_cmp(a->level, b->level);
	return c ? c : u64_cmp(a->seq, b->seq);
}

static int entry_cmp(const void *pa, const void *pb)
{
	const struct plan_entry *a = pa, *b = pb;
	int c = series_cmp(a, b);

	return c ? c : time_cmp(a, b);
}

static void plan_entries__fill(struct plan_entry *e, size_t n, unsigned bucket_s)
{
	uint64_t bucket_ns = (uint64_t)bucket_s * 1000000000ull;

	for (size_t k = 0; k < n; k++) {
		e[k].bucket = e[k].time_ns / bucket_ns;
		e[k].span = e[k].bucket / ROLLUP_SPAN_BUCKETS;
	}
}

void plan_entries__sort(struct plan_entry *e, size_t n, unsigned bucket_s)
{
	plan_entries__fill(e, n, bucket_s);
	qsort(e, n, sizeof(*e), entry_cmp);
}

size_t plan_entries__group_end(const struct plan_entry *e, size_t n, size_t i, bool by_span)
{
	size_t j = i + 1;

	while (j < n && !series_cmp(&e[i], &e[j]) &&
	       (by_span ? e[j].span == e[i].span : e[j].bucket == e[i].bucket))
		j++;
	return j;
}

/* Service, type, span, bucket, level, seq: the order in which groups are planned and built. */
static int group_cmp(const void *pa, const void *pb)
{
	const struct plan_entry *a = pa, *b = pb;
	int c = ptr_cmp(a->service, b->service);

	if (!c)
		c = ptr_cmp(a->type, b->type);
	return c ? c : time_cmp(a, b);
}

void plan_entries__sort_by_group(struct plan_entry *e, size_t n, unsigned bucket_s)
{
	plan_entries__fill(e, n, bucket_s);
	qsort(e, n, sizeof(*e), group_cmp);
}

size_t plan_entries__group_run_end(const struct plan_entry *e, size_t n, size_t i, bool by_span)
{
	size_t j = i + 1;

	while (j < n && e[j].service == e[i].service && e[j].type == e[i].type &&
	       (by_span ? e[j].span == e[i].span : e[j].bucket == e[i].bucket))
		j++;
	return j;
}

static int item_cmp(const void *pa, const void *pb)
{
	const struct merge_item *a = pa, *b = pb;

	return u64_cmp(a->seq, b->seq);
}

static void plan_raws(const struct plan_entry *e, size_t n, struct merge_plan *out)
{
	for (size_t i = 0; i < n; i++)
		if (!e[i].level && !e[i].taken)
			out->items[out->n_items++] = (struct merge_item){ .seq = e[i].seq };
}

/*
 * A group e[0..n) (sorted) read through its newest rollup of this level, which must cover every
 * raw of the group: false (nothing planned) when there is no such rollup or no raw.
 */
static bool plan_rollup(const struct plan_entry *e, size_t n, unsigned level,
			struct merge_plan *out)
{
	const struct plan_entry *ru = NULL;
	struct merge_item *it;
	size_t raws = 0;

	for (size_t i = 0; i < n; i++) {
		if (!e[i].level && e[i].taken) /* part of the group is read through a group rollup */
			return false;
		if (e[i].level == level)
			ru = &e[i];
		raws += !e[i].level;
	}
	if (!ru || !raws)
		return false;
	it = &out->items[out->n_items++];
	*it = (struct merge_item){ .seq = ru->seq, .first = out->n_raws, .n = raws };
	for (size_t i = 0; i < n; i++) {
		if (e[i].level)
			continue;
		out->raws[out->n_raws++] = e[i].seq;
		it->seq_sum += e[i].seq;
	}
	return true;
}

static bool plan_whole(uint64_t start, uint64_t len, uint64_t from, uint64_t to)
{
	return start >= from && start + len - 1 <= to;
}

/*
 * A group's span or bucket e[0..n) (every series of a service and type) read through its
 * newest group rollup of this level when that covers as many raws as were selected here: the
 * selector took every series (rollup__load checks the seq sum). Its raws are then taken.
 */
static bool plan_group_rollup(struct plan_entry *e, size_t n, unsigned level,
			      struct merge_plan *out)
{
	const struct plan_entry *ru = NULL;
	struct merge_item *it;
	size_t raws = 0;

	for (size_t i = 0; i < n; i++) {
		if (e[i].group && e[i].level == level)
			ru = &e[i];
		raws += !e[i].level;
	}
	if (!ru || !raws || ru->covers != raws)
		return false;
	it = &out->items[out->n_items++];
	*it = (struct merge_item){ .seq = ru->seq, .first = out->n_raws, .n = raws };
	for (size_t i = 0; i < n; i++) {
		if (e[i].level)
			continue;
		e[i].taken = true;
		out->raws[out->n_raws++] = e[i].seq;
		it->seq_sum += e[i].seq;
	}
	return true;
}

/* The group rollups usable in [from, to]: whole spans first, else whole buckets. */
static void plan_groups(struct plan_entry *e, size_t n, uint64_t bucket_ns, uint64_t from,
			uint64_t to, struct merge_plan *out)
{
	uint64_t span_ns = ROLLUP_SPAN_BUCKETS * bucket_ns;

	for (size_t i = 0, j; i < n; i = j) {
		j = plan_entries__group_run_end(e, n, i, true);
		if (plan_whole(e[i].span * span_ns, span_ns, from, to) &&
		    plan_group_rollup(e + i, j - i, 2, out))
			continue;
		for (size_t k = i, m; k < j; k = m) {
			m = plan_entries__group_run_end(e, j, k, false);
			if (plan_whole(e[k].bucket * bucket_ns, bucket_ns, from, to))
				plan_group_rollup(e + k, m - k, 1, out);
		}
	}
}

/* One series' span group e[0..n): its span rollup, else bucket by bucket. */
static void plan_span(const struct plan_entry *e, size_t n, uint64_t bucket_ns, uint64_t from,
		      uint64_t to, struct merge_plan *out)
{
	size_t k = 0;

	if (plan_whole(e[0].span * ROLLUP_SPAN_BUCKETS * bucket_ns, ROLLUP_SPAN_BUCKETS * bucket_ns,
		       from, to) && plan_rollup(e, n, 2, out))
		return;
	while (k < n) {
		size_t m = plan_entries__group_end(e, n, k, false);

		if (!plan_whole(e[k].bucket * bucket_ns, bucket_ns, from, to) ||
		    !plan_rollup(e + k, m - k, 1, out))
			plan_raws(e + k, m - k, out);
		k = m;
	}
}

int rollup__plan(struct plan_entry *e, size_t n, uint64_t from_ns, uint64_t to_ns,
		 unsigned bucket_s, struct merge_plan *out)
{
	size_t i = 0;

	memset(out, 0, sizeof(*out));
	out->items = calloc(n ? n : 1, sizeof(*out->items));
	out->raws = calloc(n ? n : 1, sizeof(*out->raws));
	if (!out->items || !out->raws) {
		merge_plan__free(out);
		return -ENOMEM;
	}
	for (size_t k = 0; k < n; k++)
		out->n_profiles += !e[k].level;
	if (!bucket_s) {
		plan_raws(e, n, out);
		return 0;
	}
	plan_entries__sort_by_group(e, n, bucket_s);
	plan_groups(e, n, (uint64_t)bucket_s * 1000000000ull, from_ns, to_ns, out);
	qsort(e, n, sizeof(*e), entry_cmp); /* the rest series by series */
	while (i < n) {
		size_t j = plan_entries__group_end(e, n, i, true);

		plan_span(e + i, j - i, (uint64_t)bucket_s * 1000000000ull, from_ns, to_ns, out);
		i = j;
	}
	/* oldest first, as a raw merge reads them (the values do not depend on it) */
	qsort(out->items, out->n_items, sizeof(*out->items), item_cmp);
	return 0;
}
