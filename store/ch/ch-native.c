// SPDX-License-Identifier: MIT
/*
 * store/ch/ch-native.c — a batch's samples as one block of ClickHouse's Native format, in the
 * samples table's order: each profile's RowBinary rows (day, ts, series, sig, profile, stack, v:
 * one per distinct stack, ch-rows.c) folded into the table's row per profile.
 */
#include <stdlib.h>
#include <string.h>

#include "store/ch/ch-store.h"

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
 * body, when in order already; 0 when out of memory (the batch is sent later).
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

/*
 * The samples body, its segments sg in turn, as one block of ClickHouse's Native format (per
 * column: name, type, then the values; an Array as its end offsets, then its elements), which
 * ClickHouse reads a column at a time instead of a field at a time (parsing RowBinary was
 * 12-17% of its CPU at ingest). A profile's rows are consecutive in a segment, one profile id,
 * so each run of one id is folded into a row of its stacks (Array(UInt64)) and their values
 * (Array(Array(Int64))): ClickHouse's per-row work at INSERT (parsing, squashing,
 * partitioning, the sort check, hour) is then per profile.
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

/* A whole samples body as one Native block (for tests/unit/store/ch/ch-rows-test.c). */
bool ch__samples_block(const struct rb *rows, struct rb *out)
{
	const struct seg sg = { .off = 0, .len = rows->len };

	return arrays_native(rows, &sg, 1, out);
}

bool ch_native__samples(const struct ch_batch *b, struct rb *order, struct rb *out)
{
	size_t nseg = batch__order(b, order);

	return nseg && arrays_native(&b->rows[T_SAMPLES], (const void *)order->p, nseg, out);
}
