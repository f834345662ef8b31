/* SPDX-License-Identifier: MIT */
/*
 * store/api/api.h — the collector's API: the routes (store/api/api.c), the ingest paths
 * (api-ingest.c), /metrics, render and debug files (api-*.c), and what they share: the handler
 * context, the output buffer, the common ingest path. It sits above the server
 * (store/server/server.h: listeners, TLS, HTTP), which calls it through the struct
 * server_handler that api__handler() fills and store/main.c hands over; the server includes
 * nothing from here.
 */
#ifndef EDGEPROF_STORE_API_H
#define EDGEPROF_STORE_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "port/http.h"
#include "pprof/pprof.h"
#include "store/api/duty.h"
#include "store/api/regress-rules.h"
#include "store/api/sbuf.h"
#include "store/server/server.h"
#include "store/store.h"

struct selector;

/* What the API opens: the store, the debug-file store and the duty cycler. */
struct api_opts {
	struct store_opts store;
	const char *debuginfo_dir;	/* debug-file store (NULL = <ring>.debuginfo) */
	size_t max_body;		/* a profile's bytes (--max-body) */
	struct duty_opts duty;		/* budget_percent 0 = no duty cycling */
	struct regress_rules_opts regress; /* --regression-rule (n 0: none) */
};

struct api;

/* Opens what o names, counting into m (the server's): NULL with the reason in err. */
struct api *api__new(const struct api_opts *o, struct server_metrics *m, char *err,
		     size_t errlen);
void api__free(struct api *api);	/* closes the store (syncs); NULL-safe */
/* The handler that answers the server's requests; its free is api__free(). */
struct server_handler api__handler(struct api *api);


struct api_ctx {
	struct store *store;
	struct debuginfo *debuginfo;
	struct duty *duty;	/* NULL = no schedules in upload answers */
	struct duty_schedule sched;	/* the uploading device's, with has_sched */
	bool has_sched;
	struct server_metrics *metrics;
	const struct http_message *req;
	const char *device;	/* client certificate CN; "" on the plain-HTTP listener */
	const char *peer;	/* "ip:port", for log lines */
	size_t max_body;
	struct server_answer ans;	/* the answer */
	size_t skipped;		/* a merge's profiles left out (unreadable, odd types) */
	struct regress_rules *regress_rules;	/* NULL: no --regression-rule */
	struct mem_charge mem;	/* what this request holds of the upload memory budget */
	struct pprof_budget query; /* a query's: mem as take/give, and its deadline */
};

/* A handler context on the API's store and metrics, for what the collector ingests itself
 * (its scrapes): device "" (none), peer the given name. api_reset() it after each use. */
void api__ctx(struct api *api, struct api_ctx *a, const char *peer);

void api_handle(struct api_ctx *a);
/*
 * Roles: a device certificate uploads (and may ask /healthz and the version); everything that
 * reads what is stored needs an operator (a certificate with OU=operator, or the HTTP token).
 */
bool api_device_may(const char *method, const char *path);
void api_reset(struct api_ctx *a);	/* frees the answer, gives back its decode memory */
/* Sets a JSON error answer {"code":N,"error":"..."} and counts it under r. */
void api_error(struct api_ctx *a, int status, enum reject_reason r, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
void api_json(struct api_ctx *a, struct sbuf *b);	/* takes b's buffer as a 200 answer */
/* Sets the answer; body is malloc'd (taken over) unless is_static. */
void api_set_body(struct api_ctx *a, int status, const char *ctype, void *body, size_t len,
		  bool is_static);
/* Query parameter name into out: 1 present, 0 absent, -1 bad (answer set). */
int api_param(struct api_ctx *a, const char *name, char *out, size_t outlen);
/* Fills q from query=/service=/labels=/type=/from=/to=/limit=: 0, or -1 with the answer set.
 * The caller frees q->sel. */
int api_query(struct api_ctx *a, struct store_query *q, char *type, size_t typelen);
/* Merges the request's selection into *p (*n profiles): 0, or -1 with the answer set (204 when
 * nothing matches). */
int api_merge_query(struct api_ctx *a, struct pprof_profile **p, size_t *n);
/*
 * The budget of this request's query (store_query.budget): its memory under --query-mem, taken
 * from the global budget, and --query-timeout-ms from now. The request's charge is given back
 * when it is answered.
 */
const struct pprof_budget *api_query_budget(struct api_ctx *a);
/* Takes bytes more for the query (a render, an encoding): 0, or -1 with the answer set. */
int api_query_take(struct api_ctx *a, size_t bytes);
/*
 * A query's refusal by its budget as the answer: 413 over --query-mem, 503 + Retry-After when
 * the global budget is full, 503 past --query-timeout-ms (counted). True when ret was one.
 */
bool api_query_refused(struct api_ctx *a, int ret, const char *what, const char *err);
bool api_over_budget(struct api_ctx *a, const struct selector *sel);

/*
 * Validates and stores one profile (every ingest path ends here): the device label comes from
 * the certificate, never from the client; the time from created (ns, 0 = the profile's own time,
 * else receive time). Sets the answer on error and returns -errno; on success *seq, *dup.
 */
struct ingest {
	const char *service, *type, *key;
	struct record_label labels[STORE_MAX_LABELS];
	size_t n_labels;
	int64_t created_ns;
};
int api_store_profile(struct api_ctx *a, struct ingest *in, const void *body, size_t len,
		      uint64_t *seq, bool *dup, int64_t *time_ns);

void api_pyroscope_ingest(struct api_ctx *a);
void api_alloy_push(struct api_ctx *a);
void api_metrics(struct api_ctx *a);
void api_render(struct api_ctx *a);	/* store/api/api-render.c */
void api_render_file(struct api_ctx *a);
#define API_MAX_DECODED (64u << 20) /* a profile may expand to this much (gzip bombs) */
/*
 * Decodes and validates a request's profile (pprof, gzip or raw; with folded_ok also folded
 * text): 0, or -errno with the error answer set (400 malformed or no samples, 413 a limit).
 * merge: samples that differ only in their values are merged (pprof_read_limits).
 */
int api_read_profile(struct api_ctx *a, const void *body, size_t len, bool folded_ok,
		     bool merge, struct pprof_profile **p);
void api_debuginfo_put(struct api_ctx *a);	/* store/api/api-debuginfo.c */
void api_debuginfo_list(struct api_ctx *a);
/* The profile to export: p symbolized with the debug-file store when it can name anything
 * (p is then freed), else p itself. */
struct pprof_profile *api_symbolize(struct api_ctx *a, struct pprof_profile *p);
/* What api_symbolize(p) will allocate, for the query's budget: 0 when it makes no copy. */
size_t api_symbolize_mem(struct api_ctx *a, const struct pprof_profile *p);
void api_timeline(struct api_ctx *a);
void api_regressions(struct api_ctx *a);	/* store/api/api-regress.c */
void api_regression_rules(struct api_ctx *a);

#endif /* EDGEPROF_STORE_API_H */
