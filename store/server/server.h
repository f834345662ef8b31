/* SPDX-License-Identifier: MIT */
/*
 * store/server/server.h — the collector's network side: listeners (mutual TLS, optional plain HTTP),
 * one thread per connection up to a hard cap per listener (connections that have not yet
 * authenticated wait in the accept loop's poll until they speak, under a budget of their own:
 * server.c), and the API handlers (store/api*.c) they call.
 *
 * Why threads and not an event loop: a connection spends its time in three blocking things —
 * the TLS handshake (ECDHE + ECDSA, CPU), reading a body, and waiting for the ring's fsync
 * (group commit). mbedtls' blocking mode with our deadline-aware bio keeps the TLS state machine
 * mbedtls' own; an event loop would still need a worker pool for the fsync waits and the pprof
 * validation. The cap (--max-conns, CONFIG_COLLECTOR_MAX_CONNS) bounds threads and memory:
 * per connection a 256 KiB stack (virtual; a few pages touched), a 16 KiB read buffer, a 16 KiB
 * parsed head, mbedtls' two 16 KiB record buffers, and the body (<= CONFIG_COLLECTOR_MAX_BODY_KB).
 * Every request has a deadline (slowloris), every idle keep-alive connection a timeout.
 */
#ifndef EDGEPROF_STORE_SERVER_H
#define EDGEPROF_STORE_SERVER_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "port/http.h"
#include "store/api/duty.h"
#include "store/store.h"

struct server_opts {
	const char *listen;		/* mTLS HOST:PORT (NULL = none) */
	const char *tls_ca, *tls_cert, *tls_key;
	const char *http_listen;	/* plain HTTP HOST:PORT (NULL = off) */
	const char *http_token;		/* required on plain HTTP when set */
	struct store_opts store;
	const char *debuginfo_dir;	/* debug-file store (NULL = <ring>.debuginfo) */
	size_t max_body;		/* bytes */
	size_t max_debuginfo_body;	/* POST /api/0/debuginfo/<id>; 0 = Kconfig default */
	unsigned max_conns;		/* authenticated, per listener */
	unsigned max_handshakes;	/* unauthenticated, per listener; 0 = Kconfig default */
	unsigned request_timeout_ms;	/* whole request, head and body */
	unsigned idle_timeout_ms;	/* keep-alive wait for the next request */
	unsigned handshake_timeout_ms;
	struct duty_opts duty;		/* budget_percent 0 = no duty cycling */
};

enum reject_reason {
	REJ_BAD_REQUEST,	/* malformed HTTP, bad parameters, bad selector */
	REJ_BAD_PROFILE,	/* body is not a valid pprof (or has no samples) */
	REJ_TOO_LARGE,		/* body over the limit, gzip bomb */
	REJ_HEADER_TOO_LARGE,
	REJ_TIMEOUT,		/* request not complete before its deadline */
	REJ_UNAUTHORIZED,	/* plain HTTP without the token */
	REJ_NOT_FOUND,		/* unknown endpoint or id */
	REJ_METHOD,
	REJ_STORE,		/* the ring could not store it */
	REJ_BUSY,		/* connection cap reached */
	REJ_FORBIDDEN,		/* a device certificate on a path for operators */
	REJ__N,
};

enum tls_fail_reason { TLSF_NO_CERT, TLSF_BAD_CERT, TLSF_TIMEOUT, TLSF_OTHER, TLSF__N };

/* Why a scrape failed (port/fetch.h's enum fetch_fail, in its order, but FETCH_OK). */
#define SCRAPE_FAIL__N 6
extern const char *const scrape_fail_names[SCRAPE_FAIL__N];

struct server_metrics {
	atomic_uint_fast64_t requests, received, stored, duplicates, bytes_received;
	atomic_uint_fast64_t rejected[REJ__N];
	atomic_uint_fast64_t tls_handshakes, tls_resumed, tls_failures[TLSF__N];
	atomic_uint_fast64_t conns_total, conns_refused, conns_evicted;
	atomic_int conns_active, conns_preauth;
	/* the collector's own scrapes (store/scrape/scrape.h) */
	atomic_uint_fast64_t scrape_fetches, scrape_stored, scrape_baselines, scrape_bad_profile;
	atomic_uint_fast64_t scrape_failed[SCRAPE_FAIL__N];
	atomic_int scrape_targets, scrape_reload_errors;
};

extern const char *const reject_reason_names[REJ__N];
extern const char *const tls_fail_names[TLSF__N];

struct server;

struct server *server__new(const struct server_opts *o, char *err, size_t errlen);
/* Serves until server__stop(); then waits for connections to finish their request. 0/-errno. */
int server__run(struct server *s);
void server__stop(struct server *s);	/* async-signal-safe */
void server__free(struct server *s);	/* closes the store (syncs); NULL-safe */
int server__port(const struct server *s, bool tls);
/* A handler context on the server's store and metrics, for what the collector ingests itself
 * (its scrapes): device "" (none), peer the given name. api_reset() it after each use. */
struct api_ctx;
void server__api_ctx(struct server *s, struct api_ctx *a, const char *peer);

/* ---- handlers (store/api*.c) ---------------------------------------------------------------- */

/* A growable output buffer (JSON, metrics); oom sticks and turns the answer into a 500. */
struct sbuf {
	char *p;
	size_t len, cap;
	bool oom;
};
void sbuf_printf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sbuf_json_str(struct sbuf *b, const char *s);	/* quoted, escaped */
void sbuf_free(struct sbuf *b);

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
	/* the answer */
	int status;
	const char *content_type;
	unsigned char *body;	/* malloc'd unless body_static */
	size_t body_len;
	bool body_static;
	char extra[256];	/* extra header lines */
	size_t skipped;		/* a merge's profiles left out (unreadable, types that cannot merge) */
};

void api_handle(struct api_ctx *a);
/*
 * Roles: a device certificate uploads (and may ask /healthz and the version); everything that
 * reads what is stored needs an operator (a certificate with OU=operator, or the HTTP token).
 */
bool api_device_may(const char *method, const char *path);
void api_reset(struct api_ctx *a);	/* frees the answer */
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
struct store_query;
int api_query(struct api_ctx *a, struct store_query *q, char *type, size_t typelen);
/* Merges the request's selection into *p (*n profiles): 0, or -1 with the answer set (204 when
 * nothing matches). */
int api_merge_query(struct api_ctx *a, struct pprof_profile **p, size_t *n);
struct selector;
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
void api_timeline(struct api_ctx *a);

#endif /* EDGEPROF_STORE_SERVER_H */
