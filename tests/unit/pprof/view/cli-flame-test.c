// SPDX-License-Identifier: MIT
/* Unit tests for pprof/view/flame.c: layout geometry, merging of narrow frames, bounds, SVG. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "pprof/view/flame.h"

static void add(struct ftree *t, const char *a, const char *b, const char *c, int64_t v, int slot)
{
	struct stack_frame f[3] = {{.name = a, .module = "pkg"},
				   {.name = b, .module = "pkg"},
				   {.name = c, .module = "lib"}};
	const struct stack_frame *fp[3] = {&f[0], &f[1], &f[2]};

	assert_int_equal(ftree__add(t, fp, c ? 3 : (b ? 2 : 1), v, slot), 0);
}

static const struct flame_rect *find(const struct ftree *t, const struct flame_rect *r, size_t n,
				     const char *name)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (r[i].node != FTREE_NONE && !strcmp(t->nodes[r[i].node].name, name))
			return &r[i];
	return NULL;
}

static void widths_are_shares_and_children_nest(void **state)
{
	struct ftree *t = ftree__new(0);
	const struct flame_rect *root, *m, *a, *b, *x;
	struct flame_rect *r;
	size_t n, elided;

	add(t, "main", "a", NULL, 30, 0);
	add(t, "main", "b", "x", 50, 0);
	add(t, "main", NULL, NULL, 20, 0);
	ftree__sort(t);
	assert_int_equal(flame__layout(t, 0, 0.001, 0, &r, &n, &elided), 0);
	assert_int_equal(n, 5);
	assert_int_equal(elided, 0);
	root = &r[0];
	assert_int_equal(root->node, 0);
	assert_true(fabs(root->w - 1.0) < 1e-9);
	m = find(t, r, n, "main");
	a = find(t, r, n, "a");
	b = find(t, r, n, "b");
	x = find(t, r, n, "x");
	assert_true(m && a && b && x);
	assert_int_equal(m->depth, 1);
	assert_int_equal(x->depth, 3);
	assert_true(fabs(a->w - 0.3) < 1e-9 && fabs(b->w - 0.5) < 1e-9);
	/* sorted children sit left to right from the parent's x; x starts where b starts */
	assert_true(fabs(a->x - m->x) < 1e-9);
	assert_true(fabs(b->x - (a->x + a->w)) < 1e-9);
	assert_true(fabs(x->x - b->x) < 1e-9 && fabs(x->w - b->w) < 1e-9);
	/* parents come before their children */
	assert_true(m < a && m < b && b < x);
	free(r);
	ftree__free(t);
}

static void narrow_siblings_merge(void **state)
{
	struct ftree *t = ftree__new(0);
	const struct flame_rect *big;
	struct flame_rect *r;
	char name[16];
	size_t n, elided, i, merged = 0;
	int k;

	add(t, "main", "big", NULL, 1000, 0);
	for (k = 0; k < 50; k++) {
		snprintf(name, sizeof(name), "tiny%02d", k);
		add(t, "main", name, "leaf", 1, 0); /* 1/1050 each, under min width */
	}
	ftree__sort(t);
	assert_int_equal(flame__layout(t, 0, 0.002, 0, &r, &n, &elided), 0);
	big = find(t, r, n, "big");
	assert_non_null(big);
	assert_null(find(t, r, n, "tiny07"));
	assert_null(find(t, r, n, "leaf")); /* not descended into */
	for (i = 0; i < n; i++)
		if (r[i].node == FTREE_NONE) {
			merged++;
			assert_int_equal(r[i].n_merged, 50);
			assert_int_equal(r[i].value[0], 50);
			assert_int_equal(r[i].depth, 2);
		}
	assert_int_equal(merged, 1);
	assert_int_equal(n, 4); /* root, main, big, one merged box */
	free(r);
	ftree__free(t);
}

static void max_rects_bounds_output(void **state)
{
	struct ftree *t = ftree__new(0);
	struct flame_rect *r;
	size_t n, elided;

	add(t, "a", "b", "c", 1, 0);
	add(t, "a", "d", "e", 1, 0);
	assert_int_equal(flame__layout(t, 0, 0.0001, 3, &r, &n, &elided), 0);
	assert_int_equal(n, 3);
	assert_int_equal(elided, 2); /* two subtrees left out: b;c and e */
	free(r);
	ftree__free(t);
}

static char *svg(const struct ftree *t, const struct flame_opts *o)
{
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);

	assert_int_equal(flame__svg(t, o, f, NULL), 0);
	fclose(f);
	return out;
}

static void svg_escapes_and_has_tooltips(void **state)
{
	struct ftree *t = ftree__new(0);
	struct flame_opts o = {.title = "cpu <test>", .unit = "nanoseconds"};
	char *out;

	add(t, "main", "operator<<(a&b)", NULL, 1500000000, 0);
	add(t, "main", "bad\xff\x01utf8", NULL, 500000000, 0);
	ftree__sort(t);
	out = svg(t, &o);
	assert_non_null(strstr(out, "<svg "));
	assert_non_null(strstr(out, "</svg>\n"));
	assert_non_null(strstr(out, "cpu &lt;test&gt;"));
	assert_non_null(strstr(out, "<title>operator&lt;&lt;(a&amp;b)\n1.50s (75.00%)</title>"));
	assert_non_null(strstr(out, "<title>bad??utf8\n500ms (25.00%)</title>"));
	assert_null(strstr(out, "\xff"));
	assert_non_null(strstr(out, "<script"));
	free(out);
	ftree__free(t);
}

static void diff_colours_follow_share_change(void **state)
{
	struct ftree *t = ftree__new(0);
	struct flame_opts o = {.unit = "count", .diff = true};
	char *out, *grew, *shrank;

	add(t, "main", "grows", NULL, 10, 0);
	add(t, "main", "shrinks", NULL, 90, 0);
	add(t, "main", "grows", NULL, 600, 1);	 /* 10% -> 60% */
	add(t, "main", "shrinks", NULL, 400, 1); /* 90% -> 40%, though its value went up */
	ftree__sort(t);
	out = svg(t, &o);
	grew = strstr(out, "<title>grows\n");
	shrank = strstr(out, "<title>shrinks\n");
	assert_non_null(grew);
	assert_non_null(shrank);
	assert_non_null(strstr(grew, "share +50.00%"));
	assert_non_null(strstr(shrank, "share -50.00%"));
	/* the fill that follows each title: red for growth, blue for shrinking */
	assert_true(strstr(grew, "fill=\"rgb(250,") < strstr(grew, "</g>"));
	assert_true(strstr(shrank, ",250)\"") < strstr(shrank, "</g>"));
	free(out);
	ftree__free(t);
}

static void budget_raises_min_width(void **state)
{
	struct ftree *t = ftree__new(0);
	struct flame_opts o = {.unit = "count", .max_rects = 40};
	struct flame_result res;
	char name[16], *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);
	int k;

	for (k = 0; k < 100; k++) { /* 100 siblings, 11.8 px each at 1200 px */
		snprintf(name, sizeof(name), "fn%02d", k);
		add(t, "main", name, NULL, 1, 0);
	}
	ftree__sort(t);
	assert_int_equal(flame__svg(t, &o, f, &res), 0);
	fclose(f);
	assert_true(res.boxes <= 40);
	assert_int_equal(res.elided, 0);
	assert_true(res.min_width > 11.8); /* 0.1 doubled until the siblings merged */
	assert_non_null(strstr(out, "small frames]"));
	free(out);
	ftree__free(t);
}

static void xml_escape_bounds_characters(void **state)
{
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);

	flame__xml_escape("h\xc3\xa9llo&world", 4, f); /* é is one character */
	fclose(f);
	assert_string_equal(out, "h\xc3\xa9ll");
	free(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(widths_are_shares_and_children_nest),
	    cmocka_unit_test(narrow_siblings_merge),
	    cmocka_unit_test(max_rects_bounds_output),
	    cmocka_unit_test(svg_escapes_and_has_tooltips),
	    cmocka_unit_test(diff_colours_follow_share_change),
	    cmocka_unit_test(budget_raises_min_width),
	    cmocka_unit_test(xml_escape_bounds_characters),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
