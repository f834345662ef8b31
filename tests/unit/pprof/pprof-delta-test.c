// SPDX-License-Identifier: MIT
/* pprof/delta.c: cumulative heap and mutex values into growth between profiles. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "pprof/delta.h"
#include "pprof/pprof.h"

/*
 * A Go-like heap profile: alloc_space, inuse_space; sample i is the stack {fn[i], main} with
 * values alloc[i], inuse[i] (NULL name: no sample). time in seconds.
 */
static struct pprof_profile *heap(const char *const fn[3], const int64_t alloc[3],
				  const int64_t inuse[3], int64_t time_s)
{
	struct pprof_buf buf = {0};
	struct pprof_builder *b = pprof_builder__new(NULL, pprof_buf_write, &buf);
	struct pprof_profile *p = NULL;
	uint64_t main_loc, m;
	char err[256];

	assert_int_equal(pprof_builder__add_sample_type(b, "alloc_space", "bytes"), 0);
	assert_int_equal(pprof_builder__add_sample_type(b, "inuse_space", "bytes"), 0);
	pprof_builder__set_time(b, time_s * 1000000000, 0);
	m = pprof_builder__mapping(b, &(struct pprof_mapping_desc){.memory_start = 0x1000,
								   .memory_limit = 0x9000,
								   .filename = "/bin/app",
								   .has_functions = true});
	main_loc = pprof_builder__location(
		b, m, 0x1100,
		&(struct pprof_line_desc){.function_id = pprof_builder__function(b, "main", NULL, NULL, 0)}, 1);
	for (int i = 0; i < 3; i++) {
		uint64_t locs[2];
		int64_t v[2] = {alloc[i], inuse[i]};

		if (!fn[i])
			continue;
		locs[0] = pprof_builder__location(
			b, m, 0x2000 + 0x100 * (uint64_t)(fn[i][0]),
			&(struct pprof_line_desc){
				.function_id = pprof_builder__function(b, fn[i], NULL, NULL, 0)},
			1);
		locs[1] = main_loc;
		assert_int_equal(pprof_builder__add_sample(b, locs, 2, v, NULL, 0), 0);
	}
	assert_int_equal(pprof_builder__finish(b), 0);
	pprof_builder__free(b);
	assert_int_equal(pprof_read(buf.data, buf.len, NULL, &p, err, sizeof(err)), 0);
	free(buf.data);
	return p;
}

/* The value of type k of the sample whose leaf is fn, or -1 when there is none. */
static int64_t value_of(const struct pprof_profile *p, const char *fn, size_t k)
{
	for (size_t i = 0; i < p->n_samples; i++) {
		const struct pprof_location *l = &p->locations[p->samples[i].location_ids[0] - 1];

		if (!strcmp(pprof_str(p, p->functions[l->lines[0].function_id - 1].name), fn))
			return p->samples[i].values[k];
	}
	return -1;
}

static void test_heap_growth(void **state)
{
	static const char *const fns[3] = {"alloc_a", "alloc_b", "idle_c"};
	struct pprof_delta *d = pprof_delta__new(0);
	struct pprof_delta_stats st;
	bool cum[PPROF_DELTA_MAX_TYPES];
	struct pprof_profile *p;

	p = heap(fns, (int64_t[]){100, 50, 7}, (int64_t[]){10, 5, 7}, 1000);
	assert_int_equal(pprof_delta_cumulative("heap", p, cum), 1);
	assert_true(cum[0]);
	assert_false(cum[1]);
	assert_int_equal(pprof_delta__apply(d, p, cum), 1); /* the baseline: nothing to send */
	assert_int_equal(p->n_samples, 3);
	pprof_profile__free(p);

	/* alloc_a grew by 150, alloc_b by 0 (but holds inuse), idle_c did nothing at all */
	p = heap(fns, (int64_t[]){250, 50, 7}, (int64_t[]){20, 5, 0}, 1010);
	assert_int_equal(pprof_delta__apply(d, p, cum), 0);
	assert_int_equal(value_of(p, "alloc_a", 0), 150);
	assert_int_equal(value_of(p, "alloc_a", 1), 20); /* inuse stays a snapshot */
	assert_int_equal(value_of(p, "alloc_b", 0), 0);
	assert_int_equal(value_of(p, "alloc_b", 1), 5);
	assert_int_equal(value_of(p, "idle_c", 0), -1); /* all zero: left out */
	assert_int_equal(p->duration_nanos, 10 * 1000000000ll);
	pprof_profile__free(p);

	/* the program restarted: alloc_a went down, its growth is its new value */
	p = heap(fns, (int64_t[]){30, 60, 7}, (int64_t[]){1, 1, 0}, 1020);
	assert_int_equal(pprof_delta__apply(d, p, cum), 0);
	assert_int_equal(value_of(p, "alloc_a", 0), 30);
	assert_int_equal(value_of(p, "alloc_b", 0), 10);
	pprof_delta__stats(d, &st);
	assert_int_equal(st.resets, 1);
	assert_int_equal(st.profiles, 3);
	pprof_profile__free(p);
	pprof_delta__free(d);
}

/* Samples beyond the bound are left out and counted; a change of types starts over. */
static void test_bound_and_types(void **state)
{
	static const char *const fns[3] = {"alloc_a", "alloc_b", "alloc_c"};
	struct pprof_delta *d = pprof_delta__new(2);
	struct pprof_delta_stats st;
	bool cum[PPROF_DELTA_MAX_TYPES];
	struct pprof_profile *p;

	p = heap(fns, (int64_t[]){1, 2, 3}, (int64_t[]){0, 0, 0}, 1);
	pprof_delta_cumulative("mutex", p, cum); /* every type cumulative */
	assert_true(cum[0] && cum[1]);
	assert_int_equal(pprof_delta__apply(d, p, cum), 1);
	pprof_profile__free(p);
	p = heap(fns, (int64_t[]){2, 4, 6}, (int64_t[]){0, 0, 0}, 2);
	assert_int_equal(pprof_delta__apply(d, p, cum), 0);
	assert_int_equal(p->n_samples, 2);
	pprof_delta__stats(d, &st);
	assert_int_equal(st.over_bound, 2);
	pprof_profile__free(p);
	pprof_delta__free(d);
}

/*
 * What a scraper ships: the baseline (1), a delta (0), no growth (2), no profile (-EINVAL); a
 * heap's baseline with its snapshot (0).
 */
static void test_scraped(void **state)
{
	static const char *const fns[3] = {"lock_a", NULL, NULL};
	struct pprof_delta *d = pprof_delta__new(0), *h = pprof_delta__new(0);
	struct pprof_delta *h2 = pprof_delta__new(0);
	struct pprof_buf enc = {0}, out = {0};
	struct pprof_profile *p;
	char err[200];

	p = heap(fns, (int64_t[]){5, 0, 0}, (int64_t[]){5, 0, 0}, 1);
	assert_int_equal(pprof_write_profile(p, NULL, pprof_buf_write, &enc), 0);
	pprof_profile__free(p);
	assert_int_equal(pprof_delta_scraped(d, "mutex", enc.data, enc.len, 0, &out, err,
					     sizeof(err)), 1);
	assert_int_equal(pprof_delta_scraped(d, "mutex", enc.data, enc.len, 0, &out, err,
					     sizeof(err)), 2); /* the same totals: no growth */
	assert_null(out.data);
	free(enc.data);
	enc = (struct pprof_buf){0};

	/* a heap's baseline ships its inuse snapshot (alloc at 0); the next round its growth */
	p = heap(fns, (int64_t[]){5, 0, 0}, (int64_t[]){3, 0, 0}, 1);
	assert_int_equal(pprof_write_profile(p, NULL, pprof_buf_write, &enc), 0);
	pprof_profile__free(p);
	assert_int_equal(pprof_delta_scraped(h, "heap", enc.data, enc.len, 0, &out, err,
					     sizeof(err)), 0);
	assert_int_equal(pprof_read(out.data, out.len, NULL, &p, err, sizeof(err)), 0);
	assert_int_equal(value_of(p, "lock_a", 0), 0);
	assert_int_equal(value_of(p, "lock_a", 1), 3);
	pprof_profile__free(p);
	free(out.data);
	out = (struct pprof_buf){0};
	/* a baseline without any snapshot value: nothing to send */
	p = heap(fns, (int64_t[]){5, 0, 0}, (int64_t[]){0, 0, 0}, 1);
	free(enc.data);
	enc = (struct pprof_buf){0};
	assert_int_equal(pprof_write_profile(p, NULL, pprof_buf_write, &enc), 0);
	pprof_profile__free(p);
	assert_int_equal(pprof_delta_scraped(h2, "heap", enc.data, enc.len, 0, &out, err,
					     sizeof(err)), 1);
	assert_null(out.data);

	/* not cumulative: passed on as fetched, byte for byte */
	assert_int_equal(pprof_delta_scraped(NULL, "goroutine", enc.data, enc.len, 0, &out, err,
					     sizeof(err)), 0);
	assert_int_equal(out.len, enc.len);
	assert_memory_equal(out.data, enc.data, enc.len);
	free(out.data);
	assert_int_equal(pprof_delta_scraped(d, "mutex", "not a profile", 13, 0, &out, err,
					     sizeof(err)), -EINVAL);
	free(enc.data);
	pprof_delta__free(d);
	pprof_delta__free(h);
	pprof_delta__free(h2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_heap_growth),
		cmocka_unit_test(test_bound_and_types),
		cmocka_unit_test(test_scraped),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
