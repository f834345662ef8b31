// SPDX-License-Identifier: MIT
/*
 * store/api/api-regress.c — GET /api/0/regressions (operators only, like every read):
 *
 *   ?base=SEL&cand=SEL&from=T&to=T[&base_from=T&base_to=T][&type=cpu][&sample=SPEC]
 *    [&alpha=0.001][&min_change=0.05][&all=1]
 *
 * which functions take a different share of the CPU on the candidate selection's devices than
 * on the base's (pprof/view/regress.h: per device, Mann-Whitney U, Benjamini-Hochberg). The
 * base's time range is from/to unless base_from/base_to say otherwise. type defaults to cpu
 * (shares of different profile types do not compare). all=1 lists every test, not only the
 * findings (the reference test checks the statistics on them).
 *
 * {"code":200,"body":{"base":{"profiles":N,"devices":N,"unreadable":N,"skipped":N (of
 *  another kind)},"cand":{...},
 *  "functions":N,"tests":N,"alpha":A,"min_change":C,"findings":[{"function":..,"metric":
 *  "self"|"cum","base_pct":..,"cand_pct":..,"delta_pct":relative change in % (null: new),
 *  "diff_lo_pct":..,"diff_hi_pct":.. (95 % interval of cand_pct - base_pct),"u":..,"z":..,
 *  "p_value":..,"p_adjusted":..,"devices_base":..,"devices_cand":..,"present_base":..,
 *  "present_cand":..,"verdict":"regression"|"improvement"|"new"|"gone"|"none","stacks":[
 *  {"callers":["main",..] (the function's nearest callers, root first),"cut":more above,
 *  "base_pct":..,"cand_pct":..} (the caller chains whose mean per-device share moved most,
 *  findings only)]}]}}
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "port/clock.h"
#include "store/api/api.h"
#include "store/api/regress-store.h"
#include "store/query/selector.h"
#include "store/query/timeparse.h"

struct regress_req {
	struct store_query q[2];
	char type[64], spec[64];
	struct regress_opts o;
	bool all;
};

/* A time parameter into *ns (absent: keeps it). 0, or -1 with the answer set. */
static int time_param(struct api_ctx *a, const char *name, uint64_t *ns)
{
	char v[128], err[200];
	int64_t t;
	int ret = api_param(a, name, v, sizeof(v));

	if (ret <= 0)
		return ret;
	if (timeparse(v, (int64_t)port_clock_real_ns(), &t, err, sizeof(err))) {
		api_error(a, 400, REJ_BAD_REQUEST, "%s: %s", name, err);
		return -1;
	}
	*ns = t > 0 ? (uint64_t)t : 1;
	return 0;
}

static int sel_param(struct api_ctx *a, const char *name, struct store_query *q)
{
	char text[8192], err[256];

	if (api_param(a, name, text, sizeof(text)) < 0)
		return -1;
	if (!text[0]) {
		api_error(a, 400, REJ_BAD_REQUEST, "%s: a selector is needed, e.g. "
			  "svc{version=\"1.4\"}", name);
		return -1;
	}
	if (selector__parse(text, 0, (struct selector **)&q->sel, err, sizeof(err))) {
		api_error(a, 400, REJ_BAD_REQUEST, "bad %s selector '%s': %s", name, text, err);
		return -1;
	}
	return 0;
}

static int num_param(struct api_ctx *a, const char *name, double *v, double lo, double hi)
{
	char s[64], *end;
	int ret = api_param(a, name, s, sizeof(s));

	if (ret <= 0)
		return ret;
	*v = strtod(s, &end);
	if (*end || !(*v >= lo && *v <= hi)) {
		api_error(a, 400, REJ_BAD_REQUEST, "%s must be a number in [%g, %g]", name, lo, hi);
		return -1;
	}
	return 0;
}

static int parse(struct api_ctx *a, struct regress_req *rq)
{
	char all[8];
	uint64_t from = 0, to = 0;

	double min_change = REGRESS_DEFAULT_MIN_CHANGE;

	if (api_param(a, "type", rq->type, sizeof(rq->type)) < 0 ||
	    api_param(a, "sample", rq->spec, sizeof(rq->spec)) < 0 ||
	    api_param(a, "all", all, sizeof(all)) < 0 ||
	    num_param(a, "alpha", &rq->o.alpha, 1e-300, 1) ||
	    num_param(a, "min_change", &min_change, 0, 1e6) ||
	    time_param(a, "from", &from) || time_param(a, "to", &to))
		return -1;
	rq->all = !strcmp(all, "1") || !strcmp(all, "true");
	rq->o.min_change = min_change ? min_change : -1; /* 0 asked: no effect threshold */
	for (int i = 0; i < 2; i++) {
		rq->q[i].type = rq->type[0] ? rq->type : "cpu";
		rq->q[i].from_ns = from;
		rq->q[i].to_ns = to;
	}
	if (time_param(a, "base_from", &rq->q[0].from_ns) ||
	    time_param(a, "base_to", &rq->q[0].to_ns))
		return -1;
	return sel_param(a, "base", &rq->q[0]) || sel_param(a, "cand", &rq->q[1]) ? -1 : 0;
}

static void json_double(struct sbuf *b, const char *key, double v)
{
	if (isfinite(v))
		sbuf_printf(b, ",\"%s\":%.17g", key, v);
	else
		sbuf_printf(b, ",\"%s\":null", key);
}

/* ,"stacks":[{"callers":["main",...],"cut":false,"base_pct":..,"cand_pct":..},...] */
static void json_chains(struct sbuf *b, const struct regress_finding *f)
{
	sbuf_printf(b, ",\"stacks\":[");
	for (size_t i = 0; i < f->n_chains; i++) {
		const struct regress_chain *c = &f->chains[i];

		sbuf_printf(b, "%s{\"callers\":[", i ? "," : "");
		for (size_t j = 0; j < c->n_callers; j++) {
			sbuf_printf(b, "%s", j ? "," : "");
			sbuf_json_str(b, c->callers[j]);
		}
		sbuf_printf(b, "],\"cut\":%s", c->cut ? "true" : "false");
		json_double(b, "base_pct", c->base_share * 100);
		json_double(b, "cand_pct", c->cand_share * 100);
		sbuf_printf(b, "}");
	}
	sbuf_printf(b, "]");
}

static void json_finding(struct sbuf *b, const struct regress_finding *f, bool first)
{
	sbuf_printf(b, "%s{\"function\":", first ? "" : ",");
	sbuf_json_str(b, f->function);
	sbuf_printf(b, ",\"metric\":\"%s\"", regress__metric_name(f->metric));
	json_double(b, "base_pct", f->base_share * 100);
	json_double(b, "cand_pct", f->cand_share * 100);
	json_double(b, "delta_pct", f->rel_change * 100);
	json_double(b, "diff_lo_pct", f->diff_lo * 100);
	json_double(b, "diff_hi_pct", f->diff_hi * 100);
	json_double(b, "u", f->u);
	json_double(b, "z", f->z);
	json_double(b, "p_value", f->p_value);
	json_double(b, "p_adjusted", f->p_adjusted);
	sbuf_printf(b, ",\"devices_base\":%zu,\"devices_cand\":%zu,\"present_base\":%zu,"
		    "\"present_cand\":%zu,\"verdict\":\"%s\"", f->devices_base, f->devices_cand,
		    f->present_base, f->present_cand, regress__verdict_name(f->verdict));
	json_chains(b, f);
	sbuf_printf(b, "}");
}

static void json_side(struct sbuf *b, const char *name, const struct regress_side_stats *s)
{
	sbuf_printf(b, "\"%s\":{\"profiles\":%zu,\"devices\":%zu,\"unreadable\":%zu,"
		    "\"skipped\":%zu},", name, s->profiles, s->devices, s->unreadable, s->skipped);
}

static void answer(struct api_ctx *a, struct regress *r, const struct regress_req *rq,
		   const struct regress_side_stats *side)
{
	struct regress_finding *f = NULL;
	struct regress_stats st;
	struct sbuf b = { 0 };
	size_t n = 0;

	if (regress__run(r, rq->all, &f, &n))
		return api_error(a, 503, REJ_STORE, "regressions: out of memory");
	regress__stats(r, &st);
	sbuf_printf(&b, "{\"code\":200,\"body\":{");
	json_side(&b, "base", &side[0]);
	json_side(&b, "cand", &side[1]);
	sbuf_printf(&b, "\"functions\":%zu,\"tests\":%zu,\"dropped_functions\":%zu,"
		    "\"dropped_stack_entries\":%zu", st.functions, st.tests, st.dropped_functions,
		    st.dropped_stack_entries);
	json_double(&b, "alpha", rq->o.alpha ? rq->o.alpha : REGRESS_DEFAULT_ALPHA);
	json_double(&b, "min_change", rq->o.min_change < 0 ? 0 : rq->o.min_change);
	sbuf_printf(&b, ",\"findings\":[");
	for (size_t i = 0; i < n; i++)
		json_finding(&b, &f[i], !i);
	sbuf_printf(&b, "]}}\n");
	free(f);
	api_json(a, &b);
}

/* GET /api/0/regressions/rules: the standing rules' last results (regress-rules.h). */
void api_regression_rules(struct api_ctx *a)
{
	struct sbuf b = { 0 };

	sbuf_printf(&b, "{\"code\":200,\"body\":");
	regress_rules__json(a->regress_rules, &b);
	sbuf_printf(&b, "}\n");
	api_json(a, &b);
}

void api_regressions(struct api_ctx *a)
{
	static const char *const names[] = { "base", "cand" };
	struct regress_req rq = { 0 };
	struct regress_side_stats side[2] = { 0 };
	struct regress *r = NULL;
	char err[300] = "";
	int ret = parse(a, &rq);

	if (!ret && !(r = regress__new(&rq.o)))
		api_error(a, 503, REJ_STORE, "regressions: out of memory");
	for (int i = 0; r && !ret && i < 2; i++) {
		rq.q[i].budget = api_query_budget(a);
		ret = regress_store_side(a->store, &rq.q[i], rq.spec[0] ? rq.spec : NULL, r,
					 (enum regress_side)i, &side[i], err, sizeof(err));
		if (api_over_budget(a, rq.q[i].sel))
			ret = -1;
		else if (ret == -ENOENT)
			api_error(a, 404, REJ_NOT_FOUND, "no %s profiles match", names[i]);
		else if (api_query_refused(a, ret, names[i], err))
			;
		else if (ret)
			api_error(a, ret == -ENOMEM ? 503 : 400, ret == -ENOMEM ? REJ_STORE :
				  REJ_BAD_REQUEST, "%s: %s", names[i], err[0] ? err : strerror(-ret));
	}
	if (r && !ret)
		answer(a, r, &rq, side);
	regress__free(r);
	selector__free((struct selector *)rq.q[0].sel);
	selector__free((struct selector *)rq.q[1].sel);
}
