// SPDX-License-Identifier: MIT
/*
 * pprof/view/regress.c — per-device function shares, Mann-Whitney U, Benjamini-Hochberg and a
 * bootstrap interval (regress.h says what and why).
 *
 * Why Benjamini-Hochberg and not Bonferroni: a comparison runs one test per function and
 * metric, thousands of them, and a real regression moves several at once (the slow function's
 * self share, its callers' cumulative shares). Bonferroni controls the chance of any false
 * finding by testing each at alpha/m, which at m = 5,000 asks every finding for p < 2e-7 and
 * loses small regressions on a few hundred candidate devices. BH controls the expected fraction
 * of false findings among those reported (the false discovery rate), which is the error an
 * engineer pays for (a finding to look at that is not real); under the null of no change at all
 * (an A/A comparison) it equals the chance of any false finding, so an A/A run still reports
 * nothing with probability >= 1 - alpha. Tests of one function's self and cumulative shares are
 * positively dependent, the case BH is proven for (Benjamini & Yekutieli 2001).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pprof/view/regress.h"
#include "pprof/view/stacks.h"

/* One function's values on one device where it has samples. */
struct entry {
	uint32_t dev;
	int64_t self, cum;
};

struct func {
	char *name;
	struct entry *e;
	size_t n, cap;
	bool caller;		/* ever a non-leaf frame: cumulative differs from self */
	bool leaf;		/* ever a leaf: it has a self share to test */
};

struct regress {
	struct regress_opts o;
	struct func *f;
	size_t n_f, cap_f;
	uint32_t *slots;	/* name hash -> function index + 1, open addressing */
	size_t n_slots;
	/* per device, in order of addition */
	uint8_t *side;
	int64_t *total;
	uint32_t *side_index;	/* index among its side's devices */
	size_t n_dev, cap_dev;
	/* scratch of the device being added, indexed by function */
	int64_t *acc_self, *acc_cum;
	uint32_t *seen;		/* stack generation a function was last counted in */
	uint32_t *touched;
	size_t n_touched, cap_scratch;
	uint32_t gen;
	int64_t cur_total;	/* the open device's total so far */
	/* the chains' data: stacks interned as function indices (root first), and each
	 * device's (stack, value) sums, devices in order of addition */
	uint32_t *sfn;		/* every interned stack's functions, one after another */
	size_t n_sfn, cap_sfn;
	struct stk { size_t off; uint32_t n; bool leaf; } *stk;
	size_t n_stk, cap_stk;
	uint32_t *stk_slots;	/* stack hash -> index + 1 */
	size_t n_stk_slots;
	struct dstack { uint32_t stack; int64_t v; } *ds;
	size_t n_ds, cap_ds;
	size_t *ds_start;	/* device d's sums: ds[ds_start[d] .. ds_start[d + 1] or n_ds) */
	size_t open_ds;		/* the first sum of the device being added */
	/* the input: the stacks profile of regress__stacks() and, per its sample, the
	 * first sample of the same locations (its stack), the stack's interned index (-1: not
	 * yet) and the open rows' sum and mark */
	struct stacks *in;
	const struct pprof_profile *in_p;
	size_t *in_stack;
	long *in_sid;
	int64_t *in_sum;
	uint32_t *in_mark, in_gen;
	size_t *in_order;	/* stacks of the rows being added, first seen first */
	size_t in_cap;
	struct regress_row *rows;	/* regress__add_profile()'s rows */
	size_t rows_cap;
	struct regress_stats st;
};

struct regress *regress__new(const struct regress_opts *o)
{
	struct regress *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	if (o)
		r->o = *o;
	if (r->o.alpha <= 0)
		r->o.alpha = REGRESS_DEFAULT_ALPHA;
	if (r->o.min_change == 0)
		r->o.min_change = REGRESS_DEFAULT_MIN_CHANGE;
	if (!r->o.max_functions)
		r->o.max_functions = REGRESS_DEFAULT_MAX_FUNCTIONS;
	if (!r->o.bootstrap)
		r->o.bootstrap = REGRESS_DEFAULT_BOOTSTRAP;
	if (!r->o.seed)
		r->o.seed = 0x9e3779b97f4a7c15ull;
	if (!r->o.max_stack_entries)
		r->o.max_stack_entries = REGRESS_DEFAULT_MAX_STACK_ENTRIES;
	return r;
}

void regress__free(struct regress *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n_f; i++) {
		free(r->f[i].name);
		free(r->f[i].e);
	}
	free(r->f);
	free(r->slots);
	free(r->side);
	free(r->total);
	free(r->side_index);
	free(r->acc_self);
	free(r->acc_cum);
	free(r->seen);
	free(r->touched);
	free(r->sfn);
	free(r->stk);
	free(r->stk_slots);
	free(r->ds);
	free(r->ds_start);
	stacks__free(r->in);
	free(r->in_stack);
	free(r->in_sid);
	free(r->in_sum);
	free(r->in_mark);
	free(r->in_order);
	free(r->rows);
	free(r);
}

static uint64_t hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ull;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

static int grow_slots(struct regress *r)
{
	size_t n = r->n_slots ? r->n_slots * 2 : 1024;
	uint32_t *s = calloc(n, sizeof(*s));

	if (!s)
		return -ENOMEM;
	for (size_t i = 0; i < r->n_f; i++) {
		size_t j = hash_str(r->f[i].name) & (n - 1);

		while (s[j])
			j = (j + 1) & (n - 1);
		s[j] = (uint32_t)i + 1;
	}
	free(r->slots);
	r->slots = s;
	r->n_slots = n;
	return 0;
}

/* Scratch arrays sized for every function known: 0 or -ENOMEM. */
static int grow_scratch(struct regress *r)
{
	size_t n = r->cap_f;

	if (r->cap_scratch >= n)
		return 0;
	int64_t *a = realloc(r->acc_self, n * sizeof(*a)), *c;
	if (!a)
		return -ENOMEM;
	r->acc_self = a;
	c = realloc(r->acc_cum, n * sizeof(*c));
	if (!c)
		return -ENOMEM;
	r->acc_cum = c;
	uint32_t *s = realloc(r->seen, n * sizeof(*s)), *t;
	if (!s)
		return -ENOMEM;
	r->seen = s;
	t = realloc(r->touched, n * sizeof(*t));
	if (!t)
		return -ENOMEM;
	r->touched = t;
	for (size_t i = r->cap_scratch; i < n; i++)
		r->acc_self[i] = r->acc_cum[i] = 0, r->seen[i] = 0;
	r->cap_scratch = n;
	return 0;
}

/* The index of name, added when new: >= 0, -ENOSPC past max_functions, -ENOMEM. */
static long func_index(struct regress *r, const char *name)
{
	size_t j;

	if ((r->n_f + 1) * 2 > r->n_slots && grow_slots(r))
		return -ENOMEM;
	j = hash_str(name) & (r->n_slots - 1);
	for (; r->slots[j]; j = (j + 1) & (r->n_slots - 1))
		if (!strcmp(r->f[r->slots[j] - 1].name, name))
			return (long)r->slots[j] - 1;
	if (r->n_f >= r->o.max_functions)
		return -ENOSPC;
	if (r->n_f == r->cap_f) {
		size_t cap = r->cap_f ? r->cap_f * 2 : 256;
		struct func *f = realloc(r->f, cap * sizeof(*f));

		if (!f)
			return -ENOMEM;
		r->f = f;
		r->cap_f = cap;
		if (grow_scratch(r))
			return -ENOMEM;
	}
	memset(&r->f[r->n_f], 0, sizeof(r->f[0]));
	r->f[r->n_f].name = strdup(name);
	if (!r->f[r->n_f].name)
		return -ENOMEM;
	r->slots[j] = (uint32_t)r->n_f + 1;
	return (long)r->n_f++;
}

static void touch(struct regress *r, uint32_t fi)
{
	if (!r->acc_self[fi] && !r->acc_cum[fi])
		r->touched[r->n_touched++] = fi;
}

static uint64_t hash_fns(const uint32_t *f, size_t n)
{
	uint64_t h = 0x9e3779b97f4a7c15ull ^ n;

	for (size_t i = 0; i < n; i++) {
		h = (h ^ f[i]) * 0xbf58476d1ce4e5b9ull;
		h ^= h >> 31;
	}
	return h;
}

static bool grow(void **v, size_t *cap, size_t need, size_t size)
{
	size_t cap2 = *cap ? *cap : 256;
	void *p;

	if (need <= *cap)
		return true;
	while (cap2 < need)
		cap2 *= 2;
	p = realloc(*v, cap2 * size);
	if (!p)
		return false;
	*v = p;
	*cap = cap2;
	return true;
}

static int grow_stk_slots(struct regress *r)
{
	size_t n = r->n_stk_slots ? r->n_stk_slots * 2 : 1024;
	uint32_t *sl = calloc(n, sizeof(*sl));

	if (!sl)
		return -ENOMEM;
	for (size_t i = 0; i < r->n_stk; i++) {
		size_t j = hash_fns(r->sfn + r->stk[i].off, r->stk[i].n) & (n - 1);

		while (sl[j])
			j = (j + 1) & (n - 1);
		sl[j] = (uint32_t)i + 1;
	}
	free(r->stk_slots);
	r->stk_slots = sl;
	r->n_stk_slots = n;
	return 0;
}

/*
 * The index of the stack of functions f[0..n) (leaf: f[n - 1] is its sample's leaf, not a
 * caller whose leaf was past max_functions), interned when new: >= 0 or -ENOMEM.
 */
static long stack_index(struct regress *r, const uint32_t *f, size_t n, bool leaf)
{
	size_t j;

	if ((r->n_stk + 1) * 2 > r->n_stk_slots && grow_stk_slots(r))
		return -ENOMEM;
	j = hash_fns(f, n) & (r->n_stk_slots - 1);
	for (; r->stk_slots[j]; j = (j + 1) & (r->n_stk_slots - 1)) {
		const struct stk *k = &r->stk[r->stk_slots[j] - 1];

		if (k->n == n && k->leaf == leaf && !memcmp(r->sfn + k->off, f, n * sizeof(*f)))
			return (long)r->stk_slots[j] - 1;
	}
	if (!grow((void **)&r->stk, &r->cap_stk, r->n_stk + 1, sizeof(*r->stk)) ||
	    !grow((void **)&r->sfn, &r->cap_sfn, r->n_sfn + n + 1, sizeof(*r->sfn)))
		return -ENOMEM;
	memcpy(r->sfn + r->n_sfn, f, n * sizeof(*f));
	r->stk[r->n_stk] = (struct stk){ .off = r->n_sfn, .n = (uint32_t)n, .leaf = leaf };
	r->n_sfn += n;
	r->stk_slots[j] = (uint32_t)r->n_stk + 1;
	return (long)r->n_stk++;
}

/* The open device's sum of interned stack si (for the chains), within max_stack_entries. */
static int record_stack(struct regress *r, long si, int64_t v)
{
	if (si < 0 || r->n_ds >= r->o.max_stack_entries) {
		r->st.dropped_stack_entries++;
		return 0;
	}
	if (!grow((void **)&r->ds, &r->cap_ds, r->n_ds + 1, sizeof(*r->ds)))
		return -ENOMEM;
	r->ds[r->n_ds++] = (struct dstack){ .stack = (uint32_t)si, .v = v };
	return 0;
}

/* Value v of the functions f[0..n) into the open device: the leaf's self, each one's cum once. */
static void accumulate(struct regress *r, const uint32_t *f, size_t n, bool leaf, int64_t v)
{
	if (!++r->gen) { /* wrapped: forget every mark */
		memset(r->seen, 0, r->cap_scratch * sizeof(*r->seen));
		r->gen = 1;
	}
	for (size_t i = 0; i < n; i++) {
		uint32_t fi = f[i];
		bool is_leaf = leaf && i + 1 == n;

		touch(r, fi);
		if (is_leaf) {
			r->acc_self[fi] += v;
			r->f[fi].leaf = true;
		}
		if (r->seen[fi] == r->gen)
			continue;
		r->seen[fi] = r->gen;
		r->acc_cum[fi] += v;
		if (!is_leaf)
			r->f[fi].caller = true;
	}
}

/*
 * The functions of the input's stack g (root first; deeper stacks keep their 256 leaf-most
 * frames: the shares that matter are there) into f[0..*n); *leaf: its leaf is among them.
 */
static int stack_functions(struct regress *r, size_t g, uint32_t *f, size_t *n, bool *leaf)
{
	const struct stack_frame *frames[256];
	size_t depth = stacks__sample(r->in, g, frames, 256);

	*n = 0;
	*leaf = false;
	for (size_t i = 0; i < depth; i++) {
		long fi = func_index(r, frames[i]->name);

		if (fi == -ENOSPC) {
			r->st.dropped_functions++;
			continue;
		}
		if (fi < 0)
			return (int)fi;
		f[(*n)++] = (uint32_t)fi;
		*leaf = i + 1 == depth;
	}
	return 0;
}

/*
 * Value v (> 0) of the input's stack g into the open device. Its functions are named once
 * per input (interned: in_sid); past max_stack_entries a new stack is not interned, named
 * again each time and left out of the chains.
 */
static int add_stack(struct regress *r, size_t g, int64_t v)
{
	uint32_t f[256];
	long si = r->in_sid[g];
	size_t n;
	bool leaf;
	int ret;

	r->cur_total += v;
	if (si >= 0) {
		const struct stk *k = &r->stk[si];

		accumulate(r, r->sfn + k->off, k->n, k->leaf, v);
		return record_stack(r, si, v);
	}
	ret = stack_functions(r, g, f, &n, &leaf);
	if (ret)
		return ret;
	if (r->n_ds < r->o.max_stack_entries) {
		si = stack_index(r, f, n, leaf);
		if (si < 0)
			return (int)si;
		r->in_sid[g] = si;
	}
	accumulate(r, f, n, leaf, v);
	return record_stack(r, si, v);
}

static int push_entry(struct func *f, uint32_t dev, int64_t self, int64_t cum)
{
	if (f->n == f->cap) {
		size_t cap = f->cap ? f->cap * 2 : 8;
		struct entry *e = realloc(f->e, cap * sizeof(*e));

		if (!e)
			return -ENOMEM;
		f->e = e;
		f->cap = cap;
	}
	f->e[f->n++] = (struct entry){ .dev = dev, .self = self, .cum = cum };
	return 0;
}

static int add_dev_slot(struct regress *r, enum regress_side side, int64_t total)
{
	if (r->n_dev == r->cap_dev) {
		size_t cap = r->cap_dev ? r->cap_dev * 2 : 64;
		uint8_t *s = realloc(r->side, cap);

		if (!s)
			return -ENOMEM;
		r->side = s;
		int64_t *t = realloc(r->total, cap * sizeof(*t));
		if (!t)
			return -ENOMEM;
		r->total = t;
		uint32_t *x = realloc(r->side_index, cap * sizeof(*x));
		if (!x)
			return -ENOMEM;
		r->side_index = x;
		size_t *d = realloc(r->ds_start, (cap + 1) * sizeof(*d));
		if (!d)
			return -ENOMEM;
		r->ds_start = d;
		r->cap_dev = cap;
	}
	r->ds_start[r->n_dev] = r->open_ds;
	r->side[r->n_dev] = (uint8_t)side;
	r->total[r->n_dev] = total;
	r->side_index[r->n_dev] = (uint32_t)r->st.devices[side]++;
	r->n_dev++;
	return 0;
}

/* Moves the scratch of the device being added into the functions' entries. */
static int flush_device(struct regress *r, enum regress_side side, int64_t total)
{
	int ret = total > 0 ? add_dev_slot(r, side, total) : 0;

	if (total <= 0)
		r->st.empty_devices++;
	for (size_t i = 0; i < r->n_touched; i++) {
		uint32_t fi = r->touched[i];

		if (!ret && total > 0 && (r->acc_self[fi] || r->acc_cum[fi]))
			ret = push_entry(&r->f[fi], (uint32_t)r->n_dev - 1, r->acc_self[fi],
					 r->acc_cum[fi]);
		r->acc_self[fi] = r->acc_cum[fi] = 0;
	}
	r->n_touched = 0;
	if (total <= 0 || ret)
		r->n_ds = r->open_ds; /* an empty device's sums go with it */
	r->open_ds = r->n_ds;
	return ret;
}


/* ---- the input: stacks, and each device's rows of them ---------------------------------- */

static uint64_t hash_locs(const struct pprof_sample *smp)
{
	uint64_t h = 0x9e3779b97f4a7c15ull ^ smp->n_locations;

	for (size_t i = 0; i < smp->n_locations; i++) {
		h = (h ^ smp->location_ids[i]) * 0xbf58476d1ce4e5b9ull;
		h ^= h >> 31;
	}
	return h;
}

static bool same_locs(const struct pprof_sample *a, const struct pprof_sample *b)
{
	return a->n_locations == b->n_locations &&
	       (!a->n_locations || !memcmp(a->location_ids, b->location_ids,
					   a->n_locations * sizeof(*a->location_ids)));
}

/* in_stack[i]: the first sample of p with sample i's locations (stacks__unique's stacks). */
static int group_samples(struct regress *r, const struct pprof_profile *p)
{
	size_t cap = 16, *slot;

	while (cap < 2 * p->n_samples)
		cap *= 2;
	slot = calloc(cap, sizeof(*slot));
	if (!slot)
		return -ENOMEM;
	for (size_t i = 0; i < p->n_samples; i++) {
		size_t j = hash_locs(&p->samples[i]) & (cap - 1);

		while (slot[j] && !same_locs(&p->samples[slot[j] - 1], &p->samples[i]))
			j = (j + 1) & (cap - 1);
		if (!slot[j])
			slot[j] = i + 1;
		r->in_stack[i] = slot[j] - 1;
	}
	free(slot);
	return 0;
}

/* The input's arrays for a stacks profile of n samples: 0 or -ENOMEM. */
static int grow_input(struct regress *r, size_t n)
{
	void **v[] = { (void **)&r->in_stack, (void **)&r->in_sid, (void **)&r->in_sum,
		       (void **)&r->in_mark, (void **)&r->in_order };
	const size_t size[] = { sizeof(*r->in_stack), sizeof(*r->in_sid), sizeof(*r->in_sum),
				sizeof(*r->in_mark), sizeof(*r->in_order) };

	if (n <= r->in_cap)
		return 0;
	for (size_t k = 0; k < sizeof(v) / sizeof(v[0]); k++) {
		void *p = realloc(*v[k], n * size[k]);

		if (!p)
			return -ENOMEM;
		*v[k] = p;
	}
	r->in_cap = n;
	return 0;
}

int regress__stacks(struct regress *r, const struct pprof_profile *p, char *err, size_t errlen)
{
	int ret;

	stacks__free(r->in);
	r->in = NULL;
	r->in_p = NULL;
	if (!p)
		return 0;
	ret = grow_input(r, p->n_samples + 1);
	if (!ret)
		ret = group_samples(r, p);
	if (ret) {
		snprintf(err, errlen, "out of memory");
		return ret;
	}
	r->in = stacks__new(p, err, errlen);
	if (!r->in)
		return -EINVAL;
	r->in_p = p;
	for (size_t i = 0; i < p->n_samples; i++)
		r->in_sid[i] = -1, r->in_mark[i] = 0;
	r->in_gen = 0;
	return 0;
}

int regress__add_rows(struct regress *r, const struct regress_row *rows, size_t n, char *err,
		      size_t errlen)
{
	size_t n_order = 0;
	int ret = 0;

	if (!r->in) {
		snprintf(err, errlen, "rows without stacks");
		return -EINVAL;
	}
	if (!++r->in_gen) { /* wrapped: forget every mark */
		memset(r->in_mark, 0, r->in_p->n_samples * sizeof(*r->in_mark));
		r->in_gen = 1;
	}
	for (size_t i = 0; i < n; i++) { /* summed by stack, as stacks__unique() sums */
		size_t g;

		if (rows[i].sample >= r->in_p->n_samples) {
			snprintf(err, errlen, "a row of sample %zu: the stacks have %zu",
				 rows[i].sample, r->in_p->n_samples);
			return -EINVAL;
		}
		if (!rows[i].value)
			continue;
		g = r->in_stack[rows[i].sample];
		if (r->in_mark[g] != r->in_gen) {
			r->in_mark[g] = r->in_gen;
			r->in_sum[g] = 0;
			r->in_order[n_order++] = g;
		}
		r->in_sum[g] += rows[i].value;
	}
	for (size_t i = 0; !ret && i < n_order; i++)
		if (r->in_sum[r->in_order[i]] > 0)
			ret = add_stack(r, r->in_order[i], r->in_sum[r->in_order[i]]);
	if (ret == -ENOMEM)
		snprintf(err, errlen, "out of memory");
	return ret;
}

size_t regress__profile_mem(const struct pprof_profile *p)
{
	struct regress *r = NULL;
	size_t per = sizeof(*r->in_stack) + sizeof(*r->in_sid) + sizeof(*r->in_sum) +
		     sizeof(*r->in_mark) + sizeof(*r->in_order) + sizeof(*r->rows) +
		     4 * sizeof(size_t); /* group_samples' slots: a power of two >= 2n */

	return (p->n_samples + 1) * per + 16 * sizeof(size_t);
}

/* The input's arrays and rows freed: a ring side's profiles come one at a time, of any size. */
static void input_free(struct regress *r)
{
	free(r->in_stack);
	free(r->in_sid);
	free(r->in_sum);
	free(r->in_mark);
	free(r->in_order);
	free(r->rows);
	r->in_stack = NULL;
	r->in_sid = NULL;
	r->in_sum = NULL;
	r->in_mark = NULL;
	r->in_order = NULL;
	r->rows = NULL;
	r->in_cap = r->rows_cap = 0;
}

int regress__add_profile(struct regress *r, const struct pprof_profile *p, int vi, char *err,
			 size_t errlen)
{
	int ret = regress__stacks(r, p, err, errlen);

	if (!ret && !grow((void **)&r->rows, &r->rows_cap, p->n_samples + 1, sizeof(*r->rows))) {
		snprintf(err, errlen, "out of memory");
		ret = -ENOMEM;
	}
	for (size_t i = 0; !ret && i < p->n_samples; i++)
		r->rows[i] = (struct regress_row){ .sample = i, .value = p->samples[i].values[vi] };
	if (!ret)
		ret = regress__add_rows(r, r->rows, p->n_samples, err, errlen);
	regress__stacks(r, NULL, err, errlen);
	input_free(r);
	return ret;
}

int regress__end_device(struct regress *r, enum regress_side side)
{
	int ret = flush_device(r, side, r->cur_total);

	r->cur_total = 0;
	return ret;
}

int regress__add_device(struct regress *r, enum regress_side side, const struct pprof_profile *p,
			int vi, char *err, size_t errlen)
{
	int ret = regress__add_profile(r, p, vi, err, errlen);

	if (ret) {
		regress__drop_device(r);
		return ret;
	}
	return regress__end_device(r, side);
}

void regress__drop_device(struct regress *r)
{
	r->cur_total = 0;
	for (size_t i = 0; i < r->n_touched; i++)
		r->acc_self[r->touched[i]] = r->acc_cum[r->touched[i]] = 0;
	r->n_touched = 0;
	r->n_ds = r->open_ds;
}

void regress__stats(const struct regress *r, struct regress_stats *st)
{
	*st = r->st;
	st->functions = r->n_f;
}

/* ---- statistics ---------------------------------------------------------------------------- */

struct ranked {
	double v;
	int group; /* 0 = a, 1 = b */
};

static int cmp_ranked(const void *x, const void *y)
{
	double a = ((const struct ranked *)x)->v, b = ((const struct ranked *)y)->v;

	return (a > b) - (a < b);
}

double regress__mann_whitney(const double *a, size_t na, const double *b, size_t nb, double *u,
			     double *z)
{
	size_t n = na + nb, i = 0;
	struct ranked *x = malloc(n * sizeof(*x));
	double rb = 0, ties = 0, mu, var, ub, umax, zz;

	*u = *z = 0;
	if (!x || !na || !nb) {
		free(x);
		return 1;
	}
	for (size_t k = 0; k < na; k++)
		x[k] = (struct ranked){ a[k], 0 };
	for (size_t k = 0; k < nb; k++)
		x[na + k] = (struct ranked){ b[k], 1 };
	qsort(x, n, sizeof(*x), cmp_ranked);
	while (i < n) { /* a run of ties gets the average of its ranks */
		size_t j = i;
		double t, rank;

		while (j < n && x[j].v == x[i].v)
			j++;
		t = (double)(j - i);
		rank = ((double)i + 1 + (double)j) / 2;
		for (size_t k = i; k < j; k++)
			if (x[k].group)
				rb += rank;
		ties += t * t * t - t;
		i = j;
	}
	free(x);
	ub = rb - (double)nb * ((double)nb + 1) / 2;
	mu = (double)na * (double)nb / 2;
	var = (double)na * (double)nb / 12 *
	      (((double)n + 1) - ties / ((double)n * ((double)n - 1)));
	*u = ub;
	if (var <= 0)
		return 1;
	/* scipy's two-sided asymptotic p: the larger U, a continuity correction of 1/2. */
	umax = ub > (double)na * (double)nb - ub ? ub : (double)na * (double)nb - ub;
	zz = (umax - mu - 0.5) / sqrt(var);
	*z = ub >= mu ? zz : -zz;
	zz = erfc(zz / sqrt(2.0)); /* 2 * P(N > zz) */
	return zz > 1 ? 1 : zz;
}

struct pidx {
	double p;
	size_t i;
};

static int cmp_pidx(const void *x, const void *y)
{
	double a = ((const struct pidx *)x)->p, b = ((const struct pidx *)y)->p;

	return (a > b) - (a < b);
}

int regress__bh(const double *p, size_t n, double *adj)
{
	struct pidx *s = malloc((n ? n : 1) * sizeof(*s));
	double run = 1;

	if (!s)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		s[i] = (struct pidx){ p[i], i };
	qsort(s, n, sizeof(*s), cmp_pidx);
	for (size_t k = n; k-- > 0;) { /* from the largest p down: running minimum of p*n/rank */
		double v = s[k].p * (double)n / (double)(k + 1);

		if (v < run)
			run = v;
		adj[s[k].i] = run;
	}
	free(s);
	return 0;
}

/* xorshift64*: the bootstrap's reproducible stream. */
static uint64_t rnd(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ull;
}

static double resampled_mean(const double *v, size_t n, uint64_t *seed)
{
	double sum = 0;

	for (size_t i = 0; i < n; i++)
		sum += v[rnd(seed) % n];
	return sum / (double)n;
}

static int cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;

	return (a > b) - (a < b);
}

/* The percentile bootstrap's 95 % interval of mean(b) - mean(a). */
static int bootstrap(const struct regress *r, const double *a, size_t na, const double *b,
		     size_t nb, size_t salt, double *lo, double *hi)
{
	unsigned nboot = r->o.bootstrap;
	double *d = malloc(nboot * sizeof(*d));
	uint64_t seed = r->o.seed ^ (salt * 0x2545f4914f6cdd1dull);

	if (!d)
		return -ENOMEM;
	if (!seed)
		seed = 1;
	for (unsigned k = 0; k < nboot; k++)
		d[k] = resampled_mean(b, nb, &seed) - resampled_mean(a, na, &seed);
	qsort(d, nboot, sizeof(*d), cmp_double);
	*lo = d[(size_t)(0.025 * (nboot - 1) + 0.5)];
	*hi = d[(size_t)(0.975 * (nboot - 1) + 0.5)];
	free(d);
	return 0;
}

/* ---- the comparison ------------------------------------------------------------------------ */

/* Fills the per-device shares of f (metric m) into a (base) and b (candidate), zeros first. */
static void shares(const struct regress *r, const struct func *f, enum regress_metric m,
		   double *a, double *b, size_t *present)
{
	memset(a, 0, r->st.devices[0] * sizeof(*a));
	memset(b, 0, r->st.devices[1] * sizeof(*b));
	present[0] = present[1] = 0;
	for (size_t k = 0; k < f->n; k++) {
		const struct entry *e = &f->e[k];
		int64_t v = m == REGRESS_SELF ? e->self : e->cum;
		double *dst = r->side[e->dev] ? b : a;

		if (!v)
			continue;
		dst[r->side_index[e->dev]] = (double)v / (double)r->total[e->dev];
		present[r->side[e->dev]]++;
	}
}

static double mean(const double *v, size_t n)
{
	double s = 0;

	for (size_t i = 0; i < n; i++)
		s += v[i];
	return n ? s / (double)n : 0;
}

void regress__each_share(struct regress *r, regress_share_fn cb, void *ctx)
{
	size_t na = r->st.devices[0], nb = r->st.devices[1], present[2];
	double *a = malloc((na + 1) * sizeof(*a)), *b = malloc((nb + 1) * sizeof(*b));

	for (size_t fi = 0; a && b && fi < r->n_f; fi++) {
		for (int m = REGRESS_SELF; m <= REGRESS_CUM; m++) {
			if (m == REGRESS_CUM ? !r->f[fi].caller : !r->f[fi].leaf)
				continue;
			shares(r, &r->f[fi], (enum regress_metric)m, a, b, present);
			for (size_t i = 0; i < na; i++)
				cb(ctx, r->f[fi].name, (enum regress_metric)m, REGRESS_BASE, i, a[i]);
			for (size_t i = 0; i < nb; i++)
				cb(ctx, r->f[fi].name, (enum regress_metric)m, REGRESS_CAND, i, b[i]);
		}
	}
	free(a);
	free(b);
}

/* One test: the effect and p of function fi, metric m, into t. */
static void test_one(const struct regress *r, size_t fi, enum regress_metric m, double *a,
		     double *b, struct regress_finding *t)
{
	size_t na = r->st.devices[0], nb = r->st.devices[1], present[2];

	shares(r, &r->f[fi], m, a, b, present);
	*t = (struct regress_finding){
		.function = r->f[fi].name, .metric = m,
		.base_share = mean(a, na), .cand_share = mean(b, nb),
		.devices_base = na, .devices_cand = nb,
		.present_base = present[0], .present_cand = present[1],
	};
	t->rel_change = t->base_share > 0 ? (t->cand_share - t->base_share) / t->base_share
					  : INFINITY;
	t->p_value = regress__mann_whitney(a, na, b, nb, &t->u, &t->z);
}

static enum regress_verdict verdict(const struct regress *r, const struct regress_finding *t)
{
	if (!(t->p_adjusted < r->o.alpha))
		return REGRESS_NONE;
	if (!t->present_base)
		return REGRESS_NEW;
	if (!t->present_cand)
		return REGRESS_GONE;
	if (fabs(t->rel_change) < r->o.min_change)
		return REGRESS_NONE;
	return t->rel_change > 0 ? REGRESS_REGRESSION : REGRESS_IMPROVEMENT;
}

static int cmp_finding(const void *x, const void *y)
{
	const struct regress_finding *a = x, *b = y;
	double ca = fabs(a->rel_change), cb = fabs(b->rel_change);

	if (a->p_adjusted != b->p_adjusted)
		return a->p_adjusted < b->p_adjusted ? -1 : 1;
	if (ca != cb)
		return ca > cb ? -1 : 1;
	return strcmp(a->function, b->function);
}

/* Runs every test into t (*n of them). */
static int run_tests(const struct regress *r, struct regress_finding *t, size_t *n, double *a,
		     double *b)
{
	double *p, *adj;
	size_t k = 0;

	for (size_t fi = 0; fi < r->n_f; fi++) {
		if (r->f[fi].leaf)
			test_one(r, fi, REGRESS_SELF, a, b, &t[k++]);
		if (r->f[fi].caller)
			test_one(r, fi, REGRESS_CUM, a, b, &t[k++]);
	}
	*n = k;
	p = malloc((k + 1) * sizeof(*p));
	adj = malloc((k + 1) * sizeof(*adj));
	if (!p || !adj) {
		free(p);
		free(adj);
		return -ENOMEM;
	}
	for (size_t i = 0; i < k; i++)
		p[i] = t[i].p_value;
	if (regress__bh(p, k, adj)) {
		free(p);
		free(adj);
		return -ENOMEM;
	}
	for (size_t i = 0; i < k; i++)
		t[i].p_adjusted = adj[i];
	free(p);
	free(adj);
	return 0;
}

/* ---- the stacks that changed --------------------------------------------------------------- */

struct chain_acc {
	uint32_t fn[REGRESS_CHAIN_CALLERS];
	uint32_t n;
	bool cut;
	double sum[2];		/* per side: the devices' shares summed */
};

/* The chain of fi in interned stack k for metric m into c: false when fi is not there. */
static bool chain_in(const struct regress *r, size_t k, uint32_t fi, enum regress_metric m,
		     struct chain_acc *c)
{
	const uint32_t *f = r->sfn + r->stk[k].off;
	size_t n = r->stk[k].n, pos = 0, from;

	if (!n)
		return false;
	if (m == REGRESS_SELF) {
		if (f[n - 1] != fi)
			return false;
		pos = n - 1;
	} else {
		while (pos < n && f[pos] != fi) /* the outermost call: cumulative counts it */
			pos++;
		if (pos == n)
			return false;
	}
	from = pos > REGRESS_CHAIN_CALLERS ? pos - REGRESS_CHAIN_CALLERS : 0;
	*c = (struct chain_acc){ .n = (uint32_t)(pos - from), .cut = from > 0 };
	memcpy(c->fn, f + from, c->n * sizeof(*f));
	return true;
}

/* Index of chain c among v[0..*n), appended when new: >= 0, or -1 out of memory. */
static long chain_find(struct chain_acc **v, size_t *n, size_t *cap, const struct chain_acc *c)
{
	for (size_t i = 0; i < *n; i++)
		if ((*v)[i].n == c->n && (*v)[i].cut == c->cut &&
		    !memcmp((*v)[i].fn, c->fn, c->n * sizeof(c->fn[0])))
			return (long)i;
	if (!grow((void **)v, cap, *n + 1, sizeof(**v)))
		return -1;
	(*v)[*n] = *c;
	return (long)(*n)++;
}

static double side_mean(const struct regress *r, const struct chain_acc *c, int side)
{
	return r->st.devices[side] ? c->sum[side] / (double)r->st.devices[side] : 0;
}

static double chain_move(const struct regress *r, const struct chain_acc *c)
{
	return fabs(side_mean(r, c, 1) - side_mean(r, c, 0));
}

/* The REGRESS_MAX_CHAINS largest moves of v[0..n) into t->chains. */
static void chains_pick(const struct regress *r, struct chain_acc *v, size_t n,
			struct regress_finding *t)
{
	t->n_chains = 0;
	while (t->n_chains < REGRESS_MAX_CHAINS) {
		size_t best = n;
		struct regress_chain *o;

		for (size_t i = 0; i < n; i++)
			if (v[i].n != UINT32_MAX &&
			    (best == n || chain_move(r, &v[i]) > chain_move(r, &v[best])))
				best = i;
		if (best == n)
			break;
		o = &t->chains[t->n_chains++];
		*o = (struct regress_chain){ .n_callers = v[best].n, .cut = v[best].cut,
			.base_share = side_mean(r, &v[best], 0),
			.cand_share = side_mean(r, &v[best], 1) };
		for (size_t j = 0; j < v[best].n; j++)
			o->callers[j] = r->f[v[best].fn[j]].name;
		v[best].n = UINT32_MAX; /* taken */
	}
}

/*
 * Every device's values by chain (cid: a stack's chain, < 0 none) summed as integers, then
 * added to v as a share of the device's total: the same sums however the device's profiles
 * came (one merged, or one by one), to the last bit.
 */
static int chains_sum(const struct regress *r, const long *cid, struct chain_acc *v, size_t n)
{
	int64_t *acc = calloc(n + 1, sizeof(*acc));
	size_t *touched = malloc((n + 1) * sizeof(*touched)), nt = 0;

	if (!acc || !touched) {
		free(acc);
		free(touched);
		return -ENOMEM;
	}
	for (size_t d = 0; d < r->n_dev; d++) {
		size_t end = d + 1 < r->n_dev ? r->ds_start[d + 1] : r->n_ds;

		for (size_t e = r->ds_start[d]; e < end; e++) {
			long c = cid[r->ds[e].stack];

			if (c < 0)
				continue;
			if (!acc[c])
				touched[nt++] = (size_t)c;
			acc[c] += r->ds[e].v;
		}
		for (size_t k = 0; k < nt; k++) {
			v[touched[k]].sum[r->side[d]] += (double)acc[touched[k]] / (double)r->total[d];
			acc[touched[k]] = 0;
		}
		nt = 0;
	}
	free(acc);
	free(touched);
	return 0;
}

/*
 * The chains of finding t (function fi): each interned stack's chain of fi, then every
 * device's sums by chain as shares of its total, their means per side. O(stacks + sums).
 */
static int chains(const struct regress *r, size_t fi, struct regress_finding *t)
{
	long *cid = malloc((r->n_stk + 1) * sizeof(*cid));
	struct chain_acc *v = NULL, c;
	size_t n = 0, cap = 0;

	if (!cid)
		return -ENOMEM;
	for (size_t k = 0; k < r->n_stk; k++) {
		cid[k] = chain_in(r, k, (uint32_t)fi, t->metric, &c) ? chain_find(&v, &n, &cap, &c)
								      : -2;
		if (cid[k] == -1) {
			free(cid);
			free(v);
			return -ENOMEM;
		}
	}
	if (chains_sum(r, cid, v, n)) {
		free(cid);
		free(v);
		return -ENOMEM;
	}
	chains_pick(r, v, n, t);
	free(cid);
	free(v);
	return 0;
}

/* Keeps the findings (all: every test), with their intervals. */
static int keep(struct regress *r, struct regress_finding *t, size_t n, bool all, double *a,
		double *b, size_t *kept)
{
	size_t k = 0, na = r->st.devices[0], nb = r->st.devices[1];

	for (size_t i = 0; i < n; i++) {
		t[i].verdict = verdict(r, &t[i]);
		if (t[i].verdict == REGRESS_NONE && !all)
			continue;
		t[i].diff_lo = t[i].diff_hi = NAN;
		if (t[i].verdict != REGRESS_NONE) {
			size_t present[2], fi;
			long idx = func_index(r, t[i].function); /* known: a lookup */

			if (idx < 0)
				return (int)idx;
			fi = (size_t)idx;
			shares(r, &r->f[fi], t[i].metric, a, b, present);
			if (bootstrap(r, a, na, b, nb, fi * 2 + t[i].metric, &t[i].diff_lo,
				      &t[i].diff_hi) || chains(r, fi, &t[i]))
				return -ENOMEM;
		}
		t[k++] = t[i];
	}
	*kept = k;
	return 0;
}

int regress__run(struct regress *r, bool all, struct regress_finding **out, size_t *n)
{
	size_t na = r->st.devices[0], nb = r->st.devices[1], cnt = 0;
	struct regress_finding *t = malloc((2 * r->n_f + 1) * sizeof(*t));
	double *a = malloc((na + 1) * sizeof(*a)), *b = malloc((nb + 1) * sizeof(*b));
	int ret = t && a && b ? 0 : -ENOMEM;

	*out = NULL;
	*n = 0;
	if (!ret)
		ret = run_tests(r, t, &cnt, a, b);
	r->st.tests = cnt;
	if (!ret)
		ret = keep(r, t, cnt, all, a, b, &cnt);
	free(a);
	free(b);
	if (ret || !cnt) {
		free(t);
		return ret;
	}
	qsort(t, cnt, sizeof(*t), cmp_finding);
	*out = t;
	*n = cnt;
	return 0;
}

const char *regress__verdict_name(enum regress_verdict v)
{
	static const char *const names[] = { "none", "regression", "improvement", "new", "gone" };

	return (unsigned)v < sizeof(names) / sizeof(names[0]) ? names[v] : "?";
}

const char *regress__metric_name(enum regress_metric m)
{
	return m == REGRESS_CUM ? "cum" : "self";
}
