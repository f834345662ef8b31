/* SPDX-License-Identifier: MIT */
/*
 * agent/daemon/pull.h — pull mode: the agent serves Go's on-demand profile endpoints to operators,
 *
 *   GET /debug/pprof/profile?seconds=N   CPU profile of the next N seconds (default 30)
 *   GET /debug/pprof/heap                heap of the producers that record it (404 when none)
 *   GET /debug/pprof/                    the index of the above
 *
 * over mutual TLS (the device certificate as the server's, made with `edgeprof certs device DIR
 * ID --server-ip IP`; the client needs an operator certificate of the same CA, OU=operator), so
 * that `go tool pprof -tls_ca ca.crt -tls_cert op.crt -tls_key op.key https://gw:port/...` opens
 * a profile straight from a device.
 *
 * Bounded: at most CONFIG_PULL_PENDING connections wait for their first byte (without a
 * thread) and CONFIG_PULL_CONNS are served at once, a thread each, one request per connection;
 * the handshake has CONFIG_PULL_HANDSHAKE_MS, each later step a deadline; the main loop makes
 * one profile at a time (requests take turns); N is at most CONFIG_PULL_MAX_SECONDS; nothing is read from a client before
 * its certificate is verified, and only a request head (HTTP_HEAD_MAX) after. The profile is
 * made by the agent's main loop (its samplers and rings): the server thread posts what it needs
 * (pull__pending) and waits for pull__answer.
 */
#ifndef EDGEPROF_AGENT_PULL_H
#define EDGEPROF_AGENT_PULL_H

#include <stddef.h>
#include <stdint.h>

enum pull_kind {
	PULL_NONE = 0,
	PULL_CPU,	/* a CPU profile of `seconds` from now */
	PULL_HEAP,	/* the heap profile now */
};

struct pull_opts {
	const char *listen;	/* HOST:PORT; loopback or the device's address */
	const char *ca_file;	/* the fleet's CA: clients must present a certificate it signed */
	const char *cert_file;	/* this device's certificate (with serverAuth: see above) */
	const char *key_file;
};

struct pull_stats {
	uint64_t conns;		/* connections accepted */
	uint64_t refused_tls;	/* handshake failed: no certificate, a bad one, a timeout */
	uint64_t refused_role;	/* a valid certificate without OU=operator (403) */
	uint64_t refused_busy;	/* closed: CONFIG_PULL_CONNS connections served already */
	uint64_t requests;	/* requests read */
	uint64_t profiles;	/* profiles sent (200) */
	uint64_t errors;	/* other answers (400, 404, 405, 503) */
};

struct pull_server;

#ifdef CONFIG_PULL_SERVER
/* Listens and starts the server thread. NULL with the reason in err. */
struct pull_server *pull__new(const struct pull_opts *o, char *err, size_t errlen);
/* NULL-safe: stops the thread (a request in progress is answered 503) and closes the socket. */
void pull__free(struct pull_server *p);
/* The port it listens on (for --pull-listen 127.0.0.1:0). */
int pull__port(const struct pull_server *p);

/* Main loop: the request waiting for a profile, or PULL_NONE; seconds for PULL_CPU. */
enum pull_kind pull__pending(struct pull_server *p, unsigned *seconds);
/*
 * Main loop: the answer to the pending request. status 200 with a gzip pprof, or an error status
 * with a one-line text. The data is copied: the caller keeps it.
 */
void pull__answer(struct pull_server *p, int status, const void *data, size_t len);
void pull__stats(struct pull_server *p, struct pull_stats *st);
#else
static inline struct pull_server *pull__new(const struct pull_opts *o, char *err, size_t errlen)
{
	return NULL;
}
static inline void pull__free(struct pull_server *p)
{
}
static inline int pull__port(const struct pull_server *p)
{
	return -1;
}
static inline enum pull_kind pull__pending(struct pull_server *p, unsigned *seconds)
{
	return PULL_NONE;
}
static inline void pull__answer(struct pull_server *p, int status, const void *data, size_t len)
{
}
static inline void pull__stats(struct pull_server *p, struct pull_stats *st)
{
}
#endif /* CONFIG_PULL_SERVER */

#endif /* EDGEPROF_AGENT_PULL_H */
