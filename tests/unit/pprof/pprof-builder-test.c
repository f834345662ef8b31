// SPDX-License-Identifier: MIT
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "pprof/pprof.h"

static struct pprof_profile *read_buf(const struct pprof_buf *buf)
{
	struct pprof_profile *p = NULL;
	char err[256];
	int ret = pprof_read(buf->data, buf->len, NULL, &p, err, sizeof(err));

	if (ret)
		fail_msg("pprof_read: %s", err);
	return p;
}

static void add_types(struct pprof_builder *b)
{
	assert_int_equal(pprof_builder__add_sample_type(b, "samples", "count"), 0);
	assert_int_equal(pprof_builder__add_sample_type(b, "cpu", "nanoseconds"), 0);
	assert_int_equal(pprof_builder__set_period(b, "cpu", "nanoseconds", 1000), 0);
}

static void tables_are_deduplicated(void **state)
{
	struct pprof_buf buf = { 0 };
	struct pprof_builder *b = pprof_builder__new(NULL, pprof_buf_write, &buf);
	struct pprof_mapping_desc md = { 0x1000, 0x2000, 0, "/bin/a", "abcd", true, false, false };
	struct pprof_line_desc ln;
	uint64_t m, f1, f2, l1, l2;

	assert_non_null(b);
	assert_int_equal(pprof_builder__string(b, NULL), 0);
	assert_int_equal(pprof_builder__string(b, ""), 0);
	assert_int_equal(pprof_builder__string(b, "x"), pprof_builder__string(b, "x"));
	m = pprof_builder__mapping(b, &md);
	assert_int_equal(m, 1);
	assert_int_equal(pprof_builder__mapping(b, &md), m);
	md.file_offset = 0x10;
	assert_int_equal(pprof_builder__mapping(b, &md), 2);
	f1 = pprof_builder__function(b, "main", NULL, "a.c", 1);
	f2 = pprof_builder__function(b, "main", NULL, "b.c", 1);
	assert_int_equal(f1, 1);
	assert_int_equal(f2, 2);
	assert_int_equal(pprof_builder__function(b, "main", NULL, "a.c", 1), f1);
	ln = (struct pprof_line_desc){ f1, 10 };
	l1 = pprof_builder__location(b, m, 0x1100, &ln, 1);
	assert_int_equal(pprof_builder__location(b, m, 0x1100, &ln, 1), l1);
	ln.line = 11;
	l2 = pprof_builder__location(b, m, 0x1100, &ln, 1);
	assert_int_not_equal(l1, l2);
	/* References to tables that do not exist are refused. */
	assert_int_equal(pprof_builder__location(b, 99, 0x1100, &ln, 1), 0);
	ln.function_id = 77;
	assert_int_equal(pprof_builder__location(b, m, 0x1100, &ln, 1), 0);
	assert_int_equal(pprof_builder__finish(b), 0);
	pprof_builder__free(b);
	free(buf.data);
}

static void writes_what_it_was_given(void **state)
{
	struct pprof_buf buf = { 0 };
	struct pprof_builder *b = pprof_builder__new(NULL, pprof_buf_write, &buf);
	struct pprof_label_desc labels[] = { { "k", "v", 0, NULL }, { "n", NULL, -5, "bytes" } };
	struct pprof_line_desc lines[2];
	struct pprof_profile *p;
	uint64_t m, f1, f2, loc[2];
	int64_t v[2] = { 3, -7 };

	add_types(b);
	pprof_builder__set_time(b, 123, 456);
	assert_int_equal(pprof_builder__add_comment(b, "hello"), 0);
	assert_int_equal(pprof_builder__set_drop_frames(b, "sig.*"), 0);
	assert_int_equal(pprof_builder__set_default_sample_type(b, "cpu"), 0);
	m = pprof_builder__mapping(b, &(struct pprof_mapping_desc){ 0x400000, 0x500000, 0x1000,
								    "/bin/app", "beef", true,
								    true, true });
	f1 = pprof_builder__function(b, "leaf", "_Z4leafv", "x.c", 3);
	f2 = pprof_builder__function(b, "root", NULL, "y.c", 9);
	lines[0] = (struct pprof_line_desc){ f1, 4 };
	lines[1] = (struct pprof_line_desc){ f2, 10 };
	loc[0] = pprof_builder__location(b, m, 0x401000, lines, 2);
	loc[1] = pprof_builder__location(b, 0, 0xffff, NULL, 0);
	assert_int_equal(pprof_builder__add_sample(b, loc, 2, v, labels, 2), 0);
	assert_int_equal(pprof_builder__add_sample(b, loc + 1, 1, v, NULL, 0), 0);
	assert_int_equal(pprof_builder__finish(b), 0);
	pprof_builder__free(b);

	assert_true(pprof_is_gzip(buf.data, buf.len));
	p = read_buf(&buf);
	assert_string_equal(p->strings[0], "");
	assert_int_equal(p->n_sample_type, 2);
	assert_string_equal(pprof_str(p, p->sample_type[1].type), "cpu");
	assert_string_equal(pprof_str(p, p->sample_type[1].unit), "nanoseconds");
	assert_string_equal(pprof_str(p, p->period_type.type), "cpu");
	assert_int_equal(p->period, 1000);
	assert_int_equal(p->time_nanos, 123);
	assert_int_equal(p->duration_nanos, 456);
	assert_int_equal(p->n_comments, 1);
	assert_string_equal(pprof_str(p, p->comments[0]), "hello");
	assert_string_equal(pprof_str(p, p->drop_frames), "sig.*");
	assert_string_equal(pprof_str(p, p->default_sample_type), "cpu");
	assert_int_equal(p->n_samples, 2);
	assert_int_equal(p->samples[0].n_locations, 2);
	assert_int_equal(p->samples[0].values[0], 3);
	assert_int_equal(p->samples[0].values[1], -7);
	assert_int_equal(p->samples[0].n_labels, 2);
	assert_string_equal(pprof_str(p, p->samples[0].labels[0].key), "k");
	assert_string_equal(pprof_str(p, p->samples[0].labels[0].str), "v");
	assert_int_equal(p->samples[0].labels[1].num, -5);
	assert_string_equal(pprof_str(p, p->samples[0].labels[1].num_unit), "bytes");
	assert_int_equal(p->n_mappings, 1);
	assert_string_equal(pprof_str(p, p->mappings[0].build_id), "beef");
	assert_int_equal(p->mappings[0].file_offset, 0x1000);
	assert_true(p->mappings[0].has_functions);
	assert_int_equal(p->n_locations, 2);
	{
		const struct pprof_location *l = &p->locations[p->samples[0].location_ids[0] - 1];

		assert_int_equal(l->address, 0x401000);
		assert_int_equal(l->n_lines, 2);
		assert_string_equal(pprof_str(p, p->functions[l->lines[0].function_id - 1].name),
				    "leaf");
		assert_string_equal(
			pprof_str(p, p->functions[l->lines[0].function_id - 1].system_name),
			"_Z4leafv");
		assert_int_equal(l->lines[1].line, 10);
	}
	assert_int_equal(p->locations[1].mapping_id, 0);
	pprof_profile__free(p);
	free(buf.data);
}

static void raw_output_has_no_gzip(void **state)
{
	struct pprof_builder_opts opts = { .gzip_level = -1 };
	struct pprof_buf buf = { 0 };
	struct pprof_builder *b = pprof_builder__new(&opts, pprof_buf_write, &buf);
	struct pprof_profile *p;

	add_types(b);
	assert_int_equal(pprof_builder__finish(b), 0);
	pprof_builder__free(b);
	assert_false(pprof_is_gzip(buf.data, buf.len));
	p = read_buf(&buf);
	assert_int_equal(p->n_sample_type, 2);
	assert_int_equal(p->n_samples, 0);
	pprof_profile__free(p);
	free(buf.data);
}

/* Samples go out through the sink while they are added, not at finish. */
static void samples_stream_before_finish(void **state)
{
	struct pprof_builder_opts opts = { .gzip_level = 1 };
	struct pprof_buf buf = { 0 };
	struct pprof_builder *b = pprof_builder__new(&opts, pprof_buf_write, &buf);
	uint64_t f, locs[64];
	int64_t v[2] = { 1, 1000 };
	struct pprof_profile *p;
	size_t i;

	add_types(b);
	f = pprof_builder__function(b, "f", NULL, NULL, 0);
	for (i = 0; i < 64; i++)
		locs[i] = pprof_builder__location(b, 0, 0x1000 + i * 16,
						  &(struct pprof_line_desc){ f, i }, 1);
	for (i = 0; i < 200000; i++) {
		v[1] = i; /* varied values: not all compressible to nothing */
		assert_int_equal(pprof_builder__add_sample(b, locs + i % 32, 32, v, NULL, 0), 0);
	}
	assert_true(buf.len > 100000);
	assert_int_equal(pprof_builder__add_sample_type(b, "late", "count"), -EBUSY);
	assert_int_equal(pprof_builder__finish(b), 0);
	assert_int_equal(pprof_builder__finish(b), -EBUSY);
	pprof_builder__free(b);
	p = read_buf(&buf);
	assert_int_equal(p->n_samples, 200000);
	assert_int_equal(p->samples[199999].values[1], 199999);
	pprof_profile__free(p);
	free(buf.data);
}

static void tables_are_bounded(void **state)
{
	struct pprof_builder_opts opts = { .max_functions = 2, .max_strings = 6,
					   .max_locations = 1, .max_mappings = 1 };
	struct pprof_buf buf = { 0 };
	struct pprof_builder *b = pprof_builder__new(&opts, pprof_buf_write, &buf);
	struct pprof_mapping_desc md = { 0, 1, 0, NULL, NULL, false, false, false };

	assert_int_not_equal(pprof_builder__function(b, "a", NULL, NULL, 0), 0);
	assert_int_not_equal(pprof_builder__function(b, "b", NULL, NULL, 0), 0);
	assert_int_equal(pprof_builder__function(b, "a", NULL, NULL, 1), 0);
	assert_int_not_equal(pprof_builder__location(b, 0, 1, NULL, 0), 0);
	assert_int_equal(pprof_builder__location(b, 0, 2, NULL, 0), 0);
	assert_int_equal(pprof_builder__mapping(b, &md), 1);
	md.memory_limit = 2;
	assert_int_equal(pprof_builder__mapping(b, &md), 0);
	/* "", a, b: 3 strings; three more fit, the seventh does not. */
	assert_true(pprof_builder__string(b, "c") > 0);
	assert_true(pprof_builder__string(b, "d") > 0);
	assert_true(pprof_builder__string(b, "e") > 0);
	assert_int_equal(pprof_builder__string(b, "f"), -ENOSPC);
	assert_true(pprof_builder__string(b, "c") > 0);
	pprof_builder__free(b); /* freeing unfinished is fine */
	free(buf.data);
}

static int failing_write(void *ctx, const void *data, size_t len)
{
	return -ENOSPC;
}

static void sink_errors_are_reported(void **state)
{
	struct pprof_builder_opts opts = { .gzip_level = -1 };
	struct pprof_builder *b = pprof_builder__new(&opts, failing_write, NULL);
	uint64_t loc;
	int64_t v[2] = { 1, 1 };
	int i, ret = 0;

	add_types(b);
	loc = pprof_builder__location(b, 0, 1, NULL, 0);
	for (i = 0; i < 10000 && !ret; i++)
		ret = pprof_builder__add_sample(b, &loc, 1, v, NULL, 0);
	assert_int_equal(ret, -ENOSPC);
	assert_int_equal(pprof_builder__finish(b), -ENOSPC);
	pprof_builder__free(b);
	pprof_builder__free(NULL);
}

static void bounded_buffer_refuses_growth(void **state)
{
	struct pprof_buf buf = { .max = 4 };

	assert_int_equal(pprof_buf_write(&buf, "abc", 3), 0);
	assert_int_equal(pprof_buf_write(&buf, "de", 2), -EFBIG);
	assert_int_equal(buf.len, 3);
	free(buf.data);
}

/* A profile assembled by hand (no blocks) is written and freed element by element. */
static void write_profile_by_hand(void **state)
{
	struct pprof_profile *p = calloc(1, sizeof(*p)), *q;
	struct pprof_buf buf = { 0 };
	char err[128];

	p->n_strings = 3;
	p->strings = calloc(3, sizeof(char *));
	p->strings[0] = strdup("");
	p->strings[1] = strdup("objects");
	p->strings[2] = strdup("count");
	p->n_sample_type = 1;
	p->sample_type = calloc(1, sizeof(*p->sample_type));
	p->sample_type[0] = (struct pprof_value_type){ 1, 2 };
	p->n_samples = 1;
	p->samples = calloc(1, sizeof(*p->samples));
	p->samples[0].values = calloc(1, sizeof(int64_t));
	p->samples[0].values[0] = 42;
	assert_int_equal(pprof_write_profile(p, NULL, pprof_buf_write, &buf), 0);
	assert_int_equal(pprof_read(buf.data, buf.len, NULL, &q, err, sizeof(err)), 0);
	assert_int_equal(q->samples[0].values[0], 42);
	assert_string_equal(pprof_str(q, q->sample_type[0].type), "objects");
	pprof_profile__free(q);
	pprof_profile__free(p);
	pprof_profile__free(NULL);
	free(buf.data);
}

/*
 * The writer encodes small samples and locations by hand into a 1 KiB buffer and gives larger
 * ones to nanopb: both paths, side by side in one profile, must read back exactly.
 */
static void large_and_small_messages_round_trip(void **state)
{
	enum { DEEP = 1500, LINES = 120 }; /* both over 1 KiB encoded */
	struct pprof_profile *p = calloc(1, sizeof(*p)), *q;
	struct pprof_builder_opts raw = { .gzip_level = -1 };
	struct pprof_buf buf = { 0 };
	char err[128];
	size_t i, j;

	p->n_strings = 3;
	p->strings = calloc(3, sizeof(char *));
	p->strings[0] = strdup("");
	p->strings[1] = strdup("cpu");
	p->strings[2] = strdup("f");
	p->n_sample_type = 1;
	p->sample_type = calloc(1, sizeof(*p->sample_type));
	p->sample_type[0] = (struct pprof_value_type){ 1, 1 };
	p->n_functions = 1;
	p->functions = calloc(1, sizeof(*p->functions));
	p->functions[0] = (struct pprof_function){ 1, 2, 2, 2, -7 };
	p->n_locations = 2;
	p->locations = calloc(2, sizeof(*p->locations));
	for (i = 0; i < 2; i++) {
		struct pprof_location *l = &p->locations[i];

		*l = (struct pprof_location){ i + 1, 0, 0x400000 + i, NULL, i ? LINES : 1, true };
		l->lines = calloc(l->n_lines, sizeof(*l->lines));
		for (j = 0; j < l->n_lines; j++)
			l->lines[j] = (struct pprof_line){ 1, (int64_t)j - 3, (int64_t)j * 1000 };
	}
	p->n_samples = 2;
	p->samples = calloc(2, sizeof(*p->samples));
	for (i = 0; i < 2; i++) {
		struct pprof_sample *s = &p->samples[i];

		s->n_locations = i ? DEEP : 2;
		s->location_ids = calloc(s->n_locations, sizeof(*s->location_ids));
		for (j = 0; j < s->n_locations; j++)
			s->location_ids[j] = 1 + (j % 2);
		s->values = calloc(1, sizeof(*s->values));
		s->values[0] = i ? -1 : 5;
		s->n_labels = 1;
		s->labels = calloc(1, sizeof(*s->labels));
		s->labels[0] = (struct pprof_label){ 2, 0, INT64_MIN, 1 };
	}
	assert_int_equal(pprof_write_profile(p, &raw, pprof_buf_write, &buf), 0);
	assert_int_equal(pprof_read(buf.data, buf.len, NULL, &q, err, sizeof(err)), 0);
	assert_int_equal(q->n_samples, 2);
	assert_int_equal(q->n_locations, 2);
	assert_memory_equal(q->functions, p->functions, sizeof(*p->functions));
	for (i = 0; i < 2; i++) {
		const struct pprof_sample *a = &p->samples[i], *b = &q->samples[i];
		const struct pprof_location *la = &p->locations[i], *lb = &q->locations[i];

		assert_int_equal(b->n_locations, a->n_locations);
		assert_memory_equal(b->location_ids, a->location_ids,
				    a->n_locations * sizeof(*a->location_ids));
		assert_int_equal(b->values[0], a->values[0]);
		assert_int_equal(b->n_labels, 1);
		assert_memory_equal(b->labels, a->labels, sizeof(*a->labels));
		assert_int_equal(lb->address, la->address);
		assert_true(lb->is_folded);
		assert_int_equal(lb->n_lines, la->n_lines);
		assert_memory_equal(lb->lines, la->lines, la->n_lines * sizeof(*la->lines));
	}
	pprof_profile__free(q);
	pprof_profile__free(p);
	free(buf.data);
}

/* A profile whose encoding is about 1 MiB: samples over a few thousand locations. */
static struct pprof_profile *big_profile(void)
{
	enum { SAMPLES = 20000, DEPTH = 20, LOCS = 3000 };
	struct pprof_profile *p = calloc(1, sizeof(*p));
	uint64_t x = 88172645463325252ULL;
	size_t i, j;

	p->n_strings = 2;
	p->strings = calloc(2, sizeof(char *));
	p->strings[0] = strdup("");
	p->strings[1] = strdup("cpu");
	p->n_sample_type = 1;
	p->sample_type = calloc(1, sizeof(*p->sample_type));
	p->sample_type[0] = (struct pprof_value_type){ 1, 1 };
	p->n_locations = LOCS;
	p->locations = calloc(LOCS, sizeof(*p->locations));
	for (i = 0; i < LOCS; i++)
		p->locations[i] = (struct pprof_location){ .id = i + 1, .address = 0x401000 + 16 * i };
	p->n_samples = SAMPLES;
	p->samples = calloc(SAMPLES, sizeof(*p->samples));
	for (i = 0; i < SAMPLES; i++) {
		struct pprof_sample *s = &p->samples[i];

		s->n_locations = DEPTH;
		s->location_ids = calloc(DEPTH, sizeof(*s->location_ids));
		for (j = 0; j < DEPTH; j++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			s->location_ids[j] = 1 + x % LOCS;
		}
		s->values = calloc(1, sizeof(*s->values));
		s->values[0] = (int64_t)(x % 1000000);
	}
	return p;
}

/*
 * threads > 1: the profile is gzipped in parts deflated at once. The result must be one valid
 * gzip stream (pprof_read checks its CRC and length), decode to the same bytes, and be about as
 * small as one stream.
 */
static void parallel_gzip_is_one_stream(void **state)
{
	struct pprof_profile *p = big_profile(), *q1, *q4;
	struct pprof_builder_opts one = { 0 }, four = { .threads = 4 }, raw = { .gzip_level = -1 };
	struct pprof_buf b1 = { 0 }, b4 = { 0 }, r1 = { 0 }, r4 = { 0 };
	char err[128];

	assert_int_equal(pprof_write_profile(p, &one, pprof_buf_write, &b1), 0);
	assert_int_equal(pprof_write_profile(p, &four, pprof_buf_write, &b4), 0);
	assert_memory_not_equal(b1.data, b4.data, b1.len < b4.len ? b1.len : b4.len);
	assert_true(b4.len < b1.len + b1.len / 100);
	assert_int_equal(pprof_read(b1.data, b1.len, NULL, &q1, err, sizeof(err)), 0);
	assert_int_equal(pprof_read(b4.data, b4.len, NULL, &q4, err, sizeof(err)), 0);
	assert_int_equal(pprof_write_profile(q1, &raw, pprof_buf_write, &r1), 0);
	assert_int_equal(pprof_write_profile(q4, &raw, pprof_buf_write, &r4), 0);
	assert_true(r1.len > 4 * 64 * 1024); /* four parts, not one */
	assert_int_equal(r1.len, r4.len);
	assert_memory_equal(r1.data, r4.data, r1.len);
	pprof_profile__free(q1);
	pprof_profile__free(q4);
	/* A cut stream is refused: the parts are not each a complete gzip member. */
	assert_int_not_equal(pprof_read(b4.data, b4.len / 2, NULL, &q4, err, sizeof(err)), 0);
	pprof_profile__free(p);
	free(b1.data);
	free(b4.data);
	free(r1.data);
	free(r4.data);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(tables_are_deduplicated),
		cmocka_unit_test(writes_what_it_was_given),
		cmocka_unit_test(raw_output_has_no_gzip),
		cmocka_unit_test(samples_stream_before_finish),
		cmocka_unit_test(tables_are_bounded),
		cmocka_unit_test(sink_errors_are_reported),
		cmocka_unit_test(bounded_buffer_refuses_growth),
		cmocka_unit_test(write_profile_by_hand),
		cmocka_unit_test(large_and_small_messages_round_trip),
		cmocka_unit_test(parallel_gzip_is_one_stream),
	};

	return cmocka_run_group_tests_name("pprof-builder", tests, NULL, NULL);
}
