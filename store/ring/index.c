// SPDX-License-Identifier: MIT
/*
 * store/ring/index.c — the in-memory index (see index.h).
 *
 * Entries live in a circular array in seq order (binary search by seq). Strings and whole label
 * sets are interned with reference counts, so memory follows what is indexed now, not what was
 * ever seen. The idempotency keys are 64-bit hashes in a linear-probing table of 32-bit entry
 * positions (backward-shift deletion, no tombstones): 8 bytes per entry at load <= 1/2. Two
 * different keys collide with probability about n^2 / 2^65 (3e-8 for a million keys).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store/ring/index.h"
#include "port/hash.h"

struct istr {
	struct istr *next;	/* hash chain */
	uint64_t hash;
	uint32_t refs;
	char s[];
};

struct lset {
	struct lset *next;
	uint64_t hash;
	uint32_t refs;
	uint32_t n;
	struct istr **kv;	/* 2n interned strings, sorted by key */
	struct record_label labels[]; /* views of kv for store_entry */
};

struct ix_entry {
	uint64_t seq, time_ns, key_hash;
	int64_t value;
	uint32_t size;
	uint32_t weight_milli;	/* record_meta's: 0 or 1000 when none */
	uint16_t flags;
	struct istr *service, *type, *device;
	struct lset *labels;
};

struct htab {
	void **b;	/* chains of istr or lset (next is the first member of both) */
	size_t nb, n;
};

struct index {
	struct ix_entry *e;
	size_t cap, head, n, max;	/* entry i (0 = oldest) is e[(head + i) % cap] */
	uint32_t *keys;			/* positions+1 into e[], 0 = empty */
	size_t nkeys;			/* power of two */
	struct htab strs, sets;
	size_t str_bytes, set_bytes;
	uint64_t dropped, evicted;
};

/* ---- hashing -------------------------------------------------------------------------------- */


static uint64_t hash_str(const char *s)
{
	return hash_mix64(hash_fnv64_str(s));
}

static int htab__grow(struct htab *t)
{
	size_t nb = t->nb ? t->nb * 2 : 256;
	void **b = calloc(nb, sizeof(*b));

	if (!b)
		return -ENOMEM;
	for (size_t i = 0; i < t->nb; i++) {
		void *p = t->b[i];

		while (p) {
			void *next = *(void **)p;
			uint64_t h = ((struct istr *)p)->hash;

			*(void **)p = b[h & (nb - 1)];
			b[h & (nb - 1)] = p;
			p = next;
		}
	}
	free(t->b);
	t->b = b;
	t->nb = nb;
	return 0;
}

static void htab__unlink(struct htab *t, void *node, uint64_t hash)
{
	void **pp = &t->b[hash & (t->nb - 1)];

	while (*pp != node)
		pp = (void **)*pp;
	*pp = *(void **)node;
	t->n--;
}

/* ---- interned strings and label sets ------------------------------------------------------ */

static struct istr *istr__get(struct index *ix, const char *s)
{
	uint64_t h;
	struct istr *p;
	size_t len;

	s = s ? s : "";
	h = hash_str(s);
	if (ix->strs.nb)
		for (p = ix->strs.b[h & (ix->strs.nb - 1)]; p; p = p->next)
			if (p->hash == h && !strcmp(p->s, s)) {
				p->refs++;
				return p;
			}
	if (ix->strs.n >= ix->strs.nb && htab__grow(&ix->strs))
		return NULL;
	len = strlen(s);
	p = malloc(sizeof(*p) + len + 1);
	if (!p)
		return NULL;
	p->hash = h;
	p->refs = 1;
	memcpy(p->s, s, len + 1);
	p->next = ix->strs.b[h & (ix->strs.nb - 1)];
	ix->strs.b[h & (ix->strs.nb - 1)] = p;
	ix->strs.n++;
	ix->str_bytes += sizeof(*p) + len + 1;
	return p;
}

static void istr__put(struct index *ix, struct istr *p)
{
	if (!p || --p->refs)
		return;
	htab__unlink(&ix->strs, p, p->hash);
	ix->str_bytes -= sizeof(*p) + strlen(p->s) + 1;
	free(p);
}

static void lset__free(struct index *ix, struct lset *ls)
{
	for (uint32_t i = 0; i < 2 * ls->n; i++)
		istr__put(ix, ls->kv[i]);
	free(ls);
}

static int label_cmp(const void *a, const void *b)
{
	const struct record_label *x = a, *y = b;

	return strcmp(x->key, y->key);
}

static struct lset *lset__get(struct index *ix, const struct record_label *labels, size_t n)
{
	struct record_label sorted[RINGFILE_MAX_LABELS];
	uint64_t h = 0x9e3779b97f4a7c15ull;
	struct lset *ls;
	size_t bytes;

	if (n > RINGFILE_MAX_LABELS)
		return NULL;
	if (n) {
		memcpy(sorted, labels, n * sizeof(*sorted));
		qsort(sorted, n, sizeof(*sorted), label_cmp);
	}
	for (size_t i = 0; i < n; i++)
		h = hash_mix64(h ^ hash_str(sorted[i].key)) ^ hash_str(sorted[i].value ? sorted[i].value
										: "");
	h = hash_mix64(h + n);
	if (ix->sets.nb)
		for (ls = ix->sets.b[h & (ix->sets.nb - 1)]; ls; ls = ls->next) {
			size_t i;

			if (ls->hash != h || ls->n != n)
				continue;
			for (i = 0; i < n; i++)
				if (strcmp(ls->labels[i].key, sorted[i].key) ||
				    strcmp(ls->labels[i].value,
					   sorted[i].value ? sorted[i].value : ""))
					break;
			if (i == n) {
				ls->refs++;
				return ls;
			}
		}
	if (ix->sets.n >= ix->sets.nb && htab__grow(&ix->sets))
		return NULL;
	bytes = sizeof(*ls) + n * sizeof(ls->labels[0]) + 2 * n * sizeof(ls->kv[0]);
	ls = calloc(1, bytes);
	if (!ls)
		return NULL;
	ls->kv = (struct istr **)(ls->labels + n);
	for (size_t i = 0; i < n; i++) {
		ls->kv[2 * i] = istr__get(ix, sorted[i].key);
		ls->kv[2 * i + 1] = istr__get(ix, sorted[i].value);
		ls->n = i + 1;
		if (!ls->kv[2 * i] || !ls->kv[2 * i + 1]) {
			lset__free(ix, ls);
			return NULL;
		}
		ls->labels[i].key = ls->kv[2 * i]->s;
		ls->labels[i].value = ls->kv[2 * i + 1]->s;
	}
	ls->n = n;
	ls->hash = h;
	ls->refs = 1;
	ls->next = ix->sets.b[h & (ix->sets.nb - 1)];
	ix->sets.b[h & (ix->sets.nb - 1)] = ls;
	ix->sets.n++;
	ix->set_bytes += bytes;
	return ls;
}

static void lset__put(struct index *ix, struct lset *ls)
{
	if (!ls || --ls->refs)
		return;
	htab__unlink(&ix->sets, ls, ls->hash);
	ix->set_bytes -= sizeof(*ls) + ls->n * (sizeof(ls->labels[0]) + 2 * sizeof(ls->kv[0]));
	lset__free(ix, ls);
}

/* ---- idempotency keys ----------------------------------------------------------------------- */

static struct ix_entry *ix__at(const struct index *ix, size_t i)
{
	return &ix->e[(ix->head + i) % ix->cap];
}

static size_t keys__home(const struct index *ix, uint64_t h)
{
	return h & (ix->nkeys - 1);
}

static void keys__insert(struct index *ix, size_t pos)
{
	size_t i = keys__home(ix, ix->e[pos].key_hash);

	while (ix->keys[i])
		i = (i + 1) & (ix->nkeys - 1);
	ix->keys[i] = pos + 1;
}

/* Removes array position pos from the key table (backward-shift deletion). */
static void keys__remove(struct index *ix, size_t pos)
{
	size_t mask = ix->nkeys - 1, i = keys__home(ix, ix->e[pos].key_hash), j;

	while (ix->keys[i] && ix->keys[i] != pos + 1)
		i = (i + 1) & mask;
	if (!ix->keys[i])
		return;
	ix->keys[i] = 0;
	for (j = (i + 1) & mask; ix->keys[j]; j = (j + 1) & mask) {
		size_t home = keys__home(ix, ix->e[ix->keys[j] - 1].key_hash);

		/* move j back into the hole i unless its home lies cyclically in (i, j] */
		if ((j > i && (home <= i || home > j)) || (j < i && (home <= i && home > j))) {
			ix->keys[i] = ix->keys[j];
			ix->keys[j] = 0;
			i = j;
		}
	}
}

static int keys__rebuild(struct index *ix, size_t nkeys)
{
	uint32_t *k = calloc(nkeys, sizeof(*k));

	if (!k)
		return -ENOMEM;
	free(ix->keys);
	ix->keys = k;
	ix->nkeys = nkeys;
	for (size_t i = 0; i < ix->n; i++) {
		size_t pos = (ix->head + i) % ix->cap;

		if (ix->e[pos].key_hash)
			keys__insert(ix, pos);
	}
	return 0;
}

static uint64_t key_hash(const char *key)
{
	uint64_t h = hash_str(key);

	return h ? h : 1; /* 0 means "no key" */
}

/* ---- entries -------------------------------------------------------------------------------- */

struct index *index__new(size_t max_entries)
{
	struct index *ix = calloc(1, sizeof(*ix));

	if (!ix)
		return NULL;
	ix->max = max_entries ? max_entries : 1;
	if (ix->max > UINT32_MAX - 1)
		ix->max = UINT32_MAX - 1;
	return ix;
}

static void ix__pop_front(struct index *ix)
{
	struct ix_entry *e = ix__at(ix, 0);

	if (e->key_hash)
		keys__remove(ix, ix->head);
	istr__put(ix, e->service);
	istr__put(ix, e->type);
	istr__put(ix, e->device);
	lset__put(ix, e->labels);
	ix->head = (ix->head + 1) % ix->cap;
	ix->n--;
}

/* Makes room for one more entry: grows the array (up to max) or drops the oldest. */
static int ix__reserve(struct index *ix)
{
	size_t ncap;
	struct ix_entry *ne;

	if (ix->n == ix->max) {
		ix__pop_front(ix);
		ix->dropped++;
	}
	if (ix->n < ix->cap)
		return 0;
	ncap = ix->cap ? ix->cap * 2 : 1024;
	if (ncap > ix->max)
		ncap = ix->max;
	ne = malloc(ncap * sizeof(*ne));
	if (!ne)
		return -ENOMEM;
	for (size_t i = 0; i < ix->n; i++)
		ne[i] = *ix__at(ix, i);
	free(ix->e);
	ix->e = ne;
	ix->cap = ncap;
	ix->head = 0;
	{
		size_t nk = 16;

		while (nk < 2 * ncap)
			nk *= 2;
		return keys__rebuild(ix, nk);
	}
}

int index__find_key(const struct index *ix, const char *key, uint64_t *seq)
{
	uint64_t h;

	if (!key || !*key || !ix->nkeys)
		return -ENOENT;
	h = key_hash(key);
	for (size_t i = keys__home(ix, h); ix->keys[i]; i = (i + 1) & (ix->nkeys - 1)) {
		const struct ix_entry *e = &ix->e[ix->keys[i] - 1];

		if (e->key_hash == h) {
			*seq = e->seq;
			return 0;
		}
	}
	return -ENOENT;
}

int index__add(struct index *ix, uint64_t seq, const struct record_meta *meta, uint32_t size,
	       uint64_t *existing)
{
	struct ix_entry e = { .seq = seq, .time_ns = meta->time_ns, .size = size,
			      .value = meta->value, .flags = meta->flags,
			      .weight_milli = meta->weight_milli };
	uint64_t dup;
	size_t pos;
	int err;

	if (ix->n && ix__at(ix, ix->n - 1)->seq >= seq)
		return -EINVAL;
	if (index__find_key(ix, meta->key, &dup) == 0) {
		if (existing)
			*existing = dup;
		return -EEXIST;
	}
	err = ix__reserve(ix);
	if (err)
		return err;
	e.service = istr__get(ix, meta->service);
	e.type = istr__get(ix, meta->type);
	e.device = istr__get(ix, meta->device);
	e.labels = lset__get(ix, meta->labels, meta->n_labels);
	if (!e.service || !e.type || !e.device || !e.labels) {
		istr__put(ix, e.service);
		istr__put(ix, e.type);
		istr__put(ix, e.device);
		lset__put(ix, e.labels);
		return meta->n_labels > RINGFILE_MAX_LABELS ? -EINVAL : -ENOMEM;
	}
	e.key_hash = meta->key && *meta->key ? key_hash(meta->key) : 0;
	pos = (ix->head + ix->n) % ix->cap;
	ix->e[pos] = e;
	ix->n++;
	if (e.key_hash)
		keys__insert(ix, pos);
	return 0;
}

/* Position (0 = oldest) of the first entry with seq >= target. */
static size_t ix__lower_bound(const struct index *ix, uint64_t target)
{
	size_t lo = 0, hi = ix->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (ix__at(ix, mid)->seq < target)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static void ix__view(const struct ix_entry *e, struct store_entry *v)
{
	v->seq = e->seq;
	v->time_ns = e->time_ns;
	v->size = e->size;
	v->value = e->value;
	v->weight_milli = e->weight_milli;
	v->flags = e->flags;
	v->service = e->service->s;
	v->type = e->type->s;
	v->device = e->device->s;
	v->labels = e->labels->n ? e->labels->labels : NULL;
	v->n_labels = e->labels->n;
}

int index__get(const struct index *ix, uint64_t seq, struct store_entry *v)
{
	size_t i = ix__lower_bound(ix, seq);

	if (i == ix->n || ix__at(ix, i)->seq != seq)
		return -ENOENT;
	ix__view(ix__at(ix, i), v);
	return 0;
}

void index__evict_before(struct index *ix, uint64_t first_live)
{
	while (ix->n && ix__at(ix, 0)->seq < first_live) {
		ix__pop_front(ix);
		ix->evicted++;
	}
}

int index__foreach(const struct index *ix, uint64_t from_ns, uint64_t to_ns, bool newest_first,
		   store_entry_fn cb, void *ctx)
{
	for (size_t k = 0; k < ix->n; k++) {
		const struct ix_entry *e = ix__at(ix, newest_first ? ix->n - 1 - k : k);
		struct store_entry v;
		int ret;

		if (e->time_ns < from_ns || e->time_ns > to_ns)
			continue;
		ix__view(e, &v);
		ret = cb(ctx, &v);
		if (ret)
			return ret;
	}
	return 0;
}

static int istr_ptr_cmp(const void *a, const void *b)
{
	return strcmp((*(struct istr *const *)a)->s, (*(struct istr *const *)b)->s);
}

int index__foreach_service(const struct index *ix, int (*cb)(void *ctx, const char *service),
			   void *ctx)
{
	struct istr **v = NULL, *last = NULL;
	size_t n = 0, cap = 0;
	int ret = 0;

	for (size_t k = 0; k < ix->n; k++) {
		struct istr *s = ix__at(ix, k)->service;
		size_t i;

		if (s == last)
			continue;
		last = s;
		for (i = 0; i < n && v[i] != s; i++)
			;
		if (i < n)
			continue;
		if (n == cap) {
			struct istr **nv = realloc(v, (cap = cap ? cap * 2 : 16) * sizeof(*v));

			if (!nv) {
				free(v);
				return -ENOMEM;
			}
			v = nv;
		}
		v[n++] = s;
	}
	qsort(v, n, sizeof(*v), istr_ptr_cmp);
	for (size_t i = 0; i < n && !ret; i++)
		ret = cb(ctx, v[i]->s);
	free(v);
	return ret;
}

void index__stats(const struct index *ix, struct index_stats *st)
{
	st->entries = ix->n;
	st->max_entries = ix->max;
	st->strings = ix->strs.n;
	st->labelsets = ix->sets.n;
	st->mem_bytes = sizeof(*ix) + ix->cap * sizeof(*ix->e) + ix->nkeys * sizeof(*ix->keys) +
			(ix->strs.nb + ix->sets.nb) * sizeof(void *) + ix->str_bytes +
			ix->set_bytes;
	st->dropped = ix->dropped;
	st->evicted = ix->evicted;
}

void index__free(struct index *ix)
{
	if (!ix)
		return;
	while (ix->n)
		ix__pop_front(ix);
	free(ix->e);
	free(ix->keys);
	free(ix->strs.b);
	free(ix->sets.b);
	free(ix);
}
