// SPDX-License-Identifier: MIT
/*
 * Unit tests for pprof/view/regress.c: Mann-Whitney U against values scipy.stats computed
 * (mannwhitneyu(cand, base, method="asymptotic"), Debian's python3-scipy 1.10), the
 * Benjamini-Hochberg adjustment worked by hand, per-device shares (a chatty device counts once,
 * cumulative counted once per stack), and small simulated comparisons: a slower function, a new
 * one, and an A/A comparison that must report nothing.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "pprof/view/regress.h"

static void test_mann_whitney(void **state)
{
	double a[] = { 1, 2, 2, 3, 5, 0, 0 }, b[] = { 6, 4, 4, 2, 7, 8 };
	double c[] = { 0.1, 0.2, 0.3 }, d[] = { 0.25, 0.5, 0.6, 0.7 };
	double u, z, p;

	(void)state;
	p = regress__mann_whitney(a, 7, b, 6, &u, &z);
	assert_true(u == 37);
	assert_true(fabs(p - 0.025564506216279086) < 1e-12);
	assert_true(z > 0);
	/* b against a: the same p, the other U, the other sign */
	p = regress__mann_whitney(b, 6, a, 7, &u, &z);
	assert_true(u == 42 - 37);
	assert_true(fabs(p - 0.025564506216279086) < 1e-12);
	assert_true(z < 0);
	p = regress__mann_whitney(c, 3, d, 4, &u, &z);
	assert_true(u == 11);
	assert_true(fabs(p - 0.11161176829829224) < 1e-12);
	/* all tied: no evidence */
	assert_true(regress__mann_whitney(c, 1, c, 1, &u, &z) == 1);
}

static void test_bh(void **state)
{
	double p[] = { 0.01, 0.04, 0.03, 0.005 }, adj[4];

	(void)state;
	assert_int_equal(regress__bh(p, 4, adj), 0);
	assert_true(fabs(adj[0] - 0.02) < 1e-15);
	assert_true(fabs(adj[1] - 0.04) < 1e-15);
	assert_true(fabs(adj[2] - 0.04) < 1e-15);
	assert_true(fabs(adj[3] - 0.02) < 1e-15);
	p[1] = 0.9; /* capped at 1 and monotone: 0.9*4/4 */
	assert_int_equal(regress__bh(p, 4, adj), 0);
	assert_true(fabs(adj[1] - 0.9) < 1e-15);
	assert_true(fabs(adj[2] - 0.04) < 1e-15);
}

/* ---- profiles: main -> task -> leaf, one sample per leaf ------------------------------------ */

#define NLEAF 8
static char *strs[] = { "", "cpu", "nanoseconds", "main", "task", "f0", "f1", "f2", "f3", "f4",
			"f5", "f6", "f7" };
static struct pprof_function funcs[NLEAF + 2];
static struct pprof_line lines[NLEAF + 2];
static struct pprof_location locs[NLEAF + 2];
static uint64_t stk[NLEAF][3];
static int64_t vals[NLEAF];
static struct pprof_sample samples[NLEAF];
static struct pprof_value_type vt = { 1, 2 };

/* A device's profile with v[i] on main;task;f<i> (f7 directly under main). */
static struct pprof_profile device(const int64_t *v)
{
	for (int i = 0; i < NLEAF + 2; i++) {
		funcs[i] = (struct pprof_function){ .id = (uint64_t)i + 1, .name = 3 + i };
		lines[i] = (struct pprof_line){ (uint64_t)i + 1, 1, 0 };
		locs[i] = (struct pprof_location){ .id = (uint64_t)i + 1, .lines = &lines[i],
						   .n_lines = 1 };
	}
	for (int i = 0; i < NLEAF; i++) {
		size_t n = i == 7 ? 2 : 3;

		stk[i][0] = (uint64_t)i + 3; /* leaf first, as pprof stores them */
		stk[i][1] = n == 3 ? 2 : 1;
		stk[i][2] = 1;
		vals[i] = v[i];
		samples[i] = (struct pprof_sample){ .location_ids = stk[i], .n_locations = n,
						    .values = &vals[i] };
	}
	return (struct pprof_profile){
		.sample_type = &vt, .n_sample_type = 1, .samples = samples, .n_samples = NLEAF,
		.locations = locs, .n_locations = NLEAF + 2, .functions = funcs,
		.n_functions = NLEAF + 2, .strings = strs,
		.n_strings = sizeof(strs) / sizeof(strs[0]),
	};
}

struct share_rec {
	double self_f0[4], cum_task[4], cum_main[4];
	int f7_cum; /* f7 is only a leaf: no cumulative test */
};

static void on_share(void *ctx, const char *fn, enum regress_metric m, enum regress_side side,
		     size_t dev, double share)
{
	struct share_rec *s = ctx;
	size_t k = side * 2 + dev;

	if (!strcmp(fn, "f0") && m == REGRESS_SELF)
		s->self_f0[k] = share;
	if (!strcmp(fn, "task") && m == REGRESS_CUM)
		s->cum_task[k] = share;
	if (!strcmp(fn, "main") && m == REGRESS_CUM)
		s->cum_main[k] = share;
	if (!strcmp(fn, "f7") && m == REGRESS_CUM)
		s->f7_cum++;
}

static void test_device_shares(void **state)
{
	int64_t quiet[NLEAF] = { 1, 1, 1, 1, 1, 1, 1, 1 };
	int64_t chatty[NLEAF] = { 3000, 0, 0, 0, 0, 0, 0, 1000 }; /* f1..f6 absent */
	struct regress *r = regress__new(NULL);
	struct share_rec s = { 0 };
	struct regress_stats st;
	struct pprof_profile p;
	char err[128];

	(void)state;
	p = device(quiet);
	assert_int_equal(regress__add_device(r, REGRESS_BASE, &p, 0, err, sizeof(err)), 0);
	p = device(chatty);
	assert_int_equal(regress__add_device(r, REGRESS_BASE, &p, 0, err, sizeof(err)), 0);
	p = device(quiet);
	assert_int_equal(regress__add_device(r, REGRESS_CAND, &p, 0, err, sizeof(err)), 0);
	regress__each_share(r, on_share, &s);
	assert_true(fabs(s.self_f0[0] - 1.0 / 8) < 1e-12);
	assert_true(fabs(s.self_f0[1] - 0.75) < 1e-12);   /* 3000 of 4000, one device */
	assert_true(fabs(s.cum_task[0] - 7.0 / 8) < 1e-12);
	assert_true(fabs(s.cum_task[1] - 0.75) < 1e-12);
	assert_true(fabs(s.cum_main[1] - 1.0) < 1e-12);    /* once per stack, not per frame */
	assert_true(fabs(s.self_f0[2] - 1.0 / 8) < 1e-12);
	assert_int_equal(s.f7_cum, 0);
	regress__stats(r, &st);
	assert_int_equal(st.devices[0], 2);
	assert_int_equal(st.devices[1], 1);
	assert_int_equal(st.functions, NLEAF + 2);
	regress__free(r);
}

/* A device's profiles added one at a time give the shares of their sum (the merged profile). */
static void test_profiles_sum(void **state)
{
	int64_t a[NLEAF] = { 3, 0, 1, 0, 0, 0, 0, 4 }, b[NLEAF] = { 1, 2, 1, 0, 0, 0, 0, 0 };
	int64_t sum[NLEAF] = { 4, 2, 2, 0, 0, 0, 0, 4 };
	struct regress *r1 = regress__new(NULL), *r2 = regress__new(NULL);
	struct share_rec s1 = { 0 }, s2 = { 0 };
	struct pprof_profile p;
	char err[128];

	(void)state;
	p = device(a);
	assert_int_equal(regress__add_profile(r1, &p, 0, err, sizeof(err)), 0);
	p = device(b);
	assert_int_equal(regress__add_profile(r1, &p, 0, err, sizeof(err)), 0);
	assert_int_equal(regress__end_device(r1, REGRESS_BASE), 0);
	p = device(sum);
	assert_int_equal(regress__add_device(r2, REGRESS_BASE, &p, 0, err, sizeof(err)), 0);
	regress__each_share(r1, on_share, &s1);
	regress__each_share(r2, on_share, &s2);
	assert_true(fabs(s1.self_f0[0] - 4.0 / 12) < 1e-12);
	assert_true(fabs(s1.self_f0[0] - s2.self_f0[0]) < 1e-15);
	assert_true(fabs(s1.cum_task[0] - s2.cum_task[0]) < 1e-15);
	assert_true(fabs(s1.cum_task[0] - 8.0 / 12) < 1e-12);
	regress__free(r1);
	regress__free(r2);
}

/*
 * One stacks profile shared by every device, and each device's rows of it (ClickHouse's way:
 * regress__stacks() once, regress__add_rows() a device), give the shares of each device's own
 * profile: rows of one stack summed, two samples with the same locations one stack (f2's
 * rows cancel out: left out, as stacks__unique() leaves them), a row past the stacks refused.
 */
static void test_rows_of_shared_stacks(void **state)
{
	int64_t one[NLEAF] = { 1, 1, 1, 1, 1, 1, 1, 1 };
	int64_t a[NLEAF] = { 3500, 0, 0, 0, 0, 0, 0, 1000 }, b[NLEAF] = { 1, 2, 1, 4, 0, 0, 0, 9 };
	struct regress_row ra[] = { { 0, 3000 }, { 7, 1000 }, { 2, 5 }, { 0, 500 }, { NLEAF, -5 },
				    { 4, 0 } };
	struct regress_row rb[] = { { 3, 4 }, { 0, 1 }, { 1, 2 }, { 2, 1 }, { 7, 9 } };
	struct regress *r1 = regress__new(NULL), *r2 = regress__new(NULL);
	struct pprof_sample shared[NLEAF + 1];
	struct share_rec s1 = { 0 }, s2 = { 0 };
	struct regress_finding *f1, *f2;
	struct pprof_profile p, stacks;
	size_t n1, n2;
	char err[128];

	(void)state;
	p = device(a);
	assert_int_equal(regress__add_device(r2, REGRESS_BASE, &p, 0, err, sizeof(err)), 0);
	p = device(b);
	assert_int_equal(regress__add_device(r2, REGRESS_CAND, &p, 0, err, sizeof(err)), 0);
	stacks = device(one);
	memcpy(shared, stacks.samples, NLEAF * sizeof(shared[0]));
	shared[NLEAF] = shared[2]; /* f2's stack again (as another label set would give) */
	stacks.samples = shared;
	stacks.n_samples = NLEAF + 1;
	assert_int_equal(regress__stacks(r1, &stacks, err, sizeof(err)), 0);
	assert_int_equal(regress__add_rows(r1, ra, 6, err, sizeof(err)), 0);
	assert_int_equal(regress__end_device(r1, REGRESS_BASE), 0);
	assert_int_equal(regress__add_rows(r1, rb, 5, err, sizeof(err)), 0);
	assert_int_equal(regress__end_device(r1, REGRESS_CAND), 0);
	assert_int_equal(regress__add_rows(r1, &(struct regress_row){ NLEAF + 1, 1 }, 1, err,
					   sizeof(err)), -EINVAL);
	regress__stacks(r1, NULL, err, sizeof(err));
	regress__each_share(r1, on_share, &s1);
	regress__each_share(r2, on_share, &s2);
	assert_true(fabs(s1.self_f0[0] - 3500.0 / 4500) < 1e-12);
	assert_memory_equal(&s1, &s2, sizeof(s1));
	assert_int_equal(regress__run(r1, true, &f1, &n1), 0);
	assert_int_equal(regress__run(r2, true, &f2, &n2), 0);
	assert_int_equal(n1, n2);
	for (size_t i = 0; i < n1; i++) {
		assert_string_equal(f1[i].function, f2[i].function);
		assert_true(f1[i].base_share == f2[i].base_share);
		assert_true(f1[i].cand_share == f2[i].cand_share);
		assert_int_equal(f1[i].present_base, f2[i].present_base);
	}
	free(f1);
	free(f2);
	regress__free(r1);
	regress__free(r2);
}

/* ---- simulated fleets -------------------------------------------------------------------- */

static uint64_t seed_state;

static double uniform(void)
{
	seed_state ^= seed_state << 13;
	seed_state ^= seed_state >> 7;
	seed_state ^= seed_state << 17;
	return ((double)(seed_state >> 11) + 0.5) / 9007199254740992.0;
}

/* A device: f<i> at base weights, each times a log-normal device factor (sigma 0.1). */
static void add_sim(struct regress *r, enum regress_side side, double f3_factor, int64_t f6)
{
	static const double w[NLEAF] = { 3000, 2000, 1500, 300, 1000, 800, 0, 1400 };
	int64_t v[NLEAF];
	struct pprof_profile p;
	char err[128];

	for (int i = 0; i < NLEAF; i++) {
		double g = sqrt(-2 * log(uniform())) * cos(2 * M_PI * uniform());

		v[i] = (int64_t)(w[i] * exp(0.1 * g) * (i == 3 ? f3_factor : 1));
	}
	v[6] = f6;
	p = device(v);
	assert_int_equal(regress__add_device(r, side, &p, 0, err, sizeof(err)), 0);
}

static struct regress_finding *find(struct regress_finding *f, size_t n, const char *fn,
				    enum regress_metric m)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(f[i].function, fn) && f[i].metric == m)
			return &f[i];
	return NULL;
}

static void test_regression_found(void **state)
{
	struct regress *r = regress__new(NULL);
	struct regress_finding *f, *x;
	size_t n;

	(void)state;
	seed_state = 42;
	for (int d = 0; d < 90; d++)
		add_sim(r, REGRESS_BASE, 1.0, 0);
	for (int d = 0; d < 30; d++)
		add_sim(r, REGRESS_CAND, 1.3, 100); /* f3 30 % slower; f6 new at ~1 % */
	assert_int_equal(regress__run(r, false, &f, &n), 0);
	x = find(f, n, "f3", REGRESS_SELF);
	assert_non_null(x);
	assert_int_equal(x->verdict, REGRESS_REGRESSION);
	assert_true(x->rel_change > 0.2 && x->rel_change < 0.4);
	assert_true(x->p_adjusted < 0.001);
	assert_true(x->diff_lo > 0 && x->diff_lo < x->cand_share - x->base_share &&
		    x->diff_hi > x->cand_share - x->base_share);
	assert_int_equal(x->devices_base, 90);
	assert_int_equal(x->devices_cand, 30);
	x = find(f, n, "f6", REGRESS_SELF);
	assert_non_null(x);
	assert_int_equal(x->verdict, REGRESS_NEW);
	/* nothing else moved by 5 % (the other shares shrink by ~1.5 % only) */
	for (size_t i = 0; i < n; i++)
		assert_true(!strcmp(f[i].function, "f3") || !strcmp(f[i].function, "f6"));
	free(f);
	regress__free(r);
}

/*
 * The stacks that changed, where the truth is known: x runs under callA and under callB (both
 * under main), equally; on the candidate x is 50 % slower under callB only. Its finding's first
 * chain is main > callB, moved by the whole change; the second main > callA, unmoved; together
 * they hold x's share.
 */
static char *cstrs[] = { "", "cpu", "nanoseconds", "main", "callA", "callB", "x", "other" };
static struct pprof_function cfuncs[5];
static struct pprof_line clines[5];
static struct pprof_location clocs[5];
static uint64_t cstk[3][3] = { { 4, 2, 1 }, { 4, 3, 1 }, { 5, 1, 0 } };
static int64_t cvals[3];
static struct pprof_sample csamples[3];

static void add_two_callers(struct regress *r, enum regress_side side, double b_factor)
{
	struct pprof_profile p;
	char err[128];

	for (int i = 0; i < 5; i++) {
		cfuncs[i] = (struct pprof_function){ .id = (uint64_t)i + 1, .name = 3 + i };
		clines[i] = (struct pprof_line){ (uint64_t)i + 1, 1, 0 };
		clocs[i] = (struct pprof_location){ .id = (uint64_t)i + 1, .lines = &clines[i],
						    .n_lines = 1 };
	}
	for (int i = 0; i < 3; i++) {
		double g = sqrt(-2 * log(uniform())) * cos(2 * M_PI * uniform());

		cvals[i] = (int64_t)((i == 2 ? 9400 : 300) * exp(0.05 * g) *
				     (i == 1 ? b_factor : 1));
		csamples[i] = (struct pprof_sample){ .location_ids = cstk[i],
						     .n_locations = i == 2 ? 2 : 3,
						     .values = &cvals[i] };
	}
	p = (struct pprof_profile){
		.sample_type = &vt, .n_sample_type = 1, .samples = csamples, .n_samples = 3,
		.locations = clocs, .n_locations = 5, .functions = cfuncs, .n_functions = 5,
		.strings = cstrs, .n_strings = sizeof(cstrs) / sizeof(cstrs[0]),
	};
	assert_int_equal(regress__add_device(r, side, &p, 0, err, sizeof(err)), 0);
}

static void test_stacks_that_changed(void **state)
{
	struct regress *r = regress__new(NULL);
	struct regress_finding *f, *x;
	const struct regress_chain *c;
	size_t n;

	(void)state;
	seed_state = 7;
	for (int d = 0; d < 80; d++)
		add_two_callers(r, REGRESS_BASE, 1.0);
	for (int d = 0; d < 40; d++)
		add_two_callers(r, REGRESS_CAND, 1.5);
	assert_int_equal(regress__run(r, false, &f, &n), 0);
	x = find(f, n, "x", REGRESS_SELF);
	assert_non_null(x);
	assert_int_equal(x->verdict, REGRESS_REGRESSION);
	assert_int_equal(x->n_chains, 2);
	c = &x->chains[0];
	assert_int_equal(c->n_callers, 2);
	assert_string_equal(c->callers[0], "main");
	assert_string_equal(c->callers[1], "callB");
	assert_false(c->cut);
	assert_true(c->cand_share / c->base_share > 1.4 && c->cand_share / c->base_share < 1.6);
	c = &x->chains[1];
	assert_string_equal(c->callers[1], "callA");
	assert_true(fabs(c->cand_share / c->base_share - 1) < 0.05);
	assert_true(fabs(x->chains[0].base_share + c->base_share - x->base_share) < 1e-12);
	assert_true(fabs(x->chains[0].cand_share + c->cand_share - x->cand_share) < 1e-12);
	free(f);
	regress__free(r);
}

static void test_a_a_reports_nothing(void **state)
{
	(void)state;
	for (uint64_t seed = 1; seed <= 20; seed++) {
		struct regress *r = regress__new(&(struct regress_opts){ .seed = seed });
		struct regress_finding *f;
		size_t n, all;

		seed_state = seed * 7919;
		for (int d = 0; d < 90; d++)
			add_sim(r, REGRESS_BASE, 1.0, 0);
		for (int d = 0; d < 30; d++)
			add_sim(r, REGRESS_CAND, 1.0, 0);
		assert_int_equal(regress__run(r, false, &f, &n), 0);
		assert_int_equal(n, 0);
		assert_null(f);
		assert_int_equal(regress__run(r, true, &f, &all), 0);
		assert_int_equal(all, 7 + 2); /* f0..f5, f7 self; task and main cumulative */
		free(f);
		regress__free(r);
	}
}

static void test_gone(void **state)
{
	struct regress *r = regress__new(NULL);
	struct regress_finding *f, *x;
	size_t n;

	(void)state;
	seed_state = 99;
	for (int d = 0; d < 40; d++)
		add_sim(r, REGRESS_BASE, 1.0, 50);
	for (int d = 0; d < 40; d++)
		add_sim(r, REGRESS_CAND, 1.0, 0);
	assert_int_equal(regress__run(r, false, &f, &n), 0);
	x = find(f, n, "f6", REGRESS_SELF);
	assert_non_null(x);
	assert_int_equal(x->verdict, REGRESS_GONE);
	free(f);
	regress__free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mann_whitney),
		cmocka_unit_test(test_bh),
		cmocka_unit_test(test_device_shares),
		cmocka_unit_test(test_profiles_sum),
		cmocka_unit_test(test_rows_of_shared_stacks),
		cmocka_unit_test(test_regression_found),
		cmocka_unit_test(test_stacks_that_changed),
		cmocka_unit_test(test_a_a_reports_nothing),
		cmocka_unit_test(test_gone),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
