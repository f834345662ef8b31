// SPDX-License-Identifier: MIT
/*
 * tools/cli/regressions.c — `edgeprof regressions BASE CAND`: which functions take a different
 * share of the CPU on the candidate selection's devices than on the base's, as the collector
 * computes it (GET /api/0/regressions, store/api/api-regress.c): a table, or with --json the
 * findings array as the collector answers it.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "port/http.h"
#include "tools/cli/cli.h"
#include "tools/cli/client.h"

struct regress_args {
	struct cli_conn conn;
	const char *base, *cand, *from, *to, *base_from, *base_to, *type, *alpha, *min_change;
	bool json, all;
};

static void regressions_help(FILE *out)
{
	fprintf(out,
		"usage: edgeprof regressions BASE_SELECTOR CANDIDATE_SELECTOR [--from T] [--to T]\n"
		"           [--base-from T] [--base-to T] [--type cpu] [--alpha P]\n"
		"           [--min-change F] [--all] [--json]\n"
		"connection: as edgeprof query (--collector, --tls-*, --token or EDGEPROF_*); an\n"
		"            operator's certificate.\n"
		"\n"
		"Compares each function's share of the CPU per device (a device's profiles in the\n"
		"range merged first: devices are the unit) between the two selections, e.g.\n"
		"  edgeprof regressions 'fw{version=\"1.4\"}' 'fw{version=\"1.5\"}' --from now-1d\n"
		"with a Mann-Whitney U test per function (self and cumulative share) and the\n"
		"Benjamini-Hochberg correction across functions. Listed: adjusted p < --alpha\n"
		"(0.001) and |relative change| >= --min-change (0.05); functions on no base device\n"
		"are 'new', on no candidate device 'gone'. --all lists every test.\n"
		"--json: the findings as an array of objects (function, metric, base_pct, cand_pct,\n"
		"delta_pct = relative change in %%, diff_lo_pct/diff_hi_pct = 95 %% bootstrap\n"
		"interval of cand_pct - base_pct, p_value, p_adjusted, devices_base, devices_cand,\n"
		"present_base, present_cand, verdict).\n"
		"T: as edgeprof query (default --from now-1h; the base's range is the same unless\n"
		"--base-from/--base-to).\n");
}

static int parse(int argc, char **argv, struct regress_args *a)
{
	static const struct option opts[] = {
		CLI_CONN_OPTIONS,
		{ "from", required_argument, NULL, 'f' },
		{ "to", required_argument, NULL, 't' },
		{ "base-from", required_argument, NULL, 'F' },
		{ "base-to", required_argument, NULL, 'U' },
		{ "type", required_argument, NULL, 'y' },
		{ "alpha", required_argument, NULL, 'a' },
		{ "min-change", required_argument, NULL, 'm' },
		{ "all", no_argument, NULL, 'l' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	cli_conn_from_env(&a->conn);
	a->from = "now-1h";
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (cli_conn_option(&a->conn, c, optarg))
			continue;
		switch (c) {
		case 'f': a->from = optarg; break;
		case 't': a->to = optarg; break;
		case 'F': a->base_from = optarg; break;
		case 'U': a->base_to = optarg; break;
		case 'y': a->type = optarg; break;
		case 'a': a->alpha = optarg; break;
		case 'm': a->min_change = optarg; break;
		case 'l': a->all = true; break;
		case 'j': a->json = true; break;
		default: return CLI_USAGE;
		}
	}
	if (argc - optind != 2)
		return cli_usage_error(a->conn.cmd, "two selectors: BASE and CANDIDATE (quote them)");
	a->base = argv[optind];
	a->cand = argv[optind + 1];
	if (!a->conn.collector)
		return cli_usage_error(a->conn.cmd, "which collector? --collector https://HOST:PORT "
				       "or EDGEPROF_COLLECTOR");
	return CLI_OK;
}

static int target(const struct regress_args *a, char *t, size_t len)
{
	snprintf(t, len, "/api/0/regressions");
	if (cli_add_param(t, len, "base", a->base) || cli_add_param(t, len, "cand", a->cand) ||
	    cli_add_param(t, len, "from", a->from) || cli_add_param(t, len, "to", a->to) ||
	    cli_add_param(t, len, "base_from", a->base_from) ||
	    cli_add_param(t, len, "base_to", a->base_to) ||
	    cli_add_param(t, len, "type", a->type) || cli_add_param(t, len, "alpha", a->alpha) ||
	    cli_add_param(t, len, "min_change", a->min_change) ||
	    cli_add_param(t, len, "all", a->all ? "1" : NULL)) {
		fprintf(stderr, "edgeprof regressions: selectors too long\n");
		return -1;
	}
	return 0;
}

/* The value of "key": inside [p, end) (a string unquoted, else the raw token) into out. */
static void get(const char *p, const char *end, const char *key, char *out, size_t len)
{
	char pat[64];
	const char *v;
	size_t n = 0;

	snprintf(pat, sizeof(pat), "\"%s\":", key);
	out[0] = '\0';
	v = memmem(p, (size_t)(end - p), pat, strlen(pat));
	if (!v)
		return;
	v += strlen(pat);
	if (*v != '"') {
		while (v < end && *v != ',' && *v != '}' && n + 1 < len)
			out[n++] = *v++;
		out[n] = '\0';
		return;
	}
	for (v++; v < end && *v != '"' && n + 1 < len; v++) {
		if (*v == '\\' && v + 1 < end)
			v++;
		out[n++] = *v;
	}
	out[n] = '\0';
}

static double num(const char *p, const char *end, const char *key)
{
	char v[64];

	get(p, end, key, v, sizeof(v));
	return v[0] && strcmp(v, "null") ? strtod(v, NULL) : 0;
}

static void table_row(const char *p, const char *end)
{
	char fn[512], metric[8], verdict[16], delta[64], dev[48];

	get(p, end, "function", fn, sizeof(fn));
	get(p, end, "metric", metric, sizeof(metric));
	get(p, end, "verdict", verdict, sizeof(verdict));
	get(p, end, "delta_pct", delta, sizeof(delta));
	if (strcmp(delta, "null"))
		snprintf(delta, sizeof(delta), "%+.1f%%", num(p, end, "delta_pct"));
	else
		snprintf(delta, sizeof(delta), "new");
	snprintf(dev, sizeof(dev), "%.0f/%.0f", num(p, end, "present_base"),
		 num(p, end, "present_cand"));
	printf("%-12s %-4s %7.3f%% %7.3f%% %8s  [%+.3f, %+.3f]  %9.2g  %11s  %s\n", verdict, metric,
	       num(p, end, "base_pct"), num(p, end, "cand_pct"), delta,
	       num(p, end, "diff_lo_pct"), num(p, end, "diff_hi_pct"), num(p, end, "p_adjusted"),
	       dev, fn);
}

/* A JSON string at v (after its '"') into out; the end of it. */
static const char *json_string(const char *v, const char *end, char *out, size_t len)
{
	size_t n = 0;

	for (; v < end && *v != '"'; v++) {
		if (*v == '\\' && v + 1 < end)
			v++;
		if (n + 1 < len)
			out[n++] = *v;
	}
	out[n] = '\0';
	return v < end ? v + 1 : end;
}

/* The finding's "stacks" (p..end), one line each: "from A > B > C: 1.0% -> 1.2%". */
static void table_chains(const char *p, const char *end)
{
	const char *s = memmem(p, (size_t)(end - p), "\"stacks\":[", 10);

	while (s && (s = memmem(s, (size_t)(end - s), "{\"callers\":[", 12))) {
		const char *v = s + 12, *next = memmem(v, (size_t)(end - v), "{\"callers\":[", 12);
		const char *stop = next ? next : end;
		char name[512], line[2048];
		size_t n = 0;

		line[0] = '\0';
		while (v < stop && *v != ']') {
			if (*v++ != '"')
				continue;
			v = json_string(v, stop, name, sizeof(name));
			n += (size_t)snprintf(line + n, n < sizeof(line) ? sizeof(line) - n : 0,
					      "%s%s", n ? " > " : "", name);
		}
		printf("%-12s from %s%s: %.3f%% -> %.3f%%\n", "",
		       memmem(s, (size_t)(stop - s), "\"cut\":true", 10) ? "... > " : "",
		       line[0] ? line : "(root)", num(s, stop, "base_pct"),
		       num(s, stop, "cand_pct"));
		s = stop;
	}
}

static int print_answer(const struct regress_args *a, const struct http_message *m)
{
	const char *body = (const char *)m->body, *end = body + m->body_len;
	const char *f = memmem(body, m->body_len, "\"findings\":[", 12), *last;
	size_t n = 0;

	if (!f)
		return cli_answer_error(&a->conn, m);
	f += 11;
	for (last = end; last > f && last[-1] != ']'; last--)
		;
	if (a->json) {
		fwrite(f, 1, (size_t)(last - f), stdout);
		putchar('\n');
		return CLI_OK;
	}
	printf("base: %.0f devices (%.0f profiles), candidate: %.0f devices (%.0f profiles); "
	       "%.0f tests\n", num(body, f, "devices"), num(body, f, "profiles"),
	       num(memmem(body, (size_t)(f - body), "\"cand\":", 7) ?: body, f, "devices"),
	       num(memmem(body, (size_t)(f - body), "\"cand\":", 7) ?: body, f, "profiles"),
	       num(body, f, "tests"));
	printf("%-12s %-4s %8s %8s %8s  %-20s  %9s  %11s  %s\n", "VERDICT", "SHR", "BASE", "CAND",
	       "CHANGE", "DIFF 95% (points)", "P_ADJ", "DEVS B/C", "FUNCTION");
	for (const char *p = f; (p = memmem(p, (size_t)(last - p), "{\"function\":", 12)); n++) {
		const char *next = memmem(p + 1, (size_t)(last - p - 1), "{\"function\":", 12);

		table_row(p, next ? next : last);
		table_chains(p, next ? next : last);
		p = next ? next : last;
	}
	if (!n)
		printf("(no function past adjusted p < %g and |change| >= %g)\n",
		       num(body, end, "alpha"), num(body, end, "min_change"));
	return CLI_OK;
}

static int regressions_run(int argc, char **argv)
{
	struct regress_args a = { .conn.cmd = "regressions" };
	struct http_message *m;
	char t[20000];
	int ret;

	if (cli_wants_help(argc, argv)) {
		regressions_help(stdout);
		return CLI_OK;
	}
	ret = parse(argc, argv, &a);
	if (ret)
		return ret;
	m = calloc(1, sizeof(*m));
	if (!m || target(&a, t, sizeof(t)) || cli_request(&a.conn, "GET", t, NULL, NULL, 0, m))
		ret = CLI_FAIL;
	else if (m->status != 200)
		ret = cli_answer_error(&a.conn, m);
	else
		ret = print_answer(&a, m);
	if (m)
		http_message__reset(m);
	free(m);
	return ret;
}

CLI_COMMAND(regressions, "functions slower (or faster) in one fleet selection than another",
	    regressions_run, regressions_help);
