// SPDX-License-Identifier: MIT
/*
 * store/api/api-handler.c — what the API holds (the store, the debug-file store, the duty
 * cycler) and the handler it gives the server (struct server_handler, store/server/server.h):
 * one api_ctx per request, routed by api_handle() (store/api/api.c).
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/api/api.h"
#include "store/symbols/debuginfo.h"

struct api {
	struct store *store;
	struct debuginfo *debuginfo;
	struct duty *duty;
	struct regress_rules *regress_rules;
	struct server_metrics *metrics;
	size_t max_body;
	struct mem_charge rollup_mem;	/* the ring's compactor's share of the memory budget */
	struct pprof_budget rollup_budget;
};

void api__free(struct api *api)
{
	if (!api)
		return;
	regress_rules__free(api->regress_rules); /* its thread reads the store */
	store__free(api->store);
	debuginfo__free(api->debuginfo);
	duty__free(api->duty);
	free(api);
}

static int api__open_debuginfo(struct api *api, const struct api_opts *o, char *err,
			       size_t errlen)
{
	char dir[PATH_MAX];
	struct debuginfo_opts dopts = { .dir = o->debuginfo_dir };

	if (!dopts.dir) {
		snprintf(dir, sizeof(dir), "%s.debuginfo", o->store.path);
		dopts.dir = dir;
	}
	api->debuginfo = debuginfo__open(&dopts, err, errlen);
	return api->debuginfo ? 0 : -1;
}

struct api *api__new(const struct api_opts *o, struct server_metrics *m, char *err,
		     size_t errlen)
{
	struct api *api = calloc(1, sizeof(*api));
	struct store_opts so = o->store;

	if (!api) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}

	api->metrics = m;
	api->max_body = o->max_body;
	/* the compactor decodes and merges stored profiles too: as a query does, in the budget */
	api->rollup_mem.b = &m->mem;
	mem_charge__query(&api->rollup_mem);
	api->rollup_budget = (struct pprof_budget){ .take = mem_charge__take,
						    .give = mem_charge__give,
						    .ctx = &api->rollup_mem };
	so.rollup.budget = &api->rollup_budget;
	api->store = store__open(&so, err, errlen);
	if (!api->store || api__open_debuginfo(api, o, err, errlen))
		goto out_free;
	if (o->duty.budget_percent) {
		api->duty = duty__new(&o->duty, err, errlen);
		if (!api->duty)
			goto out_free;
	}
	api->regress_rules = regress_rules__new(api->store, &o->regress, err, errlen);
	if (!api->regress_rules && err[0])
		goto out_free;
	return api;

out_free:
	api__free(api);
	return NULL;
}

void api__ctx(struct api *api, struct api_ctx *a, const char *peer)
{
	memset(a, 0, sizeof(*a));
	a->store = api->store;
	a->debuginfo = api->debuginfo;
	a->metrics = api->metrics;
	a->device = "";
	a->peer = peer;
	a->max_body = api->max_body;
	a->regress_rules = api->regress_rules;
	a->mem.b = &api->metrics->mem;
}

/* server_handler.handle: the request through the routes, its answer handed to the server. */
static void api__serve(void *ctx, const struct server_request *r, struct server_answer *an)
{
	struct api *api = ctx;
	struct api_ctx a;

	api__ctx(api, &a, r->peer);
	a.duty = api->duty;
	a.req = r->msg;
	a.device = r->device;
	a.mem = *r->mem; /* the body's charge: the decode adds to it */
	api_handle(&a);
	*r->mem = a.mem; /* the server gives it back after the answer */
	*an = a.ans;
}

static void api__free_handler(void *ctx)
{
	api__free(ctx);
}

struct server_handler api__handler(struct api *api)
{
	return (struct server_handler){ .ctx = api, .device_may = api_device_may,
					.handle = api__serve, .free = api__free_handler };
}
