// SPDX-License-Identifier: MIT
/*
 * store/api/api-debuginfo.c — the debug-file store's endpoints and the symbolization of exports.
 *
 *   POST /api/0/debuginfo/<build-id>   body: the unstripped ELF file (at most the body limit)
 *   GET  /api/0/debuginfo              {"code":200,"body":[{"build_id":"..","size":N},...]}
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "port/log.h"
#include "store/symbols/debuginfo.h"
#include "store/api/api.h"

#define DEBUGINFO_PREFIX "/api/0/debuginfo/"

void api_debuginfo_put(struct api_ctx *a)
{
	const char *build_id = a->req->path + strlen(DEBUGINFO_PREFIX);
	struct sbuf b = { 0 };
	char err[256] = "";
	int ret;

	if (!debuginfo__valid_build_id(build_id))
		return api_error(a, 400, REJ_BAD_REQUEST,
				 "build-id '%s' is not 2..80 lowercase hex digits", build_id);
	ret = debuginfo__put(a->debuginfo, build_id, a->req->body, a->req->body_len, err,
			     sizeof(err));
	/* 413 says too large: a full store or disk is 507, a disk that may clear says when */
	if (ret == -EDQUOT)
		return api_error(a, 507, REJ_STORE, "%s (CONFIG_COLLECTOR_DEBUGINFO_TOTAL_MB)", err);
	if (ret == -ENOSPC) {
		api_error(a, 507, REJ_STORE, "%s", err);
		snprintf(a->ans.extra, sizeof(a->ans.extra), "Retry-After: 60\r\n");
		return;
	}
	if (ret == -EINVAL)
		return api_error(a, 400, REJ_BAD_REQUEST, "debug file refused: %s", err);
	if (ret)
		return api_error(a, 503, REJ_STORE, "%s", err);
	pr_info("%s: debug file %s stored (%zu bytes)", a->peer, build_id, a->req->body_len);
	sbuf_printf(&b, "{\"code\":200,\"body\":{\"build_id\":");
	sbuf_json_str(&b, build_id);
	sbuf_printf(&b, ",\"size\":%zu}}", a->req->body_len);
	api_json(a, &b);
}

struct list_ctx {
	struct sbuf *b;
	size_t n;
};

static int list_one(void *ctx, const char *build_id, uint64_t size)
{
	struct list_ctx *l = ctx;

	sbuf_printf(l->b, "%s{\"build_id\":", l->n++ ? "," : "");
	sbuf_json_str(l->b, build_id);
	sbuf_printf(l->b, ",\"size\":%" PRIu64 "}", size);
	return 0;
}

void api_debuginfo_list(struct api_ctx *a)
{
	struct sbuf b = { 0 };
	struct list_ctx l = { .b = &b };
	int ret;

	sbuf_printf(&b, "{\"code\":200,\"body\":[");
	ret = debuginfo__list(a->debuginfo, list_one, &l);
	if (ret < 0) {
		sbuf_free(&b);
		return api_error(a, 503, REJ_STORE, "listing debug files: %s", strerror(-ret));
	}
	sbuf_printf(&b, "]}");
	api_json(a, &b);
}

/*
 * The copy's bound: p's tables, and for every location a function and a name it may gain
 * (pprof_symbolize keeps one function per name; a name from .symtab is rarely over 64 bytes,
 * and a longer one is one of few).
 */
size_t api_symbolize_mem(struct api_ctx *a, const struct pprof_profile *p)
{
	if (!debuginfo__names_any(a->debuginfo, p))
		return 0;
	return pprof_profile__mem(p) + p->n_locations * (sizeof(struct pprof_function) + 64);
}

struct pprof_profile *api_symbolize(struct api_ctx *a, struct pprof_profile *p)
{
	struct pprof_profile *named = NULL;
	size_t n = 0;
	int ret = debuginfo__symbolize(a->debuginfo, p, &named, &n);

	if (ret)
		pr_warn("%s: symbolization failed (%s): the profile goes out unsymbolized", a->peer,
			strerror(-ret));
	if (!named)
		return p;
	pr_debug("%s: %zu locations symbolized from debug files", a->peer, n);
	pprof_profile__free(p);
	return named;
}
