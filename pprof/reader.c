// SPDX-License-Identifier: MIT
/*
 * pprof/reader.c — validating pprof decoder (gzip or raw, from any producer).
 *
 * Why a hand-written wire reader rather than nanopb's pb_decode with callbacks: decoding is the
 * collector's hot path (merging hundreds of profiles per query) and nanopb's callback decoding
 * costs a substream and a callback per element of every packed array. Reading the wire format
 * directly is ~100 lines, needs no per-element allocation, and lets us size every array exactly
 * in a first pass, so the decoded profile is a few blocks sized to the input. The field numbers
 * still come from the nanopb-generated definitions of pprof/profile.proto, and encoding uses
 * nanopb (pprof/writer.c).
 *
 * Two passes over the decoded bytes: pass 1 checks the wire structure and counts every repeated
 * field (including the elements of packed arrays); pass 2 fills exactly-sized arrays. Then every
 * reference is validated and ids are renumbered dense (location id i is locations[i - 1]).
 *
 * With limits.merge_samples, pass 1 also looks each sample up by its bytes but its value field
 * (a hash table of the distinct ones, 4 bytes per sample of the input besides): one seen before
 * is not counted again, its values are counted there as a repeat of the first one's or added
 * to its sums (merge_values()), and pass 2 passes over it (or, for encodings merge_values()
 * does not take, adds its values to the first one's). The ClickHouse store's profiles have ~5
 * samples per distinct one (a stack sampled again and again), and all that follows (pass 2,
 * validation, the store's stack hashes) runs over the distinct ones. Samples encoded as nearly
 * all are (packed ids, then packed values) take shortcuts there: plain_sample() in pass 1,
 * skip_merged(), is_merged() and get_packed_n() in pass 2.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "pprof/internal.h"
#include "pprof/profile.pb.h"

#define MiB (1024 * 1024)

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };

struct cur {
	const uint8_t *p, *end;
};

struct fld {
	uint32_t num;
	unsigned wt;
	uint64_t v;              /* WT_VARINT value */
	const uint8_t *data;     /* WT_LEN payload */
	size_t len;
};

static inline int get_varint(struct cur *c, uint64_t *v)
{
	const uint8_t *p = c->p;
	uint64_t r = 0;
	unsigned shift;

	if (p < c->end && *p < 0x80) { /* most varints here are one byte */
		*v = *p;
		c->p = p + 1;
		return 0;
	}
	if (c->end - p >= 10) { /* the longest varint fits: no end check per byte */
		for (shift = 0; shift < 64; shift += 7, p++) {
			r |= (uint64_t)(*p & 0x7f) << shift;
			if (*p < 0x80) {
				*v = r;
				c->p = p + 1;
				return 0;
			}
		}
		return -1;
	}
	for (shift = 0; shift < 64 && p < c->end; shift += 7) {
		uint8_t b = *p++;

		r |= (uint64_t)(b & 0x7f) << shift;
		if (b < 0x80) {
			*v = r;
			c->p = p;
			return 0;
		}
	}
	return -1; /* truncated or longer than 10 bytes */
}

/*
 * get_varint() with varints of one to four bytes unrolled: values such as 10 ms in nanoseconds
 * are four bytes and often end their field, where get_varint() took its byte-by-byte loop.
 */
static inline int get_varint4(struct cur *c, uint64_t *v)
{
	const uint8_t *p = c->p;
	ptrdiff_t left = c->end - p;

	if (left >= 1 && p[0] < 0x80) {
		*v = p[0];
		c->p = p + 1;
	} else if (left >= 2 && p[1] < 0x80) {
		*v = (uint64_t)(p[0] & 0x7f) | (uint64_t)p[1] << 7;
		c->p = p + 2;
	} else if (left >= 3 && p[2] < 0x80) {
		*v = (uint64_t)(p[0] & 0x7f) | (uint64_t)(p[1] & 0x7f) << 7 | (uint64_t)p[2] << 14;
		c->p = p + 3;
	} else if (left >= 4 && p[3] < 0x80) {
		*v = (uint64_t)(p[0] & 0x7f) | (uint64_t)(p[1] & 0x7f) << 7 |
		     (uint64_t)(p[2] & 0x7f) << 14 | (uint64_t)p[3] << 21;
		c->p = p + 4;
	} else {
		return get_varint(c, v);
	}
	return 0;
}

/* 1 = a field, 0 = end of message, -1 = malformed. */
static inline __attribute__((always_inline)) int next_field(struct cur *c, struct fld *f)
{
	uint64_t tag, len;

	if (c->p >= c->end)
		return 0;
	if (get_varint(c, &tag) || (tag >> 3) == 0 || (tag >> 3) > UINT32_MAX)
		return -1;
	f->num = tag >> 3;
	f->wt = tag & 7;
	switch (f->wt) {
	case WT_VARINT:
		return get_varint(c, &f->v) ? -1 : 1;
	case WT_I64:
		if (c->end - c->p < 8)
			return -1;
		c->p += 8;
		return 1;
	case WT_I32:
		if (c->end - c->p < 4)
			return -1;
		c->p += 4;
		return 1;
	case WT_LEN:
		if (get_varint(c, &len) || len > (uint64_t)(c->end - c->p))
			return -1;
		f->data = c->p;
		f->len = len;
		c->p += len;
		return 1;
	default:
		return -1; /* groups (3, 4) and 6, 7 do not occur in pprof */
	}
}

/*
 * Number of varints in a packed payload, or -1 when the last one is cut. Each varint ends with
 * exactly one byte below 0x80; they are counted 8 bytes at a time (this runs over every stack).
 */
static long packed_count(const uint8_t *d, size_t len)
{
	const uint64_t high = 0x8080808080808080ULL, ones = 0x0101010101010101ULL;
	size_t i = 0, cont = 0;

	if (len && d[len - 1] >= 0x80)
		return -1;
	for (; len - i >= 8; i += 8) {
		uint64_t w;

		memcpy(&w, d + i, 8);
		/* one per continuation byte, summed into the top byte (at most 8: no carry) */
		cont += (((w & high) >> 7) * ones) >> 56;
	}
	if (i < len && len >= 8) { /* the tail: the last 8 bytes, less those counted above */
		uint64_t w;

		memcpy(&w, d + len - 8, 8);
		w = (w & high) >> (8 * (8 - (len - i)));
		cont += ((w >> 7) * ones) >> 56;
		i = len;
	}
	for (; i < len; i++)
		cont += d[i] >> 7;
	return (long)(len - cont);
}

/* Counts a repeated varint field that may be packed or not: adds to *n, -1 on bad wire type. */
static int count_repeated(const struct fld *f, size_t *n)
{
	long k;

	if (f->wt == WT_VARINT) {
		(*n)++;
		return 0;
	}
	if (f->wt != WT_LEN || (k = packed_count(f->data, f->len)) < 0)
		return -1;
	*n += k;
	return 0;
}

/*
 * Appends the elements of a repeated varint field to v (room was counted in pass 1: one element
 * per byte below 0x80). Ids and small values are one to four bytes: those skip the general loop.
 */
static int read_repeated(const struct fld *f, uint64_t *v, size_t *n)
{
	struct cur c;
	size_t k = *n;
	int ret = 0;

	if (f->wt == WT_VARINT) {
		v[(*n)++] = f->v;
		return 0;
	}
	/* Only a WT_LEN field has data (found by fuzzing: f->data is stale/NULL otherwise). */
	c = (struct cur){ f->data, f->data + f->len };
	while (c.p < c.end) {
		const uint8_t *p = c.p;

		if (p[0] < 0x80) {
			v[k++] = p[0];
			c.p = p + 1;
		} else if (c.end - p >= 2 && p[1] < 0x80) {
			v[k++] = (uint64_t)(p[0] & 0x7f) | (uint64_t)p[1] << 7;
			c.p = p + 2;
		} else if (c.end - p >= 3 && (p[2] < 0x80 || (c.end - p >= 4 && p[3] < 0x80))) {
			/* values (10 ms in ns, sizes) are 3 or 4 bytes, and often last */
			uint64_t x = (uint64_t)(p[0] & 0x7f) | (uint64_t)(p[1] & 0x7f) << 7 |
				     (uint64_t)(p[2] & 0x7f) << 14;

			if (p[2] < 0x80) {
				c.p = p + 3;
			} else {
				x |= (uint64_t)p[3] << 21;
				c.p = p + 4;
			}
			v[k++] = x;
		} else if (get_varint(&c, &v[k++])) {
			ret = -1;
			break;
		}
	}
	*n = k;
	return ret;
}

/* ---- reader state ------------------------------------------------------------------------- */

/*
 * Samples merged as they are counted (limits.merge_samples). Its tables (the first sample of
 * each key, the distinct sample each sample of the input goes to, the merged samples' sums)
 * are the scratch's, rd.sc: kept between reads.
 */
struct smerge {
	bool on;               /* asked for, and no value seen negative so far */
	bool summed;           /* every merged sample's values are in sc.vals: see sum_merged() */
	size_t n_keys;         /* distinct samples: sc.keys[0..n_keys) */
	size_t n_ids, n_values, n_labels; /* totals of the distinct samples */
	size_t max_values;     /* of one sample merged into an earlier one */
	size_t n_sums;         /* in use of sc.vals, in pass 1 */
	size_t n_in;           /* samples of the input, after pass 1 */
};

struct rd {
	struct pprof_read_limits lim;
	char *err;
	size_t errlen;
	struct pprof_profile *p;
	size_t n_ids, n_values, n_labels, n_lines, str_bytes; /* totals from pass 1 */
	size_t n_comments;
	bool seen_time;
	struct smerge m;
	size_t reserved;       /* bytes asked of lim.reserve so far */
	struct pp_scratch sc;  /* the merge tables' memory between reads, the inflated input */
};

#define bad(r, ...) (pp_err((r)->err, (r)->errlen, __VA_ARGS__), -EINVAL)

/* Asks the budget for `more` bytes beyond those asked so far: 0 or its error. */
static int rd_reserve(struct rd *r, size_t more)
{
	size_t total = r->reserved + more < r->reserved ? SIZE_MAX : r->reserved + more;
	int err;

	if (!r->lim.reserve || !more)
		return 0;
	err = r->lim.reserve(r->lim.reserve_ctx, total, r->err, r->errlen);
	if (!err)
		r->reserved = total;
	return err;
}

/* n elements of sz bytes, saturating (32-bit boards: counts near 2^28). */
static size_t bytes_of(size_t n, size_t sz)
{
	return n > SIZE_MAX / sz - 1 ? SIZE_MAX : (n + 1) * sz;
}

/* ---- pass 1: structure and counts --------------------------------------------------------- */

/*
 * Whether a value field may hold a negative value: a negative int64 is a 10-byte varint (bit 63
 * set), a run of 9 continuation bytes. Values of profiles are small and most value fields are
 * shorter than 10 bytes: only those longer are looked at, byte by byte.
 */
static bool value_may_be_negative(const struct fld *f)
{
	size_t run = 0;

	if (f->wt == WT_VARINT)
		return f->v >> 63;
	if (f->wt != WT_LEN || f->len < 10)
		return false;
	for (size_t i = 0; i < f->len; i++) {
		run = f->data[i] >= 0x80 ? run + 1 : 0;
		if (run >= 9)
			return true;
	}
	return false;
}

/*
 * Hash of n bytes (a sample's key: 7 to 26 bytes in the fleet's profiles, most 8 to 16):
 * FxHash's step per 8 bytes, the last 8 loaded overlapping those before them (no tail loop;
 * 4 to 7 bytes as two overlapping 4-byte loads), then murmur3's finalizer: FxHash leaves its
 * low bits, the table's index, weak, and a milder mix left ~2x the probes with these loads.
 */
static inline uint64_t fx_step(uint64_t h, uint64_t w)
{
	return (((h << 5) | (h >> 59)) ^ w) * 0x517cc1b727220a95ULL;
}

static inline uint64_t fmix64(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ULL;
	return h ^ (h >> 33);
}

static uint64_t key_hash(uint64_t h, const uint8_t *p, size_t n)
{
	uint64_t w = 0;
	uint32_t lo, hi;

	if (n >= 8) {
		for (size_t i = 0; i + 8 < n; i += 8) {
			memcpy(&w, p + i, 8);
			h = fx_step(h, w);
		}
		memcpy(&w, p + n - 8, 8);
	} else if (n >= 4) {
		memcpy(&lo, p, 4);
		memcpy(&hi, p + n - 4, 4);
		w = (uint64_t)hi << 32 | lo;
	} else {
		for (size_t i = 0; i < n; i++)
			w |= (uint64_t)p[i] << (8 * i);
	}
	return fmix64(fx_step(h, w) ^ n);
}

/*
 * a[0..n) == b[0..n), inline: keys are ~20 bytes, where a call to memcmp cost more (and a call
 * to this one, twice per lookup: forced inline).
 */
static inline __attribute__((always_inline)) bool bytes_eq(const uint8_t *a, const uint8_t *b,
							    size_t n)
{
	uint64_t x, y;
	size_t i = 0;

	if (n < 8) {
		for (; i < n; i++)
			if (a[i] != b[i])
				return false;
		return true;
	}
	for (; n - i > 8; i += 8) {
		memcpy(&x, a + i, 8);
		memcpy(&y, b + i, 8);
		if (x != y)
			return false;
	}
	memcpy(&x, a + n - 8, 8); /* the last 8, overlapping those compared */
	memcpy(&y, b + n - 8, 8);
	return x == y;
}

/* Called once the table's slot had b's hash: the bytes decide. */
static bool key_eq(const struct pp_skey *a, const struct pp_skey *b)
{
	return a->voff == b->voff && a->len - a->vend == b->len - b->vend &&
	       bytes_eq(a->p, b->p, a->voff) &&
	       bytes_eq(a->p + a->vend, b->p + b->vend, a->len - a->vend);
}

/*
 * Merging is given up (the rest of the profile read as without) when fewer than 8 of the first
 * MERGE_PROBE samples repeat an earlier one: a profile aggregated by its producer (Go's, the
 * agent's) would pay the hashing for nothing (+26% on the fleet's profiles merged beforehand,
 * 715 samples; +7% with this). Repeats come early when there are many (8 in 256 samples:
 * about 4,000 equally likely keys, which 3,400 samples would still merge by a third).
 */
#define MERGE_PROBE 256
#define MERGE_CHUNK 4096 /* samples the merge tables' memory is asked for at once */

/*
 * Pass 1 of a sample when merging: the distinct sample it is, *added when a new one (an entry
 * for it in the table). k->len is 0 for a sample that merges with none (its values in other
 * than one field: no encoder we know writes that). -ENOMEM or 0.
 *
 * Tried and measured, not kept (the 64 fleet profiles, CPU time per decode, Zen 3): hashing
 * the next sample ahead to prefetch its slot won ~2% of the decode with the caches flushed
 * between profiles and nothing with them warm, less than the ~45 instructions a sample the
 * look-ahead costs (+5% warm). Hashing and comparing keys of up to 32 bytes as 4 words,
 * without loops or branches on their length, cost +8% instructions and +13% time. Pass 1 runs
 * at 3 or more instructions a cycle: its instructions, more than its loads, are its cost.
 */
static int merge_lookup(struct rd *r, const struct pp_skey *k, size_t idx, bool *added)
{
	struct smerge *m = &r->m;
	struct pp_scratch *t = &r->sc;
	uint32_t h = k->hash;
	size_t pos = 0, cap = t->ht.cap;

	/* room for MERGE_PROBE at once: most profiles have hundreds of samples or more */
	if (pp_grow(&t->of, &t->cap_of, idx, t->cap_of ? 1 : MERGE_PROBE, sizeof(*t->of)))
		return -ENOMEM;
	for (pos = cap ? pp_htab__pos(&t->ht, h) : 0; k->len && cap && t->ht.e[pos].slot;
	     pos = (pos + 1) & (cap - 1)) {
		uint32_t d = t->ht.e[pos].slot - 1;

		if (t->ht.e[pos].hash == h && key_eq(&t->keys[d], k)) {
			t->of[idx] = d;
			*added = false;
			return 0;
		}
	}
	/* a new one: the room is made here, not for each of the ~4 of 5 that merge */
	if (pp_htab__reserve(&t->ht, cap ? 1 : MERGE_PROBE) ||
	    pp_grow(&t->keys, &t->cap_keys, m->n_keys, t->cap_keys ? 1 : MERGE_PROBE,
		    sizeof(*t->keys)))
		return -ENOMEM;
	if (k->len && t->ht.cap != cap) /* the table grew: its empty slot for k is elsewhere */
		for (pos = pp_htab__pos(&t->ht, h); t->ht.e[pos].slot;
		     pos = (pos + 1) & (t->ht.cap - 1))
			;
	t->of[idx] = (uint32_t)m->n_keys;
	if (k->len)
		pp_htab__set(&t->ht, pos, h, (uint32_t)m->n_keys);
	t->keys[m->n_keys++] = *k;
	*added = true;
	return 0;
}

/* What count_repeated() refuses, without counting: a wire type, a cut last varint. */
static bool repeated_ok(const struct fld *f)
{
	return f->wt == WT_VARINT || (f->wt == WT_LEN && (!f->len || f->data[f->len - 1] < 0x80));
}

/*
 * The location ids and values of a sample that pass 1 checked already. A plain one (see
 * plain_sample()) is counted from its two payloads, without walking its fields again.
 */
static void count_ids_values(const struct fld *sf, const struct pp_skey *k, size_t *ids,
			     size_t *vals)
{
	struct cur c = { sf->data, sf->data + sf->len };
	struct fld f;

	if (k->plain) {
		*ids = (size_t)packed_count(k->p + 2, k->p[1]);
		*vals = (size_t)packed_count(k->p + k->voff + 2, k->p[k->voff + 1]);
		return;
	}
	while (next_field(&c, &f) > 0) {
		if (f.num == perftools_profiles_Sample_location_id_tag)
			count_repeated(&f, ids);
		else if (f.num == perftools_profiles_Sample_value_tag)
			count_repeated(&f, vals);
	}
}

#define NO_SUM UINT32_MAX /* pp_skey.sum of a key with no sums */

/*
 * Whether b's one value field is a's byte for byte: the usual repeat (a producer that writes a
 * sample per tick writes the same count and time in each). Their keys are equal, so the 8
 * bytes that end the fields are compared at once when the fields are no longer (those before
 * them, if any, are the same bytes of the keys).
 */
static bool same_values(const struct pp_skey *a, const struct pp_skey *b)
{
	uint64_t x, y;

	if (a->vend != b->vend)
		return false;
	if (a->vend < 8 || a->vend - a->voff > 8)
		return bytes_eq(a->p + a->voff, b->p + b->voff, a->vend - a->voff);
	memcpy(&x, a->p + a->vend - 8, 8);
	memcpy(&y, b->p + b->vend - 8, 8);
	return x == y;
}

/*
 * Adds the values of a sample merging into first (its one value field, k's [voff, vend)) to
 * first's sums (made, zeroed, at the first such sample), in pass 1. Only for the usual
 * encoding, a packed field under a one-byte length holding exactly first's number of values:
 * false for anything else.
 */
static bool sum_merged(struct rd *r, struct pp_skey *first, const struct pp_skey *k)
{
	const uint8_t *p = k->p + k->voff, *end = k->p + k->vend;
	struct cur c = { p + 2, end };
	uint64_t *sum;

	if (end - p < 2 || p[0] != 0x12 || p[1] >= 0x80 || p[1] != end - p - 2)
		return false;
	if (first->sum == NO_SUM) {
		size_t at = r->m.n_sums;

		if (at + first->n_vals >= NO_SUM ||
		    pp_grow(&r->sc.vals, &r->sc.cap_vals, at, first->n_vals, sizeof(*r->sc.vals)))
			return false;
		memset(r->sc.vals + at, 0, first->n_vals * sizeof(*r->sc.vals));
		first->sum = (uint32_t)at;
		r->m.n_sums += first->n_vals;
	}
	sum = r->sc.vals + first->sum;
	for (size_t j = 0; j < first->n_vals; j++) {
		uint64_t v;

		if (get_varint4(&c, &v))
			return false;
		sum[j] += v; /* int64 wraps around, as stacks are summed elsewhere */
	}
	return c.p == end;
}

/*
 * A sample merging into first, in pass 1: its values counted as a repeat of first's or added
 * to first's sums, and pass 2 skips it (it read the sample again, ~130 instructions for each of
 * the ~4 of 5 samples of the fleet's profiles that merge). false when neither applies: pass 2
 * then adds every merged sample itself (add_values(), its errors included). Either is enough
 * for pass 2 to have accepted the sample: first comes before it, and pass 2 checks first's
 * number of values against the sample types.
 */
static bool merge_values(struct rd *r, struct pp_skey *first, const struct pp_skey *k)
{
	if (same_values(first, k)) {
		first->reps++;
		return first->reps != 0;
	}
	return sum_merged(r, first, k);
}

/*
 * Pass 1 of a sample when merging, once its fields are checked: one the same as an earlier one
 * but for its values is not counted again (the first one's locations passed the depth limit;
 * its values are bounded by their bytes), a new one is. The totals of the input (r->n_*, in
 * case merging is turned off later) are exact for the new ones, bounds for the others.
 */
static int merge_count(struct rd *r, const struct fld *sf, size_t idx, struct pp_skey *k,
		       size_t nvf)
{
	struct smerge *m = &r->m;
	size_t ids = 0, vals = 0;
	bool added;

	if (nvf == 1 && sf->len <= UINT32_MAX) {
		k->len = (uint32_t)sf->len;
		k->hash = (uint32_t)key_hash(0, k->p, k->voff);
		if (k->len > k->vend) /* labels after the values */
			k->hash = (uint32_t)key_hash(k->hash, k->p + k->vend, k->len - k->vend);
	}
	if (merge_lookup(r, k, idx, &added)) {
		pp_err(r->err, r->errlen, "out of memory");
		return -ENOMEM;
	}
	if (idx + 1 == MERGE_PROBE && m->n_keys + 8 > MERGE_PROBE)
		m->on = false; /* this sample is counted as when merging: that stays right */
	if (!added) {
		struct pp_skey *first = &r->sc.keys[r->sc.of[idx]];

		vals = k->vend - k->voff;
		if (vals > m->max_values)
			m->max_values = vals;
		r->n_ids += first->n_ids;
		r->n_values += vals;
		r->n_labels += first->n_labels;
		if (m->summed && !merge_values(r, first, k))
			m->summed = false;
		return 0;
	}
	count_ids_values(sf, k, &ids, &vals);
	if (ids > r->lim.max_stack_depth) {
		pp_err(r->err, r->errlen, "sample %zu has %zu locations, limit %zu", idx, ids,
		       r->lim.max_stack_depth);
		return -EFBIG;
	}
	r->sc.keys[m->n_keys - 1].n_ids = ids;
	r->sc.keys[m->n_keys - 1].n_vals = (uint16_t)vals;
	r->sc.keys[m->n_keys - 1].sum = NO_SUM;
	if (vals > UINT16_MAX)
		m->summed = false; /* n_vals could not say how many to sum */
	r->n_ids += ids;
	m->n_ids += ids;
	r->n_values += vals;
	m->n_values += vals;
	r->n_labels += k->n_labels;
	m->n_labels += k->n_labels;
	return 0;
}

/*
 * Whether a sample is encoded as nearly all are (Go's encoder, ours): field 1 (location ids)
 * packed, then field 2 (values) packed, each under 128 bytes, and nothing else; then fills k as
 * the general walk of count_sample() would. Anything else (labels, unpacked or cut fields)
 * returns false and takes the general walk, its errors included: this only saves the
 * next_field() calls of the ~3,400 samples of a profile.
 */
static bool plain_sample(const struct fld *sf, struct pp_skey *k)
{
	const uint8_t *d = sf->data;
	size_t n = sf->len, a;

	if (n < 4 || d[0] != 0x0a || d[1] >= 0x80)
		return false;
	a = 2 + (size_t)d[1]; /* the value field's tag */
	if (a + 2 > n || d[a] != 0x12 || d[a + 1] >= 0x80 || a + 2 + d[a + 1] != n)
		return false;
	if ((d[1] && d[a - 1] >= 0x80) || (d[a + 1] && d[n - 1] >= 0x80))
		return false; /* a cut last varint: repeated_ok()'s error */
	k->voff = (uint32_t)a;
	k->vend = (uint32_t)n;
	k->plain = true;
	return true;
}

/* count_sample() of a plain sample when merging: its one value field, no labels. */
static int count_plain(struct rd *r, const struct fld *sf, size_t idx, struct pp_skey *k)
{
	struct fld vf = { .num = perftools_profiles_Sample_value_tag, .wt = WT_LEN,
			  .data = k->p + k->voff + 2, .len = k->vend - k->voff - 2 };

	if (value_may_be_negative(&vf))
		r->m.on = false;
	return merge_count(r, sf, idx, k, 1);
}

static int count_sample(struct rd *r, const struct fld *sf, size_t idx)
{
	struct cur c = { sf->data, sf->data + sf->len };
	struct pp_skey k = { .p = sf->data };
	size_t ids = 0, vals = 0, labels = 0, nvf = 0;
	bool merging = r->m.on; /* for all of this sample, should a value turn it off */
	struct fld f;
	int ret;

	if (merging && plain_sample(sf, &k))
		return count_plain(r, sf, idx, &k);
	for (const uint8_t *at = c.p; (ret = next_field(&c, &f)) > 0; at = c.p) {
		switch (f.num) {
		case perftools_profiles_Sample_location_id_tag:
			if (!repeated_ok(&f))
				return bad(r, "sample %zu: malformed location_id", idx);
			if (!merging)
				count_repeated(&f, &ids);
			break;
		case perftools_profiles_Sample_value_tag:
			if (!repeated_ok(&f))
				return bad(r, "sample %zu: malformed value", idx);
			if (!merging) {
				count_repeated(&f, &vals);
				break;
			}
			k.voff = (uint32_t)(at - sf->data);
			k.vend = (uint32_t)(c.p - sf->data);
			nvf++;
			if (value_may_be_negative(&f))
				r->m.on = false;
			break;
		case perftools_profiles_Sample_label_tag:
			if (f.wt != WT_LEN)
				return bad(r, "sample %zu: label has wire type %u", idx, f.wt);
			labels++;
			break;
		}
	}
	if (ret < 0)
		return bad(r, "sample %zu is truncated or malformed", idx);
	if (merging) {
		k.n_labels = (uint32_t)labels;
		return merge_count(r, sf, idx, &k, nvf);
	}
	if (ids > r->lim.max_stack_depth) {
		pp_err(r->err, r->errlen, "sample %zu has %zu locations, limit %zu", idx, ids,
		       r->lim.max_stack_depth);
		return -EFBIG;
	}
	r->n_ids += ids;
	r->n_values += vals;
	r->n_labels += labels;
	return 0;
}

static int count_location(struct rd *r, const struct fld *lf, size_t idx)
{
	struct cur c = { lf->data, lf->data + lf->len };
	struct fld f;
	int ret;

	while ((ret = next_field(&c, &f)) > 0) {
		if (f.num == perftools_profiles_Location_line_tag) {
			if (f.wt != WT_LEN)
				return bad(r, "location %zu: line has wire type %u", idx, f.wt);
			r->n_lines++;
		}
	}
	return ret < 0 ? bad(r, "location %zu is truncated or malformed", idx) : 0;
}

static const char *const field_names[] = {
	[1] = "sample_type", [2] = "sample", [3] = "mapping", [4] = "location", [5] = "function",
	[6] = "string_table", [7] = "drop_frames", [8] = "keep_frames", [9] = "time_nanos",
	[10] = "duration_nanos", [11] = "period_type", [12] = "period", [13] = "comment",
	[14] = "default_sample_type", [15] = "doc_url",
};

static int count_field(struct rd *r, const struct fld *f)
{
	struct pprof_profile *p = r->p;
	int err = 0;

	switch (f->num) {
	case perftools_profiles_Profile_sample_type_tag:
	case perftools_profiles_Profile_period_type_tag:
	case perftools_profiles_Profile_mapping_tag:
	case perftools_profiles_Profile_function_tag:
	case perftools_profiles_Profile_string_table_tag:
	case perftools_profiles_Profile_sample_tag:
	case perftools_profiles_Profile_location_tag:
		if (f->wt != WT_LEN)
			return bad(r, "%s has wire type %u, want 2", field_names[f->num], f->wt);
		break;
	case perftools_profiles_Profile_comment_tag:
		if (count_repeated(f, &r->n_comments))
			return bad(r, "malformed comment field");
		return 0;
	default:
		if (f->num < 16 && f->wt != WT_VARINT)
			return bad(r, "%s has wire type %u, want 0", field_names[f->num], f->wt);
		/* As Go's decoder: two time_nanos mean two encodings were concatenated. */
		if (f->num == perftools_profiles_Profile_time_nanos_tag && f->v) {
			if (r->seen_time)
				return bad(r, "concatenated profiles (a second time_nanos)");
			r->seen_time = true;
		}
		return 0; /* unknown fields are skipped */
	}
	switch (f->num) {
	case perftools_profiles_Profile_sample_type_tag:
		p->n_sample_type++;
		break;
	case perftools_profiles_Profile_mapping_tag:
		p->n_mappings++;
		break;
	case perftools_profiles_Profile_function_tag:
		p->n_functions++;
		break;
	case perftools_profiles_Profile_string_table_tag:
		p->n_strings++;
		r->str_bytes += f->len + 1;
		break;
	case perftools_profiles_Profile_sample_tag:
		if (p->n_samples >= r->lim.max_samples) {
			pp_err(r->err, r->errlen, "more than %zu samples", r->lim.max_samples);
			return -EFBIG;
		}
		/*
		 * The merge tables grow by doubling: a key, a slot of `of` and two hash slots a
		 * sample, twice over, asked for a chunk of samples ahead.
		 */
		if (r->m.on && !(p->n_samples % MERGE_CHUNK) &&
		    (err = rd_reserve(r, 2 * MERGE_CHUNK * (sizeof(struct pp_skey) +
		     sizeof(uint32_t) + 2 * sizeof(struct pp_htab_slot)))))
			return err;
		err = count_sample(r, f, p->n_samples++);
		break;
	case perftools_profiles_Profile_location_tag:
		err = count_location(r, f, p->n_locations++);
		break;
	}
	return err;
}

/* ---- pass 2: fill ------------------------------------------------------------------------- */

static int read_value_type(struct rd *r, const struct fld *vf, struct pprof_value_type *vt)
{
	struct cur c = { vf->data, vf->data + vf->len };
	struct fld f;
	int ret;

	while ((ret = next_field(&c, &f)) > 0) {
		if (f.wt != WT_VARINT)
			continue;
		if (f.num == perftools_profiles_ValueType_type_tag)
			vt->type = f.v;
		else if (f.num == perftools_profiles_ValueType_unit_tag)
			vt->unit = f.v;
	}
	return ret < 0 ? bad(r, "malformed value type") : 0;
}

static int read_label(struct rd *r, const struct fld *lf, struct pprof_label *l, size_t idx)
{
	struct cur c = { lf->data, lf->data + lf->len };
	struct fld f;
	int ret;

	memset(l, 0, sizeof(*l));
	while ((ret = next_field(&c, &f)) > 0) {
		if (f.wt != WT_VARINT)
			continue;
		switch (f.num) {
		case perftools_profiles_Label_key_tag:
			l->key = f.v;
			break;
		case perftools_profiles_Label_str_tag:
			l->str = f.v;
			break;
		case perftools_profiles_Label_num_tag:
			l->num = f.v;
			break;
		case perftools_profiles_Label_num_unit_tag:
			l->num_unit = f.v;
			break;
		}
	}
	return ret < 0 ? bad(r, "sample %zu: malformed label", idx) : 0;
}

/* Reads a sample into s; idx: its index in the input (for errors). */
static int read_sample(struct rd *r, const struct fld *sf, struct pprof_sample *s, size_t idx)
{
	struct pprof_profile *p = r->p;
	struct pprof_blocks *bl = p->blocks;
	struct cur c = { sf->data, sf->data + sf->len };
	size_t nv = 0;
	struct fld f;
	int ret;

	s->location_ids = bl->ids + r->n_ids;
	s->values = bl->values + r->n_values;
	s->labels = bl->labels + r->n_labels;
	while ((ret = next_field(&c, &f)) > 0) {
		switch (f.num) {
		case perftools_profiles_Sample_location_id_tag:
			if (read_repeated(&f, s->location_ids, &s->n_locations))
				return bad(r, "sample %zu: malformed location_id", idx);
			break;
		case perftools_profiles_Sample_value_tag:
			if (read_repeated(&f, (uint64_t *)s->values, &nv))
				return bad(r, "sample %zu: malformed value", idx);
			break;
		case perftools_profiles_Sample_label_tag:
			if (read_label(r, &f, &s->labels[s->n_labels++], idx))
				return -EINVAL;
			break;
		}
	}
	if (ret < 0)
		return bad(r, "sample %zu is malformed", idx);
	if (nv != p->n_sample_type)
		return bad(r, "sample %zu has %zu values, profile has %zu sample types", idx, nv,
			   p->n_sample_type);
	r->n_ids += s->n_locations;
	r->n_values += nv;
	r->n_labels += s->n_labels;
	return 0;
}

/*
 * The n values of a packed value field [p, end) (tag, length, payload) into v, for the common
 * case only: a one-byte length, exactly n varints. false for anything else, which the general
 * code then reads (and reports, when it is an error): v may have been written by then.
 */
static bool get_packed_n(const uint8_t *p, const uint8_t *end, uint64_t *v, size_t n)
{
	struct cur c = { p + 2, end };

	if (end - p < 2 || p[0] != 0x12 || p[1] >= 0x80 || p[1] != end - p - 2)
		return false;
	for (size_t j = 0; j < n; j++)
		if (get_varint4(&c, &v[j]))
			return false;
	return c.p == end;
}

/*
 * Adds the values of sample idx of the input (with the key of d: the same bytes before and
 * after its one value field, which may be longer or shorter) to d, the distinct sample it merges
 * into, read before it and checked then (its locations and labels are the same bytes). Its
 * values are checked as read_sample checks them, with the same errors.
 */
static int add_values(struct rd *r, const struct fld *sf, size_t d, size_t idx)
{
	const struct pp_skey *k = &r->sc.keys[d];
	struct cur c = { sf->data + k->voff, sf->data + sf->len - (k->len - k->vend) };
	struct pprof_sample *s = &r->p->samples[d];
	uint64_t *v = r->sc.vals;
	size_t nv = 0;
	struct fld f;

	if (get_packed_n(c.p, c.end, v, r->p->n_sample_type)) {
		nv = r->p->n_sample_type;
		goto add;
	}
	if (next_field(&c, &f) > 0 && read_repeated(&f, v, &nv))
		return bad(r, "sample %zu: malformed value", idx);
	if (nv != r->p->n_sample_type)
		return bad(r, "sample %zu has %zu values, profile has %zu sample types", idx, nv,
			   r->p->n_sample_type);
add:
	for (size_t j = 0; j < nv; j++) /* int64 wraps around, as stacks are summed elsewhere */
		s->values[j] = (int64_t)((uint64_t)s->values[j] + v[j]);
	return 0;
}

static int read_mapping(struct rd *r, const struct fld *mf, struct pprof_mapping *m)
{
	struct cur c = { mf->data, mf->data + mf->len };
	struct fld f;
	int ret;

	while ((ret = next_field(&c, &f)) > 0) {
		if (f.wt != WT_VARINT)
			continue;
		switch (f.num) {
		case perftools_profiles_Mapping_id_tag: m->id = f.v; break;
		case perftools_profiles_Mapping_memory_start_tag: m->memory_start = f.v; break;
		case perftools_profiles_Mapping_memory_limit_tag: m->memory_limit = f.v; break;
		case perftools_profiles_Mapping_file_offset_tag: m->file_offset = f.v; break;
		case perftools_profiles_Mapping_filename_tag: m->filename = f.v; break;
		case perftools_profiles_Mapping_build_id_tag: m->build_id = f.v; break;
		case perftools_profiles_Mapping_has_functions_tag: m->has_functions = f.v; break;
		case perftools_profiles_Mapping_has_filenames_tag: m->has_filenames = f.v; break;
		case perftools_profiles_Mapping_has_line_numbers_tag:
			m->has_line_numbers = f.v;
			break;
		case perftools_profiles_Mapping_has_inline_frames_tag:
			m->has_inline_frames = f.v;
			break;
		}
	}
	return ret < 0 ? bad(r, "malformed mapping") : 0;
}

static int read_line(struct rd *r, const struct fld *lf, struct pprof_line *ln)
{
	struct cur c = { lf->data, lf->data + lf->len };
	struct fld f;
	int ret;

	while ((ret = next_field(&c, &f)) > 0) {
		if (f.wt != WT_VARINT)
			continue;
		if (f.num == perftools_profiles_Line_function_id_tag)
			ln->function_id = f.v;
		else if (f.num == perftools_profiles_Line_line_tag)
			ln->line = f.v;
		else if (f.num == perftools_profiles_Line_column_tag)
			ln->column = f.v;
	}
	return ret < 0 ? bad(r, "malformed line") : 0;
}

static int read_location(struct rd *r, const struct fld *lf, struct pprof_location *l)
{
	struct cur c = { lf->data, lf->data + lf->len };
	struct fld f = { 0 };
	int ret;

	l->lines = r->p->blocks->lines + r->n_lines;
	while ((ret = next_field(&c, &f)) > 0) {
		if (f.num == perftools_profiles_Location_line_tag && f.wt == WT_LEN) {
			if (read_line(r, &f, &l->lines[l->n_lines++]))
				return -EINVAL;
			continue;
		}
		if (f.wt != WT_VARINT)
			continue;
		switch (f.num) {
		case perftools_profiles_Location_id_tag: l->id = f.v; break;
		case perftools_profiles_Location_mapping_id_tag: l->mapping_id = f.v; break;
		case perftools_profiles_Location_address_tag: l->address = f.v; break;
		case perftools_profiles_Location_is_folded_tag: l->is_folded = f.v; break;
		}
	}
	r->n_lines += l->n_lines;
	return ret < 0 ? bad(r, "malformed location") : 0;
}

static int read_function(struct rd *r, const struct fld *ff, struct pprof_function *fn)
{
	struct cur c = { ff->data, ff->data + ff->len };
	struct fld f;
	int ret;

	while ((ret = next_field(&c, &f)) > 0) {
		if (f.wt != WT_VARINT)
			continue;
		switch (f.num) {
		case perftools_profiles_Function_id_tag: fn->id = f.v; break;
		case perftools_profiles_Function_name_tag: fn->name = f.v; break;
		case perftools_profiles_Function_system_name_tag: fn->system_name = f.v; break;
		case perftools_profiles_Function_filename_tag: fn->filename = f.v; break;
		case perftools_profiles_Function_start_line_tag: fn->start_line = f.v; break;
		}
	}
	return ret < 0 ? bad(r, "malformed function") : 0;
}

struct fill {
	size_t st, s, in, m, l, fn, str, cm; /* in: samples of the input read */
	char *sp;
};

/* Sample number k->in of the input: read, or (merging) added to the one it merges into. */
static int fill_sample(struct rd *r, const struct fld *f, struct fill *k)
{
	size_t idx = k->in++, d = k->s;
	struct pprof_sample *s = &r->p->samples[d];
	const struct pp_skey *key;
	const uint64_t *sum;
	int err;

	if (r->m.on && r->sc.of[idx] != d)
		return add_values(r, f, r->sc.of[idx], idx);
	err = read_sample(r, f, s, idx);
	k->s++;
	if (err || !r->m.on || !r->m.summed)
		return err;
	/* the samples merged into it in pass 1 (read, it has the n_vals counted then) */
	key = &r->sc.keys[d];
	sum = key->sum == NO_SUM ? NULL : r->sc.vals + key->sum;
	for (size_t j = 0; j < key->n_vals; j++)
		s->values[j] = (int64_t)((uint64_t)s->values[j] * (key->reps + 1ull) +
					 (sum ? sum[j] : 0));
	return 0;
}

/*
 * Whether field f is a sample merged into an earlier one (~4 of 5 of the fleet's): those are
 * added from the decode loop, past fill_field()'s switch.
 */
static inline bool is_merged(const struct rd *r, const struct fld *f, const struct fill *k)
{
	return f->num == perftools_profiles_Profile_sample_tag && r->m.on &&
	       r->sc.of[k->in] != k->s;
}

/*
 * Passes over the merged samples that follow at c (their values were counted in pass 1: see
 * merge_values()) without decoding them as fields: a sample is its tag (0x12) and a length.
 * Stops at anything else, which the decode loop reads (pass 1 accepted all of it).
 */
static void skip_merged(const struct rd *r, struct cur *c, struct fill *k)
{
	while (k->in < r->m.n_in && c->end - c->p >= 2 && c->p[0] == 0x12 &&
	       r->sc.of[k->in] != k->s) {
		struct cur l = { c->p + 1, c->end };
		uint64_t len;

		if (get_varint(&l, &len) || len > (uint64_t)(l.end - l.p))
			return;
		c->p = l.p + len;
		k->in++;
	}
}

static int add_merged(struct rd *r, const struct fld *f, struct fill *k)
{
	size_t idx = k->in++;

	return add_values(r, f, r->sc.of[idx], idx);
}

static int fill_field(struct rd *r, const struct fld *f, struct fill *k)
{
	struct pprof_profile *p = r->p;

	switch (f->num) {
	case perftools_profiles_Profile_sample_type_tag:
		return read_value_type(r, f, &p->sample_type[k->st++]);
	case perftools_profiles_Profile_sample_tag:
		return fill_sample(r, f, k);
	case perftools_profiles_Profile_mapping_tag:
		return read_mapping(r, f, &p->mappings[k->m++]);
	case perftools_profiles_Profile_location_tag:
		return read_location(r, f, &p->locations[k->l++]);
	case perftools_profiles_Profile_function_tag:
		return read_function(r, f, &p->functions[k->fn++]);
	case perftools_profiles_Profile_string_table_tag:
		memcpy(k->sp, f->data, f->len);
		k->sp[f->len] = '\0';
		p->strings[k->str++] = k->sp;
		k->sp += f->len + 1;
		return 0;
	case perftools_profiles_Profile_period_type_tag:
		return read_value_type(r, f, &p->period_type);
	case perftools_profiles_Profile_comment_tag:
		return read_repeated(f, (uint64_t *)p->comments, &k->cm) ? bad(r, "bad comment") : 0;
	case perftools_profiles_Profile_drop_frames_tag: p->drop_frames = f->v; break;
	case perftools_profiles_Profile_keep_frames_tag: p->keep_frames = f->v; break;
	case perftools_profiles_Profile_time_nanos_tag: p->time_nanos = f->v; break;
	case perftools_profiles_Profile_duration_nanos_tag: p->duration_nanos = f->v; break;
	case perftools_profiles_Profile_period_tag: p->period = f->v; break;
	case perftools_profiles_Profile_default_sample_type_tag:
		p->default_sample_type = f->v;
		break;
	case perftools_profiles_Profile_doc_url_tag: p->doc_url = f->v; break;
	}
	return 0;
}

/* malloc of n elements of sz bytes, NULL on overflow (32-bit boards: counts near 2^28). */
static void *alloc_n(size_t n, size_t sz)
{
	return n > (SIZE_MAX - sz) / sz ? NULL : malloc((n + 1) * sz);
}

/* What alloc_arrays() will take, as the budget is asked for it. */
static size_t arrays_bytes(const struct rd *r)
{
	const struct pprof_profile *p = r->p;
	size_t b[] = {
		bytes_of(p->n_sample_type, sizeof(*p->sample_type)),
		bytes_of(p->n_samples, sizeof(*p->samples)),
		bytes_of(p->n_mappings, sizeof(*p->mappings)),
		bytes_of(p->n_locations, sizeof(*p->locations)),
		bytes_of(p->n_functions, sizeof(*p->functions)),
		bytes_of(p->n_strings, sizeof(*p->strings)),
		bytes_of(r->n_comments, sizeof(*p->comments)),
		bytes_of(r->str_bytes, 1),
		bytes_of(r->n_ids, sizeof(*p->blocks->ids)),
		bytes_of(r->n_values, sizeof(*p->blocks->values)),
		bytes_of(r->n_labels, sizeof(*p->blocks->labels)),
		bytes_of(r->n_lines, sizeof(*p->blocks->lines)),
		/* the id maps of validate(), when the ids are not 1..n */
		bytes_of(2 * (p->n_locations + p->n_functions + p->n_mappings),
			 2 * sizeof(struct pp_htab_slot)),
	};
	size_t sum = 0;

	for (size_t i = 0; i < sizeof(b) / sizeof(b[0]); i++)
		sum = sum + b[i] < sum ? SIZE_MAX : sum + b[i];
	return sum;
}

static int alloc_arrays(struct rd *r)
{
	struct pprof_profile *p = r->p;
	struct pprof_blocks *bl = p->blocks;
	int err = rd_reserve(r, arrays_bytes(r));

	if (err)
		return err;

	/* +1 everywhere: calloc(0) may return NULL, and NULL means "no memory" below. */
	p->sample_type = calloc(p->n_sample_type + 1, sizeof(*p->sample_type));
	p->samples = calloc(p->n_samples + 1, sizeof(*p->samples));
	p->mappings = calloc(p->n_mappings + 1, sizeof(*p->mappings));
	p->locations = calloc(p->n_locations + 1, sizeof(*p->locations));
	p->functions = calloc(p->n_functions + 1, sizeof(*p->functions));
	p->strings = calloc(p->n_strings + 1, sizeof(*p->strings));
	p->comments = calloc(r->n_comments + 1, sizeof(*p->comments));
	bl->strdata = alloc_n(r->str_bytes, 1);
	bl->ids = alloc_n(r->n_ids, sizeof(*bl->ids));
	bl->values = alloc_n(r->n_values, sizeof(*bl->values));
	bl->labels = alloc_n(r->n_labels, sizeof(*bl->labels));
	bl->lines = calloc(r->n_lines + 1, sizeof(*bl->lines));
	if (!p->sample_type || !p->samples || !p->mappings || !p->locations || !p->functions ||
	    !p->strings || !p->comments || !bl->strdata || !bl->ids || !bl->values ||
	    !bl->labels || !bl->lines) {
		pp_err(r->err, r->errlen, "out of memory");
		return -ENOMEM;
	}
	return 0;
}

static int decode(struct rd *r, const uint8_t *buf, size_t len)
{
	struct pprof_profile *p = r->p;
	struct fill k = { 0 };
	struct cur c = { buf, buf + len };
	struct fld f;
	int ret, err;

	while ((ret = next_field(&c, &f)) > 0)
		if ((err = count_field(r, &f)))
			return err;
	if (ret < 0)
		return bad(r, "profile is truncated or malformed at byte %zu of %zu",
			   (size_t)(c.p - buf), len);
	if (r->m.on) {
		r->m.n_in = p->n_samples;
		p->n_samples = r->m.n_keys;
		r->n_ids = r->m.n_ids;
		r->n_values = r->m.n_values;
		r->n_labels = r->m.n_labels;
		if (pp_grow(&r->sc.vals, &r->sc.cap_vals, 0, r->m.max_values + 1,
			    sizeof(*r->sc.vals))) {
			pp_err(r->err, r->errlen, "out of memory");
			return -ENOMEM;
		}
	}
	err = alloc_arrays(r);
	if (err)
		return err;
	k.sp = p->blocks->strdata;
	r->n_ids = r->n_values = r->n_labels = r->n_lines = 0;
	c.p = buf;
	while (next_field(&c, &f) > 0) {
		if (is_merged(r, &f, &k) && r->m.summed) {
			k.in++; /* its values are in the sums already */
			skip_merged(r, &c, &k);
		} else if ((err = is_merged(r, &f, &k) ? add_merged(r, &f, &k) :
			       fill_field(r, &f, &k)))
			return err;
	}
	p->n_comments = k.cm;
	return 0;
}

/* ---- validation and dense renumbering ----------------------------------------------------- */

/*
 * id -> index for one table. Producers almost always number 1..n in order; then the map is the
 * identity and costs nothing. Otherwise a hash index over the ids.
 */
struct idmap {
	const char *what;
	size_t n;
	bool dense;
	struct pp_htab ht;
	const void *base;
	size_t stride; /* bytes between ids in the table */
};

static uint64_t idmap__id(const struct idmap *m, size_t i)
{
	return *(const uint64_t *)((const char *)m->base + i * m->stride);
}

static int idmap__build(struct rd *r, struct idmap *m)
{
	size_t i;

	m->dense = true;
	for (i = 0; i < m->n && m->dense; i++)
		m->dense = idmap__id(m, i) == i + 1;
	if (m->dense)
		return 0;
	if (pp_htab__reserve(&m->ht, m->n)) {
		pp_err(r->err, r->errlen, "out of memory");
		return -ENOMEM;
	}
	for (i = 0; i < m->n; i++) {
		uint64_t id = idmap__id(m, i);
		uint32_t h = pp_mix(0, id);
		size_t pos;

		if (!id)
			return bad(r, "%s %zu has id 0", m->what, i);
		for (pos = pp_htab__pos(&m->ht, h); m->ht.e[pos].slot; pos = (pos + 1) & (m->ht.cap - 1))
			if (idmap__id(m, m->ht.e[pos].slot - 1) == id)
				return bad(r, "duplicate %s id %" PRIu64, m->what, id);
		pp_htab__set(&m->ht, pos, h, i);
	}
	return 0;
}

/* New (dense) id for an old one, 0 when absent. */
static uint64_t idmap__get(const struct idmap *m, uint64_t id)
{
	size_t pos;

	if (m->dense)
		return id <= m->n ? id : 0;
	if (!m->ht.cap)
		return 0;
	for (pos = pp_htab__pos(&m->ht, pp_mix(0, id)); m->ht.e[pos].slot;
	     pos = (pos + 1) & (m->ht.cap - 1))
		if (idmap__id(m, m->ht.e[pos].slot - 1) == id)
			return m->ht.e[pos].slot;
	return 0;
}

static bool str_ok(const struct pprof_profile *p, int64_t i)
{
	return i >= 0 && (uint64_t)i < p->n_strings;
}

#define check_str(r, idx, ...)                                                                 \
	do {                                                                                   \
		if (!str_ok((r)->p, (idx))) {                                                  \
			char what_[96];                                                        \
			snprintf(what_, sizeof(what_), __VA_ARGS__);                           \
			return bad((r), "%s references string %" PRId64 ", profile has %zu",  \
				   what_, (int64_t)(idx), (r)->p->n_strings);                  \
		}                                                                              \
	} while (0)

static int validate_header(struct rd *r)
{
	struct pprof_profile *p = r->p;
	size_t i;

	if (!p->n_strings || p->strings[0][0] != '\0')
		return bad(r, "string_table[0] must be \"\"");
	for (i = 0; i < p->n_sample_type; i++) {
		check_str(r, p->sample_type[i].type, "sample_type %zu", i);
		check_str(r, p->sample_type[i].unit, "sample_type %zu unit", i);
	}
	check_str(r, p->period_type.type, "period_type");
	check_str(r, p->period_type.unit, "period_type unit");
	check_str(r, p->drop_frames, "drop_frames");
	check_str(r, p->keep_frames, "keep_frames");
	check_str(r, p->default_sample_type, "default_sample_type");
	check_str(r, p->doc_url, "doc_url");
	for (i = 0; i < p->n_comments; i++)
		check_str(r, p->comments[i], "comment %zu", i);
	return 0;
}

static int validate_tables(struct rd *r, const struct idmap *maps, const struct idmap *funcs)
{
	struct pprof_profile *p = r->p;
	size_t i, j;

	for (i = 0; i < p->n_mappings; i++) {
		check_str(r, p->mappings[i].filename, "mapping %zu filename", i);
		check_str(r, p->mappings[i].build_id, "mapping %zu build_id", i);
	}
	for (i = 0; i < p->n_functions; i++) {
		struct pprof_function *fn = &p->functions[i];

		check_str(r, fn->name, "function %zu name", i);
		check_str(r, fn->system_name, "function %zu system_name", i);
		check_str(r, fn->filename, "function %zu filename", i);
	}
	for (i = 0; i < p->n_locations; i++) {
		struct pprof_location *l = &p->locations[i];
		uint64_t m = l->mapping_id ? idmap__get(maps, l->mapping_id) : 0;

		if (l->mapping_id && !m)
			return bad(r, "location %zu references mapping %" PRIu64 ", profile has %zu",
				   i, l->mapping_id, p->n_mappings);
		l->mapping_id = m;
		for (j = 0; j < l->n_lines; j++) {
			uint64_t fid = l->lines[j].function_id;
			uint64_t nf = fid ? idmap__get(funcs, fid) : 0;

			if (fid && !nf)
				return bad(r, "location %zu references function %" PRIu64
					   ", profile has %zu", i, fid, p->n_functions);
			l->lines[j].function_id = nf;
		}
	}
	return 0;
}

/*
 * Index of the first location id of s outside 1..n, or s->n_locations. Dense ids (the usual
 * case) stay as they are and this is the whole check: one compare per frame.
 */
static size_t first_id_out_of_range(const struct pprof_sample *s, uint64_t n)
{
	size_t j;

	for (j = 0; j < s->n_locations; j++)
		if (s->location_ids[j] - 1 >= n)
			break;
	return j;
}

/*
 * The index in the input of sample i (merged: of the first sample merged into it). Only for
 * errors: the first sample of the input that fails a check is the first of its key, as the
 * others have its locations and labels.
 */
static size_t sample_index(const struct rd *r, size_t i)
{
	size_t k = 0;

	if (!r->m.on)
		return i;
	while (r->sc.of[k] != i)
		k++;
	return k;
}

static int validate_samples(struct rd *r, const struct idmap *locs)
{
	struct pprof_profile *p = r->p;
	size_t i, j;

	for (i = 0; i < p->n_samples; i++) {
		struct pprof_sample *s = &p->samples[i];

		j = locs->dense ? first_id_out_of_range(s, locs->n) : 0;
		for (; j < s->n_locations; j++) {
			uint64_t id = locs->dense ? 0 : idmap__get(locs, s->location_ids[j]);

			if (!id)
				return bad(r, "sample %zu references location %" PRIu64
					   ", profile has %zu", sample_index(r, i),
					   s->location_ids[j], p->n_locations);
			s->location_ids[j] = id;
		}
		for (j = 0; j < s->n_labels; j++) {
			const struct pprof_label *l = &s->labels[j];

			check_str(r, l->key, "sample %zu label %zu key", sample_index(r, i), j);
			check_str(r, l->str, "sample %zu label %zu", sample_index(r, i), j);
			check_str(r, l->num_unit, "sample %zu label %zu unit", sample_index(r, i), j);
		}
	}
	return 0;
}

static int validate(struct rd *r)
{
	struct pprof_profile *p = r->p;
	struct idmap maps = { "mapping", p->n_mappings, .base = &p->mappings[0].id,
			      .stride = sizeof(*p->mappings) };
	struct idmap funcs = { "function", p->n_functions, .base = &p->functions[0].id,
			       .stride = sizeof(*p->functions) };
	struct idmap locs = { "location", p->n_locations, .base = &p->locations[0].id,
			      .stride = sizeof(*p->locations) };
	int err;

	err = validate_header(r);
	if (!err)
		err = idmap__build(r, &maps);
	if (!err)
		err = idmap__build(r, &funcs);
	if (!err)
		err = idmap__build(r, &locs);
	if (!err)
		err = validate_tables(r, &maps, &funcs);
	if (!err)
		err = validate_samples(r, &locs);
	if (!err) {
		size_t i;

		/* Last: the id maps above read the original ids from the tables. */
		for (i = 0; i < p->n_locations; i++)
			p->locations[i].id = i + 1;
		for (i = 0; i < p->n_mappings; i++)
			p->mappings[i].id = i + 1;
		for (i = 0; i < p->n_functions; i++)
			p->functions[i].id = i + 1;
	}
	pp_htab__free(&maps.ht);
	pp_htab__free(&funcs.ht);
	pp_htab__free(&locs.ht);
	return err;
}

/* ---- gunzip ------------------------------------------------------------------------------- */

/* The output size the gzip trailer claims (its last member's, mod 2^32), +1, at most max. */
static size_t gzip_hint(const uint8_t *in, size_t len, size_t max)
{
	size_t isize;

	if (len < 18)
		return 0;
	isize = (size_t)in[len - 4] | (size_t)in[len - 3] << 8 | (size_t)in[len - 2] << 16 |
		(size_t)in[len - 1] << 24;
	return !isize || isize >= max ? max : isize + 1;
}

static int gunzip(struct rd *r, const uint8_t *in, size_t len, uint8_t **out, size_t *out_len)
{
	size_t ratio_max = len > SIZE_MAX / r->lim.max_ratio ? SIZE_MAX : len * r->lim.max_ratio;
	size_t max, cap, olen = 0, fast;
	z_stream z = { 0 };
	uint8_t *buf = NULL;
	int ret, err = 0;

	/* The ratio bound stops zip bombs; below 1 MiB of output it does not apply. */
	max = ratio_max < MiB ? MiB : ratio_max;
	if (max > r->lim.max_decoded)
		max = r->lim.max_decoded;
	fast = gzip_hint(in, len, max);
	if ((err = rd_reserve(r, fast)))
		return err;
	/* bounded by what was asked: a lying ISIZE falls to zlib's path, which asks as it grows */
	if (!pp_inflate_fast(in, len, r->lim.reserve ? fast : max, &r->sc, out_len)) {
		*out = r->sc.buf; /* the scratch's: not freed by the caller */
		return 0;
	}
	if (r->sc.cap_buf > (size_t)CONFIG_PPROF_READ_SCRATCH_KB * 1024) {
		free(r->sc.buf); /* grown by a bomb: not kept through zlib's path too */
		r->sc.buf = NULL;
		r->sc.cap_buf = 0;
	}
	cap = len < max / 4 ? (len * 4 < 65536 ? 65536 : len * 4) : max;
	if (cap > max)
		cap = max;
	if (inflateInit2(&z, 16 + 15) != Z_OK)
		return -ENOMEM;
	z.next_in = (uint8_t *)in;
	z.avail_in = len;
	for (;;) {
		if (!buf || olen == cap) {
			uint8_t *nb;

			if (buf && cap == max) {
				pp_err(r->err, r->errlen, "gzip input of %zu bytes expands beyond %zu "
				       "bytes (limits: ratio %u, %zu bytes)", len, max,
				       r->lim.max_ratio, r->lim.max_decoded);
				err = -EFBIG;
				break;
			}
			if (buf)
				cap = cap > max / 2 ? max : cap * 2;
			if ((err = rd_reserve(r, buf ? cap / 2 + 1 : cap)))
				break;
			nb = realloc(buf, cap);
			if (!nb) {
				err = -ENOMEM;
				break;
			}
			buf = nb;
		}
		z.next_out = buf + olen;
		z.avail_out = cap - olen;
		ret = inflate(&z, Z_NO_FLUSH);
		olen = cap - z.avail_out;
		if (ret == Z_STREAM_END) {
			if (!z.avail_in)
				break;
			/* Concatenated gzip members are one stream (as gzip -d and Go read it). */
			if (z.avail_in >= 2 && z.next_in[0] == 0x1f && z.next_in[1] == 0x8b &&
			    inflateReset(&z) == Z_OK)
				continue;
			err = bad(r, "%u bytes of garbage after the gzip stream", z.avail_in);
			break;
		}
		if (ret == Z_OK)
			continue;
		if (ret == Z_BUF_ERROR && z.avail_out)
			err = bad(r, "gzip stream is truncated");
		else if (ret == Z_MEM_ERROR)
			err = -ENOMEM;
		else if (ret != Z_BUF_ERROR)
			err = bad(r, "gzip: %s", z.msg ? z.msg : "corrupt data");
		if (err)
			break;
	}
	inflateEnd(&z);
	if (err) {
		free(buf);
		return err;
	}
	*out = buf;
	*out_len = olen;
	return 0;
}

/* ---- entry -------------------------------------------------------------------------------- */

static void limits_init(struct pprof_read_limits *l, const struct pprof_read_limits *in)
{
	if (in)
		*l = *in;
	else
		memset(l, 0, sizeof(*l));
	if (!l->max_input)
		l->max_input = 64 * MiB;
	if (!l->max_decoded)
		l->max_decoded = 256 * MiB;
	if (!l->max_ratio)
		l->max_ratio = 200;
	if (!l->max_samples)
		l->max_samples = 10000000;
	if (!l->max_stack_depth)
		l->max_stack_depth = 4096;
}

int pprof_read(const void *data, size_t len, const struct pprof_read_limits *limits,
	       struct pprof_profile **out, char *err, size_t errlen)
{
	struct rd r = { .err = err, .errlen = errlen };
	const uint8_t *buf = data;
	uint8_t *unzipped = NULL;
	size_t blen = len;
	int ret;

	*out = NULL;
	if (err && errlen)
		err[0] = '\0';
	limits_init(&r.lim, limits);
	r.m.on = r.m.summed = r.lim.merge_samples;
	if (!data || !len)
		return bad(&r, "empty input");
	if (len > r.lim.max_input) {
		pp_err(err, errlen, "input is %zu bytes, limit %zu", len, r.lim.max_input);
		return -EFBIG;
	}
	pp_scratch__take(&r.sc); /* the merge tables start from its memory, emptied */
	if (pprof_is_gzip(data, len)) {
		ret = gunzip(&r, data, len, &unzipped, &blen);
		if (ret) {
			pp_scratch__give(&r.sc);
			return ret;
		}
		buf = unzipped;
	} else if (len > r.lim.max_decoded) {
		pp_err(err, errlen, "input is %zu bytes, limit %zu", len, r.lim.max_decoded);
		pp_scratch__give(&r.sc);
		return -EFBIG;
	}
	r.p = calloc(1, sizeof(*r.p));
	if (r.p)
		r.p->blocks = calloc(1, sizeof(*r.p->blocks));
	if (!r.p || !r.p->blocks) {
		ret = -ENOMEM;
		goto out;
	}
	ret = decode(&r, buf, blen);
	if (!ret)
		ret = validate(&r);
out:
	if (unzipped != r.sc.buf)
		free(unzipped); /* zlib's */
	pp_scratch__give(&r.sc);
	if (ret == -ENOMEM)
		pp_err(err, errlen, "out of memory");
	if (ret) {
		if (r.p && !r.p->blocks) {
			free(r.p);
			r.p = NULL;
		}
		pprof_profile__free(r.p);
		return ret;
	}
	*out = r.p;
	return 0;
}
