// SPDX-License-Identifier: MIT
/*
 * Unit tests for pprof/view/stacks.c on a profile built in memory: frame names (inlined,
 * unsymbolized), modules, sample type selection, pprof's drop_frames pruning, depth bound.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "pprof/view/stacks.h"

enum { S_EMPTY, S_MAIN, S_A, S_B, S_C, S_CPU, S_NS, S_LIB, S_SAMPLES, S_COUNT, S_DROP };

static char *strings[] = {
    "",	       "main.main", "main.alpha",	 "net/http.(*conn).serve",
    "memcpy",  "cpu",	    "nanoseconds",	 "/usr/lib/libfoo.so",
    "samples", "count",	    "main.alpha|memcpy",
};

static struct pprof_function functions[] = {
    {.id = 1, .name = S_MAIN},
    {.id = 2, .name = S_A},
    {.id = 3, .name = S_B},
    {.id = 4, .name = S_C},
};

static struct pprof_mapping mappings[] = {
    {.id = 1,
     .memory_start = 0x1000,
     .memory_limit = 0x9000,
     .file_offset = 0x2000,
     .filename = S_LIB},
};

static struct pprof_line l_main = {1, 10, 0}, l_a = {2, 20, 0}, l_b = {3, 30, 0};
static struct pprof_line l_c_in_b[] = {{4, 40, 0}, {3, 31, 0}}; /* memcpy inlined in b */

static struct pprof_location locations[] = {
    {.id = 1, .lines = &l_main, .n_lines = 1},
    {.id = 2, .lines = &l_a, .n_lines = 1},
    {.id = 3, .lines = &l_b, .n_lines = 1},
    {.id = 4, .mapping_id = 1, .address = 0x1234}, /* unsymbolized */
    {.id = 5, .lines = l_c_in_b, .n_lines = 2},
    {.id = 6, .address = 0xdead}, /* no mapping either */
};

static uint64_t st0[] = {3, 2, 1}, st1[] = {4, 2, 1}, st2[] = {5, 1}, st3[] = {6};
static int64_t v0[] = {1, 10}, v1[] = {2, 20}, v2[] = {3, 30}, v3[] = {4, 40};

static struct pprof_sample samples[] = {
    {.location_ids = st0, .n_locations = 3, .values = v0},
    {.location_ids = st1, .n_locations = 3, .values = v1},
    {.location_ids = st2, .n_locations = 2, .values = v2},
    {.location_ids = st3, .n_locations = 1, .values = v3},
};

static struct pprof_value_type types[] = {{S_SAMPLES, S_COUNT}, {S_CPU, S_NS}};

static struct pprof_profile profile(void)
{
	return (struct pprof_profile){
	    .sample_type = types,
	    .n_sample_type = 2,
	    .samples = samples,
	    .n_samples = 4,
	    .mappings = mappings,
	    .n_mappings = 1,
	    .locations = locations,
	    .n_locations = 6,
	    .functions = functions,
	    .n_functions = 4,
	    .strings = strings,
	    .n_strings = sizeof(strings) / sizeof(strings[0]),
	};
}

/* "a;b;c" of sample i. */
static const char *joined(struct stacks *s, size_t i, size_t max)
{
	static char buf[512];
	const struct stack_frame *f[16];
	size_t n = stacks__sample(s, i, f, max), k;

	buf[0] = '\0';
	for (k = 0; k < n; k++) {
		if (k)
			strcat(buf, ";");
		strcat(buf, f[k]->name);
	}
	return buf;
}

static void frames_are_root_first_with_inlines_and_addresses(void **state)
{
	struct pprof_profile p = profile();
	const struct stack_frame *f[16];
	char err[128];
	struct stacks *s = stacks__new(&p, err, sizeof(err));

	assert_non_null(s);
	assert_string_equal(joined(s, 0, 16), "main.main;main.alpha;net/http.(*conn).serve");
	assert_string_equal(joined(s, 1, 16), "main.main;main.alpha;libfoo.so+0x2234");
	assert_string_equal(joined(s, 2, 16), "main.main;net/http.(*conn).serve;memcpy");
	assert_string_equal(joined(s, 3, 16), "0xdead");

	/* the inlined frame is marked, its caller at the same address is not */
	assert_int_equal(stacks__sample(s, 2, f, 16), 3);
	assert_false(f[1]->inlined);
	assert_true(f[2]->inlined);
	/* modules: Go package (with its path), else the mapping's file */
	assert_string_equal(f[0]->module, "main");
	assert_string_equal(f[1]->module, "net/http");
	assert_int_equal(stacks__sample(s, 1, f, 16), 3);
	assert_string_equal(f[2]->module, "libfoo.so");
	assert_int_equal(stacks__truncated(s), 0);
	stacks__free(s);
}

/* The runtime of a frame: its mapping's name, as the agent names interpreter and JIT code. */
static void runtime_from_the_mapping(void **state)
{
	struct pprof_profile p = profile();
	const struct stack_frame *f[16];
	char err[128];
	struct stacks *s;

	assert_int_equal(stacks__runtime_of("[python]"), STACK_RT_PYTHON);
	assert_int_equal(stacks__runtime_of("[python3.11]"), STACK_RT_PYTHON);
	assert_int_equal(stacks__runtime_of("[lua5.4]"), STACK_RT_LUA);
	assert_int_equal(stacks__runtime_of("/tmp/perf-4242.map"), STACK_RT_JIT);
	assert_int_equal(stacks__runtime_of("[jit]"), STACK_RT_JIT);
	assert_int_equal(stacks__runtime_of("[javascript]"), STACK_RT_JIT);
	assert_int_equal(stacks__runtime_of("[luajit]"), STACK_RT_LUA);
	assert_int_equal(stacks__runtime_of("[kernel.kallsyms]"), STACK_RT_KERNEL);
	assert_int_equal(stacks__runtime_of("/usr/bin/python3.11"), STACK_RT_NATIVE);
	assert_int_equal(stacks__runtime_of("/usr/lib/perf-tools.so"), STACK_RT_NATIVE);
	assert_int_equal(stacks__runtime_of("perf-.map"), STACK_RT_NATIVE);
	assert_int_equal(stacks__runtime_of(""), STACK_RT_NATIVE);
	assert_string_equal(stacks__runtime_name(STACK_RT_PYTHON), "python");
	assert_string_equal(stacks__runtime_name(STACK_RT_N), "native");

	/* the frames of a mapping carry its runtime; frames without one are native */
	strings[S_LIB] = "[lua5.4]";
	s = stacks__new(&p, err, sizeof(err));
	strings[S_LIB] = "/usr/lib/libfoo.so";
	assert_non_null(s);
	assert_int_equal(stacks__sample(s, 1, f, 16), 3);
	assert_int_equal(f[2]->runtime, STACK_RT_LUA);
	assert_int_equal(f[0]->runtime, STACK_RT_NATIVE);
	stacks__free(s);
}

static void deep_stacks_keep_their_leaves(void **state)
{
	struct pprof_profile p = profile();
	char err[128];
	struct stacks *s = stacks__new(&p, err, sizeof(err));

	assert_string_equal(joined(s, 0, 2), "main.alpha;net/http.(*conn).serve");
	assert_int_equal(stacks__truncated(s), 1);
	stacks__free(s);
}

static void sample_index_by_name_number_and_default(void **state)
{
	struct pprof_profile p = profile();
	char err[128] = "";

	assert_int_equal(stacks__sample_index(&p, NULL, err, sizeof(err)), 1); /* the last */
	assert_int_equal(stacks__sample_index(&p, "samples", err, sizeof(err)), 0);
	assert_int_equal(stacks__sample_index(&p, "1", err, sizeof(err)), 1);
	p.default_sample_type = S_SAMPLES;
	assert_int_equal(stacks__sample_index(&p, NULL, err, sizeof(err)), 0);
	assert_int_equal(stacks__sample_index(&p, "alloc_space", err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "no sample type 'alloc_space'; the profile has samples cpu");
	assert_int_equal(stacks__sample_index(&p, "2", err, sizeof(err)), -EINVAL);
}

static void drop_frames_prunes_like_pprof(void **state)
{
	struct pprof_profile p = profile();
	char err[128];
	struct stacks *s;

	/* "main.alpha|memcpy": alpha goes with what it calls; memcpy inlined goes alone */
	p.drop_frames = S_DROP;
	s = stacks__new(&p, err, sizeof(err));
	assert_non_null(s);
	assert_string_equal(joined(s, 0, 16), "main.main");
	assert_string_equal(joined(s, 1, 16), "main.main");
	assert_string_equal(joined(s, 2, 16), "main.main;net/http.(*conn).serve");
	assert_string_equal(joined(s, 3, 16), "0xdead");
	stacks__free(s);

	/* a match before any user frame (at the root) prunes nothing */
	p.drop_frames = S_MAIN;
	s = stacks__new(&p, err, sizeof(err));
	assert_string_equal(joined(s, 0, 16), "main.main;main.alpha;net/http.(*conn).serve");
	stacks__free(s);

	p.drop_frames = S_A;
	p.keep_frames = S_A; /* keep wins over drop */
	s = stacks__new(&p, err, sizeof(err));
	assert_string_equal(joined(s, 0, 16), "main.main;main.alpha;net/http.(*conn).serve");
	stacks__free(s);
}

static void unique_groups_identical_stacks(void **state)
{
	static uint64_t again[] = {3, 2, 1}; /* same ids as sample 0, other memory */
	static int64_t va[] = {5, 50}, vz[] = {0, 0};
	struct pprof_sample more[6];
	struct pprof_profile p = profile();
	struct stacks_unique *u = NULL;
	size_t n = 0;

	memcpy(more, samples, sizeof(samples));
	more[4] = (struct pprof_sample){.location_ids = again, .n_locations = 3, .values = va};
	more[5] = (struct pprof_sample){.location_ids = st1, .n_locations = 3, .values = vz};
	p.samples = more;
	p.n_samples = 6;
	assert_int_equal(stacks__unique(&p, 1, &u, &n), 0);
	assert_int_equal(n, 4); /* 0+4 joined, 5 is zero: adds nothing to 1 */
	assert_int_equal(u[0].sample, 0);
	assert_int_equal(u[0].value, 60);
	assert_int_equal(u[1].sample, 1);
	assert_int_equal(u[1].value, 20);
	assert_int_equal(u[3].sample, 3);
	assert_int_equal(u[3].value, 40);
	free(u);
}

static void bad_regex_is_an_error(void **state)
{
	static char *bad_strings[] = {"", "([unclosed"};
	struct pprof_profile p = profile();
	char err[128] = "";

	p.strings = bad_strings;
	p.n_strings = 2;
	p.n_samples = 0;
	p.n_locations = 0;
	p.drop_frames = 1;
	assert_null(stacks__new(&p, err, sizeof(err)));
	assert_non_null(strstr(err, "drop_frames"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(frames_are_root_first_with_inlines_and_addresses),
	    cmocka_unit_test(runtime_from_the_mapping),
	    cmocka_unit_test(deep_stacks_keep_their_leaves),
	    cmocka_unit_test(sample_index_by_name_number_and_default),
	    cmocka_unit_test(drop_frames_prunes_like_pprof),
	    cmocka_unit_test(unique_groups_identical_stacks),
	    cmocka_unit_test(bad_regex_is_an_error),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
