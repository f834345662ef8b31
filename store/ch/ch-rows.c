// SPDX-License-Identifier: MIT
/*
 * store/ch/ch-rows.c — a profile's rows for the ClickHouse backend, built outside the lock:
 * functions, mappings, locations and stacks under 64-bit content hashes, one sample row per
 * distinct stack (values summed), the profile row; the series, group, idempotency key and id
 * of an upload; and the id sets of the dictionary rows this collector has sent, with which
 * a profile's dictionary rows go into a batch once. It calls nothing else of the backend.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "port/clock.h"
#include "port/hash.h"
#include "store/ch/ch-store.h"

/* ---- hashing ------------------------------------------------------------------------------- */

struct hasher {
	uint64_t h;
};

/* FNV-1a over bytes (port/hash.h): these ids are stored, so the hash must never change. */
static void h_bytes(struct hasher *h, const void *p, size_t n)
{
	h->h = hash_fnv64_add(h->h, p, n);
}

/* A whole word at a time (stack hashes are mostly location ids): a multiply-xorshift step. */
static void h_u64(struct hasher *h, uint64_t v)
{
	h->h = (h->h ^ v) * 0x9e3779b97f4a7c15ull;
	h->h ^= h->h >> 32;
}

/* A string with its length first: "ab"+"c" and "a"+"bc" differ. */
static void h_str(struct hasher *h, const char *s)
{
	size_t n = strlen(s);

	h_u64(h, n);
	h_bytes(h, s, n);
}

static uint64_t h_end(struct hasher *h)
{
	uint64_t z = hash_mix64(h->h);

	return z ? z : 1;
}

static struct hasher h_start(char tag)
{
	struct hasher h = { HASH_FNV64_BASIS };

	h_bytes(&h, &tag, 1);
	return h;
}

/* ---- id sets ------------------------------------------------------------------------------- */

/*
 * Ids already sent (open addressing, 0 = empty). The table starts small and doubles up to its
 * bound: a fleet's dictionary is a few thousand ids, and probing them at random in a table of
 * the bound's size (8 MiB) missed the caches and the TLB at each of a profile's ~2,000 lookups
 * (7% of the collector's CPU). Cleared when 3/4 of the bound is used, as before.
 */
int idset__init(struct idset *s, size_t max)
{
	s->max = 1024;
	while (s->max < max)
		s->max *= 2;
	s->cap = s->max < 4096 ? s->max : 4096;
	s->v = calloc(s->cap, sizeof(*s->v));
	return s->v ? 0 : -ENOMEM;
}

static uint64_t *idset__slot(uint64_t *v, size_t cap, uint64_t id)
{
	size_t i = id & (cap - 1);

	while (v[i] && v[i] != id)
		i = (i + 1) & (cap - 1);
	return &v[i];
}

/* Twice the slots, the ids placed again; false when out of memory (the set is cleared). */
static bool idset__grow(struct idset *s)
{
	uint64_t *v = calloc(s->cap * 2, sizeof(*v));

	if (!v)
		return false;
	for (size_t i = 0; i < s->cap; i++)
		if (s->v[i])
			*idset__slot(v, s->cap * 2, s->v[i]) = s->v[i];
	free(s->v);
	s->v = v;
	s->cap *= 2;
	return true;
}

void idset__clear(struct idset *s)
{
	memset(s->v, 0, s->cap * sizeof(*s->v));
	s->n = 0;
}

/* true when id was not there (and now is). */
static bool idset__add(struct idset *s, uint64_t id)
{
	uint64_t *slot = idset__slot(s->v, s->cap, id);

	if (*slot)
		return false;
	if (s->n >= s->cap / 4 * 3) {
		if (s->cap >= s->max || !idset__grow(s)) {
			idset__clear(s);
			s->resets++;
		}
		slot = idset__slot(s->v, s->cap, id);
	}
	*slot = id;
	s->n++;
	return true;
}

/*
 * Starts loading the slot where the probe for id begins. ch__rows_dict looks up a profile's
 * ~1,100 ids (136 functions, 220 locations, ~715 stacks in the fleet's), and the tables are cold
 * by then (an upload's decode and rows went through the caches, and other threads' uploads):
 * the load of the first slot was 3.2% of the collectors' CPU in perf (~40 ns a lookup, one
 * miss after another). Asked for all at once, the misses overlap.
 */
static inline void idset__prefetch(const struct idset *s, uint64_t id)
{
	__builtin_prefetch(&s->v[id & (s->cap - 1)]);
}

/* ---- rows of one profile ------------------------------------------------------------------- */

static uint16_t day_of(uint64_t ts_ns)
{
	return (uint16_t)(ts_ns / NSEC_PER_SEC / 86400);
}

static void rb_strs(struct rb *b, const char *const *s, size_t n)
{
	rb_varint(b, n);
	for (size_t i = 0; i < n; i++)
		rb_str(b, s[i]);
}

uint64_t ch__series_of(const struct record_meta *m)
{
	struct hasher h = h_start('S');

	h_str(&h, m->service ? m->service : "");
	h_str(&h, m->type ? m->type : "");
	h_str(&h, m->device ? m->device : "");
	for (size_t i = 0; i < m->n_labels; i++) {
		h_str(&h, m->labels[i].key);
		h_str(&h, m->labels[i].value);
	}
	return h_end(&h);
}

/* Whether key (n bytes) is one of the comma-separated names of list. */
static bool in_list(const char *list, const char *key, size_t n)
{
	for (const char *p = list; *p; p += *p == ',') {
		size_t len = strcspn(p, ",");

		if (len == n && !memcmp(p, key, n))
			return true;
		p += len;
	}
	return false;
}

static void h_strn(struct hasher *h, struct ch_str s)
{
	h_u64(h, s.n);
	h_bytes(h, s.p, s.n);
}

uint64_t ch__group_of(const char *without, struct ch_str service, struct ch_str type,
		      const struct ch_str *label, size_t n_labels)
{
	struct hasher h = h_start('G');

	h_strn(&h, service);
	h_strn(&h, type);
	for (size_t i = 0; i < n_labels; i++) {
		if (in_list(without, label[2 * i].p, label[2 * i].n))
			continue;
		h_strn(&h, label[2 * i]);
		h_strn(&h, label[2 * i + 1]);
	}
	return h_end(&h);
}

static struct ch_str ch_str_of(const char *s)
{
	return (struct ch_str){ s ? s : "", s ? strlen(s) : 0 };
}

/* The group of m's series, from the labels its profile row keeps (ch__rows_build). */
uint64_t ch__group_of_meta(const char *without, const struct record_meta *m)
{
	struct ch_str l[2 * STORE_MAX_LABELS];
	size_t n = m->n_labels < STORE_MAX_LABELS ? m->n_labels : STORE_MAX_LABELS;

	for (size_t i = 0; i < n; i++) {
		l[2 * i] = ch_str_of(m->labels[i].key);
		l[2 * i + 1] = ch_str_of(m->labels[i].value);
	}
	return ch__group_of(without, ch_str_of(m->service), ch_str_of(m->type), l, n);
}

/* What can merge: the sample types and the period type, as pprof's merge requires. */
static uint64_t sig_of(const struct pprof_profile *p)
{
	struct hasher h = h_start('T');

	for (size_t i = 0; i < p->n_sample_type; i++) {
		h_str(&h, pprof_str(p, p->sample_type[i].type));
		h_str(&h, pprof_str(p, p->sample_type[i].unit));
	}
	h_str(&h, pprof_str(p, p->period_type.type));
	h_str(&h, pprof_str(p, p->period_type.unit));
	return h_end(&h);
}

static int ids_compute(const struct pprof_profile *p, struct profile_ids *ids)
{
	ids->fn = calloc(p->n_functions + 1, sizeof(uint64_t));
	ids->map = calloc(p->n_mappings + 1, sizeof(uint64_t));
	ids->loc = calloc(p->n_locations + 1, sizeof(uint64_t));
	if (!ids->fn || !ids->map || !ids->loc)
		return -ENOMEM;
	for (size_t i = 0; i < p->n_functions; i++) {
		const struct pprof_function *f = &p->functions[i];
		struct hasher h = h_start('F');

		h_str(&h, pprof_str(p, f->name));
		h_str(&h, pprof_str(p, f->system_name));
		h_str(&h, pprof_str(p, f->filename));
		h_u64(&h, (uint64_t)f->start_line);
		ids->fn[i] = h_end(&h);
	}
	for (size_t i = 0; i < p->n_mappings; i++) {
		const struct pprof_mapping *m = &p->mappings[i];
		struct hasher h = h_start('M');

		h_u64(&h, m->memory_start);
		h_u64(&h, m->memory_limit);
		h_u64(&h, m->file_offset);
		h_str(&h, pprof_str(p, m->filename));
		h_str(&h, pprof_str(p, m->build_id));
		ids->map[i] = h_end(&h);
	}
	for (size_t i = 0; i < p->n_locations; i++) {
		const struct pprof_location *l = &p->locations[i];
		struct hasher h = h_start('L');

		h_u64(&h, l->mapping_id ? ids->map[l->mapping_id - 1] : 0);
		h_u64(&h, l->address);
		for (size_t j = 0; j < l->n_lines; j++) {
			h_u64(&h, ids->fn[l->lines[j].function_id - 1]);
			h_u64(&h, (uint64_t)l->lines[j].line);
		}
		ids->loc[i] = h_end(&h);
	}
	return 0;
}

static void ids_free(struct profile_ids *ids)
{
	free(ids->fn);
	free(ids->map);
	free(ids->loc);
}

/*
 * A sample's stack id: its locations' ids, then its string labels (numeric ones are not kept:
 * see store/README.md), hashed on from h, which holds the first `from` locations already.
 */
static uint64_t stack_of(const struct pprof_profile *p, const struct pprof_sample *s,
			 const struct profile_ids *ids, struct hasher h, size_t from)
{
	for (size_t i = from; i < s->n_locations; i++)
		h_u64(&h, ids->loc[s->location_ids[i] - 1]);
	for (size_t i = 0; i < s->n_labels; i++) {
		if (!s->labels[i].str)
			continue;
		h_str(&h, pprof_str(p, s->labels[i].key));
		h_str(&h, pprof_str(p, s->labels[i].str));
	}
	return h_end(&h);
}

/*
 * The stack ids of all samples, the same as stack_of's one by one, four samples at a time over
 * their common depth: h_u64 is a chain of dependent multiply-xorshifts (~6 cycles a location),
 * and four chains side by side keep the multiplier busy (the hashes were ~40% of ch__rows_build).
 */
static void stacks_of(const struct pprof_profile *p, const struct profile_ids *ids,
		      uint64_t *out)
{
	size_t i = 0;

	for (; i + 4 <= p->n_samples; i += 4) {
		const struct pprof_sample *s = &p->samples[i];
		struct hasher h[4];
		size_t n = s[0].n_locations;

		for (int k = 0; k < 4; k++) {
			h[k] = h_start('K');
			if (s[k].n_locations < n)
				n = s[k].n_locations;
		}
		for (size_t j = 0; j < n; j++)
			for (int k = 0; k < 4; k++)
				h_u64(&h[k], ids->loc[s[k].location_ids[j] - 1]);
		for (int k = 0; k < 4; k++)
			out[i + k] = stack_of(p, &s[k], ids, h[k], n);
	}
	for (; i < p->n_samples; i++)
		out[i] = stack_of(p, &p->samples[i], ids, h_start('K'), 0);
}

static void row_stack(struct rb *b, const struct pprof_profile *p, const struct pprof_sample *s,
		      uint64_t id, const struct profile_ids *ids)
{
	size_t n = 0;

	rb_u64(b, id);
	rb_varint(b, s->n_locations);
	for (size_t i = 0; i < s->n_locations; i++)
		rb_u64(b, ids->loc[s->location_ids[i] - 1]);
	for (size_t i = 0; i < s->n_labels; i++)
		n += s->labels[i].str != 0;
	for (int kv = 0; kv < 2; kv++) {
		rb_varint(b, n);
		for (size_t i = 0; i < s->n_labels; i++)
			if (s->labels[i].str)
				rb_str(b, pprof_str(p, kv ? s->labels[i].str : s->labels[i].key));
	}
}

/* The dictionary rows this profile needs and this collector has not sent (under the lock). */
void ch__rows_dict(struct ch_store *c, struct ch_batch *bt, const struct pprof_profile *p,
		      const struct put_rows *r)
{
	const struct profile_ids *ids = &r->ids;

	for (size_t i = 0; i < p->n_functions; i++)
		idset__prefetch(&c->fns, ids->fn[i]);
	for (size_t i = 0; i < p->n_locations; i++)
		idset__prefetch(&c->locs, ids->loc[i]);
	for (size_t d = 0; d < r->n_distinct; d++)
		idset__prefetch(&c->stacks, r->stack_ids[r->first[d]]);
	for (size_t i = 0; i < p->n_functions; i++) {
		const struct pprof_function *f = &p->functions[i];
		struct rb *b = &bt->rows[T_FUNCTIONS];

		if (!idset__add(&c->fns, ids->fn[i]))
			continue;
		rb_u64(b, ids->fn[i]);
		rb_str(b, pprof_str(p, f->name));
		rb_str(b, pprof_str(p, f->system_name));
		rb_str(b, pprof_str(p, f->filename));
		rb_u64(b, (uint64_t)f->start_line);
		c->rows[T_FUNCTIONS]++;
	}
	for (size_t i = 0; i < p->n_mappings; i++) {
		const struct pprof_mapping *m = &p->mappings[i];
		struct rb *b = &bt->rows[T_MAPPINGS];

		if (!idset__add(&c->maps, ids->map[i]))
			continue;
		rb_u64(b, ids->map[i]);
		rb_u64(b, m->memory_start);
		rb_u64(b, m->memory_limit);
		rb_u64(b, m->file_offset);
		rb_str(b, pprof_str(p, m->filename));
		rb_str(b, pprof_str(p, m->build_id));
		c->rows[T_MAPPINGS]++;
	}
	for (size_t i = 0; i < p->n_locations; i++) {
		const struct pprof_location *l = &p->locations[i];
		struct rb *b = &bt->rows[T_LOCATIONS];

		if (!idset__add(&c->locs, ids->loc[i]))
			continue;
		rb_u64(b, ids->loc[i]);
		rb_u64(b, l->mapping_id ? ids->map[l->mapping_id - 1] : 0);
		rb_u64(b, l->address);
		rb_varint(b, l->n_lines);
		for (size_t j = 0; j < l->n_lines; j++)
			rb_u64(b, ids->fn[l->lines[j].function_id - 1]);
		rb_varint(b, l->n_lines);
		for (size_t j = 0; j < l->n_lines; j++)
			rb_u64(b, (uint64_t)l->lines[j].line);
		c->rows[T_LOCATIONS]++;
	}
	for (size_t d = 0; d < r->n_distinct; d++) {
		size_t i = r->first[d];

		if (!idset__add(&c->stacks, r->stack_ids[i]))
			continue;
		row_stack(&bt->rows[T_STACKS], p, &p->samples[i], r->stack_ids[i], &r->ids);
		c->rows[T_STACKS]++;
	}
}

/*
 * The profile's distinct stacks (r->first: the first sample of each, in the order seen), their
 * summed values (*sums, n_sample_type per stack) and *order: the distinct stacks by stack id
 * (the table's order). An open-addressing table on the stack ids, O(samples) (a sort of 3,400
 * samples was 14% of the collector's CPU), placed by the ids' top bits: its slots are in id
 * order but for probe runs, so an insertion sort of them is ~linear (a qsort was 4%).
 */
static int stacks_group(const struct pprof_profile *p, struct put_rows *r, int64_t **sums,
			uint32_t **order)
{
	size_t cap = 16, nt = p->n_sample_type, nd = 0, n = 0;
	unsigned shift = 60;
	uint32_t *slot, *ord;
	int64_t *sum;

	while (cap < 2 * p->n_samples)
		cap *= 2, shift--;
	slot = calloc(cap, sizeof(*slot));
	sum = calloc(p->n_samples * nt + 1, sizeof(*sum));
	ord = malloc((p->n_samples + 1) * sizeof(*ord));
	r->first = malloc((p->n_samples + 1) * sizeof(*r->first));
	if (!slot || !sum || !ord || !r->first) {
		free(slot);
		free(sum);
		free(ord);
		return -ENOMEM;
	}
	for (size_t i = 0; i < p->n_samples; i++) {
		uint64_t st = r->stack_ids[i];
		size_t h = (size_t)(st >> shift), d;

		while (slot[h] && r->stack_ids[r->first[slot[h] - 1]] != st)
			h = (h + 1) & (cap - 1);
		if (!slot[h]) {
			r->first[nd] = i;
			slot[h] = (uint32_t)++nd;
		}
		d = slot[h] - 1;
		for (size_t j = 0; j < nt; j++)
			sum[d * nt + j] = (int64_t)((uint64_t)sum[d * nt + j] +
						    (uint64_t)p->samples[i].values[j]);
	}
	for (size_t h = 0; h < cap; h++) {
		uint64_t st;
		size_t k = n;

		if (!slot[h])
			continue;
		st = r->stack_ids[r->first[slot[h] - 1]];
		for (; k && r->stack_ids[r->first[ord[k - 1]]] > st; k--)
			ord[k] = ord[k - 1];
		ord[k] = slot[h] - 1;
		n++;
	}
	r->n_distinct = nd;
	free(slot);
	*sums = sum;
	*order = ord;
	return 0;
}

/*
 * The sample rows (RowBinary: day, ts, series, sig, profile, stack, v) of the distinct stacks in
 * ord. Written in place, the room reserved once: rb_u64 per column was 3/4 of the rows' cost.
 * key: series, sig, profile id. RowBinary is little-endian, as every board we build for.
 */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "rows_write copies the host's bytes");

static int rows_write(struct rb *b, const struct record_meta *m, const struct put_rows *r,
		      const uint64_t key[3], const int64_t *sum, const uint32_t *ord, size_t nt)
{
	size_t row = 2 + 8 + 3 * 8 + 8 + 10 + 8 * nt;
	uint16_t day = day_of(m->time_ns);
	unsigned char head[2 + 8 + 3 * 8];
	unsigned char *o;

	if (nt > (SIZE_MAX / 2 - 64) / 8 || r->n_distinct > SIZE_MAX / 2 / row ||
	    !rb_reserve(b, r->n_distinct * row))
		return -ENOMEM;
	memcpy(head, &day, 2);
	memcpy(head + 2, &m->time_ns, 8);
	memcpy(head + 10, key, 3 * 8);
	o = b->p + b->len;
	for (size_t k = 0; k < r->n_distinct; k++) {
		size_t d = ord[k];
		uint64_t v = nt;

		memcpy(o, head, sizeof(head));
		memcpy(o + sizeof(head), &r->stack_ids[r->first[d]], 8);
		o += sizeof(head) + 8;
		do {	/* nt as a varint */
			*o++ = (unsigned char)(v & 0x7f) | (v >> 7 ? 0x80 : 0);
			v >>= 7;
		} while (v);
		for (size_t j = 0; j < nt; j++, o += 8)
			memcpy(o, &sum[d * nt + j], 8);
	}
	b->len = (size_t)(o - b->p);
	return 0;
}

/*
 * One sample row per distinct stack of the profile, values summed: samples that differ only
 * by what a stack id leaves out (numeric labels) are one row, as a merge would make them
 * (a 20 KB profile of 1,400 samples over 130 stacks: 130 rows, not 1,400).
 */
static int rows_samples(const struct record_meta *m, const struct pprof_profile *p,
			struct put_rows *r, uint64_t series, uint64_t sig, uint64_t id)
{
	size_t nt = p->n_sample_type;
	struct rb *b = &r->samples;
	uint32_t *ord;
	int64_t *sum;
	int e = stacks_group(p, r, &sum, &ord);

	if (e)
		return e;
	/*
	 * Rows in the table's order (series, ts, stack): one profile is one (series, ts), so by
	 * stack; the writer puts the batch's profiles in order (batch__order), and ClickHouse
	 * skips its sort of the block (isAlreadySorted: ~20% of its CPU at ingest).
	 */
	e = rows_write(b, m, r, (const uint64_t[3]){ series, sig, id }, sum, ord, nt);
	r->n_samples = r->n_distinct;
	free(ord);
	free(sum);
	return e;
}

/* The sample rows and the profile row, built outside the lock. */
int ch__rows_build(const struct record_meta *m, const struct pprof_profile *p, size_t len,
		      uint64_t id, struct put_rows *r)
{
	uint64_t series = ch__series_of(m), sig = sig_of(p);
	const char *keys[STORE_MAX_LABELS], *values[STORE_MAX_LABELS];
	const char *st[64], *su[64];
	size_t nst = p->n_sample_type < 64 ? p->n_sample_type : 64;
	size_t nl = m->n_labels < STORE_MAX_LABELS ? m->n_labels : STORE_MAX_LABELS;
	int e = ids_compute(p, &r->ids);

	r->stack_ids = malloc((p->n_samples + 1) * sizeof(uint64_t)); /* stacks_of() fills it */
	if (e || !r->stack_ids)
		return -ENOMEM;
	stacks_of(p, &r->ids, r->stack_ids);
	e = rows_samples(m, p, r, series, sig, id);
	if (e)
		return e;
	for (size_t i = 0; i < nl; i++) {
		keys[i] = m->labels[i].key;
		values[i] = m->labels[i].value;
	}
	for (size_t i = 0; i < nst; i++) {
		st[i] = pprof_str(p, p->sample_type[i].type);
		su[i] = pprof_str(p, p->sample_type[i].unit);
	}
	rb_u16(&r->profile, day_of(m->time_ns));
	rb_u64(&r->profile, m->time_ns);
	rb_u64(&r->profile, id);
	rb_u64(&r->profile, series);
	rb_u64(&r->profile, sig);
	rb_str(&r->profile, m->service);
	rb_str(&r->profile, m->type);
	rb_str(&r->profile, m->device);
	rb_strs(&r->profile, keys, nl);
	rb_strs(&r->profile, values, nl);
	rb_str(&r->profile, m->key);
	rb_u64(&r->profile, (uint64_t)m->value);
	rb_u64(&r->profile, len);
	rb_u16(&r->profile, m->flags);
	rb_strs(&r->profile, st, nst);
	rb_strs(&r->profile, su, nst);
	rb_str(&r->profile, pprof_str(p, p->default_sample_type));
	rb_str(&r->profile, pprof_str(p, p->period_type.type));
	rb_str(&r->profile, pprof_str(p, p->period_type.unit));
	rb_u64(&r->profile, (uint64_t)p->period);
	rb_u64(&r->profile, (uint64_t)p->time_nanos);
	rb_u64(&r->profile, (uint64_t)p->duration_nanos);
	rb_u64(&r->profile, p->n_mappings ? r->ids.map[0] : 0);
	rb_varint(&r->profile, p->n_comments < 64 ? p->n_comments : 64);
	for (size_t i = 0; i < p->n_comments && i < 64; i++)
		rb_str(&r->profile, pprof_str(p, p->comments[i]));
	return r->samples.oom || r->profile.oom ? -ENOMEM : 0;
}

void ch__rows_free(struct put_rows *r)
{
	rb_free(&r->samples);
	rb_free(&r->profile);
	free(r->stack_ids);
	free(r->first);
	ids_free(&r->ids);
}

/* ---- an upload's key and id --------------------------------------------------------------- */

uint64_t ch__key_hash(const struct record_meta *m)
{
	struct hasher h = h_start('I');

	h_str(&h, m->key);
	return h_end(&h);
}

/*
 * A profile's id: with an idempotency key, a hash of (device, key), the same on every collector,
 * so that a retry that reaches another collector (or this one after a restart) is found in
 * ClickHouse (batch__check); without, unique.
 */
uint64_t ch__new_id(const struct record_meta *m)
{
	struct hasher h = h_start('P');

	h_str(&h, m->device ? m->device : "");
	h_str(&h, m->key);
	if (!m->key || !*m->key) {
		h_u64(&h, m->time_ns);
		h_u64(&h, port_clock_mono_ns());
		h_u64(&h, (uint64_t)(uintptr_t)m);
	}
	return h_end(&h) >> 1; /* ids are positive in every JSON reader */
}
