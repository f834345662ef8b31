/* SPDX-License-Identifier: MIT */
/*
 * port/fetch.h — GET of one URL (http:// or https:// with mutual TLS), one request per
 * connection, every step before one deadline, the body bounded: the scrapers' client (the
 * agent's --scrape, the collector's --scrape-targets).
 */
#ifndef EDGEPROF_PORT_FETCH_H
#define EDGEPROF_PORT_FETCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "port/http.h"

struct tls_config;

/* The connect's own bound within the deadline: a LAN or loopback peer answers far sooner. */
#define FETCH_CONNECT_S 3

/* What one fetch did, for the caller's counters. */
enum fetch_fail {
	FETCH_OK = 0,
	FETCH_BAD_URL,		/* not http(s)://HOST:PORT/..., or https without a TLS config */
	FETCH_CONNECT,		/* refused, unreachable, no route: the target is down */
	FETCH_TLS,		/* the handshake failed (certificate refused either way) */
	FETCH_IO,		/* reading or writing failed, or the deadline passed */
	FETCH_TOO_BIG,		/* the body is larger than max_body */
	FETCH_STATUS,		/* an answer other than 200 (m->status says which) */
};

/*
 * GETs url (http://HOST:PORT/PATH?QUERY or https://...; tls must be a client configuration for
 * https) before deadline_ns (CLOCK_MONOTONIC) and reads the whole answer into m (free with
 * http_message__reset), its body at most max_body bytes. Returns FETCH_OK only for a 200, else
 * the failure with a message in err.
 */
enum fetch_fail fetch_get(const char *url, struct tls_config *tls, uint64_t deadline_ns,
			  size_t max_body, struct http_message *m, char *err, size_t errlen);

/*
 * The same, telling on_fd(ctx, fd) the connected socket before any I/O on it and -1 before it is
 * closed: another thread may shutdown() it meanwhile to end a long fetch at once (a stopping
 * scraper).
 */
typedef void (*fetch_fd_fn)(void *ctx, int fd);
enum fetch_fail fetch_get_fd(const char *url, struct tls_config *tls, uint64_t deadline_ns,
			     size_t max_body, struct http_message *m, fetch_fd_fn on_fd, void *ctx,
			     char *err, size_t errlen);
/* The same, with the https server certificate's CN into peer_cn (left "" over http). */
enum fetch_fail fetch_get_peer(const char *url, struct tls_config *tls, uint64_t deadline_ns,
			       size_t max_body, struct http_message *m, fetch_fd_fn on_fd,
			       void *ctx, char *peer_cn, size_t cnlen, char *err, size_t errlen);

/* Splits an http(s) URL: 0 or -EINVAL. path gets the rest from the first '/' ("/" if none). */
int fetch_split_url(const char *url, bool *https, char *host, size_t hostlen, char *port,
		    size_t portlen, char *path, size_t pathlen);

#endif /* EDGEPROF_PORT_FETCH_H */
