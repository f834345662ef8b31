/* SPDX-License-Identifier: MIT */
/*
 * store/server/server.h — the collector's network side: listeners (mutual TLS, optional plain HTTP),
 * one thread per connection up to a hard cap per listener (connections that have not yet
 * authenticated wait in the accept loop's poll until they speak, under a budget of their own:
 * server.c), and the handler they call for each request read whole (struct server_handler:
 * store/main.c sets the API's, store/api/; this layer includes nothing from it).
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
#include "store/server/mem-budget.h"

struct server_opts {
	const char *listen;		/* mTLS HOST:PORT (NULL = none) */
	const char *tls_ca, *tls_cert, *tls_key;
	const char *http_listen;	/* plain HTTP HOST:PORT (NULL = off) */
	const char *http_token;		/* required on plain HTTP when set */
	size_t max_body;		/* bytes */
	size_t max_debuginfo_body;	/* POST /api/0/debuginfo/<id>; 0 = Kconfig default */
	unsigned max_conns;		/* authenticated, per listener */
	unsigned max_handshakes;	/* unauthenticated, per listener; 0 = Kconfig default */
	unsigned request_timeout_ms;	/* whole request, head and body */
	unsigned idle_timeout_ms;	/* keep-alive wait for the next request */
	unsigned handshake_timeout_ms;
	size_t mem_total;		/* bodies and decodes of all requests (--decode-mem) */
	size_t mem_request;		/* of one request (--request-mem) */
	size_t mem_query;		/* of one query's merge and render (--query-mem) */
	unsigned query_timeout_ms;	/* a query's merge and render (0 = no bound) */
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
	atomic_uint_fast64_t time_clamped;	/* profiles dated ahead of our clock: now */
	/* samples with a stack snapshot (store/symbols/snapunwind.h), and those unwound exactly */
	atomic_uint_fast64_t snapshots, snapshots_exact;
	struct mem_budget mem;	/* uploads' bodies and decodes (store/server/mem-budget.h) */
};

extern const char *const reject_reason_names[REJ__N];
extern const char *const tls_fail_names[TLSF__N];

/* An answer the server writes: a handler's, or the server's own refusal. */
struct server_answer {
	int status;
	const char *content_type;
	unsigned char *body;	/* malloc'd unless body_static */
	size_t body_len;
	bool body_static;
	char extra[256];	/* extra header lines */
};

/* Sets the answer; body is malloc'd (taken over) unless is_static. */
void server_answer__set(struct server_answer *an, int status, const char *ctype, void *body,
			size_t len, bool is_static);
void server_answer__reset(struct server_answer *an);	/* frees the body */
/*
 * Sets a JSON error answer {"code":N,"error":"..."}, counts it under r in m and logs it
 * (5xx each, 4xx rate-limited) as "peer [device D] path: N message" (path NULL: "(request)").
 */
void server_answer__verror(struct server_answer *an, struct server_metrics *m, const char *peer,
			   const char *device, const char *path, int status, enum reject_reason r,
			   const char *fmt, va_list ap) __attribute__((format(printf, 8, 0)));

/* One request read whole, from an authenticated peer. */
struct server_request {
	const struct http_message *msg;
	const char *device;	/* client certificate CN; "" on the plain-HTTP listener */
	const char *peer;	/* "ip:port", for log lines */
	struct mem_charge *mem;	/* what the request holds (its body); the handler adds to it */
};

/* What answers requests (the API, store/api/api.h): set once before server__run(). */
struct server_handler {
	void *ctx;
	/*
	 * Roles: whether a device certificate may ask this (else it needs an operator: a
	 * certificate with OU=operator, or the HTTP token). Asked on the head, before the body.
	 */
	bool (*device_may)(const char *method, const char *path);
	/* Answers one request into an (zeroed before; reset by the server after writing it). */
	void (*handle)(void *ctx, const struct server_request *r, struct server_answer *an);
	/* Called by server__free() once no connection runs (NULL: the server does not own ctx). */
	void (*free)(void *ctx);
};

struct server;

/* Opens the listeners; set the handler (server__set_handler) before server__run(). */
struct server *server__new(const struct server_opts *o, char *err, size_t errlen);
/* Serves until server__stop(); then waits for connections to finish their request. 0/-errno. */
int server__run(struct server *s);
void server__stop(struct server *s);	/* async-signal-safe */
void server__free(struct server *s);	/* frees the handler too (its free); NULL-safe */
int server__port(const struct server *s, bool tls);
void server__set_handler(struct server *s, const struct server_handler *h);
/* The server's counters, which the handler adds to (received, stored, rejected, scrapes). */
struct server_metrics *server__metrics(struct server *s);

#endif /* EDGEPROF_STORE_SERVER_H */
