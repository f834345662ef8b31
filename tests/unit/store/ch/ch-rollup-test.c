// SPDX-License-Identifier: MIT
/*
 * ch_rollup__build (store/ch/ch-rollup.c): a batch's sample rows summed into samples_1g's rows,
 * read back from the Native block it makes. The rows must be what the materialized view made
 * of them, summed by group instead of series: several profiles of one key (one series, or
 * several series of one group) summed by stack, a profile with more values than samples_1g
 * has columns left out, values past a row's own count 0, rows of zero kept (the view kept
 * them; SummingMergeTree's merges drop them later), keys in samples_1g's order. Unless a test
 * says otherwise a profile's group is its series' number.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "store/ch/ch-store.h"

#define H CH_ROLLUP_NS
#define DAY 20000

struct row {
	uint64_t ts, series, sig, stack;
	size_t k;
	int64_t v[6];
};

/* One profile's rows of group grp appended to the batch as the collector writes them. */
static void add_profile_grp(struct ch_batch *b, const struct row *r, size_t n, uint64_t grp)
{
	struct rb *body = &b->rows[T_SAMPLES];
	struct pmark *m;

	b->marks = realloc(b->marks, (b->n_marks + 1) * sizeof(*b->marks));
	assert_non_null(b->marks);
	m = &b->marks[b->n_marks++];
	memset(m, 0, sizeof(*m));
	m->s_off = body->len;
	m->ts = r[0].ts;
	m->series = r[0].series;
	m->grp = grp;
	for (size_t i = 0; i < n; i++) {
		rb_u16(body, DAY);
		rb_u64(body, r[i].ts);
		rb_u64(body, r[i].series);
		rb_u64(body, r[i].sig);
		rb_u64(body, 7);	/* profile id */
		rb_u64(body, r[i].stack);
		rb_varint(body, r[i].k);
		for (size_t j = 0; j < r[i].k; j++)
			rb_u64(body, (uint64_t)r[i].v[j]);
	}
	assert_false(body->oom);
	m->s_len = body->len - m->s_off;
}

static void add_profile(struct ch_batch *b, const struct row *r, size_t n)
{
	add_profile_grp(b, r, n, r[0].series);
}

struct out {
	size_t n;
	uint16_t day[16];
	uint32_t hour[16];
	uint64_t grp[16], sig[16], stack[16];
	int64_t v[CH_ROLLUP_VALUES][16];
};

static uint64_t varint(const unsigned char **p)
{
	uint64_t v = 0;

	for (int s = 0;; s += 7) {
		unsigned char c = *(*p)++;

		v |= (uint64_t)(c & 0x7f) << s;
		if (!(c & 0x80))
			return v;
	}
}

/* The Native block's columns, checked by name and type, into o. */
static void parse(const struct rb *nat, struct out *o)
{
	static const char *const cols[][2] = {
		{ "day", "Date" }, { "hour", "UInt32" }, { "grp", "UInt64" },
		{ "sig", "UInt64" }, { "stack", "UInt64" }, { "v0", "Int64" }, { "v1", "Int64" },
		{ "v2", "Int64" }, { "v3", "Int64" },
	};
	const unsigned char *p = nat->p;

	assert_int_equal(varint(&p), 9);
	o->n = varint(&p);
	assert_true(o->n <= 16);
	for (int c = 0; c < 9; c++) {
		for (int s = 0; s < 2; s++) {
			size_t len = varint(&p);

			assert_int_equal(len, strlen(cols[c][s]));
			assert_memory_equal(p, cols[c][s], len);
			p += len;
		}
		for (size_t i = 0; i < o->n; i++) {
			if (c == 0) {
				memcpy(&o->day[i], p, 2), p += 2;
			} else if (c == 1) {
				memcpy(&o->hour[i], p, 4), p += 4;
			} else {
				uint64_t *d[] = { o->grp, o->sig, o->stack };

				if (c < 5)
					memcpy(&d[c - 2][i], p, 8);
				else
					memcpy(&o->v[c - 5][i], p, 8);
				p += 8;
			}
		}
	}
	assert_ptr_equal(p, nat->p + nat->len);
}

static void build(struct ch_batch *b, struct out *o)
{
	struct ch_scratch s = { 0 };
	size_t n = 99;

	assert_int_equal(ch_rollup__build(b, &s, &s.native, &n), 0);
	memset(o, 0, sizeof(*o));
	if (n)
		parse(&s.native, o);
	assert_int_equal(o->n, n);
	ch_scratch__free(&s);
	rb_free(&b->rows[T_SAMPLES]);
	free(b->marks);
	memset(b, 0, sizeof(*b));
}

/* samples_1d's Native block (no hour, series for grp) into o. */
static void parse_daily(const struct rb *nat, struct out *o)
{
	static const char *const cols[][2] = {
		{ "day", "Date" }, { "series", "UInt64" }, { "sig", "UInt64" },
		{ "stack", "UInt64" }, { "v0", "Int64" }, { "v1", "Int64" }, { "v2", "Int64" },
		{ "v3", "Int64" },
	};
	const unsigned char *p = nat->p;

	assert_int_equal(varint(&p), 8);
	o->n = varint(&p);
	assert_true(o->n <= 16);
	for (int c = 0; c < 8; c++) {
		for (int s = 0; s < 2; s++) {
			size_t len = varint(&p);

			assert_int_equal(len, strlen(cols[c][s]));
			assert_memory_equal(p, cols[c][s], len);
			p += len;
		}
		for (size_t i = 0; i < o->n; i++) {
			uint64_t *d[] = { o->grp, o->sig, o->stack };

			if (c == 0)
				memcpy(&o->day[i], p, 2), p += 2;
			else if (c < 4)
				memcpy(&d[c - 1][i], p, 8), p += 8;
			else
				memcpy(&o->v[c - 4][i], p, 8), p += 8;
		}
	}
	assert_ptr_equal(p, nat->p + nat->len);
}

/*
 * The per-device daily rollup (samples_1d): a series' profiles of several hours of one day
 * summed by stack, another series of the same group apart, keys in (series, sig, stack)
 * order, the group's hourly rows unchanged beside it.
 */
static void test_daily_by_series(void **state)
{
	struct ch_batch b = { 0 };
	struct ch_scratch sc = { 0 };
	struct out o;
	const struct row a5[] = { { 5 * H, 3, 2, 10, 2, { 3, 30 } }, { 5 * H, 3, 2, 20, 1, { 4 } } };
	const struct row a6[] = { { 6 * H, 3, 2, 10, 2, { 7, 70 } } };
	const struct row b5[] = { { 5 * H + 1, 1, 2, 10, 1, { 100 } } };
	size_t n = 99;

	(void)state;
	add_profile_grp(&b, a5, 2, 42);
	add_profile_grp(&b, a6, 1, 42);
	add_profile_grp(&b, b5, 1, 42);
	assert_int_equal(ch_rollup__build_daily(&b, &sc, &sc.native, &n), 0);
	assert_int_equal(n, 3);
	parse_daily(&sc.native, &o);
	assert_int_equal(o.grp[0], 1);	/* series 1 first */
	assert_int_equal(o.stack[0], 10);
	assert_int_equal(o.v[0][0], 100);
	assert_int_equal(o.grp[1], 3);
	assert_int_equal(o.stack[1], 10);
	assert_int_equal(o.v[0][1], 10);	/* hours 5 and 6 of the day: 3 + 7 */
	assert_int_equal(o.v[1][1], 100);
	assert_int_equal(o.grp[2], 3);
	assert_int_equal(o.stack[2], 20);
	assert_int_equal(o.v[1][2], 0);	/* past the row's one value */
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(o.day[i], DAY);
		assert_int_equal(o.sig[i], 2);
	}
	ch_scratch__free(&sc);
	build(&b, &o);	/* the hourly rows by group: hour 5 (two series folded), hour 6 */
	assert_int_equal(o.n, 3);
	assert_int_equal(o.v[0][0], 103);
}

/* Two profiles of one key: summed by stack, in stack order; another key after it. */
static void test_same_key_summed(void **state)
{
	struct ch_batch b = { 0 };
	struct out o;
	const struct row p1[] = { { 5 * H + 1, 1, 2, 10, 2, { 3, 30 } },
				  { 5 * H + 1, 1, 2, 20, 2, { 4, 40 } } };
	const struct row p2[] = { { 5 * H + 9, 1, 2, 5, 2, { 1, 1 } },
				  { 5 * H + 9, 1, 2, 10, 2, { 7, 70 } } };
	const struct row p0[] = { { 6 * H, 1, 2, 10, 1, { 100 } } };	/* the next hour */

	(void)state;
	add_profile(&b, p0, 1);
	add_profile(&b, p1, 2);
	add_profile(&b, p2, 2);
	build(&b, &o);
	assert_int_equal(o.n, 4);
	/* hour 5: stacks 5, 10 (3 + 7), 20; then hour 6 */
	assert_int_equal(o.hour[0], 5);
	assert_int_equal(o.stack[0], 5);
	assert_int_equal(o.stack[1], 10);
	assert_int_equal(o.v[0][1], 10);
	assert_int_equal(o.v[1][1], 100);
	assert_int_equal(o.stack[2], 20);
	assert_int_equal(o.v[0][2], 4);
	assert_int_equal(o.hour[3], 6);
	assert_int_equal(o.v[0][3], 100);
	assert_int_equal(o.v[1][3], 0);	/* past the row's one value */
	for (size_t i = 0; i < o.n; i++) {
		assert_int_equal(o.day[i], DAY);
		assert_int_equal(o.grp[i], 1);
		assert_int_equal(o.sig[i], 2);
	}
}

/*
 * Five profiles of one key (runs merged two by two: an odd one out), and a key whose rows are
 * not by stack (not rows this collector builds: sorted all the same): summed by stack, in order.
 */
static void test_many_profiles_merged(void **state)
{
	static const uint64_t stacks[][3] = { { 1, 4, 9 }, { 2, 4 }, { 9, 10, 11 }, { 1 }, { 3, 10 } };
	static const size_t ns[] = { 3, 2, 3, 1, 2 };
	static const uint64_t want[] = { 1, 2, 3, 4, 9, 10, 11 };
	static const int64_t sums[] = { 1 + 31, 11, 41, 2 + 12, 3 + 21, 22 + 42, 23 };
	const struct row odd[] = { { 7 * H, 9, 2, 8, 1, { 1 } }, { 7 * H, 9, 2, 2, 1, { 2 } } };
	const struct row odd2[] = { { 7 * H, 9, 2, 5, 1, { 3 } } };
	struct ch_batch b = { 0 };
	struct out o;

	(void)state;
	for (size_t p = 0; p < 5; p++) {
		struct row r[3];

		for (size_t i = 0; i < ns[p]; i++)
			r[i] = (struct row){ 5 * H + p, 1, 2, stacks[p][i], 1,
					     { (int64_t)(10 * p + i + 1) } };
		add_profile(&b, r, ns[p]);
	}
	add_profile(&b, odd, 2);
	add_profile(&b, odd2, 1);
	build(&b, &o);
	assert_int_equal(o.n, 10);
	for (size_t i = 0; i < 7; i++) {
		assert_int_equal(o.stack[i], want[i]);
		assert_int_equal(o.v[0][i], sums[i]);
		assert_int_equal(o.hour[i], 5);
	}
	assert_int_equal(o.stack[7], 2);
	assert_int_equal(o.v[0][7], 2);
	assert_int_equal(o.stack[8], 5);
	assert_int_equal(o.stack[9], 8);
	assert_int_equal(o.grp[9], 9);
}

/*
 * Profiles of three devices (series 1, 2, 3) in one hour: 1 and 3 of group 40, 2 of group 7:
 * group 40's stacks summed over both devices, group 7 apart and first (the key's order).
 */
static void test_devices_of_a_group_fold(void **state)
{
	const struct row d1[] = { { 3 * H + 1, 1, 2, 10, 1, { 1 } },
				  { 3 * H + 1, 1, 2, 20, 1, { 2 } } };
	const struct row d2[] = { { 3 * H + 2, 2, 2, 10, 1, { 4 } } };
	const struct row d3[] = { { 3 * H + 3, 3, 2, 10, 1, { 8 } },
				  { 3 * H + 3, 3, 2, 30, 1, { 16 } } };
	struct ch_batch b = { 0 };
	struct out o;

	(void)state;
	add_profile_grp(&b, d1, 2, 40);
	add_profile_grp(&b, d2, 1, 7);
	add_profile_grp(&b, d3, 2, 40);
	build(&b, &o);
	assert_int_equal(o.n, 4);
	assert_int_equal(o.grp[0], 7);
	assert_int_equal(o.stack[0], 10);
	assert_int_equal(o.v[0][0], 4);
	for (size_t i = 1; i < 4; i++) {
		assert_int_equal(o.grp[i], 40);
		assert_int_equal(o.hour[i], 3);
		assert_int_equal(o.stack[i], 10 * i);
	}
	assert_int_equal(o.v[0][1], 1 + 8);
	assert_int_equal(o.v[0][2], 2);
	assert_int_equal(o.v[0][3], 16);
}

/*
 * 300 profiles of 30 devices in 3 groups, one hour, 40 stacks each drawn from 64 (so a
 * group's stacks repeat across its profiles and the hash table's probes collide), against
 * sums made here row by row: each group's stacks once, in order, summed.
 */
static void test_group_sums_exact(void **state)
{
	enum { NP = 300, NG = 3, NS = 64 };
	static int64_t want[NG][NS];
	static bool seen[NG][NS];
	struct ch_batch b = { 0 };
	struct ch_scratch sc = { 0 };
	size_t n, at = 0;
	const unsigned char *p;

	(void)state;
	memset(want, 0, sizeof(want));
	memset(seen, 0, sizeof(seen));
	for (size_t i = 0; i < NP; i++) {
		struct row r[40];
		uint64_t g = i % NG;

		for (size_t j = 0; j < 40; j++) {
			uint64_t st = (j * 7 + i * 13) % NS;	/* distinct within a profile */

			r[j] = (struct row){ 4 * H + i, 1000 + i % 30, 2, (st + 1) << 40, 1,
					     { (int64_t)(i * 40 + j) } };
			want[g][st] += (int64_t)(i * 40 + j);
			seen[g][st] = true;
		}
		/* a profile's rows by stack, as the collector writes them */
		for (size_t x = 0; x < 40; x++)
			for (size_t y = x + 1; y < 40; y++)
				if (r[y].stack < r[x].stack) {
					struct row t = r[x];

					r[x] = r[y];
					r[y] = t;
				}
		add_profile_grp(&b, r, 40, 7 + g);
	}
	assert_int_equal(ch_rollup__build(&b, &sc, &sc.native, &n), 0);
	/* the Native block's columns: skip to grp, stack and v0 by their known widths */
	p = sc.native.p;
	assert_int_equal(varint(&p), 9);
	assert_int_equal(varint(&p), n);
	for (size_t g = 0; g < NG; g++)
		for (size_t st = 0; st < NS; st++)
			at += seen[g][st];
	assert_int_equal(n, at);
	{
		const unsigned char *col[9];

		for (int c = 0; c < 9; c++) {
			static const size_t width[9] = { 2, 4, 8, 8, 8, 8, 8, 8, 8 };

			p += 1 + *p;	/* name */
			p += 1 + *p;	/* type */
			col[c] = p;
			p += width[c] * n;
		}
		at = 0;
		for (size_t g = 0; g < NG; g++) {
			for (size_t st = 0; st < NS; st++) {
				uint64_t grp, stack;
				int64_t v0;

				if (!seen[g][st])
					continue;
				memcpy(&grp, col[2] + 8 * at, 8);
				memcpy(&stack, col[4] + 8 * at, 8);
				memcpy(&v0, col[5] + 8 * at, 8);
				assert_int_equal(grp, 7 + g);
				assert_int_equal(stack, (st + 1) << 40);
				assert_int_equal(v0, want[g][st]);
				at++;
			}
		}
	}
	ch_scratch__free(&sc);
	rb_free(&b.rows[T_SAMPLES]);
	free(b.marks);
}

/* A profile with more values than samples_1g's columns is left out; so is only it. */
static void test_wide_left_out(void **state)
{
	struct ch_batch b = { 0 };
	struct out o;
	const struct row wide[] = { { H, 3, 4, 1, 1, { 1 } },
				    { H, 3, 4, 2, 5, { 1, 2, 3, 4, 5 } } };
	const struct row four[] = { { H, 3, 5, 1, 4, { 1, 2, 3, 4 } } };

	(void)state;
	add_profile(&b, wide, 2);
	build(&b, &o);
	assert_int_equal(o.n, 0);
	add_profile(&b, wide, 2);
	add_profile(&b, four, 1);
	build(&b, &o);
	assert_int_equal(o.n, 1);
	assert_int_equal(o.sig[0], 5);
	assert_int_equal(o.v[3][0], 4);
}

/* Rows of zero, and values that sum to zero, stay (as the view's did); negatives sum too. */
static void test_zero_values(void **state)
{
	struct ch_batch b = { 0 };
	struct out o;
	const struct row p1[] = { { 2 * H, 8, 9, 1, 2, { 0, 0 } },
				  { 2 * H, 8, 9, 2, 1, { 5 } } };
	const struct row p2[] = { { 2 * H + 5, 8, 9, 2, 1, { -5 } } };

	(void)state;
	add_profile(&b, p1, 2);
	add_profile(&b, p2, 1);
	build(&b, &o);
	assert_int_equal(o.n, 2);
	assert_int_equal(o.stack[0], 1);
	assert_int_equal(o.v[0][0], 0);
	assert_int_equal(o.stack[1], 2);
	assert_int_equal(o.v[0][1], 0);
}

/* Rows the collector did not write: -EINVAL, nothing to send. */
static void test_bad_rows(void **state)
{
	struct ch_batch b = { 0 };
	const struct row p[] = { { H, 1, 1, 1, 1, { 1 } } };
	struct ch_scratch s = { 0 };
	size_t n;

	(void)state;
	add_profile(&b, p, 1);
	b.marks[0].s_len -= 3;	/* a value cut short */
	assert_int_equal(ch_rollup__build(&b, &s, &s.native, &n), -EINVAL);
	assert_int_equal(n, 0);
	ch_scratch__free(&s);
	rb_free(&b.rows[T_SAMPLES]);
	free(b.marks);
}

/* A batch of np profiles of 40 stacks each, over keys (series) np / 3 + 1 (some summed). */
static void make_batch(struct ch_batch *b, size_t np, uint64_t salt)
{
	struct row r[40];

	memset(b, 0, sizeof(*b));
	for (size_t i = 0; i < np; i++) {
		for (size_t j = 0; j < 40; j++)
			r[j] = (struct row){ H * (1 + i % 2), 1 + (i * 7 + salt) % (np / 3 + 1),
					     3, 10 * j + salt, 1 + j % 4, { (int64_t)(i + j),
					     (int64_t)salt, -1, 2, 3 } };
		add_profile(b, r, 40);
	}
}

static void free_batch(struct ch_batch *b)
{
	rb_free(&b->rows[T_SAMPLES]);
	free(b->marks);
}

/* The Native block of b with buffers of its own (no reuse): into *ref. */
static void build_fresh(const struct ch_batch *b, struct rb *ref, size_t *n)
{
	struct ch_scratch s = { 0 };

	assert_int_equal(ch_rollup__build(b, &s, &s.native, n), 0);
	*ref = s.native;
	s.native = (struct rb){ 0 };
	ch_scratch__free(&s);
}

/*
 * The writer keeps its buffers from one batch to the next: a big batch after a small one (the
 * buffers grow), a small one after it (stale bytes beyond must not show), and one after a
 * failed build, each the same block as built with fresh buffers.
 */
static void test_scratch_reused(void **state)
{
	static const size_t sizes[] = { 1, 300, 2, 0, 50 };
	struct ch_scratch s = { 0 };

	(void)state;
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		struct ch_batch b;
		struct rb ref;
		size_t n, nref;

		if (!sizes[k]) {	/* a failed build on the kept buffers */
			make_batch(&b, 3, k);
			b.marks[1].s_len -= 3;
			assert_int_equal(ch_rollup__build(&b, &s, &s.native, &n), -EINVAL);
			free_batch(&b);
			continue;
		}
		make_batch(&b, sizes[k], k);
		build_fresh(&b, &ref, &nref);
		assert_int_equal(ch_rollup__build(&b, &s, &s.native, &n), 0);
		assert_true(n > 0);
		assert_int_equal(n, nref);
		assert_int_equal(s.native.len, ref.len);
		assert_memory_equal(s.native.p, ref.p, ref.len);
		rb_free(&ref);
		free_batch(&b);
	}
	ch_scratch__free(&s);
}

/* rb_room: emptied, room for the size, old bytes not carried; rb_keep_within frees largest. */
static void test_keep_bounded(void **state)
{
	struct rb a = { 0 }, b = { 0 }, c = { 0 };
	struct rb *v[] = { &a, &b, &c };
	unsigned char *p;

	(void)state;
	rb_put(&a, "abc", 3);
	p = rb_room(&a, 1 << 20);
	assert_non_null(p);
	assert_int_equal(a.len, 0);
	assert_true(a.cap >= 1 << 20);
	rb_put(&a, "x", 1);
	assert_int_equal(a.len, 1);
	assert_ptr_equal(rb_room(&a, 10), a.p);	/* smaller: the same buffer */
	assert_true(a.cap >= 1 << 20);
	assert_non_null(rb_room(&b, 4096));
	assert_non_null(rb_room(&c, 100));
	assert_int_equal(rb_keep_within(v, 3, 1 << 21), a.cap + b.cap + c.cap);
	assert_int_equal(rb_keep_within(v, 3, 8192), b.cap + c.cap);	/* a, the largest */
	assert_null(a.p);
	assert_int_equal(a.cap, 0);
	assert_int_equal(rb_keep_within(v, 3, 0), 0);
	assert_null(b.p);
	assert_null(c.p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_same_key_summed),
		cmocka_unit_test(test_daily_by_series),
		cmocka_unit_test(test_many_profiles_merged),
		cmocka_unit_test(test_devices_of_a_group_fold),
		cmocka_unit_test(test_group_sums_exact),
		cmocka_unit_test(test_wide_left_out),
		cmocka_unit_test(test_zero_values),
		cmocka_unit_test(test_bad_rows),
		cmocka_unit_test(test_scratch_reused),
		cmocka_unit_test(test_keep_bounded),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
