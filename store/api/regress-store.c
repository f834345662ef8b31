// SPDX-License-Identifier: MIT
/*
 * store/api/regress-store.c — one side of a regression comparison read through the store front
 * (regress-store.h) into the statistics' one input (pprof/view/regress.h: stacks, then each
 * device's rows of them): where the backend sums by device in one pass
 * (store__sum_by_device: ClickHouse sums by device and stack), the side's stacks once and each
 * device's sums; where it has no such pass (the ring), list (seq, device), sort by device,
 * and each device's profiles read one by one, each its own stacks and rows (their sums are
 * what merging them would give). A device's shares are of its
 * duty-weighted values on both: ClickHouse stores them weighted (store/api/api.c), the ring
 * as uploaded with the weight beside them, applied here to each profile read.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pprof/view/stacks.h"
#include "store/api/regress-store.h"

struct listed {
	char *device;
	uint64_t seq;
	uint32_t weight_milli;	/* the ring's duty weight (0: none) */
};

struct listing {
	struct listed *v;
	size_t n, cap;
};

static int list_one(void *ctx, const struct store_entry *e)
{
	struct listing *l = ctx;

	if (l->n == REGRESS_STORE_MAX_PROFILES)
		return -E2BIG;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 1024;
		struct listed *v = realloc(l->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n].device = strdup(e->device ? e->device : "");
	if (!l->v[l->n].device)
		return -ENOMEM;
	l->v[l->n].weight_milli = e->weight_milli;
	l->v[l->n++].seq = e->seq;
	return 0;
}

static int cmp_listed(const void *x, const void *y)
{
	const struct listed *a = x, *b = y;
	int c = strcmp(a->device, b->device);

	return c ? c : (a->seq > b->seq) - (a->seq < b->seq);
}

/* Charges of the statistics' input for one profile (b NULL: none). */
static int take(const struct pprof_budget *b, size_t bytes, char *err, size_t errlen)
{
	return b ? b->take(b->ctx, bytes, err, errlen) : 0;
}

static void give(const struct pprof_budget *b, size_t bytes)
{
	if (b)
		b->give(b->ctx, bytes);
}

/*
 * One device's profiles v[0..n) added one by one: the sums a merge would give, without
 * building the merged profile (as fast here as store__merge_seqs' threaded decode, within this
 * machine's noise, and one profile in memory at a time). A profile overwritten since the
 * listing, or damaged, is counted in *unreadable and left out. 0, or -errno (err set).
 */
static int add_device(struct store *s, const struct listed *v, size_t n, const char *spec,
		      const struct pprof_budget *b, struct regress *r, enum regress_side side,
		      size_t *unreadable, char *err, size_t errlen)
{
	size_t added = 0;
	int ret = 0;

	for (size_t i = 0; !ret && i < n; i++) {
		struct pprof_profile *p = NULL;
		int vi;

		ret = store__read_profile(s, v[i].seq, b, &p, err, errlen);
		if (ret == -ENOENT || ret == -EIO) {
			(*unreadable)++;
			ret = 0;
			continue;
		}
		if (ret)
			break;
		/* the ring keeps the bytes as uploaded: weighed here as ClickHouse's rows were */
		if (v[i].weight_milli && v[i].weight_milli != 1000)
			pprof_profile__weigh(p, v[i].weight_milli);
		vi = stacks__sample_index(p, spec, err, errlen);
		ret = vi < 0 ? vi : take(b, regress__profile_mem(p), err, errlen);
		if (!ret) {
			ret = regress__add_profile(r, p, vi, err, errlen);
			give(b, regress__profile_mem(p));
		}
		pprof_profile__free_budget(p, b);
		added++;
	}
	return ret ? ret : added ? regress__end_device(r, side) : 0;
}

/* A side read as sums by device (ClickHouse): the side's stacks, then each device's rows. */
struct sums_ctx {
	const char *spec;
	struct regress *r;
	enum regress_side side;
	const struct pprof_profile *stacks;
	struct regress_row *rows;	/* a device's rows, the value compared */
	size_t cap, devices;
	char *err;
	size_t errlen;
};

static int sums_stacks(void *ctx, const struct pprof_profile *stacks)
{
	struct sums_ctx *x = ctx;

	x->stacks = stacks;
	return regress__stacks(x->r, stacks, x->err, x->errlen);
}

/*
 * The value a device is compared on, as stacks__sample_index() picks it in the device's merged
 * profile: spec's, else the default type of the device's first series, else the last.
 */
static int device_value(const struct sums_ctx *x, const char *default_type)
{
	const char *spec = x->spec && *x->spec ? x->spec : default_type;

	if (!*spec && x->stacks->n_sample_type)
		return (int)x->stacks->n_sample_type - 1;
	return stacks__sample_index(x->stacks, spec, x->err, x->errlen);
}

static int sums_device(void *ctx, const char *device, const char *default_type,
		       const struct store_stack_sum *rows, size_t n)
{
	struct sums_ctx *x = ctx;
	int vi = device_value(x, default_type), ret;

	(void)device;
	x->devices++;
	if (vi < 0)
		return vi;
	if (n > x->cap) {
		struct regress_row *v = realloc(x->rows, n * sizeof(*v));

		if (!v)
			return -ENOMEM;
		x->rows = v;
		x->cap = n;
	}
	for (size_t i = 0; i < n; i++)
		x->rows[i] = (struct regress_row){ .sample = rows[i].sample,
						   .value = rows[i].v[vi] };
	ret = regress__add_rows(x->r, x->rows, n, x->err, x->errlen);
	return ret ? ret : regress__end_device(x->r, x->side);
}

int regress_store_side(struct store *s, const struct store_query *q, const char *spec,
		       struct regress *r, enum regress_side side, struct regress_side_stats *st,
		       char *err, size_t errlen)
{
	static const struct store_sums_fns fns = { sums_stacks, sums_device };
	struct sums_ctx x = { .spec = spec, .r = r, .side = side, .err = err, .errlen = errlen };
	size_t skipped;
	int ret = store__sum_by_device(s, q, &fns, &x, &st->profiles, &skipped, err, errlen);

	regress__stacks(r, NULL, err, errlen);
	free(x.rows);
	if (ret == -EOPNOTSUPP)
		return regress_store_side_profiles(s, q, spec, r, side, st, err, errlen);
	st->devices = x.devices;
	st->unreadable = 0;
	st->skipped = skipped;
	return ret;
}

int regress_store_side_profiles(struct store *s, const struct store_query *q, const char *spec,
				struct regress *r, enum regress_side side,
				struct regress_side_stats *st, char *err, size_t errlen)
{
	struct listing l = { 0 };
	int ret = store__list(s, q, list_one, &l);

	memset(st, 0, sizeof(*st));
	if (ret == -E2BIG)
		snprintf(err, errlen, "the selection holds more than %u profiles: narrow it",
			 REGRESS_STORE_MAX_PROFILES);
	if (ret >= 0 && !l.n)
		ret = -ENOENT;
	if (ret >= 0) {
		ret = 0;
		qsort(l.v, l.n, sizeof(*l.v), cmp_listed);
		st->profiles = l.n;
	}
	for (size_t i = 0, j; !ret && i < l.n; i = j) {
		for (j = i + 1; j < l.n && !strcmp(l.v[j].device, l.v[i].device); j++)
			;
		st->devices++;
		ret = add_device(s, &l.v[i], j - i, spec, q->budget, r, side, &st->unreadable, err,
				 errlen);
	}
	for (size_t i = 0; i < l.n; i++)
		free(l.v[i].device);
	free(l.v);
	return ret;
}
