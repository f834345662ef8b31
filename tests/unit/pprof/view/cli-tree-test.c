// SPDX-License-Identifier: MIT
/* Unit tests for pprof/view/tree.c: the folded-stack tree, its bound and its folded output. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "pprof/view/tree.h"

/* Adds "a;b;c" with value v to slot; names are copied so that interning is what joins them. */
static int add(struct ftree *t, const char *folded, int64_t v, int slot)
{
	struct stack_frame fr[16];
	const struct stack_frame *fp[16];
	char buf[256], *save = NULL, *tok;
	char names[16][64];
	size_t n = 0;

	snprintf(buf, sizeof(buf), "%s", folded);
	for (tok = strtok_r(buf, ";", &save); tok && n < 16; tok = strtok_r(NULL, ";", &save)) {
		snprintf(names[n], sizeof(names[n]), "%s", tok);
		fr[n] = (struct stack_frame){.name = names[n], .module = "m"};
		fp[n] = &fr[n];
		n++;
	}
	return ftree__add(t, fp, n, v, slot);
}

static char *folded(const struct ftree *t, int slot)
{
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);

	assert_non_null(f);
	assert_int_equal(ftree__folded(t, slot, f), 0);
	fclose(f);
	return out;
}

static void sums_and_sorted_folded_output(void **state)
{
	struct ftree *t = ftree__new(0);
	char *out;

	assert_non_null(t);
	assert_int_equal(add(t, "main;b;x", 5, 0), 0);
	assert_int_equal(add(t, "main;a", 3, 0), 0);
	assert_int_equal(add(t, "main;b;x", 2, 0), 0);
	assert_int_equal(add(t, "main;b", 1, 0), 0);
	assert_int_equal(add(t, "main", 4, 0), 0);
	assert_int_equal(t->nodes[0].total[0], 15);
	assert_int_equal(t->n, 5); /* all, main, b, x, a */
	assert_int_equal(ftree__sort(t), 0);
	out = folded(t, 0);
	assert_string_equal(out, "main 4\nmain;a 3\nmain;b 1\nmain;b;x 7\n");
	free(out);
	ftree__free(t);
}

static void slots_are_independent_and_names_meet(void **state)
{
	struct ftree *t = ftree__new(0);
	char *out;

	add(t, "main;work", 10, 0);
	add(t, "main;work", 30, 1);
	add(t, "main;idle", 5, 1);
	assert_int_equal(t->n, 4);
	assert_int_equal(t->nodes[0].total[0], 10);
	assert_int_equal(t->nodes[0].total[1], 35);
	ftree__sort(t);
	out = folded(t, 1);
	assert_string_equal(out, "main;idle 5\nmain;work 30\n");
	free(out);
	out = folded(t, 0);
	assert_string_equal(out, "main;work 10\n");
	free(out);
	ftree__free(t);
}

static void full_tree_cuts_stacks_and_counts(void **state)
{
	struct ftree *t = ftree__new(3); /* root + two nodes */
	char *out;

	assert_int_equal(add(t, "main;a", 1, 0), 0);
	assert_int_equal(add(t, "main;b;c", 2, 0), 0); /* b does not fit: lands on main */
	assert_int_equal(t->n, 3);
	assert_int_equal(t->dropped_stacks, 1);
	assert_int_equal(t->dropped_value[0], 2);
	assert_int_equal(t->nodes[0].total[0], 3); /* nothing lost from the totals */
	out = folded(t, 0);
	assert_non_null(strstr(out, "main 2\n"));
	free(out);
	ftree__free(t);
}

static void separators_and_empty_stacks(void **state)
{
	struct ftree *t = ftree__new(0);
	struct stack_frame f = {.name = "std::map<a;b>::at", .module = "std"};
	const struct stack_frame *fp = &f;
	char *out;

	assert_int_equal(ftree__add(t, &fp, 1, 6, 0), 0);
	assert_int_equal(ftree__add(t, NULL, 0, 2, 0), 0);
	ftree__sort(t);
	out = folded(t, 0);
	assert_string_equal(out, "[no stack] 2\nstd::map<a:b>::at 6\n");
	free(out);
	ftree__free(t);
}

/* A small profile through stacks: values of the chosen type, zero values skipped. */
static void whole_profile(void **state)
{
	static char *strings[] = {"", "main", "work", "cpu", "ns"};
	static struct pprof_function fns[] = {{.id = 1, .name = 1}, {.id = 2, .name = 2}};
	static struct pprof_line l1 = {1, 0, 0}, l2 = {2, 0, 0};
	static struct pprof_location locs[] = {{.id = 1, .lines = &l1, .n_lines = 1},
					       {.id = 2, .lines = &l2, .n_lines = 1}};
	static uint64_t st[] = {2, 1};
	static int64_t va[] = {7}, vb[] = {0};
	static struct pprof_sample smp[] = {{.location_ids = st, .n_locations = 2, .values = va},
					    {.location_ids = st, .n_locations = 1, .values = vb}};
	static struct pprof_value_type ty = {3, 4};
	struct pprof_profile p = {.sample_type = &ty,
				  .n_sample_type = 1,
				  .samples = smp,
				  .n_samples = 2,
				  .locations = locs,
				  .n_locations = 2,
				  .functions = fns,
				  .n_functions = 2,
				  .strings = strings,
				  .n_strings = 5};
	char err[64];
	struct stacks *s = stacks__new(&p, err, sizeof(err));
	struct ftree *t = ftree__new(0);
	char *out;

	assert_int_equal(ftree__add_profile(t, s, &p, 0, 0), 0);
	out = folded(t, 0);
	assert_string_equal(out, "main;work 7\n");
	free(out);
	stacks__free(s);
	ftree__free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(sums_and_sorted_folded_output),
	    cmocka_unit_test(slots_are_independent_and_names_meet),
	    cmocka_unit_test(full_tree_cuts_stacks_and_counts),
	    cmocka_unit_test(separators_and_empty_stacks),
	    cmocka_unit_test(whole_profile),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
