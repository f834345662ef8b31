// SPDX-License-Identifier: MIT
/*
 * store/ch/store-ch.c — the ClickHouse backend (store/store.h), its schema and its writes (reads:
 * store/ch/ch-query.c; shared: store/ch/ch-store.h): profiles decoded at ingest, stacks,
 * locations, functions and mappings stored once under 64-bit content hashes, samples as rows,
 * fleet queries aggregated by ClickHouse (GROUP BY stack) and the pprof built from the aggregate.
 *
 * Schema (ClickHouse 18.16: no CODEC, no TTL, no LowCardinality; see store/README.md):
 *   samples   one row per profile: (day Date, ts UInt64 ns, series, sig, profile,
 *             stacks Array(UInt64), v Array(Array(Int64)), hour), read with ARRAY JOIN
 *             MergeTree PARTITION BY day ORDER BY (hour, series, ts); a database made before
 *             keeps a row per (profile, stack): stack UInt64, v Array(Int64) (ch__schema_layout)
 *   profiles  one row per profile: id, time, series (hash of service, type, device, labels),
 *             sig (hash of sample and period types: what can merge), metadata, header
 *             MergeTree PARTITION BY day ORDER BY (ts, id)
 *   stacks    (stack, locs Array(UInt64), label keys/values)      ReplacingMergeTree ORDER BY id
 *   locations (loc, mapping, address, fns Array(UInt64), lines Array(Int64))        "
 *   functions (fn, name, system_name, filename, start_line)                          "
 *   mappings  (mapping, start, limit, offset, filename, build_id)                    "
 *   samples_1g (day, hour, grp, sig, stack, v0..v3): one server: samples summed by hour and
 *             group (labels but the device's: ch__group_of), sent with each batch
 *             (ch-rollup.c); SummingMergeTree PARTITION BY day ORDER BY (grp, sig, hour,
 *             stack); samples_1g_rule: the labels a group leaves out (its first row)
 *   samples_1h (day, hour, series, sig, stack, v0..v3): samples summed by hour and series:
 *             --ch-cluster (a materialized view on samples_local), and what collectors
 *             before samples_1g sent; SummingMergeTree PARTITION BY day
 *             ORDER BY (series, sig, hour, stack); samples_1h_since: from when it is whole
 * Dictionary rows are sent once per collector (a bounded set of ids sent; when full it is
 * cleared and rows are sent again, which ReplacingMergeTree and any() absorb).
 *
 * Writes: put() appends its rows to the open batch and waits. One writer thread seals the batch
 * when it holds CONFIG_COLLECTOR_CH_BATCH_KB or is CONFIG_COLLECTOR_CH_BATCH_MS old, and sends
 * it table by table (dictionaries first, profiles last), each INSERT one body (RowBinary; the
 * samples as one Native block) under ClickHouse's 1,048,576-row block, so each is atomic. A put
 * is acknowledged once ClickHouse answered 200 for every table of its batch. A failed INSERT
 * is retried (from the table that failed, with backoff) until it succeeds: the batch stays
 * queued, bounded by
 * CONFIG_COLLECTOR_CH_QUEUE_MB (beyond it a put waits for room while ClickHouse takes batches,
 * up to CONFIG_COLLECTOR_CH_WAIT_MS: back-pressure; then, or at once while INSERTs fail, it is
 * refused: 503 with Retry-After, the device's spool keeps the profile); a put whose batch is not in within CONFIG_COLLECTOR_CH_ACK_MS answers 503
 * and a retry of its key waits for the same batch (no duplicate). Sample rows go in the table's
 * order, so ClickHouse does not sort them. With --ch-spool (store/ch/ch-spool.c) a put is
 * acknowledged once durable in the spool instead (and a replayer thread builds the batches of
 * uploads that spilled to it). With --ch-cluster
 * the tables are Distributed over <table>_local on each shard (INSERTs synchronous).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "port/clock.h"
#include "port/log.h"
#include "port/rand.h"
#include "store/ch/ch-store.h"

static const char *const ch_table_names[T__N] = {
	"functions", "mappings", "locations", "stacks", "samples", "profiles",
};

/*
 * samples' hour, computed by ClickHouse (not sent: an INSERT without a column list leaves
 * MATERIALIZED columns out) and first in its key: a time range reads the granules of its hours
 * (a range with edges mid-hour reads the raw rows of those hours; ordered by series first it
 * scanned the ts of the whole day: 10-12 s instead of 3.6 on the synthetic day). A database
 * made before it gets the column (ALTER; its key stays: those reads stay slower).
 */
#define CH_SAMPLES_HOUR "hour UInt32 MATERIALIZED toUInt32(intDiv(ts, 3600000000000))"
/*
 * samples' merges vertical: the key columns merged row by row, then each other column
 * (day, sig, profile, v) gathered in bulk by the merged order, where a horizontal merge moves
 * every column row by row through the heap (18.16 goes vertical only from 11 columns on;
 * samples has 8). Merges are a quarter to a third of ClickHouse's CPU at ingest, more the
 * longer it runs; the fleet bench's INSERTs replayed took 15% less merge CPU (8.3 s against
 * 9.7 s for 46,611 profiles, mean of 3). A table made before keeps horizontal merges (18.16
 * has no ALTER of a table's SETTINGS): the same rows either way. Only for the layout of a row
 * per (profile, stack): a row per profile moves 1/715 as many rows through the heap (with the
 * setting, two replays were within the noise of none).
 */
#define CH_SAMPLES_MERGES " SETTINGS vertical_merge_algorithm_min_columns_to_activate = 1"
/*
 * samples as databases made before one row per profile have it: a row per (profile, stack).
 * Such a database keeps it (detected at start, ch__schema_layout): same rows, old write path.
 */
static const char ch_samples_rows[] =
	"CREATE TABLE IF NOT EXISTS samples (day Date, ts UInt64, series UInt64, sig UInt64, "
	"profile UInt64, stack UInt64, v Array(Int64), " CH_SAMPLES_HOUR ") "
	"ENGINE = MergeTree PARTITION BY day ORDER BY (hour, series, ts, stack)"
	CH_SAMPLES_MERGES;
/*
 * With --ch-cluster, samples_local without hour: 18.16's Distributed INSERT sends a
 * MATERIALIZED column to the shards, which refuse it ("Cannot insert column hour").
 */
static const char ch_samples_sharded_rows[] =
	"(day Date, ts UInt64, series UInt64, sig UInt64, profile UInt64, stack UInt64, "
	"v Array(Int64)) ENGINE = MergeTree PARTITION BY day ORDER BY (series, ts, stack)"
	CH_SAMPLES_MERGES;
static const char ch_samples_sharded[] =
	"(day Date, ts UInt64, series UInt64, sig UInt64, profile UInt64, stacks Array(UInt64), "
	"v Array(Array(Int64))) ENGINE = MergeTree PARTITION BY day ORDER BY (series, ts)";

static const char *const ch_schema[T__N] = {
	"CREATE TABLE IF NOT EXISTS functions (fn UInt64, name String, system_name String, "
	"filename String, start_line Int64) ENGINE = ReplacingMergeTree ORDER BY fn",
	"CREATE TABLE IF NOT EXISTS mappings (mapping UInt64, start UInt64, limit UInt64, "
	"offset UInt64, filename String, build_id String) "
	"ENGINE = ReplacingMergeTree ORDER BY mapping",
	"CREATE TABLE IF NOT EXISTS locations (loc UInt64, mapping UInt64, address UInt64, "
	"fns Array(UInt64), lines Array(Int64)) ENGINE = ReplacingMergeTree ORDER BY loc",
	"CREATE TABLE IF NOT EXISTS stacks (stack UInt64, locs Array(UInt64), "
	"label_keys Array(String), label_values Array(String)) "
	"ENGINE = ReplacingMergeTree ORDER BY stack",
	/*
	 * One row per profile (ch__schema_layout): its distinct stacks, in stack order, and
	 * their summed values, v[i] for stacks[i]; read with ARRAY JOIN stacks AS stack, v
	 */
	"CREATE TABLE IF NOT EXISTS samples (day Date, ts UInt64, series UInt64, sig UInt64, "
	"profile UInt64, stacks Array(UInt64), v Array(Array(Int64)), " CH_SAMPLES_HOUR ") "
	"ENGINE = MergeTree PARTITION BY day ORDER BY (hour, series, ts)",
	"CREATE TABLE IF NOT EXISTS profiles (day Date, ts UInt64, id UInt64, series UInt64, "
	"sig UInt64, service String, type String, device String, label_keys Array(String), "
	"label_values Array(String), key String, value Int64, size UInt64, flags UInt16, "
	"sample_type Array(String), sample_unit Array(String), default_type String, "
	"period_type String, period_unit String, period Int64, time_nanos Int64, "
	"duration Int64, main_mapping UInt64, comments Array(String)) "
	"ENGINE = MergeTree PARTITION BY day ORDER BY (ts, id)",
};
/* With --ch-cluster, what each table's Distributed engine shards rows by. */
static const char *const ch_shard_key[T__N] = {
	"fn", "mapping", "loc", "stack", "series", "series",
};

/* ---- hashing and id sets ------------------------------------------------------------------- */

struct hasher {
	uint64_t h;
};

static void h_bytes(struct hasher *h, const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++)
		h->h = (h->h ^ b[i]) * 0x100000001b3ull;
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
	uint64_t z = h->h;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	return z ? z : 1;
}

static struct hasher h_start(char tag)
{
	struct hasher h = { 0xcbf29ce484222325ull };

	h_bytes(&h, &tag, 1);
	return h;
}

/*
 * Ids already sent (open addressing, 0 = empty). The table starts small and doubles up to its
 * bound: a fleet's dictionary is a few thousand ids, and probing them at random in a table of
 * the bound's size (8 MiB) missed the caches and the TLB at each of a profile's ~2,000 lookups
 * (7% of the collector's CPU). Cleared when 3/4 of the bound is used, as before.
 */
static int idset__init(struct idset *s, size_t max)
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

static void idset__clear(struct idset *s)
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
 * Starts loading the slot where the probe for id begins. rows_dict looks up a profile's
 * ~1,100 ids (136 functions, 220 locations, ~715 stacks in the fleet's), and the tables are cold
 * by then (an upload's decode and rows went through the caches, and other threads' uploads):
 * the load of the first slot was 3.2% of the collectors' CPU in perf (~40 ns a lookup, one
 * miss after another). Asked for all at once, the misses overlap.
 */
static inline void idset__prefetch(const struct idset *s, uint64_t id)
{
	__builtin_prefetch(&s->v[id & (s->cap - 1)]);
}

/* Idempotency keys seen (hash of the key -> profile id, batch): bounded like the id sets. */
static struct keyent *keymap__find(struct keymap *m, uint64_t kh, bool add)
{
	size_t i = kh & (m->cap - 1);

	while (m->v[i].kh) {
		if (m->v[i].kh == kh)
			return &m->v[i];
		i = (i + 1) & (m->cap - 1);
	}
	if (!add)
		return NULL;
	if (m->n >= m->cap / 4 * 3) {
		memset(m->v, 0, m->cap * sizeof(*m->v));
		m->n = 0;
		return keymap__find(m, kh, add);
	}
	m->n++;
	m->v[i].kh = kh;
	return &m->v[i];
}

/* ---- the store ----------------------------------------------------------------------------- */

static const struct store_ops ch_ops;

static void batch__free(struct ch_batch *b)
{
	if (!b)
		return;
	for (int t = 0; t < T__N; t++)
		rb_free(&b->rows[t]);
	free(b->marks);
	free(b);
}

/* A new open batch (lock held): the spare, with a sent batch's emptied buffers, if any. */
static struct ch_batch *batch__new(struct ch_store *c)
{
	struct ch_batch *b = c->spare;

	if (!b)
		return calloc(1, sizeof(*b));
	c->spare = NULL;
	return b;
}

/*
 * What the writer keeps (lock held): the spare's buffers and its scratch, trimmed to max bytes
 * of capacity, the largest freed first.
 */
static void ch__keep_trim(struct ch_store *c, size_t max)
{
	struct rb *v[T__N + 5] = { &c->scratch.rrows, &c->scratch.slots, &c->scratch.native,
				   &c->scratch.seg, &c->scratch.key };
	size_t n = 5;

	for (int t = 0; c->spare && t < T__N; t++)
		v[n++] = &c->spare->rows[t];
	rb_keep_within(v, n, max);
}

/*
 * A sent batch (lock held): its buffers, emptied, become the spare that the next batch fills
 * (a batch's rows grow to about CONFIG_COLLECTOR_CH_BATCH_KB: faulted in anew for every batch
 * otherwise), unless there is one already; then the kept buffers are trimmed to the bound.
 */
static void batch__recycle(struct ch_store *c, struct ch_batch *b)
{
	struct ch_batch keep = { .marks = b->marks, .cap_marks = b->cap_marks };

	if (c->spare || !c->keep_bytes) {
		batch__free(b);
	} else {
		for (int t = 0; t < T__N; t++)
			keep.rows[t] = (struct rb){ .p = b->rows[t].p, .cap = b->rows[t].cap };
		*b = keep;
		c->spare = b;
	}
	ch__keep_trim(c, c->keep_bytes);
}

/* After CH_KEEP_IDLE_NS without a batch sent (lock held): nothing kept. */
static void ch__keep_idle(struct ch_store *c)
{
	if (!c->last_sent_ns || port_clock_mono_ns() - c->last_sent_ns < CH_KEEP_IDLE_NS)
		return;
	ch__keep_trim(c, 0);
	batch__free(c->spare);
	c->spare = NULL;
	c->last_sent_ns = 0;
}

static size_t batch__bytes(const struct ch_batch *b)
{
	size_t n = 0;

	for (int t = 0; t < T__N; t++)
		n += b->rows[t].len;
	return n;
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

static uint64_t series_of(const struct record_meta *m)
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
static uint64_t group_of_meta(const struct ch_store *c, const struct record_meta *m)
{
	struct ch_str l[2 * STORE_MAX_LABELS];
	size_t n = m->n_labels < STORE_MAX_LABELS ? m->n_labels : STORE_MAX_LABELS;

	for (size_t i = 0; i < n; i++) {
		l[2 * i] = ch_str_of(m->labels[i].key);
		l[2 * i + 1] = ch_str_of(m->labels[i].value);
	}
	return ch__group_of(c->group_without, ch_str_of(m->service), ch_str_of(m->type), l, n);
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
static void rows_dict(struct ch_store *c, struct ch_batch *bt, const struct pprof_profile *p,
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
	uint64_t series = series_of(m), sig = sig_of(p);
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

/* ---- ingest -------------------------------------------------------------------------------- */

static uint64_t key_hash(const struct record_meta *m)
{
	struct hasher h = h_start('I');

	h_str(&h, m->key);
	return h_end(&h);
}

/*
 * A profile's id: with an idempotency key, a hash of (device, key), the same on every collector,
 * so that a retry that reaches another collector (or this one after a restart) is found in
 * ClickHouse (batch__dedup); without, unique.
 */
static uint64_t new_id(const struct record_meta *m)
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

static bool gen_dropped(const struct ch_store *c, uint64_t gen)
{
	for (unsigned i = 0; i < CH_DROPPED_GENS && i < c->n_dropped; i++)
		if (c->dropped_gen[i] == gen)
			return true;
	return false;
}

/* The CLOCK_REALTIME time ms from now, for pthread_cond_timedwait. */
static void deadline_in(struct timespec *ts, unsigned ms)
{
	clock_gettime(CLOCK_REALTIME, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (long)(ms % 1000) * 1000000;
	if (ts->tv_nsec >= 1000000000) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000;
	}
}

/* Waits (lock held) until batch gen is in ClickHouse: 0, or -EIO after ack_ms or if dropped. */
static int ch__wait(struct ch_store *c, uint64_t gen)
{
	struct timespec ts;
	int e = 0;

	deadline_in(&ts, c->ack_ms);
	while (c->done_gen < gen && !gen_dropped(c, gen) && !e)
		e = pthread_cond_timedwait(&c->done, &c->lock, &ts);
	if (c->done_gen >= gen)
		return 0;
	if (!gen_dropped(c, gen))
		c->ack_timeouts++;
	return -EIO;
}

/* Whether an upload's rows (and its record: rec, 0 without a spool) fit now (lock held). */
static bool ch__room(const struct ch_store *c, size_t rows, size_t rec)
{
	return !c->spill_from && c->queued_bytes + rows <= c->queue_bytes &&
	       (!c->spool || ch_spool__admits(c, rec));
}

/*
 * Back-pressure: while ClickHouse takes batches, an upload that finds the queue full waits
 * for batches to go in rather than spill (its rows thrown away, decoded again when read back)
 * or be refused, so that clients slow to ClickHouse's rate. Not when ClickHouse fails (the
 * spool is for that): a failed INSERT wakes the waiters. Bounded by wait_ms; a waiter holds
 * its connection's thread, so at most the listeners' --max-conns wait.
 */
bool ch__wait_room(struct ch_store *c, size_t rows, size_t rec)
{
	struct timespec ts;
	uint64_t t0;
	bool room = ch__room(c, rows, rec);

	if (room || !c->wait_ms || !c->ch_ok || c->stop || rows > c->queue_bytes)
		return room;
	t0 = port_clock_mono_ns();
	deadline_in(&ts, c->wait_ms);
	c->waits++;
	c->waiting++;
	while (!room && c->ch_ok && !c->stop &&
	       pthread_cond_timedwait(&c->done, &c->lock, &ts) != ETIMEDOUT)
		room = ch__room(c, rows, rec);
	room = ch__room(c, rows, rec);
	c->waiting--;
	if (!room)
		c->wait_timeouts++;
	c->wait_ns += port_clock_mono_ns() - t0;
	return room;
}

/*
 * Out of memory while adding to the open batch (lock held): its buffers are incomplete, so the
 * whole batch is dropped (none of it was acknowledged): its waiters get -EIO, its keys are
 * forgotten (a retry stores anew), and every dictionary row is sent again from now on.
 */
static void ch__drop_open(struct ch_store *c)
{
	struct ch_batch *b = c->open;

	if (c->spool) {
		pr_warn("clickhouse: out of memory building a batch: its %zu uploads are read "
			"back from the spool", b->n_profiles);
		ch_spool__respill(c, b);
	} else {
		pr_warn("clickhouse: out of memory building a batch: its %zu uploads are refused",
			b->n_profiles + 1);
		c->dropped_gen[c->n_dropped++ % CH_DROPPED_GENS] = b->gen;
		for (size_t i = 0; i < c->keys.cap; i++)
			if (c->keys.v[i].kh && c->keys.v[i].gen == b->gen)
				c->keys.v[i].id = 0; /* a tombstone: the probe chain stays intact */
	}
	idset__clear(&c->fns), idset__clear(&c->maps);
	idset__clear(&c->locs), idset__clear(&c->stacks);
	c->queued_bytes -= b->bytes;
	c->open = NULL;
	batch__free(b);
	pthread_cond_broadcast(&c->done);
}

int ch__put_locked(struct ch_store *c, const struct record_meta *meta,
		   const struct pprof_profile *p, struct put_rows *r, const struct ch_put *w,
		   uint64_t *gen)
{
	struct ch_batch *b = c->open;
	size_t before;

	if (c->queued_bytes + r->samples.len + r->profile.len > c->queue_bytes) {
		c->refused_full++;
		return -ENOSPC;
	}
	if (!b) {
		b = c->open = batch__new(c);
		if (!b)
			return -ENOMEM;
		b->gen = ++c->next_gen;
		b->id = port_rand_u64();
		c->open_since = port_clock_mono_ns();
	}
	if (b->n_marks == b->cap_marks) {
		size_t cap = b->cap_marks ? 2 * b->cap_marks : 64;
		struct pmark *m = realloc(b->marks, cap * sizeof(*m));

		if (!m)
			return -ENOMEM;
		b->marks = m;
		b->cap_marks = cap;
	}
	before = batch__bytes(b);
	rows_dict(c, b, p, r);
	b->marks[b->n_marks] = (struct pmark){
		.id = w->id, .series = series_of(meta), .grp = group_of_meta(c, meta),
		.ts = meta->time_ns,
		.keyed = (meta->key && *meta->key) || w->lookup, .replay = w->lookup,
		.s_off = b->rows[T_SAMPLES].len, .s_len = r->samples.len,
		.p_off = b->rows[T_PROFILES].len, .p_len = r->profile.len,
	};
	rb_put(&b->rows[T_SAMPLES], r->samples.p, r->samples.len);
	rb_put(&b->rows[T_PROFILES], r->profile.p, r->profile.len);
	for (int t = 0; t < T__N; t++) {
		if (b->rows[t].oom) {
			ch__drop_open(c);
			return -ENOMEM;
		}
	}
	c->rows[T_SAMPLES] += r->n_samples;
	c->rows[T_PROFILES]++;
	b->n_profiles++;
	b->n_rows += r->n_samples;
	b->n_marks++;
	b->dirty |= w->lookup; /* replayed at start: batch__mark_dirty */
	if (w->seq) {
		b->first_seq = b->first_seq ? b->first_seq : w->seq;
		b->last_seq = w->seq;
		b->spool_bytes += w->spool_bytes;
	}
	b->bytes = batch__bytes(b);
	c->queued_bytes += b->bytes - before;
	*gen = b->gen;
	if (ch_batch_full(c, b))
		pthread_cond_signal(&c->wake);
	return 0;
}

void ch__key_set(struct ch_store *c, uint64_t kh, uint64_t id, uint64_t gen)
{
	struct keyent *k = keymap__find(&c->keys, kh, true);

	if (k) {
		k->id = id;
		k->gen = gen;
	}
}

static int label_cmp(const void *a, const void *b)
{
	return strcmp(((const struct record_label *)a)->key, ((const struct record_label *)b)->key);
}

static int ch__put_sorted(struct ch_store *c, const struct record_meta *meta,
			  const void *payload, size_t len, const struct pprof_profile *decoded,
			  uint64_t *seq_out, bool *duplicate);

/* Labels sorted by key (as the ring stores them): one label set, one series, in any order. */
static int ch__put(struct store *base, const struct record_meta *meta, const void *payload,
		   size_t len, const struct pprof_profile *decoded, uint64_t *seq_out,
		   bool *duplicate)
{
	struct record_label labels[STORE_MAX_LABELS];
	struct record_meta m = *meta;

	if (m.n_labels > STORE_MAX_LABELS)
		return -EINVAL;
	if (m.n_labels)
		memcpy(labels, meta->labels, m.n_labels * sizeof(*labels));
	qsort(labels, m.n_labels, sizeof(*labels), label_cmp);
	m.labels = labels;
	return ch__put_sorted(ch_of(base), &m, payload, len, decoded, seq_out, duplicate);
}

static int ch__put_sorted(struct ch_store *c, const struct record_meta *meta,
			  const void *payload, size_t len, const struct pprof_profile *decoded,
			  uint64_t *seq_out, bool *duplicate)
{
	struct pprof_profile *own = NULL;
	struct put_rows r = { 0 };
	struct keyent *k = NULL;
	uint64_t id = 0, gen = 0, kh = meta->key && *meta->key ? key_hash(meta) : 0;
	char err[200];
	int e;

	*duplicate = false;
	if (kh) {
		pthread_mutex_lock(&c->lock);
		k = keymap__find(&c->keys, kh, false);
		if (k && k->id) {
			id = k->id, gen = k->gen;
			c->duplicates++;
			if (c->spool) {	/* gen is its record: acked once that is durable */
				pthread_mutex_unlock(&c->lock);
				e = ringfile__wait_durable(c->spool, gen);
			} else {
				e = ch__wait(c, gen);
				pthread_mutex_unlock(&c->lock);
			}
			*duplicate = true;
			*seq_out = id;
			return e;
		}
		pthread_mutex_unlock(&c->lock);
	}
	if (!decoded) {
		e = pprof_read(payload, len, &ch_read_limits, &own, err, sizeof(err));
		if (e)
			return -EINVAL;
		decoded = own;
	}
	id = new_id(meta);
	if (c->spool) {
		bool spilling;

		/* while uploads spill because ClickHouse fails, their rows would be thrown away
		 * and built again when read back: not built; while it takes batches, the
		 * upload may wait for room (ch__wait_room) and needs them */
		pthread_mutex_lock(&c->lock);
		spilling = c->spill_from && (!c->ch_ok || !c->wait_ms);
		pthread_mutex_unlock(&c->lock);
		e = spilling ? 0 : ch__rows_build(meta, decoded, len, id, &r);
		if (!e)
			e = ch_spool__put(c, meta, payload, len, decoded, &r, id, kh, &gen);
		ch__rows_free(&r);
		pprof_profile__free(own);
		*seq_out = id;
		return e;	/* -ENOSPC: the spool is full */
	}
	e = ch__rows_build(meta, decoded, len, id, &r);
	pthread_mutex_lock(&c->lock);
	if (!e)
		ch__wait_room(c, r.samples.len + r.profile.len, 0);
	if (!e)
		e = ch__put_locked(c, meta, decoded, &r, &(struct ch_put){ .id = id }, &gen);
	if (!e && kh)
		ch__key_set(c, kh, id, gen);
	if (!e) {
		c->puts++;
		e = ch__wait(c, gen);
	}
	if (e)
		c->put_errors++;
	pthread_mutex_unlock(&c->lock);
	ch__rows_free(&r);
	pprof_profile__free(own);
	*seq_out = id;
	return e == -ENOSPC ? -EBUSY : e;	/* the queue is full */
}

/* ---- the writer thread --------------------------------------------------------------------- */

/* A batch's profile ids, sorted, to find which ClickHouse holds (index into marks). */
struct idx {
	uint64_t id;
	size_t i;
};

static int idx_cmp(const void *a, const void *b)
{
	const struct idx *x = a, *y = b;

	return x->id < y->id ? -1 : x->id > y->id;
}

/*
 * Which of the batch's profiles with want[i] table t holds already (gone[i] set). With ranged,
 * only within their time range (and series, for samples: its primary key), which is exact for
 * a batch's own rows; without, within a day of it (a retry of a key may carry another time).
 * 0 or -errno.
 */
static int batch__find(struct ch_store *c, struct ch_conn *conn, const struct ch_batch *b,
		       int t, const bool *want, bool ranged, bool *gone)
{
	struct idx *ix = calloc(b->n_marks + 1, sizeof(*ix));
	struct rb sql = { 0 }, res = { 0 };
	uint64_t lo = UINT64_MAX, hi = 0;
	size_t n = 0;
	struct rb_rd r;
	char err[300];
	int e = 0;

	for (size_t i = 0; ix && i < b->n_marks; i++) {
		if (!want[i])
			continue;
		ix[n++] = (struct idx){ b->marks[i].id, i };
		lo = b->marks[i].ts < lo ? b->marks[i].ts : lo;
		hi = b->marks[i].ts > hi ? b->marks[i].ts : hi;
	}
	if (!ix || !n) {
		free(ix);
		return ix ? 0 : -ENOMEM;
	}
	qsort(ix, n, sizeof(*ix), idx_cmp);
	rb_printf(&sql, t == T_SAMPLES ? "SELECT DISTINCT profile FROM samples"
				       : "SELECT id FROM profiles");
	if (ranged) {
		if (t == T_SAMPLES)
			sql_where_samples(&sql, &(struct store_query){ .from_ns = lo, .to_ns = hi },
					  c->samples_hour);
		else
			sql_where(&sql, &(struct store_query){ .from_ns = lo, .to_ns = hi });
		if (t == T_SAMPLES) {
			rb_printf(&sql, " AND series IN (");
			for (size_t i = 0; i < n; i++)
				rb_printf(&sql, "%s%" PRIu64, i ? "," : "", b->marks[ix[i].i].series);
			rb_printf(&sql, ")");
		}
		rb_printf(&sql, " AND ");
	} else {
		/*
		 * A retry of a key carries its first upload's time (the device's record time, or
		 * the profile's), except from a device without a clock (placed at arrival): looked
		 * for within CH_KEY_WINDOW_NS of it, not in the whole table, which this lookup
		 * read at every batch (growing with the fleet's history).
		 */
		sql_where(&sql, &(struct store_query){
			.from_ns = lo > CH_KEY_WINDOW_NS ? lo - CH_KEY_WINDOW_NS : 0,
			.to_ns = hi + CH_KEY_WINDOW_NS });
		rb_printf(&sql, " AND ");
	}
	rb_printf(&sql, "%s IN (", t == T_SAMPLES ? "profile" : "id");
	for (size_t i = 0; i < n; i++)
		rb_printf(&sql, "%s%" PRIu64, i ? "," : "", ix[i].id);
	rb_printf(&sql, ") FORMAT RowBinary");
	rb_put(&sql, "", 1);
	e = sql.oom ? -ENOMEM : ch_conn__run(conn, (char *)sql.p, CH_QUERY_SETTINGS, NULL, 0,
					     &res, err, sizeof(err));
	rb_free(&sql);
	r = (struct rb_rd){ res.p, res.p + res.len, false };
	while (!e && rd_more(&r)) {
		struct idx key = { rd_u64(&r), 0 }, *f;

		f = bsearch(&key, ix, n, sizeof(*ix), idx_cmp);
		/* ids are unique in a batch, but a key retried within it repeats: all of them */
		while (f && f > ix && f[-1].id == key.id)
			f--;
		for (; f && f < ix + n && f->id == key.id; f++)
			gone[f->i] = true;
	}
	if (!e && r.bad)
		e = -EIO;
	rb_free(&res);
	free(ix);
	return e;
}

/*
 * Removes the rows of marks[i] with gone[i] from the samples body (samples), the profiles
 * body (profiles), or both. Returns the bytes cut.
 */
static size_t batch__cut(struct ch_batch *b, const bool *gone, bool samples, bool profiles)
{
	size_t so = 0, po = 0, cut = 0, n = 0;

	for (size_t i = 0; i < b->n_marks; i++) {
		struct pmark m = b->marks[i];

		if (gone[i] && samples)
			cut += m.s_len, m.s_len = 0;
		if (gone[i] && profiles)
			cut += m.p_len, m.p_len = 0;
		memmove(b->rows[T_SAMPLES].p + so, b->rows[T_SAMPLES].p + m.s_off, m.s_len);
		memmove(b->rows[T_PROFILES].p + po, b->rows[T_PROFILES].p + m.p_off, m.p_len);
		m.s_off = so, m.p_off = po;
		so += m.s_len, po += m.p_len;
		if (m.s_len || m.p_len)
			b->marks[n++] = m;
	}
	b->rows[T_SAMPLES].len = so;
	b->rows[T_PROFILES].len = po;
	b->n_marks = n;
	return cut;
}

/*
 * Before a batch's samples or profiles go, the rows ClickHouse holds already are taken out:
 *  - before the samples, once: keyed profiles whose profile row is there (a retry that another
 *    collector, or this one before a restart, stored): out of both bodies;
 *  - before the samples, profiles replayed from the spool (a batch of them may have landed
 *    just before a kill -9, not yet marked sent), and after an INSERT that failed in a way that
 *    may have applied it (a broken connection; with --ch-cluster, any failure: a Distributed
 *    INSERT reaches each shard apart): those whose rows that table holds, out of its body.
 * Each profile's rows of one table go to one shard in one block, so they land or not whole:
 * the lookup is per profile. 0 or -errno (retried later).
 */
static int batch__check(struct ch_store *c, struct ch_conn *conn, struct ch_batch *b)
{
	bool *want = calloc(b->n_marks + 1, sizeof(bool));
	bool *gone = calloc(b->n_marks + 1, sizeof(bool));
	bool any = false;
	size_t cut = 0;
	int e = want && gone ? 0 : -ENOMEM;

	if (!e && b->stage == T_SAMPLES && !b->deduped) {
		for (size_t i = 0; i < b->n_marks; i++)
			want[i] = b->marks[i].keyed;
		e = batch__find(c, conn, b, T_PROFILES, want, false, gone);
		if (!e)
			cut += batch__cut(b, gone, true, true);
		if (!e)
			b->deduped = true;
	}
	for (size_t i = 0; !e && i < b->n_marks; i++) {
		want[i] = b->ambiguous || (b->stage == T_SAMPLES && b->marks[i].replay);
		gone[i] = false;
		any |= want[i];
	}
	if (!e && any)
		e = batch__find(c, conn, b, b->stage, want, true, gone);
	if (!e && any) {
		cut += batch__cut(b, gone, b->stage == T_SAMPLES, b->stage == T_PROFILES);
		b->ambiguous = false;
	}
	free(want);
	free(gone);
	if (cut) {
		pthread_mutex_lock(&c->lock);
		pr_info("clickhouse: %zu bytes of rows ClickHouse holds already: not sent again",
			cut);
		c->queued_bytes -= cut;
		b->bytes -= cut;
		c->retries_found++;
		pthread_mutex_unlock(&c->lock);
	}
	return e;
}

/* A profile's sample rows in the body, for batch__order. */
struct seg {
	uint64_t series, ts;
	size_t off, len;
};

/*
 * The samples table's order: (hour, series, ts, stack) on one server, where hour is ts's hour
 * (CH_ROLLUP_NS, computed by ClickHouse); --ch-cluster's samples_local keeps (series, ts,
 * stack), the same order for a batch within one hour (a batch crossing one is sorted by
 * ClickHouse there).
 */
static int seg_cmp3(uint64_t xs, uint64_t xt, uint64_t ys, uint64_t yt)
{
	if (xt / CH_ROLLUP_NS != yt / CH_ROLLUP_NS)
		return xt < yt ? -1 : 1;
	if (xs != ys)
		return xs < ys ? -1 : 1;
	return xt < yt ? -1 : xt > yt;
}

static int seg_cmp(const void *a, const void *b)
{
	const struct seg *x = a, *y = b;

	return seg_cmp3(x->series, x->ts, y->series, y->ts);
}

/*
 * The batch's sample rows in the table's order (seg_cmp3, then stack): each profile's rows are
 * by stack already (rows_samples), so its profiles are put in (hour, series, ts) order: their
 * segments of the body, in order (a copy of the rows was made here: a batch's size more memory
 * and a copy of it per batch), into order (kept: the writer's). Their count; 1, the whole
 * body, when in order already; 0 when out of memory (the body goes as it is, ClickHouse sorts
 * it: the same rows either way).
 */
static size_t batch__order(const struct ch_batch *b, struct rb *order)
{
	const struct rb *body = &b->rows[T_SAMPLES];
	bool in_order = true;
	struct seg *sg;

	for (size_t i = 1; i < b->n_marks && in_order; i++)
		in_order = seg_cmp3(b->marks[i - 1].series, b->marks[i - 1].ts,
				    b->marks[i].series, b->marks[i].ts) <= 0;
	sg = rb_room(order, (in_order ? 1 : b->n_marks) * sizeof(*sg));
	if (!sg)
		return 0;
	if (in_order) {
		sg[0] = (struct seg){ .off = 0, .len = body->len };
		return 1;
	}
	for (size_t i = 0; i < b->n_marks; i++)
		sg[i] = (struct seg){ b->marks[i].series, b->marks[i].ts, b->marks[i].s_off,
				      b->marks[i].s_len };
	qsort(sg, b->n_marks, sizeof(*sg), seg_cmp);
	return b->n_marks;
}

/*
 * The samples body (RowBinary rows: day, ts, series, sig, profile, stack, v), its segments sg
 * in turn, as one block of ClickHouse's Native format (per column: name, type, then the values;
 * an Array as its end offsets, then its elements), which ClickHouse reads a column at a time
 * instead of a field at a time (parsing RowBinary was 12-17% of its CPU at ingest). false when
 * out of memory or the rows do not parse: the RowBinary body is sent instead.
 */
static const char *const samples_cols[][2] = {
	{ "day", "Date" }, { "ts", "UInt64" }, { "series", "UInt64" }, { "sig", "UInt64" },
	{ "profile", "UInt64" }, { "stack", "UInt64" }, { "v", "Array(Int64)" },
};

/*
 * k values of a row into a block: most rows have one to four (a call to memcpy of 8 * k bytes
 * was a tenth of arrays_native's instructions).
 */
static inline void values_copy(unsigned char *o, const unsigned char *p, uint64_t k)
{
	if (k > 4) {
		memcpy(o, p, 8 * k);
		return;
	}
	for (uint64_t j = 0; j < k; j++)
		memcpy(o + 8 * j, p + 8 * j, 8);
}

/* Rows and values of one segment, added to *n and *nv: false when they do not parse. */
static bool samples_count(const struct rb *rows, const struct seg *sg, size_t *n, size_t *nv)
{
	struct rb_rd r = { rows->p + sg->off, rows->p + sg->off + sg->len, false };

	while (rd_more(&r)) {
		uint64_t k;

		if ((size_t)(r.end - r.p) < 2 + 5 * 8)
			return false;
		r.p += 2 + 5 * 8;
		k = rd_varint1(&r);
		if (r.bad || k > (size_t)(r.end - r.p) / 8)
			return false;
		r.p += k * 8;
		*nv += k;
		(*n)++;
	}
	return !r.bad && r.p == r.end;
}

/* One segment's rows into the columns at[] of o (n rows in all): from row *i, value *pos. */
static void samples_fill(const struct rb *rows, const struct seg *sg, unsigned char *o,
			 const size_t *at, size_t n, size_t *i, size_t *pos)
{
	struct rb_rd r = { rows->p + sg->off, rows->p + sg->off + sg->len, false };

	for (; rd_more(&r); (*i)++) {
		uint64_t k;

		memcpy(o + at[0] + 2 * *i, r.p, 2);
		for (int c = 1; c < 6; c++)
			memcpy(o + at[c] + 8 * *i, r.p + 2 + 8 * (c - 1), 8);
		r.p += 2 + 5 * 8;
		k = rd_varint1(&r);
		values_copy(o + at[6] + 8 * n + 8 * *pos, r.p, k);
		r.p += 8 * k;
		*pos += k;
		for (int b = 0; b < 8; b++)	/* the end offset, little-endian */
			o[at[6] + 8 * *i + b] = (unsigned char)(*pos >> (8 * b));
	}
}

static bool samples_native(const struct rb *rows, const struct seg *sg, size_t nseg,
			   struct rb *out)
{
	size_t n = 0, nv = 0, at[8], pos, i = 0;

	for (size_t s = 0; s < nseg; s++)
		if (!samples_count(rows, &sg[s], &n, &nv))
			return false;
	if (!n)
		return false;
	pos = 20 + 2 * n + 5 * 8 * n + 8 * n + 8 * nv;	/* its size, reserved once */
	for (int c = 0; c < 7; c++)
		pos += 2 + strlen(samples_cols[c][0]) + strlen(samples_cols[c][1]);
	if (!rb_room(out, pos))
		return false;
	rb_varint(out, 7);
	rb_varint(out, n);
	for (int c = 0; c < 7; c++) {
		rb_str(out, samples_cols[c][0]);
		rb_str(out, samples_cols[c][1]);
		at[c] = out->len;
		pos = c == 0 ? 2 * n : c == 6 ? 8 * n + 8 * nv : 8 * n;
		if (!rb_reserve(out, pos))
			return false;
		out->len += pos;
	}
	if (out->oom)
		return false;
	pos = 0;
	for (size_t s = 0; s < nseg; s++)
		samples_fill(rows, &sg[s], out->p, at, n, &i, &pos);
	return true;
}

/*
 * The same body as one row per profile (the layout of new databases, ch__schema_layout): a
 * profile's rows are consecutive
 * in a segment, one profile id, so each run of one id is folded into a row of its stacks
 * (Array(UInt64)) and their values (Array(Array(Int64))). ClickHouse's per-row work at
 * INSERT (parsing, squashing, partitioning, the sort check, hour) is then per profile.
 */
static const char *const arrays_cols[][2] = {
	{ "day", "Date" }, { "ts", "UInt64" }, { "series", "UInt64" }, { "sig", "UInt64" },
	{ "profile", "UInt64" }, { "stacks", "Array(UInt64)" }, { "v", "Array(Array(Int64))" },
};

/*
 * Profiles (np), stacks (ns) and values (nv) of one segment, added: false if unparsable.
 * Counted in locals, stored once (through the pointers, each row's counts were loads and
 * stores).
 */
static bool arrays_count(const struct rb *rows, const struct seg *sg, size_t *np, size_t *ns,
			 size_t *nv, uint64_t *last)
{
	struct rb_rd r = { rows->p + sg->off, rows->p + sg->off + sg->len, false };
	size_t p = *np, s = *ns, v = *nv;
	uint64_t prev = *last;

	while (rd_more(&r)) {
		uint64_t k, id;

		if ((size_t)(r.end - r.p) < 2 + 5 * 8)
			return false;
		memcpy(&id, r.p + 2 + 3 * 8, 8);
		p += !s || id != prev;
		prev = id;
		r.p += 2 + 5 * 8;
		k = rd_varint1(&r);
		if (r.bad || k > (size_t)(r.end - r.p) / 8)
			return false;
		r.p += k * 8;
		v += k;
		s++;
	}
	*np = p;
	*ns = s;
	*nv = v;
	*last = prev;
	return !r.bad && r.p == r.end;
}

static void put_u64(unsigned char *o, uint64_t v)
{
	memcpy(o, &v, 8);	/* Native is little-endian, as every board we build for */
}

/* Where each column's values start in the block; the state of the fill. */
struct arrays_fill {
	size_t at[7], np, ns;	/* columns; profiles and stacks in all */
	size_t p, s, pos;	/* next profile row, next stack, next value */
	uint64_t last;
};

/*
 * One segment's rows into the block o. The state is kept in locals and stored back once: o is
 * bytes, which may alias f, so each store to it reloaded f's fields (a third of the fill).
 */
static void arrays_fill(const struct rb *rows, const struct seg *sg, unsigned char *o,
			struct arrays_fill *f)
{
	struct rb_rd r = { rows->p + sg->off, rows->p + sg->off + sg->len, false };
	unsigned char *scal[5], *stacks = o + f->at[5] + 8 * f->np, *ends = o + f->at[6];
	unsigned char *inner = ends + 8 * f->np, *vals = inner + 8 * f->ns;
	size_t p = f->p, s = f->s, pos = f->pos;
	uint64_t last = f->last;

	for (int c = 0; c < 5; c++)
		scal[c] = o + f->at[c];
	while (rd_more(&r)) {
		uint64_t k, id;

		memcpy(&id, r.p + 2 + 3 * 8, 8);
		if (!s || id != last) {	/* a new profile row: its scalars */
			memcpy(scal[0] + 2 * p, r.p, 2);
			for (int c = 1; c < 5; c++)
				memcpy(scal[c] + 8 * p, r.p + 2 + 8 * (c - 1), 8);
			p++;
		}
		last = id;
		memcpy(stacks + 8 * s, r.p + 2 + 4 * 8, 8);
		r.p += 2 + 5 * 8;
		k = rd_varint1(&r);
		values_copy(vals + 8 * pos, r.p, k);
		r.p += 8 * k;
		pos += k;
		s++;
		put_u64(inner + 8 * (s - 1), pos);		/* inner end offset */
		put_u64(o + f->at[5] + 8 * (p - 1), s);	/* the row's ends */
		put_u64(ends + 8 * (p - 1), s);
	}
	f->p = p;
	f->s = s;
	f->pos = pos;
	f->last = last;
}

static bool arrays_native(const struct rb *rows, const struct seg *sg, size_t nseg,
			  struct rb *out)
{
	struct arrays_fill f = { 0 };
	size_t nv = 0, sz;
	uint64_t last = 0;

	for (size_t s = 0; s < nseg; s++)
		if (!arrays_count(rows, &sg[s], &f.np, &f.ns, &nv, &last))
			return false;
	if (!f.np)
		return false;
	sz = 20 + 2 * f.np + 4 * 8 * f.np + 2 * 8 * f.np + 2 * 8 * f.ns + 8 * nv;
	for (int c = 0; c < 7; c++)
		sz += 2 + strlen(arrays_cols[c][0]) + strlen(arrays_cols[c][1]);
	if (!rb_room(out, sz))
		return false;
	rb_varint(out, 7);
	rb_varint(out, f.np);
	for (int c = 0; c < 7; c++) {
		rb_str(out, arrays_cols[c][0]);
		rb_str(out, arrays_cols[c][1]);
		f.at[c] = out->len;
		sz = c == 0 ? 2 * f.np : c == 5 ? 8 * (f.np + f.ns)
		   : c == 6 ? 8 * (f.np + f.ns + nv) : 8 * f.np;
		if (!rb_reserve(out, sz))
			return false;
		out->len += sz;
	}
	if (out->oom)
		return false;
	for (size_t s = 0; s < nseg; s++)
		arrays_fill(rows, &sg[s], out->p, &f);
	return true;
}

/* A whole samples body as one Native block, in either layout (for tests/unit/store/ch/ch-rows-test.c). */
bool ch__samples_block(const struct rb *rows, bool arrays, struct rb *out)
{
	const struct seg sg = { .off = 0, .len = rows->len };

	return arrays ? arrays_native(rows, &sg, 1, out) : samples_native(rows, &sg, 1, out);
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * Appends the batch's hours to sql as VALUES "('day', hour<tail>), ..." (each hour once) and
 * their count to *u, with the terminating NUL. 0 or -ENOMEM (n_marks x 8 bytes).
 */
static int batch__hours(const struct ch_batch *b, struct rb *sql, const char *tail, size_t *u)
{
	uint64_t *h = malloc((b->n_marks + 1) * sizeof(*h));
	size_t n = 0;

	if (!h)
		return -ENOMEM;
	for (size_t i = 0; i < b->n_marks; i++)
		if (b->marks[i].s_len)
			h[n++] = b->marks[i].ts / CH_ROLLUP_NS;
	qsort(h, n, sizeof(*h), u64_cmp);
	for (size_t i = 0; i < n; i++) {
		time_t t = (time_t)(h[i] * 3600);
		struct tm tm;

		if (i && h[i] == h[i - 1])
			continue;
		gmtime_r(&t, &tm);
		rb_printf(sql, "%s('%04d-%02d-%02d', %" PRIu64 "%s)", (*u)++ ? ", " : "",
			  tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, h[i], tail);
	}
	rb_put(sql, "", 1);
	free(h);
	return sql->oom ? -ENOMEM : 0;
}

/*
 * Write-ahead intent for the two INSERTs of a batch on one server (samples, then its rollup
 * rows): a collector killed between them (kill -9, OOM) would leave rows in samples that
 * samples_1g never gets, with no hour marked. So before its samples the batch's hours go to
 * rollup_pending with sign 1 (intent), and once its rollup rows are in (or its hours marked
 * dirty) the same rows with sign -1 (done). Merges read an hour raw while a batch of it has
 * more intents than dones (ch-query.c), and CollapsingMergeTree's merges take the pairs away:
 * the table holds little beyond batches in flight or lost. An intent that failed ambiguously
 * and was sent again leaves its hours read raw for good: exact, only slower.
 * 0 or -errno (retried: the batch waits).
 */
static int batch__intent(struct ch_store *c, struct ch_conn *conn, struct ch_batch *b, int sign)
{
	struct rb sql = { 0 };
	char tail[48], err[300];
	size_t u = 0;
	int e;

	snprintf(tail, sizeof(tail), ", %" PRIu64 ", %d", b->id, sign);
	rb_printf(&sql, "INSERT INTO rollup_pending (day, hour, batch, sign) VALUES ");
	e = batch__hours(b, &sql, tail, &u);
	e = e ? e : !u ? 0 : ch_conn__run(conn, (char *)sql.p, NULL, NULL, 0, NULL, err,
					  sizeof(err));
	rb_free(&sql);
	if (e) {
		pthread_mutex_lock(&c->lock);
		c->insert_errors++;
		if (strcmp(c->last_error, err))
			pr_warn("clickhouse: INSERT INTO rollup_pending: %s", err);
		snprintf(c->last_error, sizeof(c->last_error), "%s", err);
		pthread_mutex_unlock(&c->lock);
	} else {
		b->intent = sign > 0 ? CH_INTENT_PENDING : CH_INTENT_DONE;
	}
	return e;
}

/*
 * ClickHouse writes an INSERT's part of samples, then its view's part of samples_1h, not at
 * once (on one server the collector's rollup rows, samples_1g's, are an INSERT of their own,
 * after the samples: batch__rollup): an INSERT into samples that failed (a server dying or
 * restarting in it) may leave rows in samples that the rollup never gets, for good (the retry
 * sends only what is not there). So before the batch's samples go again, the hours of its
 * rows go to rollup_dirty, which merges read raw (ch-query.c): by the time a profile of it is
 * acknowledged, they are marked. The same for uploads replayed from the spool at start (a
 * collector killed between a failed INSERT and its mark), and for a batch whose rollup rows
 * failed (batch__rollup). 0 or -errno (retried first: the samples wait).
 */
static int batch__mark_dirty(struct ch_store *c, struct ch_conn *conn, struct ch_batch *b)
{
	const char *settings = c->cluster[0] ? "insert_distributed_sync=1" : NULL;
	struct rb sql = { 0 };
	size_t u = 0;
	char err[300];
	int e;

	rb_printf(&sql, "INSERT INTO rollup_dirty (day, hour) VALUES ");
	e = batch__hours(b, &sql, "", &u);
	e = e ? e : !u ? 0 : ch_conn__run(conn, (char *)sql.p, settings, NULL, 0, NULL, err,
					  sizeof(err));
	rb_free(&sql);
	pthread_mutex_lock(&c->lock);
	if (!e && u) {
		c->dirty_hours += u;
		pr_warn("clickhouse: %zu hour%s marked in rollup_dirty (%s): merges read %s raw",
			u, u > 1 ? "s" : "", b->rollup_failed ? "its samples_1g rows failed" :
			"an INSERT into samples failed, or replayed at start", u > 1 ? "them" : "it");
	} else if (e) {
		c->insert_errors++;
		if (strcmp(c->last_error, err))
			pr_warn("clickhouse: INSERT INTO rollup_dirty: %s", err);
		snprintf(c->last_error, sizeof(c->last_error), "%s", err);
	}
	pthread_mutex_unlock(&c->lock);
	if (!e)
		b->dirty = false;
	return e;
}

/*
 * The batch's rollup rows were not built, or their INSERT failed: its hours go to rollup_dirty
 * instead (batch__mark_dirty). Counted, logged once per distinct error, kept as last_error.
 */
static void batch__rollup_failed(struct ch_store *c, struct ch_batch *b, const char *what,
				 const char *err)
{
	b->rollup_failed = true;
	pthread_mutex_lock(&c->lock);
	c->rollup_failures++;
	if (strcmp(c->last_error, err))
		pr_warn("clickhouse: %s (%zu profiles waiting): %s: their hours are marked dirty",
			what, b->n_profiles, err);
	snprintf(c->last_error, sizeof(c->last_error), "%s", err);
	pthread_mutex_unlock(&c->lock);
}

/*
 * The batch's hourly rollup rows (ch-rollup.c), once its samples are in and before its profile
 * rows (a profile row means stored to a retry). Not sent again after a failed INSERT (any
 * error, -ENOMEM too: it may come from reading the answer, after the body went): that one
 * may have been applied and a second would count its rows twice, so the
 * retry marks their hours in rollup_dirty instead (merges read them raw), as for samples whose
 * view insert may be lost. A collector killed before this leaves its records in the spool,
 * whose replay at start marks their hours. 0 or -errno (retried: the profiles wait).
 */
static int batch__rollup(struct ch_store *c, struct ch_conn *conn, struct ch_batch *b)
{
	struct rb *body = &c->scratch.native;
	size_t n = 0;
	char err[300] = "clickhouse: out of memory";
	int e;

	if (b->rollup_failed) {
		e = batch__mark_dirty(c, conn, b);
		b->rolled = !e;
		return e;
	}
	e = ch_rollup__build(b, &c->scratch, body, &n);
	if (e) {
		/* built again, it would most likely fail again (and hold the queue): marked */
		snprintf(err, sizeof(err), "clickhouse: %s", e == -EINVAL ?
			 "sample rows that do not parse" : strerror(-e));
		batch__rollup_failed(c, b, "samples_1g rows not built", err);
		e = batch__mark_dirty(c, conn, b);
		b->rolled = !e;
		return e;
	}
	/*
	 * Any failure from here on may come after the body was written (ch_conn__run's -ENOMEM
	 * too: from reading the answer), so the INSERT may be applied: never sent again.
	 */
	if (n)
		e = ch_conn__run(conn, "INSERT INTO samples_1g FORMAT Native",
				 CH_INSERT_SETTINGS, body->p, body->len, NULL, err, sizeof(err));
	if (e) {
		pthread_mutex_lock(&c->lock);
		c->insert_errors++;
		pthread_mutex_unlock(&c->lock);
		batch__rollup_failed(c, b, "INSERT INTO samples_1g", err);
	}
	b->rolled = !e;
	return e;
}

static int batch__send(struct ch_store *c, struct ch_conn *conn, struct ch_batch *b)
{
	const char *settings = c->cluster[0] ? "insert_distributed_sync=1&" CH_INSERT_SETTINGS
					     : CH_INSERT_SETTINGS;
	char sql[128], err[300];

	for (; b->stage < T__N; b->stage++) {
		const struct rb *body = &b->rows[b->stage];
		struct rb *order = &c->scratch.seg, *native = &c->scratch.native;
		int e;

		if (b->stage == T_SAMPLES && c->own_rollup && b->intent == CH_INTENT_NONE) {
			e = batch__intent(c, conn, b, 1);
			if (e)
				return e;
		}
		if (b->stage == T_SAMPLES && b->dirty) {
			e = batch__mark_dirty(c, conn, b);
			if (e)
				return e;
		}
		if (b->stage == T_PROFILES && c->own_rollup && !b->rolled) {
			e = batch__rollup(c, conn, b);
			if (e)
				return e;
		}
		if (b->stage == T_PROFILES && b->intent == CH_INTENT_PENDING) {
			e = batch__intent(c, conn, b, -1);
			if (e)
				return e;
		}
		if (b->stage == T_SAMPLES || b->stage == T_PROFILES) {
			e = batch__check(c, conn, b);
			if (e)
				return e;
		}
		if (!b->rows[b->stage].len)
			continue;
		if (b->stage == T_SAMPLES) {
			size_t nseg = batch__order(b, order);
			const struct seg *sg = (const void *)order->p;

			if (c->samples_arrays ? nseg && arrays_native(body, sg, nseg, native)
					      : nseg && samples_native(body, sg, nseg, native))
				body = native;
			else if (c->samples_arrays) /* no RowBinary of a profile's row: later */
				return -ENOMEM;
		}
		snprintf(sql, sizeof(sql), "INSERT INTO %s FORMAT %s", ch_table_names[b->stage],
			 body == native ? "Native" : "RowBinary");
		e = ch_conn__run(conn, sql, settings, body->p, body->len, NULL, err, sizeof(err));
		if (e) {
			/* an answer from ClickHouse (-EIO) means not applied (one server); a
			 * broken connection, or any failure of a Distributed INSERT, either; and
			 * samples' part may be written without its view's (batch__mark_dirty) */
			b->ambiguous = e != -EIO || c->cluster[0] || b->stage == T_SAMPLES;
			b->dirty |= b->stage == T_SAMPLES;
			pthread_mutex_lock(&c->lock);
			c->insert_errors++;
			if (strcmp(c->last_error, err))
				pr_warn("clickhouse: INSERT INTO %s (%zu profiles waiting): %s",
					ch_table_names[b->stage], b->n_profiles, err);
			snprintf(c->last_error, sizeof(c->last_error), "%s", err);
			pthread_mutex_unlock(&c->lock);
			return e;
		}
	}
	return 0;
}

void ch__seal(struct ch_store *c)
{
	struct ch_batch *b = c->open;

	if (!b)
		return;
	c->open = NULL;
	if (c->tail)
		c->tail->next = b;
	else
		c->head = b;
	c->tail = b;
}

/* Seals the open batch when it is due (lock held): full, old enough, or stopping. */
static void ch__seal_due(struct ch_store *c)
{
	struct ch_batch *b = c->open;
	uint64_t now = port_clock_mono_ns();

	if (!b || (!ch_batch_full(c, b) && !c->stop &&
		   now - c->open_since < (uint64_t)c->batch_ms * 1000000))
		return;
	ch__seal(c);
}

static void *ch__writer(void *arg)
{
	struct ch_store *c = arg;
	struct ch_conn *conn = ch_conn__new(&c->o);
	unsigned backoff_ms = 0;
	uint64_t retain_due = 0;

	pthread_mutex_lock(&c->lock);
	while (conn) {
		struct ch_batch *b;
		struct timespec ts;
		int e;

		if ((c->retention_days || c->own_rollup) && port_clock_mono_ns() >= retain_due &&
		    !c->stop) {
			pthread_mutex_unlock(&c->lock);
			ch_retain__run(c, conn);
			pthread_mutex_lock(&c->lock);
			retain_due = port_clock_mono_ns() + 3600 * NSEC_PER_SEC;
		}
		ch__seal_due(c);
		b = c->head;
		if (!b && c->stop)
			break;
		if (!b)
			ch__keep_idle(c);
		if (!b || backoff_ms) {
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += (long)(backoff_ms ? backoff_ms : 20) * 1000000;
			ts.tv_sec += ts.tv_nsec / 1000000000;
			ts.tv_nsec %= 1000000000;
			pthread_cond_timedwait(&c->wake, &c->lock, &ts);
			if (backoff_ms && c->stop)
				break; /* ClickHouse is down at exit: nothing queued was acked */
			backoff_ms = 0;
			if (!b)
				continue;
		}
		pthread_mutex_unlock(&c->lock);
		e = batch__send(c, conn, b);
		if (!e && c->spool)
			ch_spool__done(c, b);
		pthread_mutex_lock(&c->lock);
		if (e) {
			backoff_ms = 100;
			c->ch_ok = false;	/* uploads waiting for room spill now */
			pthread_cond_broadcast(&c->done);
			continue;
		}
		c->ch_ok = true;
		c->head = b->next;
		if (!c->head)
			c->tail = NULL;
		c->queued_bytes -= b->bytes;
		c->done_gen = b->gen;
		c->batches++;
		c->last_error[0] = '\0';
		pthread_cond_broadcast(&c->done);
		pthread_cond_signal(&c->refill);
		batch__recycle(c, b);
		c->last_sent_ns = port_clock_mono_ns();
	}
	pthread_mutex_unlock(&c->lock);
	ch_conn__free(conn);
	return NULL;
}

/* ---- state --------------------------------------------------------------------------------- */

static void ch__stats(struct store *base, struct store_stats *st)
{
	struct ch_store *c = ch_of(base);

	memset(st, 0, sizeof(*st));
	st->backend = STORE_CLICKHOUSE;
	pthread_mutex_lock(&c->lock);
	st->puts = c->puts;
	st->duplicates = c->duplicates;
	st->put_errors = c->put_errors;
	st->merges = c->merges;
	st->merge_skipped = c->merge_skipped;
	st->rollups_read = c->rollup_merges;
	st->ch.batches = c->batches;
	st->ch.insert_errors = c->insert_errors;
	st->ch.refused_full = c->refused_full;
	st->ch.ack_timeouts = c->ack_timeouts;
	st->ch.queued_bytes = c->queued_bytes;
	st->ch.queue_capacity = c->queue_bytes;
	st->ch.sample_rows = c->rows[T_SAMPLES];
	st->ch.stack_rows = c->rows[T_STACKS];
	st->ch.intern_resets = c->fns.resets + c->maps.resets + c->locs.resets +
			       c->stacks.resets;
	st->ch.partitions_dropped = c->partitions_dropped;
	st->ch.rollup_dirty_hours = c->dirty_hours;
	st->ch.rollup_failures = c->rollup_failures;
	st->ch.rollup_views = c->rollup_views;
	st->ch.spool = c->spool != NULL;
	st->ch.spool_pending = c->spool_pending;
	st->ch.spool_capacity = c->spool_capacity;
	st->ch.spool_spilled = c->spool_spilled;
	st->ch.spool_replayed = c->spool_replayed;
	st->ch.spool_refused = c->spool_refused;
	st->ch.spool_lost = c->spool_lost;
	st->ch.waits = c->waits;
	st->ch.wait_timeouts = c->wait_timeouts;
	st->ch.wait_ns = c->wait_ns;
	st->ch.waiting = c->waiting;
	pthread_mutex_unlock(&c->lock);
}

static void ch__free(struct store *base)
{
	struct ch_store *c = ch_of(base);

	pthread_mutex_lock(&c->lock);
	c->stop = true;
	pthread_cond_signal(&c->wake);
	pthread_cond_signal(&c->refill);
	pthread_mutex_unlock(&c->lock);
	if (c->replayer_started)
		pthread_join(c->replayer, NULL);
	if (c->writer_started)
		pthread_join(c->writer, NULL);
	batch__free(c->open);
	while (c->head) {
		struct ch_batch *b = c->head;

		c->head = b->next;
		batch__free(b);
	}
	batch__free(c->spare);
	ch_scratch__free(&c->scratch);
	free(c->fns.v), free(c->maps.v), free(c->locs.v), free(c->stacks.v);
	free(c->keys.v);
	free(c->shard_urls);
	ringfile__free(c->spool);
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->wake);
	pthread_cond_destroy(&c->done);
	pthread_cond_destroy(&c->refill);
	free(c);
}

/*
 * --ch-cluster: table t as <name>_local on this server, and <name> a Distributed table over the
 * cluster's <name>_local tables, which every query and INSERT of this file uses unchanged
 * (ON CLUSTER needs ZooKeeper in 18.16: each shard's tables are created by a collector that
 * talks to it, or by these statements run there).
 */
static int ch__schema_sharded(struct ch_store *c, struct ch_conn *conn, int t, char *err,
			      size_t errlen)
{
	const char *name = ch_table_names[t], *def = strchr(ch_schema[t], '(');

	if (t == T_SAMPLES)
		def = c->samples_arrays ? ch_samples_sharded : ch_samples_sharded_rows;
	struct rb sql = { 0 };
	int e;

	rb_printf(&sql, "CREATE TABLE IF NOT EXISTS %s_local %s", name, def);
	rb_put(&sql, "", 1);
	e = sql.oom ? -ENOMEM : ch_conn__run(conn, (char *)sql.p, NULL, NULL, 0, NULL, err, errlen);
	sql.len = 0;
	rb_printf(&sql, "CREATE TABLE IF NOT EXISTS %s AS %s_local ENGINE = Distributed(%s, %s, "
		  "%s_local, %s)", name, name, c->cluster, c->o.database, name, ch_shard_key[t]);
	rb_put(&sql, "", 1);
	if (!e)
		e = sql.oom ? -ENOMEM : ch_conn__run(conn, (char *)sql.p, NULL, NULL, 0, NULL, err,
						     errlen);
	rb_free(&sql);
	return e;
}

/*
 * The hourly rollup (store/README.md "Rollup"): every INSERT into samples summed by (series,
 * sig, hour, stack) into samples_1h (by the collector; with --ch-cluster, by a view), so a
 * merge over whole hours reads one row per series, hour and stack instead of one per profile
 * and stack. Scalar columns (v0..v3, CH_ROLLUP_VALUES) sum several times faster than
 * sumForEach over an Array; a kind with more sample types is not rolled up (read raw). %s is
 * the tables' suffix ("_local" with --ch-cluster: the view is on each shard's local table).
 * On one server the collector sums (ch-rollup.c): the view's grouping and sorting of every
 * INSERT were 30-60% of ClickHouse's CPU at ingest.
 */
static const char ch_rollup_table[] =
	"CREATE TABLE IF NOT EXISTS samples_1h%s (day Date, hour UInt32, series UInt64, "
	"sig UInt64, stack UInt64, v0 Int64, v1 Int64, v2 Int64, v3 Int64) "
	"ENGINE = SummingMergeTree((v0, v1, v2, v3)) PARTITION BY day "
	"ORDER BY (series, sig, hour, stack)";
#define CH_ROLLUP_VIEW(from)							\
	"CREATE MATERIALIZED VIEW IF NOT EXISTS samples_1h_mv TO samples_1h%s AS SELECT day, "	\
	"toUInt32(intDiv(ts, 3600000000000)) AS hour, series, sig, stack, sum(v[1]) AS v0, "	\
	"sum(v[2]) AS v1, sum(v[3]) AS v2, sum(v[4]) AS v3 FROM " from " "			\
	"WHERE length(v) <= 4 GROUP BY day, hour, series, sig, stack"
static const char ch_rollup_view[] = CH_ROLLUP_VIEW("samples%s " CH_SAMPLES_JOIN);
static const char ch_rollup_view_rows[] = CH_ROLLUP_VIEW("samples%s");
/* From which time (ns, a whole hour) the rollup holds every row: see ch__schema_rollup. */
static const char ch_rollup_since[] =
	"CREATE TABLE IF NOT EXISTS samples_1h_since%s (since UInt64) ENGINE = Log";

/*
 * The rollup by group (one server): samples summed by (group, sig, hour, stack), the group
 * (ch__group_of) being a series' labels but the device's. A fleet of 100,000 devices at one
 * upload a minute has each batch hold about one profile a device: summed per series (by
 * samples_1h's key) each profile's ~715 stacks were rows of their own, written and merged
 * again and again (~60% of ClickHouse's CPU at ingest, 0.675 ms a profile, store/README.md);
 * summed per group, a batch's profiles of one firmware and region fold into one row a stack.
 * Merges read it for selections of whole groups (ch-query.c), raw rows otherwise.
 */
static const char ch_group_table[] =
	"CREATE TABLE IF NOT EXISTS samples_1g (day Date, hour UInt32, grp UInt64, sig UInt64, "
	"stack UInt64, v0 Int64, v1 Int64, v2 Int64, v3 Int64) "
	"ENGINE = SummingMergeTree((v0, v1, v2, v3)) PARTITION BY day "
	"ORDER BY (grp, sig, hour, stack)";
/*
 * The database's group rule: the labels a group leaves out. Its first row rules (a Log
 * table reads in the order rows went in), written by the first collector that finds none,
 * so that every collector, and every merge, computes the same groups.
 */
static const char ch_group_rule[] =
	"CREATE TABLE IF NOT EXISTS samples_1g_rule (without String) ENGINE = Log";

/* Hours whose rollup may be short (batch__mark_dirty): merges read them raw. */
static const char ch_rollup_dirty[] =
	"CREATE TABLE IF NOT EXISTS rollup_dirty%s (day Date, hour UInt32) "
	"ENGINE = ReplacingMergeTree PARTITION BY day ORDER BY hour";

/*
 * In the view's place on one server, a table of its name: an older collector started again
 * runs CREATE MATERIALIZED VIEW IF NOT EXISTS samples_1h_mv, which then creates nothing
 * (checked on 18.16), instead of a view that would count every batch of ours twice.
 */
static const char ch_rollup_tombstone[] =
	"CREATE TABLE IF NOT EXISTS samples_1h_mv (tombstone UInt8) ENGINE = Null";

/* batch__intent's table (one server only: with --ch-cluster the view fills samples_1h) */
static const char ch_rollup_pending[] =
	"CREATE TABLE IF NOT EXISTS rollup_pending (day Date, hour UInt32, batch UInt64, "
	"sign Int8) ENGINE = CollapsingMergeTree(sign) PARTITION BY day ORDER BY (hour, batch)";

/* One statement of fmt with the suffix sfx in every %s (at most two). */
static int ch__run_fmt(struct ch_conn *conn, const char *fmt, const char *sfx, struct rb *out,
		       char *err, size_t errlen)
{
	struct rb sql = { 0 };
	int e;

	rb_printf(&sql, fmt, sfx, sfx);
	rb_put(&sql, "", 1);
	e = sql.oom ? -ENOMEM : ch_conn__run(conn, (char *)sql.p, NULL, NULL, 0, out, err, errlen);
	rb_free(&sql);
	return e;
}

/* The one UInt64 that a SELECT answers (in RowBinary), 0 when it answers no row. */
static int ch__run_u64(struct ch_conn *conn, const char *fmt, const char *sfx, uint64_t *v,
		       char *err, size_t errlen)
{
	struct rb res = { 0 };
	struct rb_rd r;
	int e = ch__run_fmt(conn, fmt, sfx, &res, err, errlen);

	r = (struct rb_rd){ res.p, res.p + res.len, false };
	*v = !e && rd_more(&r) ? rd_u64(&r) : 0;
	if (!e && r.bad) {
		snprintf(err, errlen, "clickhouse: malformed answer to '%.60s'", fmt);
		e = -EIO;
	}
	rb_free(&res);
	return e;
}

/* samples made before its hour column (CH_SAMPLES_HOUR) gets it (one server only). */
static int ch__schema_hour(struct ch_store *c, struct ch_conn *conn, char *err, size_t errlen)
{
	uint64_t has = 0;
	int e;

	if (!c->samples_hour)
		return 0;
	e = ch__run_u64(conn, "SELECT count() FROM system.columns WHERE database = "
			"currentDatabase() AND table = 'samples' AND name = 'hour' FORMAT RowBinary",
			"", &has, err, errlen);
	if (!e && !has) {
		e = ch__run_fmt(conn, "ALTER TABLE samples ADD COLUMN " CH_SAMPLES_HOUR, "", NULL,
				err, errlen);
		if (!e)
			pr_info("clickhouse: samples: column hour added (a table made by an older "
				"collector: its key stays)");
	}
	return e;
}

/*
 * The rollup's table and watermark on this server, and with --ch-cluster its view (on one
 * server the collector sums samples_1h itself, ch-rollup.c, and drops the view an older
 * collector made: it would count every row again). The rollup gets only what is inserted
 * after it exists: on a database made by an older collector the rows already in samples are
 * not in samples_1h. So when the rollup is new (or the watermark missing), the watermark is the
 * hour after the newest sample row, read once the view exists (or this collector sums): any
 * row inserted before has ts below it, any row at or after it is rolled up. Merges read the
 * rollup only from there on (max over every server's watermark).
 */
static int ch__schema_rollup(struct ch_store *c, struct ch_conn *conn, char *err, size_t errlen)
{
	const char *sfx = c->cluster[0] ? "_local" : "";
	uint64_t views = 0, marks = 0, newest = 0;
	char sql[400];
	int e = ch__schema_hour(c, conn, err, errlen);

	if (!e)
		e = ch__run_fmt(conn, ch_rollup_table, sfx, NULL, err, errlen);

	if (!e)
		e = ch__run_fmt(conn, ch_rollup_since, sfx, NULL, err, errlen);
	if (!e)
		e = ch__run_fmt(conn, ch_rollup_dirty, sfx, NULL, err, errlen);
	if (!e && c->own_rollup)
		e = ch__run_fmt(conn, ch_rollup_pending, "", NULL, err, errlen);
	if (!e && c->cluster[0]) {
		snprintf(sql, sizeof(sql), "CREATE TABLE IF NOT EXISTS rollup_dirty AS "
			 "rollup_dirty_local ENGINE = Distributed(%s, %s, rollup_dirty_local, hour)",
			 c->cluster, c->o.database);
		e = ch__run_fmt(conn, sql, "", NULL, err, errlen);
	}
	if (!e && c->cluster[0]) {
		snprintf(sql, sizeof(sql), "CREATE TABLE IF NOT EXISTS samples_1h AS "
			 "samples_1h_local ENGINE = Distributed(%s, %s, samples_1h_local, series)",
			 c->cluster, c->o.database);
		e = ch__run_fmt(conn, sql, "", NULL, err, errlen);
		snprintf(sql, sizeof(sql), "CREATE TABLE IF NOT EXISTS samples_1h_since AS "
			 "samples_1h_since_local ENGINE = Distributed(%s, %s, "
			 "samples_1h_since_local)", c->cluster, c->o.database);
		if (!e)
			e = ch__run_fmt(conn, sql, "", NULL, err, errlen);
	}
	if (!e)
		e = ch__run_u64(conn, "SELECT count() FROM system.tables WHERE database = "
				"currentDatabase() AND name = 'samples_1h_mv' AND engine = "
				"'MaterializedView' FORMAT RowBinary", "", &views, err, errlen);
	if (!e && views && c->own_rollup) {
		e = ch__run_fmt(conn, "DROP TABLE IF EXISTS samples_1h_mv", "", NULL, err, errlen);
		if (!e)
			pr_info("clickhouse: samples_1h_mv dropped: collectors sum samples_1h "
				"themselves now (an older collector would leave its rows out of it)");
	}
	if (!e && c->own_rollup)	/* the tombstone: an older collector's view cannot come back */
		e = ch__run_fmt(conn, ch_rollup_tombstone, "", NULL, err, errlen);
	if (!e)
		e = ch__run_u64(conn, "SELECT count() FROM samples_1h_since%s FORMAT RowBinary",
				sfx, &marks, err, errlen);
	if (e || ((views || c->own_rollup) && marks))
		return e;
	if (!c->own_rollup)
		e = ch__run_fmt(conn, c->samples_arrays ? ch_rollup_view : ch_rollup_view_rows, sfx,
				NULL, err, errlen);
	if (!e)
		e = ch__run_u64(conn, "SELECT max(ts) FROM samples%s FORMAT RowBinary", sfx,
				&newest, err, errlen);
	if (e)
		return e;
	newest = newest ? (newest / CH_ROLLUP_NS + 1) * CH_ROLLUP_NS : 0;
	snprintf(sql, sizeof(sql), "INSERT INTO samples_1h_since%%s VALUES (%" PRIu64 ")", newest);
	e = ch__run_fmt(conn, sql, sfx, NULL, err, errlen);
	if (!e && newest)
		pr_info("clickhouse: hourly rollup created on a database with samples: merges "
			"read it from %" PRIu64 " (unix s) on, raw rows before", (uint64_t)(newest / NSEC_PER_SEC));
	return e;
}

/*
 * samples_1g and the database's group rule (one server): the first collector writes its own
 * (--ch-rollup-without), every collector then reads the first row and keeps to it.
 */
static int ch__schema_group(struct ch_store *c, struct ch_conn *conn, char *err, size_t errlen)
{
	char without[CH_GROUP_WITHOUT_LEN];
	struct rb sql = { 0 }, res = { 0 };
	struct rb_rd r;
	uint64_t rules = 0;
	int e = ch__run_fmt(conn, ch_group_table, "", NULL, err, errlen);

	memcpy(without, c->group_without, sizeof(without));
	if (!e)
		e = ch__run_fmt(conn, ch_group_rule, "", NULL, err, errlen);
	if (!e)
		e = ch__run_u64(conn, "SELECT count() FROM samples_1g_rule FORMAT RowBinary", "",
				&rules, err, errlen);
	if (!e && !rules) {	/* without: checked by store_ch__open, nothing to quote */
		rb_printf(&sql, "INSERT INTO samples_1g_rule VALUES ('%s')", without);
		rb_put(&sql, "", 1);
		e = sql.oom ? -ENOMEM : ch_conn__run(conn, (char *)sql.p, NULL, NULL, 0, NULL, err,
						     errlen);
		if (!e)
			pr_info("clickhouse: hourly rollup by group (samples_1g) created: groups "
				"leave out the device and the labels '%s'", without);
	}
	if (!e)
		e = ch__run_fmt(conn, "SELECT without FROM samples_1g_rule LIMIT 1 FORMAT RowBinary",
				"", &res, err, errlen);
	r = (struct rb_rd){ res.p, res.p + res.len, false };
	if (!e)
		rd_strcpy(&r, c->group_without, sizeof(c->group_without));
	if (!e && r.bad) {
		snprintf(err, errlen, "clickhouse: samples_1g_rule: malformed answer");
		e = -EIO;
	}
	if (!e && strcmp(c->group_without, without))
		pr_info("clickhouse: rollup groups leave out the labels '%s' (the database's rule, "
			"not --ch-rollup-without's '%s')", c->group_without, without);
	rb_free(&sql);
	rb_free(&res);
	return e;
}

/*
 * samples' layout: one row per profile (arrays_native), unless the database has samples
 * from before it (a column stack), which it keeps: no rows moved, every reader picks its SQL
 * by c->samples_arrays. With --ch-cluster, this shard's samples_local decides.
 */
static int ch__schema_layout(struct ch_store *c, struct ch_conn *conn, char *err, size_t errlen)
{
	uint64_t rows = 0;
	int e = ch__run_u64(conn, "SELECT count() FROM system.columns WHERE database = "
			    "currentDatabase() AND table = 'samples%s' AND name = 'stack' "
			    "FORMAT RowBinary", c->cluster[0] ? "_local" : "", &rows, err, errlen);

	c->samples_arrays = !e && !rows;
	if (!e && rows)
		pr_info("clickhouse: samples: one row per profile and stack (a table made by an "
			"older collector): kept");
	return e;
}

/* Creates the database and the tables when missing (18.16 syntax, checked on 18.16.1). */
static int ch__schema(struct ch_store *c, char *err, size_t errlen)
{
	struct ch_opts o = c->o;
	struct ch_conn *conn;
	char sql[128];
	int e;

	snprintf(o.database, sizeof(o.database), "default");
	conn = ch_conn__new(&o);
	if (!conn)
		return -ENOMEM;
	snprintf(sql, sizeof(sql), "CREATE DATABASE IF NOT EXISTS %s", c->o.database);
	e = ch_conn__run(conn, sql, NULL, NULL, 0, NULL, err, errlen);
	ch_conn__free(conn);
	conn = e ? NULL : ch_conn__new(&c->o);
	if (!e && !conn)
		e = -ENOMEM;
	if (!e)
		e = ch__schema_layout(c, conn, err, errlen);
	for (int t = 0; !e && t < T__N; t++)
		e = c->cluster[0] ? ch__schema_sharded(c, conn, t, err, errlen)
				  : ch_conn__run(conn, t == T_SAMPLES && !c->samples_arrays ?
						 ch_samples_rows : ch_schema[t], NULL, NULL, 0, NULL,
						 err, errlen);
	if (!e)
		e = ch__schema_rollup(c, conn, err, errlen);
	if (!e && c->own_rollup)
		e = ch__schema_group(c, conn, err, errlen);
	ch_conn__free(conn);
	return e;
}

/* How the spool (store/ch/ch-spool.c) puts what it reads back into the batches. */
static const struct ch_batch_ops ch_batch_ops = {
	.rows_build = ch__rows_build,
	.rows_free = ch__rows_free,
	.put_locked = ch__put_locked,
	.key_set = ch__key_set,
	.wait_room = ch__wait_room,
	.seal = ch__seal,
};

/*
 * --ch-rollup-without LIST (NULL: CONFIG_COLLECTOR_CH_ROLLUP_WITHOUT) into c->group_without:
 * label keys of letters, digits, '_', '.' and '-', comma-separated (nothing to quote in SQL).
 */
static int ch__group_rule(struct ch_store *c, const char *list, char *err, size_t errlen)
{
	if (!list)
		list = CONFIG_COLLECTOR_CH_ROLLUP_WITHOUT;
	if (strlen(list) >= sizeof(c->group_without) ||
	    list[strspn(list, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-,")]) {
		snprintf(err, errlen, "clickhouse: --ch-rollup-without '%.64s': label names (letters, "
			 "digits, _ . -), comma-separated, at most %d bytes", list,
			 CH_GROUP_WITHOUT_LEN - 1);
		return -EINVAL;
	}
	snprintf(c->group_without, sizeof(c->group_without), "%s", list);
	return 0;
}

struct store *store_ch__open(const struct store_opts *opts, char *err, size_t errlen)
{
	struct ch_store *c = calloc(1, sizeof(*c));
	size_t intern = CONFIG_COLLECTOR_CH_INTERN_ENTRIES;
	int e;

	if (!c) {
		snprintf(err, errlen, "store: out of memory");
		errno = ENOMEM;
		return NULL;
	}
	c->base.ops = &ch_ops;
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->wake, NULL);
	pthread_cond_init(&c->done, NULL);
	pthread_cond_init(&c->refill, NULL);
	c->batch_bytes = (size_t)CONFIG_COLLECTOR_CH_BATCH_KB << 10;
	c->keep_bytes = (size_t)CONFIG_COLLECTOR_CH_KEEP_MB << 20;
	c->batch_ms = opts->ch_batch_ms ? opts->ch_batch_ms : CONFIG_COLLECTOR_CH_BATCH_MS;
	c->queue_bytes = opts->ch_queue_bytes ? opts->ch_queue_bytes
					      : (size_t)CONFIG_COLLECTOR_CH_QUEUE_MB << 20;
	c->ack_ms = CONFIG_COLLECTOR_CH_ACK_MS;
	c->wait_ms = CONFIG_COLLECTOR_CH_WAIT_MS;
	c->ch_ok = true;	/* the schema went in; the writer's INSERTs say from now on */
	c->retention_days = opts->retention_days;
	c->no_rollup = opts->ch_no_rollup;
	c->keys.cap = 1;
	while (c->keys.cap < intern)
		c->keys.cap *= 2;
	c->keys.v = calloc(c->keys.cap, sizeof(*c->keys.v));
	e = ch_opts__parse(opts->clickhouse, &c->o, err, errlen);
	if (!e && opts->ch_cluster) {
		const char *n = opts->ch_cluster;

		if (!*n || strlen(n) >= sizeof(c->cluster) || n[strspn(n, "abcdefghijklmnopqrstuvwxyz"
					"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")]) {
			snprintf(err, errlen, "clickhouse: cluster name '%s': letters, digits and _ "
				 "only", n);
			e = -EINVAL;
		}
		snprintf(c->cluster, sizeof(c->cluster), "%s", n);
	}
	if (!e)
		e = ch_retain__init(c, opts->ch_shard_urls, err, errlen);
	c->samples_hour = !c->cluster[0];
	c->own_rollup = !c->cluster[0];
	if (!e)
		e = ch__group_rule(c, opts->ch_rollup_without, err, errlen);
	if (!e && (idset__init(&c->fns, intern) || idset__init(&c->maps, intern / 16) ||
		   idset__init(&c->locs, intern) || idset__init(&c->stacks, intern) ||
		   !c->keys.v)) {
		snprintf(err, errlen, "store: out of memory");
		e = -ENOMEM;
	}
	if (!e)
		e = ch__schema(c, err, errlen);
	if (!e && opts->ch_spool)
		e = ch_spool__open(c, opts, &ch_batch_ops, err, errlen);
	if (!e) {
		e = -pthread_create(&c->writer, NULL, ch__writer, c);
		c->writer_started = !e;
		if (e)
			snprintf(err, errlen, "clickhouse: writer thread: %s", strerror(-e));
	}
	if (!e && c->spool) {
		e = -pthread_create(&c->replayer, NULL, ch_spool__replayer, c);
		c->replayer_started = !e;
		if (e)
			snprintf(err, errlen, "clickhouse: spool thread: %s", strerror(-e));
	}
	if (e) {
		ch__free(&c->base);
		errno = -e;
		return NULL;
	}
	if (!opts->quiet)
		pr_info("store: ClickHouse %s:%s database %s (batches of %zu KiB or %u ms, "
			"queue %zu MiB)", c->o.host, c->o.port, c->o.database,
			c->batch_bytes >> 10, c->batch_ms, c->queue_bytes >> 20);
	return &c->base;
}

static const struct store_ops ch_ops = {
	.name = "clickhouse",
	.uses_decoded = true,
	.merges_samples = true,
	.put = ch__put,
	.get = ch__get,
	.list = ch__list,
	.services = ch__services,
	.timeline = ch__timeline,
	.merge = ch__merge,
	.read_profile = ch__read_profile,
	.merge_seqs = ch__merge_seqs,
	.stats = ch__stats,
	.free = ch__free,
};
