// SPDX-License-Identifier: MIT
/*
 * The ClickHouse store's rows of a profile decoded with merge_samples (as the store and the API
 * decode for it) are those of the profile decoded sample by sample: the same sample rows (stack
 * ids, summed values, in the same order), the same profile row, the same distinct stacks in the
 * same order with the same labels (the stacks rows). On Go's profiles (the fuzz corpus) and on
 * made ones: thousands of samples over hundreds of stacks, values of every length, string and
 * numeric labels. And the samples of several profiles as one Native block of the samples table
 * (a row per profile): the rows that were built.
 */
#define _FILE_OFFSET_BITS 64
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "pprof/pprof.h"
#include "store/ch/ch-store.h"

/* computed by the collector at 9d097eb, before the hash moved to port/hash.h */
#define PIN_SERIES 0xc00f04decf9ebdfeull
#define PIN_GROUP 0xf32f9bd7941f232eull
#define PIN_KEY 0x829247464c7161f4ull

static const struct pprof_read_limits merged = { .merge_samples = true };

/* The string labels of sample s, as the stacks table gets them. */
static void assert_same_string_labels(const struct pprof_profile *pu, const struct pprof_sample *u,
				      const struct pprof_profile *pm, const struct pprof_sample *m)
{
	size_t j = 0;

	for (size_t i = 0; i < u->n_labels; i++) {
		if (!u->labels[i].str)
			continue;
		while (j < m->n_labels && !m->labels[j].str)
			j++;
		assert_true(j < m->n_labels);
		assert_string_equal(pprof_str(pu, u->labels[i].key), pprof_str(pm, m->labels[j].key));
		assert_string_equal(pprof_str(pu, u->labels[i].str), pprof_str(pm, m->labels[j].str));
		j++;
	}
	while (j < m->n_labels && !m->labels[j].str)
		j++;
	assert_int_equal(j, m->n_labels);
}

/* Builds the rows of data read both ways and compares them; returns the samples read plain. */
static size_t assert_same_rows(const void *data, size_t len, size_t *n_merged)
{
	struct record_label labels[] = { { "node", "n1" }, { "version", "1.4.2" } };
	struct record_meta meta = { .service = "svc", .type = "cpu", .device = "d1",
				    .labels = labels, .n_labels = 2, .key = "",
				    .time_ns = 1700000000123456789ull };
	struct pprof_profile *u, *m;
	struct put_rows ru = { 0 }, rm = { 0 };
	size_t n;
	char err[256];

	assert_int_equal(pprof_read(data, len, NULL, &u, err, sizeof(err)), 0);
	assert_int_equal(pprof_read(data, len, &merged, &m, err, sizeof(err)), 0);
	assert_int_equal(ch__rows_build(&meta, u, len, 42, &ru), 0);
	assert_int_equal(ch__rows_build(&meta, m, len, 42, &rm), 0);
	assert_int_equal(ru.n_samples, rm.n_samples);
	assert_int_equal(ru.samples.len, rm.samples.len);
	assert_memory_equal(ru.samples.p, rm.samples.p, ru.samples.len);
	assert_int_equal(ru.profile.len, rm.profile.len);
	assert_memory_equal(ru.profile.p, rm.profile.p, ru.profile.len);
	assert_int_equal(ru.n_distinct, rm.n_distinct);
	for (size_t d = 0; d < ru.n_distinct; d++) {
		const struct pprof_sample *su = &u->samples[ru.first[d]];
		const struct pprof_sample *sm = &m->samples[rm.first[d]];

		assert_int_equal(ru.stack_ids[ru.first[d]], rm.stack_ids[rm.first[d]]);
		assert_int_equal(su->n_locations, sm->n_locations);
		for (size_t i = 0; i < su->n_locations; i++)
			assert_int_equal(ru.ids.loc[su->location_ids[i] - 1],
					 rm.ids.loc[sm->location_ids[i] - 1]);
		assert_same_string_labels(u, su, m, sm);
	}
	n = u->n_samples;
	*n_merged = m->n_samples;
	ch__rows_free(&ru);
	ch__rows_free(&rm);
	pprof_profile__free(u);
	pprof_profile__free(m);
	return n;
}

static void go_profiles(void **state)
{
	const char *dir = "tests/fuzz/pprof-reader.corpus";
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	assert_non_null(d);
	while ((e = readdir(d))) {
		static unsigned char data[4 << 20];
		char path[512];
		size_t len, nm;
		FILE *f;

		if (strncmp(e->d_name, "go-", 3) || !strstr(e->d_name, ".gz.seed"))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		f = fopen(path, "rb");
		assert_non_null(f);
		len = fread(data, 1, sizeof(data), f);
		fclose(f);
		assert_same_rows(data, len, &nm);
		n++;
	}
	closedir(d);
	assert_true(n > 0);
}

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/*
 * A fleet-like profile: n samples over `stacks` stacks of up to 24 of 200 locations; values of
 * 1 to 9 bytes (and 0); labels: none, a string one of 3, or a numeric one of 3, or both.
 */
static void make_profile(struct pprof_buf *out, size_t n, size_t stacks, int types, uint64_t seed)
{
	static const char *const strs[] = { "a", "b", "c" };
	struct pprof_builder *b = pprof_builder__new(NULL, pprof_buf_write, out);
	uint64_t locs[200], (*st)[25] = calloc(stacks, sizeof(*st));
	uint64_t s = seed;

	assert_non_null(b);
	assert_non_null(st);
	assert_int_equal(pprof_builder__add_sample_type(b, "samples", "count"), 0);
	if (types > 1)
		assert_int_equal(pprof_builder__add_sample_type(b, "cpu", "nanoseconds"), 0);
	for (int i = 0; i < 200; i++) {
		char name[32];
		struct pprof_line_desc ln;

		snprintf(name, sizeof(name), "fn%d", i % 150);
		ln.function_id = pprof_builder__function(b, name, NULL, "x.c", 0);
		ln.line = i;
		locs[i] = pprof_builder__location(b, 0, 0x1000 + 16 * (uint64_t)i, &ln, 1);
		assert_true(locs[i] > 0);
	}
	for (size_t k = 0; k < stacks; k++) {
		st[k][0] = 1 + rnd(&s) % 24;
		for (size_t j = 1; j <= st[k][0]; j++)
			st[k][j] = locs[rnd(&s) % 200];
	}
	for (size_t i = 0; i < n; i++) {
		size_t k = rnd(&s) % stacks;
		int64_t v[2] = { (int64_t)(rnd(&s) % 3),
				 (int64_t)(rnd(&s) >> (1 + rnd(&s) % 63)) };
		struct pprof_label_desc l[2];
		unsigned which = rnd(&s) % 4, nl = 0;

		if (which & 1)
			l[nl++] = (struct pprof_label_desc){ .key = "task", .str = strs[k % 3] };
		if (which & 2)
			l[nl++] = (struct pprof_label_desc){ .key = "bytes", .num = (int64_t)(k % 3),
							     .num_unit = "bytes" };
		assert_int_equal(pprof_builder__add_sample(b, &st[k][1], st[k][0], v, l, nl), 0);
	}
	assert_int_equal(pprof_builder__finish(b), 0);
	pprof_builder__free(b);
	free(st);
}

static void made_profiles(void **state)
{
	static const size_t shapes[][3] = {
		{ 3400, 715, 2 }, { 3400, 50, 1 }, { 1000, 1000, 2 }, { 1, 1, 1 }, { 20000, 3, 2 },
	};

	for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
		struct pprof_buf out = { 0 };
		size_t n, nm;

		make_profile(&out, shapes[i][0], shapes[i][1], (int)shapes[i][2], 0x9e37 + i);
		n = assert_same_rows(out.data, out.len, &nm);
		assert_int_equal(n, shapes[i][0]);
		print_message("%zu samples over %zu stacks: %zu merged\n", n, shapes[i][1], nm);
		assert_true(nm <= n);
		free(out.data);
	}
}

/* One column of a Native block: its values (an Array: its end offsets, then its elements). */
struct ncol {
	const unsigned char *p;		/* the values, or an Array's offsets */
	const unsigned char *elems;	/* an Array's elements (an Array of Arrays: inner offsets) */
	const unsigned char *inner;	/* an Array of Arrays: the innermost elements */
};

static uint64_t get64(const unsigned char *p, size_t i)
{
	uint64_t v;

	memcpy(&v, p + 8 * i, 8);
	return v;
}

static uint64_t read_varint(const unsigned char **p)
{
	uint64_t v = 0;

	for (unsigned sh = 0;; sh += 7) {
		unsigned char c = *(*p)++;

		v |= (uint64_t)(c & 0x7f) << sh;
		if (!(c & 0x80))
			return v;
	}
}

/* The columns of a Native block of the samples (7 columns), its row count into *n. */
static void read_block(const struct rb *b, struct ncol col[7], size_t *n)
{
	const unsigned char *p = b->p, *end = b->p + b->len;

	assert_int_equal(read_varint(&p), 7);
	*n = read_varint(&p);
	for (int c = 0; c < 7; c++) {
		size_t nl = read_varint(&p), tl;
		const char *type;

		p += nl;
		tl = read_varint(&p);
		type = (const char *)p;
		p += tl;
		col[c] = (struct ncol){ .p = p };
		if (tl == 4 && !memcmp(type, "Date", 4)) {
			p += 2 * *n;
		} else if (tl == 19 && !memcmp(type, "Array(Array(Int64))", 19)) {
			size_t outer = *n ? get64(p, *n - 1) : 0, inner;

			col[c].elems = p + 8 * *n;
			inner = outer ? get64(col[c].elems, outer - 1) : 0;
			col[c].inner = col[c].elems + 8 * outer;
			p = col[c].inner + 8 * inner;
		} else if (tl > 6 && !memcmp(type, "Array(", 6)) {
			col[c].elems = p + 8 * *n;
			p = col[c].elems + 8 * (*n ? get64(p, *n - 1) : 0);
		} else {
			p += 8 * *n;
		}
		assert_true(p <= end);
	}
	assert_ptr_equal(p, end);
}

/* The sample rows of a body (RowBinary: day, ts, series, sig, profile, stack, v), by column. */
struct body_rows {
	size_t n;
	uint16_t *day;
	uint64_t *col[5];	/* ts, series, sig, profile, stack */
	uint64_t *ends;		/* each row's values' end offset */
	int64_t *v;
};

static void read_body(const struct rb *b, struct body_rows *r)
{
	const unsigned char *p = b->p, *end = b->p + b->len;
	size_t cap = b->len / (2 + 5 * 8 + 1) + 1, nv = 0;

	r->day = calloc(cap, sizeof(*r->day));
	for (int c = 0; c < 5; c++)
		r->col[c] = calloc(cap, sizeof(uint64_t));
	r->ends = calloc(cap, sizeof(uint64_t));
	r->v = calloc(b->len / 8 + 1, sizeof(int64_t));
	r->n = 0;
	while (p < end) {
		uint64_t k;

		memcpy(&r->day[r->n], p, 2);
		for (int c = 0; c < 5; c++)
			r->col[c][r->n] = get64(p + 2, (size_t)c);
		p += 2 + 5 * 8;
		k = read_varint(&p);
		memcpy(r->v + nv, p, 8 * k);
		p += 8 * k;
		nv += k;
		r->ends[r->n++] = nv;
	}
	assert_ptr_equal(p, end);
}

static void body_rows_free(struct body_rows *r)
{
	free(r->day);
	for (int c = 0; c < 5; c++)
		free(r->col[c]);
	free(r->ends);
	free(r->v);
}

/*
 * The samples of several profiles as one row per profile hold the rows built (one per
 * profile and stack): the same stacks and values in the same order, each profile's run of
 * rows one row with its day, ts, series, sig and id.
 */
static void profile_rows(void **state)
{
	static const size_t shapes[][3] = { { 3400, 715, 2 }, { 1, 1, 1 }, { 3400, 50, 1 },
					    { 1000, 1000, 2 } };
	struct rb body = { 0 }, arrays = { 0 };
	struct body_rows r;
	struct ncol a[7];
	size_t nr, na, k = 0;

	for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
		struct record_meta meta = { .service = "svc", .type = "cpu", .device = "d1",
					    .key = "", .time_ns = 1700000000000000000ull + i };
		struct pprof_buf out = { 0 };
		struct pprof_profile *p;
		struct put_rows pr = { 0 };
		char err[256];

		make_profile(&out, shapes[i][0], shapes[i][1], (int)shapes[i][2], 0x51 + i);
		assert_int_equal(pprof_read(out.data, out.len, &merged, &p, err, sizeof(err)), 0);
		assert_int_equal(ch__rows_build(&meta, p, out.len, 100 + i, &pr), 0);
		rb_put(&body, pr.samples.p, pr.samples.len);
		ch__rows_free(&pr);
		pprof_profile__free(p);
		free(out.data);
	}
	assert_true(ch__samples_block(&body, &arrays));
	read_body(&body, &r);
	nr = r.n;
	read_block(&arrays, a, &na);
	assert_int_equal(na, sizeof(shapes) / sizeof(shapes[0]));
	assert_int_equal(get64(a[5].p, na - 1), nr);		/* stacks: every row's */
	assert_int_equal(get64(a[6].p, na - 1), nr);		/* v: one array per stack */
	assert_memory_equal(a[5].elems, r.col[4], 8 * nr);	/* the stacks, in order */
	assert_memory_equal(a[6].elems, r.ends, 8 * nr);	/* each stack's values' ends */
	assert_memory_equal(a[6].inner, r.v, 8 * r.ends[nr - 1]);
	for (size_t i = 0; i < na; i++) {
		size_t end = get64(a[5].p, i);

		assert_true(end > k);
		assert_int_equal(get64(a[6].p, i), end);
		for (; k < end; k++) {
			assert_memory_equal(a[0].p + 2 * i, &r.day[k], 2);
			for (int c = 1; c < 5; c++)
				assert_int_equal(get64(a[c].p, i), r.col[c - 1][k]);
		}
		assert_int_equal(get64(a[4].p, i), 100 + i);
	}
	body_rows_free(&r);
	rb_free(&body);
	rb_free(&arrays);
}

/*
 * The ids ClickHouse stores (series, rollup group, idempotency key) are hashes (port/hash.h):
 * pinned here, so that a change of the hash, which would split every stored series and group
 * in two, fails a test instead of a database.
 */
static void persisted_ids_are_pinned(void **state)
{
	struct record_label labels[] = { { "version", "1.4.2" }, { "node", "n1" } };
	struct record_meta m = { .service = "gateway", .type = "cpu", .device = "gw-0042",
				 .labels = labels, .n_labels = 2, .key = "gw-0042-1700000000-7" };

	assert_int_equal(ch__series_of(&m), PIN_SERIES);
	assert_int_equal(ch__group_of_meta("node", &m), PIN_GROUP);
	assert_int_equal(ch__key_hash(&m), PIN_KEY);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(go_profiles),
		cmocka_unit_test(made_profiles),
		cmocka_unit_test(profile_rows),
		cmocka_unit_test(persisted_ids_are_pinned),
	};

	return cmocka_run_group_tests_name("ch-rows", tests, NULL, NULL);
}
