// SPDX-License-Identifier: MIT
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "pprof/pprof.h"
#include "store/api/render.h"

/* main -> a -> leaf (30), main -> b (10): total 40. */
static struct pprof_profile *make_profile(void)
{
	struct pprof_buf buf = { 0 };
	struct pprof_builder *b = pprof_builder__new(NULL, pprof_buf_write, &buf);
	struct pprof_profile *p = NULL;
	uint64_t fmain, fa, fb, fleaf, lmain, la, lb, lleaf;
	char err[256];

	assert_non_null(b);
	assert_int_equal(pprof_builder__add_sample_type(b, "samples", "count"), 0);
	assert_int_equal(pprof_builder__add_sample_type(b, "cpu", "nanoseconds"), 0);
	fmain = pprof_builder__function(b, "main", "main", "m.c", 1);
	fa = pprof_builder__function(b, "a", "a", "m.c", 10);
	fb = pprof_builder__function(b, "b\"quoted\"", "b", "m.c", 20);
	fleaf = pprof_builder__function(b, "leaf", "leaf", "m.c", 30);
	lmain = pprof_builder__location(b, 0, 0x1000, &(struct pprof_line_desc){ fmain, 2 }, 1);
	la = pprof_builder__location(b, 0, 0x2000, &(struct pprof_line_desc){ fa, 11 }, 1);
	lb = pprof_builder__location(b, 0, 0x3000, &(struct pprof_line_desc){ fb, 21 }, 1);
	lleaf = pprof_builder__location(b, 0, 0x4000, &(struct pprof_line_desc){ fleaf, 31 }, 1);
	uint64_t s1[] = { lleaf, la, lmain }, s2[] = { lb, lmain };
	int64_t v1[] = { 3, 30 }, v2[] = { 1, 10 };
	assert_int_equal(pprof_builder__add_sample(b, s1, 3, v1, NULL, 0), 0);
	assert_int_equal(pprof_builder__add_sample(b, s2, 2, v2, NULL, 0), 0);
	assert_int_equal(pprof_builder__finish(b), 0);
	pprof_builder__free(b);
	assert_int_equal(pprof_read(buf.data, buf.len, NULL, &p, err, sizeof(err)), 0);
	free(buf.data);
	return p;
}

static char *render(const struct pprof_profile *p, enum render_format fmt)
{
	char *out, err[256] = "";
	size_t len;

	assert_int_equal(render_profile(p, fmt, 2, 0, &out, &len, err, sizeof(err)), 0);
	assert_int_equal(strlen(out), len);
	return out;
}

static void json_is_preorder_tree_of_last_type(void **state)
{
	struct pprof_profile *p = make_profile();
	char *j = render(p, RENDER_JSON);

	/* Default sample type is the last one: cpu/nanoseconds, total 40. */
	assert_non_null(strstr(j, "\"type\":\"cpu\",\"unit\":\"nanoseconds\",\"total\":40"));
	assert_non_null(strstr(j, "\"profiles\":2"));
	assert_non_null(strstr(j, "\"types\":[[\"samples\",\"count\"],[\"cpu\",\"nanoseconds\"]]"));
	assert_non_null(strstr(j, "\"names\":[\"total\",\"main\",\"a\",\"leaf\",\"b\\\"quoted\\\"\"]"));
	/* root, main (parent 0), a (1), leaf (2), b (1) with self/total; all native (0). */
	assert_non_null(strstr(j, "\"runtimes\":[\"native\",\"kernel\",\"python\",\"lua\",\"jit\"]"));
	assert_non_null(strstr(j, "\"nodes\":[[0,-1,0,40,0],[1,0,0,40,0],[2,1,0,30,0],[3,2,30,30,0],"
				  "[4,1,10,10,0]]"));
	free(j);
	pprof_profile__free(p);
}

/* index picks another sample type (a heap profile's alloc_space); an unknown one is -EINVAL. */
static void index_picks_the_sample_type(void **state)
{
	struct pprof_profile *p = make_profile();
	char *out, err[256] = "";
	size_t len;

	assert_int_equal(render_profile_index(p, "samples", RENDER_JSON, 1, 0, &out, &len, err,
					      sizeof(err)), 0);
	assert_non_null(strstr(out, "\"type\":\"samples\",\"unit\":\"count\",\"total\":4"));
	free(out);
	assert_int_equal(render_profile_index(p, "inuse_space", RENDER_JSON, 1, 0, &out, &len, err,
					      sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "no sample type 'inuse_space'"));
	pprof_profile__free(p);
}

static void folded_lines_sum_to_total(void **state)
{
	struct pprof_profile *p = make_profile();
	char *f = render(p, RENDER_FOLDED);

	assert_non_null(strstr(f, "main;a;leaf 30\n"));
	assert_non_null(strstr(f, "main;b\"quoted\" 10\n"));
	free(f);
	pprof_profile__free(p);
}

static void flamebearer_levels_have_offsets(void **state)
{
	struct pprof_profile *p = make_profile();
	char *f = render(p, RENDER_FLAMEBEARER);

	/* Level 2 holds a (x 0, total 30) then b (x 30: delta 0 after a's end). */
	assert_non_null(strstr(f, "\"levels\":[[0,40,0,0],[0,40,0,1],[0,30,0,2,0,10,10,4],"
				  "[0,30,30,3]]"));
	assert_non_null(strstr(f, "\"numTicks\":40,\"maxSelf\":30"));
	free(f);
	pprof_profile__free(p);
}

static void unknown_format_is_rejected(void **state)
{
	enum render_format fmt;

	assert_int_equal(render_format_parse("svg", &fmt), -22);
	assert_int_equal(render_format_parse(NULL, &fmt), 0);
	assert_int_equal(fmt, RENDER_JSON);
	assert_int_equal(render_format_parse("folded", &fmt), 0);
	assert_int_equal(fmt, RENDER_FOLDED);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(json_is_preorder_tree_of_last_type),
		cmocka_unit_test(index_picks_the_sample_type),
		cmocka_unit_test(folded_lines_sum_to_total),
		cmocka_unit_test(flamebearer_levels_have_offsets),
		cmocka_unit_test(unknown_format_is_rejected),
	};
	return cmocka_run_group_tests_name("store/render", tests, NULL, NULL);
}
