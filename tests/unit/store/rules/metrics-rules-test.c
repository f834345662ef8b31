// SPDX-License-Identifier: MIT
/* tests/unit/store/rules/metrics-rules-test.c — store/rules/metrics-rules.c: parsing, values, units, bounds, text. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "port/clock.h"
#include "pprof/pprof.h"
#include "store/rules/metrics-rules.h"

/*
 * A profile of the given sample types ("cpu/nanoseconds,samples/count") and stacks, root first
 * ("main;checksum"), with values[i * n_types + t].
 */
static struct pprof_profile *profile(const char *types, const char *const *stacks, size_t n,
				     const int64_t *values)
{
	struct pprof_buf buf = {0};
	struct pprof_builder_opts o = {.gzip_level = -1};
	struct pprof_builder *b = pprof_builder__new(&o, pprof_buf_write, &buf);
	struct pprof_profile *p = NULL;
	char tbuf[256], *save = NULL, err[200];
	size_t nt = 0;

	snprintf(tbuf, sizeof(tbuf), "%s", types);
	for (char *t = strtok_r(tbuf, ",", &save); t; t = strtok_r(NULL, ",", &save), nt++) {
		char *slash = strchr(t, '/');

		*slash = '\0';
		assert_int_equal(pprof_builder__add_sample_type(b, t, slash + 1), 0);
	}
	for (size_t i = 0; i < n; i++) {
		uint64_t locs[16];
		char sbuf[256], *names[16], *s2 = NULL;
		size_t d = 0;

		snprintf(sbuf, sizeof(sbuf), "%s", stacks[i]);
		for (char *f = strtok_r(sbuf, ";", &s2); f; f = strtok_r(NULL, ";", &s2))
			names[d++] = f;
		for (size_t j = 0; j < d; j++) { /* leaf first */
			struct pprof_line_desc l = {
			    pprof_builder__function(b, names[d - 1 - j], NULL, NULL, 0), 0};

			locs[j] = pprof_builder__location(b, 0, 0, &l, 1);
		}
		assert_int_equal(pprof_builder__add_sample(b, locs, d, values + i * nt, NULL, 0),
				 0);
	}
	assert_int_equal(pprof_builder__finish(b), 0);
	pprof_builder__free(b);
	if (pprof_read(buf.data, buf.len, NULL, &p, err, sizeof(err)))
		fail_msg("%s", err);
	free(buf.data);
	return p;
}

static const char *const stacks[] = {
    "main;checksum", "main;other", "main;other;checksum", "main;checksum;checksum", "main;idle",
};
/* samples/count, cpu/nanoseconds */
static const int64_t cpu_values[] = {2, 200, 3, 300, 1, 50, 1, 25, 1, 0};

static struct record_label labels_v14[] = {{"version", "1.4"}, {"region", "eu"}};
static struct record_label labels_v15[] = {{"version", "1.5"}};
static struct record_meta meta(const char *type, struct record_label *l, size_t n)
{
	return (struct record_meta){
	    .service = "gw", .type = type, .device = "d1", .labels = l, .n_labels = n};
}

static char *text(struct metrics_rules *r)
{
	char *t;
	size_t len;

	assert_int_equal(metrics_rules__text(r, &t, &len), 0);
	assert_int_equal(strlen(t), len);
	return t;
}

static void has(const char *t, const char *line)
{
	if (!strstr(t, line))
		fail_msg("no '%s' in:\n%s", line, t);
}

/* Adds p under m to r (eval + commit, as store__ingest does). */
static void ingest(struct metrics_rules *r, struct record_meta m, struct pprof_profile *p)
{
	struct metrics_pending pend;

	metrics_rules__eval(r, &m, p, &pend);
	metrics_rules__commit(r, &m, &pend);
}

static void test_parse_errors(void **state)
{
	static const struct {
		const char *rule, *msg;
	} bad[] = {
	    {"no equals", "expected NAME=SELECTOR"},
	    {"9x=gw", "expected NAME=SELECTOR"},
	    {"a-b=gw", "expected NAME=SELECTOR"},
	    {"x=gw{", "selector: unterminated"},
	    {"x=gw{r=}", "selector:"},
	    {"x=gw by version", "expected '(' after by"},
	    {"x=gw by (a,a)", "label 'a' twice in by ()"},
	    {"x=gw by (__name__)", "cannot be a Prometheus label name"},
	    {"x=gw by (a b)", "expected ',' or ')'"},
	    {"x=gw function=checksum", "expected function=\"NAME\""},
	    {"x=gw function=\"a\" function=\"b\"", "more than one function filter"},
	    {"x=gw function=~\"(a\"", "function filter: selector: bad regex"},
	    {"x=gw trailing", "expected function=\"NAME\" or by (label, ...) at 'trailing'"},
	};
	struct metrics_rules *r = metrics_rules__new(10);
	char err[300];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_not_equal(metrics_rules__add(r, bad[i].rule, err, sizeof(err)), 0);
		if (!strstr(err, bad[i].msg))
			fail_msg("'%s': got '%s', want '%s'", bad[i].rule, err, bad[i].msg);
	}
	assert_int_equal(metrics_rules__count(r), 0);
	assert_int_equal(metrics_rules__add(r, "x=gw{r=\"a b}\"} function=~\"c.*\" by (r, a.b)",
					    err, sizeof(err)),
			 0);
	assert_int_equal(metrics_rules__add(r, "x=gw", err, sizeof(err)), -EINVAL);
	has(err, "a rule named x already exists");
	for (int i = (int)metrics_rules__count(r); i < METRICS_RULES_MAX; i++) {
		char rule[32];

		snprintf(rule, sizeof(rule), "r%d=gw", i);
		assert_int_equal(metrics_rules__add(r, rule, err, sizeof(err)), 0);
	}
	assert_int_equal(metrics_rules__add(r, "one_more=gw", err, sizeof(err)), -E2BIG);
	metrics_rules__free(r);
}

static void test_values(void **state)
{
	struct metrics_rules *r = metrics_rules__new(100);
	struct pprof_profile *p = profile("samples/count,cpu/nanoseconds", stacks, 5, cpu_values);
	char err[300], *t;

	(void)state;
	assert_int_equal(metrics_rules__add(r, "all=gw", err, sizeof(err)), 0);
	assert_int_equal(
	    metrics_rules__add(r, "ck=gw function=\"checksum\" by (version)", err, sizeof(err)), 0);
	assert_int_equal(metrics_rules__add(r, "not_ck=gw function!~\"check.*\"", err, sizeof(err)),
			 0);
	assert_int_equal(
	    metrics_rules__add(r, "cpu_eu=gw{region=\"eu\",type=\"cpu\"}", err, sizeof(err)), 0);
	assert_int_equal(metrics_rules__add(r, "none=gw function=\"absent\"", err, sizeof(err)), 0);
	ingest(r, meta("cpu", labels_v14, 2), p);
	ingest(r, meta("cpu", labels_v14, 2), p);
	ingest(r, meta("cpu", labels_v15, 1), p);
	t = text(r);
	/* 575 ns a profile; checksum 275 (the recursive sample once); outside it 300 */
	has(t, "\nall_seconds_total 0.000001725\n");
	has(t, "\nck_seconds_total{version=\"1.4\"} 0.000000550\n");
	has(t, "\nck_seconds_total{version=\"1.5\"} 0.000000275\n");
	has(t, "\nnot_ck_seconds_total 0.000000900\n");
	has(t, "\ncpu_eu_seconds_total 0.000001150\n");
	has(t, "\nnone_seconds_total 0.000000000\n");
	has(t, "# TYPE ck_seconds_total counter\n");
	has(t, "# HELP ck_seconds_total Profiles' seconds by metrics rule: ck=gw "
	       "function=\"checksum\" by (version)\n"); /* HELP escapes only \\ and \\n */
	has(t, "\nedgeprof_collector_metrics_rule_series 6\n");
	free(t);
	pprof_profile__free(p);
	metrics_rules__free(r);
}

static void test_units(void **state)
{
	static const int64_t heap_values[] = {1, 1000, 1, 500, 2, 2048, 0, 0};
	static const int64_t inuse_values[] = {1, 4096};
	static const int64_t count_values[] = {7, 5};
	static const char *const one[] = {"main;alloc"}, *const two[] = {"main;a", "main;b"};
	struct metrics_rules *r = metrics_rules__new(100);
	struct pprof_profile *heap = profile("alloc_objects/count,alloc_space/bytes,"
					     "inuse_objects/count,inuse_space/bytes",
					     two, 2, heap_values);
	struct pprof_profile *inuse =
	    profile("inuse_objects/count,inuse_space/bytes", one, 1, inuse_values);
	struct pprof_profile *cnt = profile("contentions/count", two, 2, count_values);
	char err[300], *t;

	(void)state;
	assert_int_equal(metrics_rules__add(r, "m=gw by (type)", err, sizeof(err)), 0);
	ingest(r, meta("heap", NULL, 0), heap);
	ingest(r, meta("heap", NULL, 0), inuse);
	ingest(r, meta("mutex", NULL, 0), cnt);
	t = text(r);
	has(t, "\nm_bytes_total{type=\"heap\"} 3048\n"); /* alloc_space, not inuse */
	has(t, "\nm_total{type=\"mutex\"} 12\n");
	has(t, "\nedgeprof_collector_metrics_rule_snapshots_total 1\n");
	free(t);
	pprof_profile__free(heap);
	pprof_profile__free(inuse);
	pprof_profile__free(cnt);
	metrics_rules__free(r);
}

static void test_bound(void **state)
{
	struct metrics_rules *r = metrics_rules__new(2);
	struct pprof_profile *p = profile("samples/count,cpu/nanoseconds", stacks, 5, cpu_values);
	struct record_label l[1] = {{"seq", ""}};
	char err[300], *t, v[4][12];

	(void)state;
	assert_int_equal(metrics_rules__add(r, "s=gw by (seq)", err, sizeof(err)), 0);
	for (int i = 0; i < 4; i++) {
		snprintf(v[i], sizeof(v[i]), "%d", i);
		l[0].value = v[i];
		ingest(r, meta("cpu", l, 1), p);
	}
	l[0].value = v[0];
	ingest(r, meta("cpu", l, 1), p); /* an existing series: counted */
	t = text(r);
	has(t, "\ns_seconds_total{seq=\"0\"} 0.000001150\n");
	has(t, "\ns_seconds_total{seq=\"1\"} 0.000000575\n");
	assert_null(strstr(t, "seq=\"2\""));
	has(t, "\nedgeprof_collector_metrics_rule_series 2\n");
	has(t, "\nedgeprof_collector_metrics_rule_series_dropped_total 2\n");
	free(t);
	pprof_profile__free(p);
	metrics_rules__free(r);
}

/*
 * Each rule has its share (issue 38: one device's unbounded label took all 50 series and
 * another rule got none): 4 series, 2 rules, a rule by seq with 10 values keeps 2 and the
 * other rule still gets its series.
 */
static void test_share_per_rule(void **state)
{
	struct metrics_rules *r = metrics_rules__new(4);
	struct pprof_profile *p = profile("samples/count,cpu/nanoseconds", stacks, 5, cpu_values);
	struct record_label l[1] = {{"seq", ""}};
	char err[300], *t, v[10][12];

	(void)state;
	assert_int_equal(metrics_rules__add(r, "greedy=gw by (seq)", err, sizeof(err)), 0);
	assert_int_equal(metrics_rules__add(r, "other=gw", err, sizeof(err)), 0);
	for (int i = 0; i < 10; i++) {
		snprintf(v[i], sizeof(v[i]), "%d", i);
		l[0].value = v[i];
		ingest(r, meta("cpu", l, 1), p);
	}
	t = text(r);
	has(t, "\nother_seconds_total 0.000005750\n"); /* all 10 profiles */
	has(t, "\nedgeprof_collector_metrics_rule_series 3\n");
	has(t, "\nedgeprof_collector_metrics_rule_dropped_total{rule=\"greedy\"} 8\n");
	has(t, "\nedgeprof_collector_metrics_rule_dropped_total{rule=\"other\"} 0\n");
	free(t);
	pprof_profile__free(p);
	metrics_rules__free(r);
}

/*
 * Idle series are freed (issue 38): devices 0 and 1 fill the rule's 2 series and go away; once
 * they have been idle for the idle time, devices 2 and 3 get their series, the freed ones are
 * counted and gone from the text, and a series still updated stays with its value.
 */
static void test_idle_series_freed(void **state)
{
	struct metrics_rules *r = metrics_rules__new(3);
	struct pprof_profile *p = profile("samples/count,cpu/nanoseconds", stacks, 5, cpu_values);
	struct record_label l[1] = {{"seq", ""}};
	char err[300], *t, v[4][12];

	(void)state;
	metrics_rules__set_idle_ms(r, 200);
	assert_int_equal(metrics_rules__add(r, "d=gw by (seq)", err, sizeof(err)), 0);
	for (int i = 0; i < 4; i++)
		snprintf(v[i], sizeof(v[i]), "%d", i);
	for (int i = 0; i < 3; i++) { /* 0, 1, 2 fill the table; 3 has no room */
		l[0].value = v[i];
		ingest(r, meta("cpu", l, 1), p);
	}
	l[0].value = v[3];
	ingest(r, meta("cpu", l, 1), p);
	t = text(r);
	assert_null(strstr(t, "seq=\"3\""));
	has(t, "\nedgeprof_collector_metrics_rule_series_freed_total 0\n");
	free(t);
	for (int k = 0; k < 5; k++) { /* 2 keeps uploading, 0 and 1 went away */
		port_sleep_ns(60 * NSEC_PER_MSEC);
		l[0].value = v[2];
		ingest(r, meta("cpu", l, 1), p);
	}
	l[0].value = v[3];
	ingest(r, meta("cpu", l, 1), p);
	t = text(r);
	has(t, "\nd_seconds_total{seq=\"2\"} 0.000003450\n"); /* 6 profiles, kept */
	has(t, "\nd_seconds_total{seq=\"3\"} 0.000000575\n");
	assert_null(strstr(t, "seq=\"0\""));
	assert_null(strstr(t, "seq=\"1\""));
	has(t, "\nedgeprof_collector_metrics_rule_series 2\n");
	has(t, "\nedgeprof_collector_metrics_rule_series_freed_total 2\n");
	has(t, "\nedgeprof_collector_metrics_rule_series_dropped_total 1\n");
	free(t);
	pprof_profile__free(p);
	metrics_rules__free(r);
}

static void test_escapes(void **state)
{
	struct metrics_rules *r = metrics_rules__new(10);
	struct pprof_profile *p = profile("samples/count,cpu/nanoseconds", stacks, 5, cpu_values);
	struct record_label l[] = {{"fw.version", "a\"b\\c\nd"}};
	char err[300], *t;

	(void)state;
	assert_int_equal(metrics_rules__add(r, "e=gw by (fw.version)", err, sizeof(err)), 0);
	ingest(r, meta("cpu", l, 1), p);
	t = text(r);
	has(t, "\ne_seconds_total{fw_version=\"a\\\"b\\\\c\\nd\"} 0.000000575\n");
	free(t);
	pprof_profile__free(p);
	metrics_rules__free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parse_errors), cmocka_unit_test(test_values),
	    cmocka_unit_test(test_units),	 cmocka_unit_test(test_bound),
	    cmocka_unit_test(test_share_per_rule), cmocka_unit_test(test_escapes),
	    cmocka_unit_test(test_idle_series_freed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
