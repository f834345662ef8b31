// SPDX-License-Identifier: MIT
/*
 * store/api/api-render.c — the JSON endpoints behind the web UI, usable by scripts too:
 *
 *   GET /api/0/render?query=&type=&from=&to=&format=json|flamebearer|folded&index=SAMPLE_TYPE
 *       the merged profile of the selection as a call tree (store/api/render.h)
 *   POST /api/0/render?format=...&index=...   body: a pprof (gzip or raw) or folded-text file
 *       the same for that one file, nothing stored (the web UI's "open a file")
 *   GET /api/0/timeline?query=&type=&from=&to=&step=SECONDS
 *       {"from":s,"step":s,"profiles":n,"values":[...]}: the profiles' totals per time bucket,
 *       from the index alone (records carry their total), so it costs no payload decode.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "port/clock.h"
#include "store/api/api.h"
#include "store/api/render.h"
#include "store/query/selector.h"

#define TIMELINE_MAX_BUCKETS 2000
#define TIMELINE_DEFAULT_BUCKETS 120
#define TIMELINE_DEFAULT_SPAN (3600 * NSEC_PER_SEC)

/* The format= and index= parameters: 0, or -EINVAL with the error answer set. */
static int render_params(struct api_ctx *a, enum render_format *fmt, char *index, size_t size)
{
	char format[32];

	if (api_param(a, "format", format, sizeof(format)) < 0 ||
	    api_param(a, "index", index, size) < 0)
		return -EINVAL;
	if (!render_format_parse(format, fmt))
		return 0;
	api_error(a, 400, REJ_BAD_REQUEST, "unknown format '%s': json, flamebearer or folded",
		  format);
	return -EINVAL;
}

/*
 * Symbolizes p with the stored debug files, renders its sample type index ("": the default)
 * as the answer, frees it.
 */
static void render_answer(struct api_ctx *a, struct pprof_profile *p, size_t n,
			  enum render_format fmt, const char *index)
{
	char err[300] = "", *out = NULL;
	size_t len = 0;
	int ret;

	if (api_query_take(a, render_mem_bound(p, 0) + api_symbolize_mem(a, p))) {
		pprof_profile__free(p);
		return;
	}
	p = api_symbolize(a, p);
	ret = render_profile_index(p, index, fmt, n, 0, &out, &len, err, sizeof(err));
	pprof_profile__free(p);
	if (ret == -EINVAL && index[0]) /* a sample type the profiles do not have */
		return api_error(a, 400, REJ_BAD_REQUEST, "%s", err);
	if (ret)
		return api_error(a, 500, REJ_STORE, "%s", err);
	api_set_body(a, 200, fmt == RENDER_FOLDED ? "text/plain; charset=utf-8" : "application/json",
		     out, len, false);
}

void api_render(struct api_ctx *a)
{
	struct pprof_profile *p = NULL;
	enum render_format fmt;
	char index[64];
	size_t n = 0;

	if (render_params(a, &fmt, index, sizeof(index)) || api_merge_query(a, &p, &n))
		return;
	render_answer(a, p, n, fmt, index);
}

/*
 * Stateless: the body is read under --max-body like any request, decoded under the ingest's
 * limits (gzip bombs: 413), symbolized with the stored debug files, rendered, and freed. An
 * operator's path (it costs a decode and a render): devices get a 403 before their body.
 */
void api_render_file(struct api_ctx *a)
{
	struct pprof_profile *p = NULL;
	enum render_format fmt;
	char index[64];

	if (render_params(a, &fmt, index, sizeof(index)) ||
	    api_read_profile(a, a->req->body, a->req->body_len, true, false, &p))
		return;
	render_answer(a, p, 1, fmt, index);
}

struct timeline {
	uint64_t from_ns, step_ns;
	size_t n_buckets, profiles;
	int64_t *values;
};

void api_timeline(struct api_ctx *a)
{
	struct timeline t = { 0 };
	struct store_query q;
	struct sbuf b = { 0 };
	char type[64], step[32];
	uint64_t span;
	int ret;

	if (api_param(a, "step", step, sizeof(step)) < 0 || api_query(a, &q, type, sizeof(type)))
		return;
	q.limit = 0;
	if (!q.to_ns)
		q.to_ns = port_clock_real_ns();
	if (!q.from_ns)
		q.from_ns = q.to_ns > TIMELINE_DEFAULT_SPAN ? q.to_ns - TIMELINE_DEFAULT_SPAN : 0;
	span = q.to_ns - q.from_ns + 1;
	t.step_ns = step[0] ? strtoull(step, NULL, 10) * NSEC_PER_SEC : 0;
	if (!t.step_ns)
		t.step_ns = (span + TIMELINE_DEFAULT_BUCKETS - 1) / TIMELINE_DEFAULT_BUCKETS;
	/* Whole seconds, so the UI's times and ours agree. */
	t.step_ns = (t.step_ns + NSEC_PER_SEC - 1) / NSEC_PER_SEC * NSEC_PER_SEC;
	t.from_ns = q.from_ns / NSEC_PER_SEC * NSEC_PER_SEC;
	t.n_buckets = (q.to_ns - t.from_ns) / t.step_ns + 1;
	if (t.n_buckets > TIMELINE_MAX_BUCKETS) {
		selector__free((struct selector *)q.sel);
		return api_error(a, 400, REJ_BAD_REQUEST,
				 "timeline of %zu buckets: more than %d, use a larger step",
				 t.n_buckets, TIMELINE_MAX_BUCKETS);
	}
	t.values = calloc(t.n_buckets, sizeof(*t.values));
	ret = t.values ? store__timeline(a->store, &q, t.from_ns, t.step_ns, t.n_buckets, t.values,
					 &t.profiles) : -ENOMEM;
	if (api_over_budget(a, q.sel)) {
		selector__free((struct selector *)q.sel);
		free(t.values);
		return;
	}
	selector__free((struct selector *)q.sel);
	if (ret < 0) {
		free(t.values);
		return api_error(a, 503, REJ_STORE, "timeline: %s", strerror(-ret));
	}
	sbuf_printf(&b, "{\"from\":%" PRIu64 ",\"step\":%" PRIu64 ",\"profiles\":%zu,\"values\":[",
		    (uint64_t)(t.from_ns / NSEC_PER_SEC), (uint64_t)(t.step_ns / NSEC_PER_SEC),
		    t.profiles);
	for (size_t i = 0; i < t.n_buckets; i++)
		sbuf_printf(&b, "%s%" PRId64, i ? "," : "", t.values[i]);
	sbuf_printf(&b, "]}");
	free(t.values);
	api_json(a, &b);
}
