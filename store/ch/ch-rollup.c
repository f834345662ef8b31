// SPDX-License-Identifier: MIT
/*
 * store/ch/ch-rollup.c — a batch's hourly rollup rows (samples_1g), summed by the collector.
 *
 * The rows a materialized view would make of the batch's samples (sample rows with at most
 * CH_ROLLUP_VALUES values, summed by key, values past a row's own count 0, as v[k] reads
 * them), keyed by group (the labels but the device's, ch__group_of) instead of series, so
 * that the profiles of a fleet's devices fold in one batch already; sent in the table's key
 * order so that ClickHouse neither groups nor sorts. A view's grouping and sorting of every
 * INSERT was 30-60% of clickhouse-server's CPU at ingest (docs/notes/rollups.md); the
 * collector has the rows in hand, already by stack within each profile.
 *
 * The same rows keyed by (series, sig, day) instead are samples_1d's, the per-device daily
 * rollup a regression comparison reads (ch-daily.c): ch_rollup__build_daily().
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store/ch/ch-store.h"

#define ROW_FIXED (2 + 5 * 8)	/* day, ts, series, sig, profile, stack; then the values */

/*
 * One profile's rows in the samples body, with its rollup key: (grp, sig, hour) for
 * samples_1g; for samples_1d grp holds the series and hour the day.
 */
struct rseg {
	uint64_t grp, sig, hour;
	size_t off, len, n;
};

/* A rollup row being summed. */
struct rrow {
	uint64_t stack;
	uint64_t v[CH_ROLLUP_VALUES];
	uint16_t day;
};

static uint64_t get64(const unsigned char *p)
{
	uint64_t v;

	memcpy(&v, p, 8);	/* RowBinary is little-endian, as every board we build for */
	return v;
}

/* samples_1g's key order, but for the stack: (grp, sig, hour). */
static int rseg_key_cmp(const struct rseg *x, const struct rseg *y)
{
	if (x->grp != y->grp)
		return x->grp < y->grp ? -1 : 1;
	if (x->sig != y->sig)
		return x->sig < y->sig ? -1 : 1;
	return x->hour < y->hour ? -1 : x->hour > y->hour;
}

static int rseg_cmp(const void *a, const void *b)
{
	const struct rseg *x = a, *y = b;
	int k = rseg_key_cmp(x, y);

	return k ? k : x->off < y->off ? -1 : x->off > y->off;
}

static int rrow_cmp(const void *a, const void *b)
{
	const struct rrow *x = a, *y = b;

	return x->stack < y->stack ? -1 : x->stack > y->stack;
}

/*
 * The segment of mark m: its key and row count, or n = 0 when its rows are not rolled up
 * (more values than samples_1g has columns: the view's WHERE). -1 when the rows do not parse.
 */
static int rseg_of(const struct rb *body, const struct pmark *m, bool daily, struct rseg *s)
{
	struct rb_rd r = { body->p + m->s_off, body->p + m->s_off + m->s_len, false };
	bool wide = false;

	*s = (struct rseg){ .off = m->s_off, .len = m->s_len };
	while (rd_more(&r)) {
		uint64_t k;

		if ((size_t)(r.end - r.p) < ROW_FIXED)
			return -1;
		if (!s->n) {
			uint16_t day;

			memcpy(&day, r.p, 2);
			s->grp = daily ? get64(r.p + 10) : m->grp;
			s->sig = get64(r.p + 18);
			s->hour = daily ? day : get64(r.p + 2) / CH_ROLLUP_NS;
		}
		r.p += ROW_FIXED;
		k = rd_varint1(&r);
		if (r.bad || k > (size_t)(r.end - r.p) / 8)
			return -1;
		wide |= k > CH_ROLLUP_VALUES;
		r.p += 8 * k;
		s->n++;
	}
	if (r.bad)
		return -1;
	if (wide)
		s->n = 0;
	return 0;
}

/* Whether rows[0..n) are in strictly increasing stack order (distinct). */
static bool rrows_ordered(const struct rrow *rows, size_t n)
{
	for (size_t i = 1; i < n; i++)
		if (rows[i].stack <= rows[i - 1].stack)
			return false;
	return true;
}

/* The row at *p (rseg_of() checked it) into w; *p moves past it. */
static void rrow_read(const unsigned char **p, const unsigned char *end, struct rrow *w)
{
	struct rb_rd r = { *p + ROW_FIXED, end, false };
	uint64_t k;

	memset(w, 0, sizeof(*w));
	memcpy(&w->day, *p, 2);
	w->stack = get64(*p + 34);
	k = rd_varint1(&r);
	for (uint64_t j = 0; j < k; j++)
		w->v[j] = get64(r.p + 8 * j);
	*p = r.p + 8 * k;
}

/* Appends the rows of segment s to rows[*n] (a profile's: one per stack, in stack order). */
static void rseg_rows(const struct rb *body, const struct rseg *s, struct rrow *rows, size_t *n)
{
	const unsigned char *p = body->p + s->off, *end = p + s->len;

	for (size_t i = 0; i < s->n; i++)
		rrow_read(&p, end, &rows[(*n)++]);
}

/*
 * The rows of the k segments s[] of one key (several profiles: a group's in the batch) summed
 * by stack (values in uint64: Int64 wraps alike) at rows[*n..], in stack order. Through the
 * hash table slot[0..cap) (cap a power of two above the rows; zeroed here): each row is looked
 * up once, and only the distinct stacks are sorted. A merge of the profiles' sorted runs, two
 * by two, moved every row log2(k) times: 8% of the collector's CPU with 100,000 devices in 16
 * groups (perf record, tests/bench/fleet-bench.sh), where a group's ~80 profiles of a batch
 * hold a few thousand distinct stacks.
 */
static void rseg_sum(const struct rb *body, const struct rseg *s, size_t k, struct rrow *rows,
		     size_t *n, uint32_t *slot, size_t cap)
{
	struct rrow *out = rows + *n;
	uint32_t d = 0;

	memset(slot, 0, cap * sizeof(*slot));
	for (size_t i = 0; i < k; i++) {
		const unsigned char *p = body->p + s[i].off, *end = p + s[i].len;

		for (size_t j = 0; j < s[i].n; j++) {
			struct rrow w;
			size_t h;

			rrow_read(&p, end, &w);
			/* stack ids are content hashes already: their top bits pick the slot */
			h = (size_t)((w.stack * 0x9e3779b97f4a7c15ull) >> 32) & (cap - 1);
			while (slot[h] && out[slot[h] - 1].stack != w.stack)
				h = (h + 1) & (cap - 1);
			if (!slot[h]) {
				out[d] = w;
				slot[h] = ++d;
				continue;
			}
			for (int v = 0; v < CH_ROLLUP_VALUES; v++)
				out[slot[h] - 1].v[v] += w.v[v];
		}
	}
	qsort(out, d, sizeof(*out), rrow_cmp);
	*n += d;
}

/*
 * The rows of one key's k segments sg[] (kn rows) summed, at rows[*n..]: one profile's as
 * they are (a profile's rows are by stack, one per stack), several through rseg_sum().
 */
static int rkey_rows(const struct rb *body, const struct rseg *sg, size_t k, size_t kn,
		     struct ch_scratch *s, struct rrow *rows, size_t *n)
{
	size_t first = *n, cap = 16;
	uint32_t *slot;

	if (k == 1) {
		rseg_rows(body, sg, rows, n);
		if (rrows_ordered(rows + first, *n - first))
			return 0;
		*n = first;	/* not rows this collector built: summed all the same */
	}
	while (cap < 2 * kn)
		cap *= 2;
	slot = rb_room(&s->slots, cap * sizeof(*slot));
	if (!slot)
		return -ENOMEM;
	rseg_sum(body, sg, k, rows, n, slot, cap);
	return 0;
}

/* samples_1g's columns; samples_1d's are the same without hour, with series for grp. */
static const char *const rollup_cols[][2] = {
	{ "day", "Date" }, { "hour", "UInt32" }, { "grp", "UInt64" }, { "sig", "UInt64" },
	{ "stack", "UInt64" }, { "v0", "Int64" }, { "v1", "Int64" }, { "v2", "Int64" },
	{ "v3", "Int64" },
};

#define ROLLUP_COLS (sizeof(rollup_cols) / sizeof(rollup_cols[0]))

/* rows (with their segments' keys) as one Native block, column by column. */
static int rollup_native(const struct rrow *rows, const struct rseg *const *key, size_t n,
			 bool daily, struct rb *out)
{
	static const size_t width[ROLLUP_COLS] = { 2, 4, 8, 8, 8, 8, 8, 8, 8 };
	size_t at[ROLLUP_COLS], size = 20;	/* two varints */

	for (size_t c = 0; c < ROLLUP_COLS; c++)	/* its size, reserved once */
		size += 2 + strlen(rollup_cols[c][0]) + strlen(rollup_cols[c][1]) + width[c] * n;
	if (!rb_reserve_exact(out, size))
		return -ENOMEM;
	rb_varint(out, ROLLUP_COLS - daily);
	rb_varint(out, n);
	for (size_t c = 0; c < ROLLUP_COLS; c++) {
		if (daily && c == 1)
			continue;
		rb_str(out, daily && c == 2 ? "series" : rollup_cols[c][0]);
		rb_str(out, rollup_cols[c][1]);
		at[c] = out->len;
		if (!rb_reserve(out, width[c] * n))
			return -ENOMEM;
		out->len += width[c] * n;
	}
	if (out->oom)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		uint32_t hour = (uint32_t)key[i]->hour;
		unsigned char *o = out->p;

		memcpy(o + at[0] + 2 * i, &rows[i].day, 2);
		if (!daily)
			memcpy(o + at[1] + 4 * i, &hour, 4);
		memcpy(o + at[2] + 8 * i, &key[i]->grp, 8);
		memcpy(o + at[3] + 8 * i, &key[i]->sig, 8);
		memcpy(o + at[4] + 8 * i, &rows[i].stack, 8);
		for (int j = 0; j < CH_ROLLUP_VALUES; j++)
			memcpy(o + at[5 + j] + 8 * i, &rows[i].v[j], 8);
	}
	return 0;
}

/*
 * The rollup of the batch's sample rows (those of its marks, as they were inserted) as a
 * Native block in out, in samples_1g's order (grp, sig, hour, stack), or daily samples_1d's
 * (series, sig, day, stack). *n_rows: its rows (0: nothing to insert). 0, -ENOMEM, or
 * -EINVAL when the rows do not parse.
 */
static int rollup_build(const struct ch_batch *b, bool daily, struct ch_scratch *s,
			struct rb *out, size_t *n_rows)
{
	const struct rb *body = &b->rows[T_SAMPLES];
	struct rseg *sg = rb_room(&s->seg, (b->n_marks + 1) * sizeof(*sg));
	const struct rseg **key = NULL;
	struct rrow *rows = NULL;
	size_t ns = 0, total = 0, n = 0;
	int e = sg ? 0 : -ENOMEM;

	*n_rows = 0;
	out->len = 0;
	out->oom = false;
	for (size_t i = 0; !e && i < b->n_marks; i++) {
		if (!b->marks[i].s_len)
			continue;
		e = rseg_of(body, &b->marks[i], daily, &sg[ns]) ? -EINVAL : 0;
		if (!e && sg[ns].n)
			total += sg[ns++].n;
	}
	if (!e && total) {
		rows = rb_room(&s->rrows, total * sizeof(*rows));
		key = rb_room(&s->key, total * sizeof(*key));
		e = rows && key ? 0 : -ENOMEM;
	}
	if (!e && total)
		qsort(sg, ns, sizeof(*sg), rseg_cmp);
	for (size_t i = 0, j; !e && i < ns; i = j) {
		size_t first = n, kn = 0;

		for (j = i; j < ns && !rseg_key_cmp(&sg[i], &sg[j]); j++)
			kn += sg[j].n;
		e = rkey_rows(body, &sg[i], j - i, kn, s, rows, &n);
		for (size_t k = first; k < n; k++)
			key[k] = &sg[i];
	}
	if (!e && n)
		e = rollup_native(rows, key, n, daily, out);
	if (!e)
		*n_rows = n;
	return e;
}

int ch_rollup__build(const struct ch_batch *b, struct ch_scratch *s, struct rb *out,
		     size_t *n_rows)
{
	return rollup_build(b, false, s, out, n_rows);
}

int ch_rollup__build_daily(const struct ch_batch *b, struct ch_scratch *s, struct rb *out,
			   size_t *n_rows)
{
	return rollup_build(b, true, s, out, n_rows);
}

void ch_scratch__free(struct ch_scratch *s)
{
	rb_free(&s->rrows);
	rb_free(&s->slots);
	rb_free(&s->native);
	rb_free(&s->seg);
	rb_free(&s->key);
}
