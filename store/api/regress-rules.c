// SPDX-License-Identifier: MIT
/*
 * store/api/regress-rules.c — standing regression rules (regress-rules.h): parse, an interval
 * thread that runs each rule, the findings kept under a lock for /metrics and the UI.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "port/clock.h"
#include "pprof/view/regress.h"
#include "store/api/sbuf.h"
#include "store/api/regress-rules.h"
#include "store/api/regress-store.h"
#include "store/query/selector.h"

struct kept {
	char *function;
	enum regress_metric metric;
	enum regress_verdict verdict;
	double base_pct, cand_pct, delta_pct, p_adjusted;
	size_t devices_base, devices_cand;
};

struct rule {
	char name[64], label[64];
	char *selector;			/* the text, matchers added per run */
	/* the last run's result, under rr->lock */
	char base[128], cand[128];	/* the two values compared ("" before two are seen) */
	char status[256];		/* "ok", or why nothing was compared */
	struct kept *found;
	size_t n_found, dropped, runs;
	uint64_t last_run_s;
};

struct regress_rules {
	struct store *store;
	struct rule r[REGRESS_RULES_MAX];
	size_t n;
	unsigned interval_s;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	bool stop, started;
};

/* 'NAME=SELECTOR by LABEL': 0, or -EINVAL with err. */
static int parse_rule(struct rule *r, const char *text, char *err, size_t errlen)
{
	const char *eq = strchr(text, '='), *by = NULL, *p;
	struct selector *sel = NULL;
	size_t nl;

	for (p = text; (p = strstr(p, " by ")); p++)
		by = p;
	nl = eq ? (size_t)(eq - text) : 0;
	if (!eq || !nl || nl >= sizeof(r->name) || !by || by < eq) {
		snprintf(err, errlen, "--regression-rule '%s': expected 'NAME=SELECTOR by LABEL'", text);
		return -EINVAL;
	}
	memcpy(r->name, text, nl);
	r->name[nl] = '\0';
	for (size_t i = 0; i < nl; i++)
		if (!(r->name[i] == '_' || (r->name[i] >= 'a' && r->name[i] <= 'z') ||
		      (r->name[i] >= 'A' && r->name[i] <= 'Z') || (i && r->name[i] >= '0' &&
							       r->name[i] <= '9'))) {
			snprintf(err, errlen, "--regression-rule: name '%s': letters, digits, _",
				 r->name);
			return -EINVAL;
		}
	snprintf(r->label, sizeof(r->label), "%s", by + 4);
	r->selector = strndup(eq + 1, (size_t)(by - eq - 1));
	if (!r->selector || !r->label[0] || strspn(r->label, "abcdefghijklmnopqrstuvwxyz"
			"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.") != strlen(r->label)) {
		snprintf(err, errlen, "--regression-rule '%s': a label name after 'by'", text);
		return -EINVAL;
	}
	if (selector__parse(r->selector, 0, &sel, err, errlen))
		return -EINVAL;
	selector__free(sel);
	snprintf(r->status, sizeof(r->status), "not run yet");
	return 0;
}

/* ---- one run --------------------------------------------------------------------------- */

struct value_seen {
	char v[128];
	uint64_t first_ns;
};

struct values {
	const char *label;
	struct value_seen v[REGRESS_RULE_MAX_VALUES];
	size_t n, dropped;
};

static int value_one(void *ctx, const struct store_entry *e)
{
	struct values *vs = ctx;
	const char *v = NULL;

	for (size_t i = 0; i < e->n_labels && !v; i++)
		if (!strcmp(e->labels[i].key, vs->label))
			v = e->labels[i].value;
	if (!v)
		return 0;
	for (size_t i = 0; i < vs->n; i++)
		if (!strcmp(vs->v[i].v, v)) {
			if (e->time_ns < vs->v[i].first_ns)
				vs->v[i].first_ns = e->time_ns;
			return 0;
		}
	if (vs->n == REGRESS_RULE_MAX_VALUES || strlen(v) >= sizeof(vs->v[0].v)) {
		vs->dropped++;
		return 0;
	}
	snprintf(vs->v[vs->n].v, sizeof(vs->v[0].v), "%s", v);
	vs->v[vs->n++].first_ns = e->time_ns;
	return 0;
}

/* The rule's selector with LABEL="value" added, parsed into q->sel. */
static int side_query(const struct rule *r, const char *value, struct store_query *q, char *err,
		      size_t errlen)
{
	char text[1024], esc[300];
	size_t n = strlen(r->selector), k = 0;

	while (n && r->selector[n - 1] == ' ')
		n--;
	for (const char *p = value; *p && k + 2 < sizeof(esc); p++) {
		if (*p == '"' || *p == '\\')
			esc[k++] = '\\';
		esc[k++] = *p;
	}
	esc[k] = '\0';
	if (n >= 2 && !strncmp(r->selector + n - 2, "{}", 2))
		n -= 2;
	if (n && r->selector[n - 1] == '}')
		snprintf(text, sizeof(text), "%.*s,%s=\"%s\"}", (int)n - 1, r->selector, r->label,
			 esc);
	else
		snprintf(text, sizeof(text), "%.*s{%s=\"%s\"}", (int)n, r->selector, r->label, esc);
	return selector__parse(text, SELECTOR_F_NO_BUDGET, (struct selector **)&q->sel, err,
			       errlen);
}

/* The newest two values by first-seen time into vs->v[0] (newest), vs->v[1]. */
static int newest_two(struct regress_rules *rr, struct rule *r, struct values *vs, char *err,
		      size_t errlen)
{
	struct store_query q = { .type = "cpu" };
	int ret;

	vs->label = r->label;
	if (selector__parse(r->selector, SELECTOR_F_NO_BUDGET, (struct selector **)&q.sel, err,
			    errlen))
		return -EINVAL;
	ret = store__list(rr->store, &q, value_one, vs);
	selector__free((struct selector *)q.sel);
	if (ret < 0)
		return ret;
	for (int k = 0; k < 2 && (size_t)k < vs->n; k++) /* two passes of a selection sort */
		for (size_t i = (size_t)k + 1; i < vs->n; i++)
			if (vs->v[i].first_ns > vs->v[k].first_ns) {
				struct value_seen t = vs->v[k];

				vs->v[k] = vs->v[i];
				vs->v[i] = t;
			}
	if (vs->n < 2)
		snprintf(err, errlen, "waiting for a second value of %s (%zu seen)", r->label, vs->n);
	return vs->n < 2 ? -ENOENT : 0;
}

static void keep_findings(struct regress_rules *rr, struct rule *r, const struct values *vs,
			  const struct regress_finding *f, size_t n, const char *status)
{
	struct kept *k = calloc(n ? n : 1, sizeof(*k));
	size_t m = 0;

	for (size_t i = 0; k && i < n && m < REGRESS_RULE_MAX_FINDINGS; i++) {
		k[m] = (struct kept){ .function = strdup(f[i].function), .metric = f[i].metric,
				      .verdict = f[i].verdict, .base_pct = f[i].base_share * 100,
				      .cand_pct = f[i].cand_share * 100,
				      .delta_pct = f[i].rel_change * 100,
				      .p_adjusted = f[i].p_adjusted,
				      .devices_base = f[i].devices_base,
				      .devices_cand = f[i].devices_cand };
		if (k[m].function)
			m++;
	}
	pthread_mutex_lock(&rr->lock);
	for (size_t i = 0; i < r->n_found; i++)
		free(r->found[i].function);
	free(r->found);
	r->found = k;
	r->n_found = k ? m : 0;
	r->dropped = n - r->n_found;
	snprintf(r->cand, sizeof(r->cand), "%s", vs && vs->n > 1 ? vs->v[0].v : "");
	snprintf(r->base, sizeof(r->base), "%s", vs && vs->n > 1 ? vs->v[1].v : "");
	snprintf(r->status, sizeof(r->status), "%s", status);
	r->runs++;
	r->last_run_s = port_clock_real_ns() / NSEC_PER_SEC;
	pthread_mutex_unlock(&rr->lock);
}

static void run_rule(struct regress_rules *rr, struct rule *r)
{
	struct values *vs = calloc(1, sizeof(*vs));
	struct store_query q[2] = { { .type = "cpu" }, { .type = "cpu" } };
	struct regress_side_stats st;
	struct regress_finding *f = NULL;
	struct regress *g = regress__new(NULL);
	char err[256] = "";
	size_t n = 0;
	int ret = vs && g ? newest_two(rr, r, vs, err, sizeof(err)) : -ENOMEM;

	for (int i = 0; !ret && i < 2; i++) {
		q[i].from_ns = vs->v[0].first_ns; /* the days both ran */
		ret = side_query(r, vs->v[1 - i].v, &q[i], err, sizeof(err));
		if (!ret)
			ret = regress_store_side(rr->store, &q[i], NULL, g, (enum regress_side)i, &st,
						 err, sizeof(err));
	}
	if (!ret)
		ret = regress__run(g, false, &f, &n);
	if (ret && !err[0])
		snprintf(err, sizeof(err), "%s", strerror(-ret));
	keep_findings(rr, r, ret ? NULL : vs, f, n, ret ? err : "ok");
	free(f);
	regress__free(g);
	selector__free((struct selector *)q[0].sel);
	selector__free((struct selector *)q[1].sel);
	free(vs);
}

static void *rules_thread(void *arg)
{
	struct regress_rules *rr = arg;

	pthread_mutex_lock(&rr->lock);
	while (!rr->stop) {
		struct timespec ts;

		pthread_mutex_unlock(&rr->lock);
		for (size_t i = 0; i < rr->n; i++)
			run_rule(rr, &rr->r[i]);
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += rr->interval_s;
		pthread_mutex_lock(&rr->lock);
		while (!rr->stop && pthread_cond_timedwait(&rr->wake, &rr->lock, &ts) != ETIMEDOUT)
			;
	}
	pthread_mutex_unlock(&rr->lock);
	return NULL;
}

struct regress_rules *regress_rules__new(struct store *s, const struct regress_rules_opts *o,
					 char *err, size_t errlen)
{
	struct regress_rules *rr;

	err[0] = '\0';
	if (!o->n)
		return NULL;
	if (o->n > REGRESS_RULES_MAX) {
		snprintf(err, errlen, "--regression-rule: at most %d", REGRESS_RULES_MAX);
		return NULL;
	}
	rr = calloc(1, sizeof(*rr));
	if (!rr) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	rr->store = s;
	rr->interval_s = o->interval_s ? o->interval_s : REGRESS_RULES_DEFAULT_INTERVAL_S;
	pthread_mutex_init(&rr->lock, NULL);
	pthread_cond_init(&rr->wake, NULL);
	for (; rr->n < o->n; rr->n++)
		if (parse_rule(&rr->r[rr->n], o->rules[rr->n], err, errlen)) {
			rr->n++; /* its selector text is freed too */
			regress_rules__free(rr);
			return NULL;
		}
	if (pthread_create(&rr->thread, NULL, rules_thread, rr)) {
		snprintf(err, errlen, "--regression-rule: cannot start a thread");
		regress_rules__free(rr);
		return NULL;
	}
	rr->started = true;
	return rr;
}

void regress_rules__free(struct regress_rules *rr)
{
	if (!rr)
		return;
	if (rr->started) {
		pthread_mutex_lock(&rr->lock);
		rr->stop = true;
		pthread_cond_signal(&rr->wake);
		pthread_mutex_unlock(&rr->lock);
		pthread_join(rr->thread, NULL);
	}
	for (size_t i = 0; i < rr->n; i++) {
		for (size_t k = 0; k < rr->r[i].n_found; k++)
			free(rr->r[i].found[k].function);
		free(rr->r[i].found);
		free(rr->r[i].selector);
	}
	pthread_mutex_destroy(&rr->lock);
	pthread_cond_destroy(&rr->wake);
	free(rr);
}

/* ---- output -------------------------------------------------------------------------------- */

/* A Prometheus label value: \ " and newline escaped. */
static void prom_str(struct sbuf *b, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			sbuf_printf(b, "\\%c", *s);
		else if (*s == '\n')
			sbuf_printf(b, "\\n");
		else
			sbuf_printf(b, "%c", *s);
	}
}

static void prom_value(struct sbuf *b, double v)
{
	if (isinf(v))
		sbuf_printf(b, " %sInf\n", v > 0 ? "+" : "-");
	else
		sbuf_printf(b, " %.6g\n", v);
}

void regress_rules__metrics(struct regress_rules *rr, struct sbuf *b)
{
	if (!rr)
		return;
	sbuf_printf(b, "# HELP edgeprof_regression Relative change in %% of a function's CPU share per "
		    "device, newest value of the rule's label against the previous, past adjusted "
		    "p < 0.001 and 5 %% (+Inf: new, -100: gone).\n# TYPE edgeprof_regression gauge\n");
	pthread_mutex_lock(&rr->lock);
	for (size_t i = 0; i < rr->n; i++) {
		const struct rule *r = &rr->r[i];

		for (size_t k = 0; k < r->n_found; k++) {
			sbuf_printf(b, "edgeprof_regression{rule=\"%s\",label=\"%s\",base=\"", r->name,
				    r->label);
			prom_str(b, r->base);
			sbuf_printf(b, "\",cand=\"");
			prom_str(b, r->cand);
			sbuf_printf(b, "\",function=\"");
			prom_str(b, r->found[k].function);
			sbuf_printf(b, "\",metric=\"%s\",verdict=\"%s\"}",
				    regress__metric_name(r->found[k].metric),
				    regress__verdict_name(r->found[k].verdict));
			prom_value(b, r->found[k].delta_pct);
		}
	}
	sbuf_printf(b, "# HELP edgeprof_regression_rule_runs_total Runs of each regression rule.\n"
		    "# TYPE edgeprof_regression_rule_runs_total counter\n");
	for (size_t i = 0; i < rr->n; i++)
		sbuf_printf(b, "edgeprof_regression_rule_runs_total{rule=\"%s\"} %zu\n",
			    rr->r[i].name, rr->r[i].runs);
	pthread_mutex_unlock(&rr->lock);
}

static void json_rule(struct sbuf *b, const struct rule *r)
{
	sbuf_printf(b, "{\"rule\":");
	sbuf_json_str(b, r->name);
	sbuf_printf(b, ",\"selector\":");
	sbuf_json_str(b, r->selector);
	sbuf_printf(b, ",\"label\":");
	sbuf_json_str(b, r->label);
	sbuf_printf(b, ",\"base\":");
	sbuf_json_str(b, r->base);
	sbuf_printf(b, ",\"cand\":");
	sbuf_json_str(b, r->cand);
	sbuf_printf(b, ",\"status\":");
	sbuf_json_str(b, r->status);
	sbuf_printf(b, ",\"runs\":%zu,\"last_run\":%" PRIu64 ",\"dropped\":%zu,\"findings\":[",
		    r->runs, r->last_run_s, r->dropped);
	for (size_t k = 0; k < r->n_found; k++) {
		const struct kept *f = &r->found[k];

		sbuf_printf(b, "%s{\"function\":", k ? "," : "");
		sbuf_json_str(b, f->function);
		sbuf_printf(b, ",\"metric\":\"%s\",\"verdict\":\"%s\",\"base_pct\":%.6g,"
			    "\"cand_pct\":%.6g", regress__metric_name(f->metric),
			    regress__verdict_name(f->verdict), f->base_pct, f->cand_pct);
		if (isfinite(f->delta_pct))
			sbuf_printf(b, ",\"delta_pct\":%.6g", f->delta_pct);
		else
			sbuf_printf(b, ",\"delta_pct\":null");
		sbuf_printf(b, ",\"p_adjusted\":%.3g,\"devices_base\":%zu,\"devices_cand\":%zu}",
			    f->p_adjusted, f->devices_base, f->devices_cand);
	}
	sbuf_printf(b, "]}");
}

void regress_rules__json(struct regress_rules *rr, struct sbuf *b)
{
	sbuf_printf(b, "[");
	if (rr) {
		pthread_mutex_lock(&rr->lock);
		for (size_t i = 0; i < rr->n; i++) {
			sbuf_printf(b, "%s", i ? "," : "");
			json_rule(b, &rr->r[i]);
		}
		pthread_mutex_unlock(&rr->lock);
	}
	sbuf_printf(b, "]");
}
