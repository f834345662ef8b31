// SPDX-License-Identifier: MIT
/* pprof/delta.c — cumulative values into deltas between profiles (pprof/delta.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pprof/delta.h"
#include "port/hash.h"

struct delta_entry {
	uint64_t key;		/* 0 = empty slot */
	int64_t v[PPROF_DELTA_MAX_TYPES];
	bool seen;		/* this profile's first sample of the key took the growth */
};

struct delta_table {
	struct delta_entry *e;
	size_t cap, n;		/* cap a power of two, n <= cap / 2 */
};

struct pprof_delta {
	size_t max;
	bool have_prev;
	int64_t prev_time;	/* time_nanos of the previous profile */
	size_t n_types;		/* of the previous profile */
	int64_t types[PPROF_DELTA_MAX_TYPES][2]; /* hashes of its type and unit names */
	struct delta_table prev;
	struct pprof_delta_stats st;
};

/* A string with its NUL, so that "ab"+"c" and "a"+"bc" differ. */
static uint64_t fnv_str(uint64_t h, const char *s)
{
	return hash_fnv64_add(h, s, strlen(s) + 1);
}

/* A sample's identity: each frame's address and function names, then its labels. */
static uint64_t sample_key(const struct pprof_profile *p, const struct pprof_sample *s)
{
	uint64_t h = HASH_FNV64_BASIS;

	for (size_t i = 0; i < s->n_locations; i++) {
		const struct pprof_location *l = &p->locations[s->location_ids[i] - 1];

		h = hash_fnv64_add(h, &l->address, sizeof(l->address));
		for (size_t j = 0; j < l->n_lines; j++) {
			uint64_t f = l->lines[j].function_id;

			if (f && f <= p->n_functions)
				h = fnv_str(h, pprof_str(p, p->functions[f - 1].name));
		}
		h = hash_fnv64_add(h, "|", 1);
	}
	for (size_t i = 0; i < s->n_labels; i++) {
		const struct pprof_label *l = &s->labels[i];

		h = fnv_str(h, pprof_str(p, l->key));
		h = fnv_str(h, pprof_str(p, l->str));
		h = hash_fnv64_add(h, &l->num, sizeof(l->num));
	}
	return h ? h : 1;
}

static struct delta_entry *table_find(struct delta_table *t, uint64_t key, bool add)
{
	size_t pos;

	if (!t->cap)
		return NULL;
	for (pos = key & (t->cap - 1); t->e[pos].key; pos = (pos + 1) & (t->cap - 1))
		if (t->e[pos].key == key)
			return &t->e[pos];
	if (!add || (t->n + 1) * 2 > t->cap)
		return NULL;
	t->e[pos].key = key;
	t->n++;
	return &t->e[pos];
}

static int table_init(struct delta_table *t, size_t samples, size_t max)
{
	size_t cap = 16;

	if (samples > max)
		samples = max;
	while (cap < 2 * samples)
		cap *= 2;
	t->e = calloc(cap, sizeof(*t->e));
	t->cap = t->e ? cap : 0;
	t->n = 0;
	return t->e ? 0 : -ENOMEM;
}

size_t pprof_delta_cumulative(const char *kind, const struct pprof_profile *p,
			      bool cumulative[PPROF_DELTA_MAX_TYPES])
{
	bool all = !strcmp(kind, "mutex") || !strcmp(kind, "block");
	bool heap = !strcmp(kind, "heap") || !strcmp(kind, "allocs");
	size_t n = 0;

	for (size_t i = 0; i < PPROF_DELTA_MAX_TYPES; i++) {
		const char *t = i < p->n_sample_type ? pprof_str(p, p->sample_type[i].type) : "";

		cumulative[i] = i < p->n_sample_type && (all || (heap && !strncmp(t, "alloc_", 6)));
		n += cumulative[i];
	}
	return n;
}

static bool same_types(const struct pprof_delta *d, const struct pprof_profile *p)
{
	if (!d->have_prev || d->n_types != p->n_sample_type)
		return false;
	for (size_t i = 0; i < d->n_types; i++)
		if (d->types[i][0] != (int64_t)fnv_str(0, pprof_str(p, p->sample_type[i].type)) ||
		    d->types[i][1] != (int64_t)fnv_str(0, pprof_str(p, p->sample_type[i].unit)))
			return false;
	return true;
}

static void remember_types(struct pprof_delta *d, const struct pprof_profile *p)
{
	d->n_types = p->n_sample_type;
	for (size_t i = 0; i < d->n_types; i++) {
		d->types[i][0] = (int64_t)fnv_str(0, pprof_str(p, p->sample_type[i].type));
		d->types[i][1] = (int64_t)fnv_str(0, pprof_str(p, p->sample_type[i].unit));
	}
}

/* The cumulative totals of p per key into t (samples over the bound are marked key 0). */
static void sum_into(struct pprof_delta *d, struct delta_table *t, const struct pprof_profile *p,
		     const bool *cum, uint64_t *keys)
{
	for (size_t i = 0; i < p->n_samples; i++) {
		struct delta_entry *e;

		keys[i] = sample_key(p, &p->samples[i]);
		e = table_find(t, keys[i], t->n < d->max);
		if (!e) {
			keys[i] = 0;
			d->st.over_bound++;
			continue;
		}
		for (size_t k = 0; k < p->n_sample_type; k++)
			if (cum[k])
				e->v[k] += p->samples[i].values[k];
	}
}

/* p's cumulative values become the growth of their key, carried by its first sample. */
static void to_growth(struct pprof_delta *d, struct delta_table *cur, struct pprof_profile *p,
		      const bool *cum, const uint64_t *keys)
{
	size_t out = 0;

	for (size_t i = 0; i < p->n_samples; i++) {
		struct pprof_sample *s = &p->samples[i];
		struct delta_entry *e = keys[i] ? table_find(cur, keys[i], false) : NULL;
		struct delta_entry *old = keys[i] ? table_find(&d->prev, keys[i], false) : NULL;
		bool any = false;

		for (size_t k = 0; k < p->n_sample_type; k++) {
			if (cum[k]) {
				int64_t was = old ? old->v[k] : 0, now = e ? e->v[k] : 0;

				if (now < was)
					d->st.resets++;
				s->values[k] = !e || e->seen ? 0 : now < was ? now : now - was;
			}
			any |= s->values[k] != 0;
		}
		if (e)
			e->seen = true;
		if (any)
			p->samples[out++] = *s;
		else
			d->st.zero_dropped++;
	}
	p->n_samples = out;
}

int pprof_delta__apply(struct pprof_delta *d, struct pprof_profile *p,
		       const bool cumulative[PPROF_DELTA_MAX_TYPES])
{
	struct delta_table cur;
	uint64_t *keys;
	bool first = !same_types(d, p);
	int ret = first && d->have_prev ? -EINVAL : first ? 1 : 0;

	if (p->n_sample_type > PPROF_DELTA_MAX_TYPES)
		return -EINVAL;
	keys = calloc(p->n_samples ? p->n_samples : 1, sizeof(*keys));
	if (!keys || table_init(&cur, p->n_samples, d->max)) {
		free(keys);
		return -ENOMEM;
	}
	d->st.profiles++;
	sum_into(d, &cur, p, cumulative, keys);
	if (!first) {
		to_growth(d, &cur, p, cumulative, keys);
		if (p->time_nanos > d->prev_time && d->prev_time)
			p->duration_nanos = p->time_nanos - d->prev_time;
	}
	for (size_t i = 0; i < cur.cap; i++)
		cur.e[i].seen = false;
	free(d->prev.e);
	d->prev = cur;
	d->have_prev = true;
	remember_types(d, p);
	d->prev_time = p->time_nanos;
	free(keys);
	return ret;
}

struct pprof_delta *pprof_delta__new(size_t max_samples)
{
	struct pprof_delta *d = calloc(1, sizeof(*d));

	if (d)
		d->max = max_samples ? max_samples : 4096;
	return d;
}

void pprof_delta__free(struct pprof_delta *d)
{
	if (!d)
		return;
	free(d->prev.e);
	free(d);
}

void pprof_delta__stats(const struct pprof_delta *d, struct pprof_delta_stats *st)
{
	*st = d->st;
}

/*
 * The first profile of a delta is its baseline: its cumulative values (a heap's alloc_*) have
 * no growth yet and become 0, but what is a snapshot (a heap's inuse_*) holds now and is sent.
 * Samples left all zero are dropped. Returns 0 when something is left, 1 when nothing is (a
 * mutex or block profile, all cumulative).
 */
static int snapshot_only(struct pprof_profile *p, const bool *cum)
{
	size_t out = 0;

	for (size_t i = 0; i < p->n_samples; i++) {
		bool any = false;

		for (size_t k = 0; k < p->n_sample_type; k++) {
			if (cum[k])
				p->samples[i].values[k] = 0;
			any |= p->samples[i].values[k] != 0;
		}
		if (any)
			p->samples[out++] = p->samples[i];
	}
	p->n_samples = out;
	return out ? 0 : 1;
}

int pprof_delta_scraped(struct pprof_delta *d, const char *kind, const void *body, size_t len,
			size_t max_input, struct pprof_buf *out, char *err, size_t errlen)
{
	struct pprof_read_limits lim = {.max_input = max_input};
	bool cum[PPROF_DELTA_MAX_TYPES];
	struct pprof_profile *p = NULL;
	int ret = pprof_read(body, len, &lim, &p, err, errlen);

	if (ret)
		return ret;
	if (!p->n_samples) { /* an idle service's CPU profile: nothing a store would take */
		pprof_profile__free(p);
		return 2;
	}
	if (d && pprof_delta_cumulative(kind, p, cum)) {
		ret = pprof_delta__apply(d, p, cum);
		if (ret == 1 || ret == -EINVAL) /* a (new) baseline: its snapshot part still goes */
			ret = snapshot_only(p, cum);
		if (ret || !p->n_samples) { /* 1: a baseline with no snapshot; else no growth */
			pprof_profile__free(p);
			return ret == -ENOMEM ? ret : ret ? 1 : 2;
		}
	} else if (pprof_is_gzip(body, len)) {
		pprof_profile__free(p);
		out->data = malloc(len);
		if (!out->data)
			return -ENOMEM;
		memcpy(out->data, body, len);
		out->len = len;
		return 0;
	}
	ret = pprof_write_profile(p, NULL, pprof_buf_write, out);
	pprof_profile__free(p);
	return ret;
}

const char *const pprof_kind_names[PPROF_KIND__N] = {"cpu", "heap", "goroutine", "mutex", "block"};
const char *const pprof_kind_paths[PPROF_KIND__N] = {"profile", "heap", "goroutine", "mutex",
						     "block"};

int pprof_kinds_parse(const char *list, unsigned *kinds, char *err, size_t errlen)
{
	char buf[128], *save = NULL;

	snprintf(buf, sizeof(buf), "%s", list);
	*kinds = 0;
	for (char *w = strtok_r(buf, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
		int k;

		for (k = 0; k < PPROF_KIND__N && strcmp(w, pprof_kind_names[k]); k++)
			;
		if (k == PPROF_KIND__N) {
			snprintf(err, errlen, "--scrape-types: '%s' is not cpu, heap, goroutine, "
				 "mutex or block", w);
			return -EINVAL;
		}
		*kinds |= 1u << k;
	}
	if (!*kinds) {
		snprintf(err, errlen, "--scrape-types: empty");
		return -EINVAL;
	}
	return 0;
}
