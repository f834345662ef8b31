/* SPDX-License-Identifier: MIT */
/*
 * agent/transport/upload.h — HTTPS POST of one gzip pprof to the collector over mutual TLS.
 *
 *   POST /api/0/profiles?service=S&type=T&labels=k=v,k=v    X-Edgeprof-Key: KEY
 *
 * One uploader holds one TLS client configuration (CA pinned, device certificate and key) and at
 * most one open connection: requests of a batch reuse it (HTTP keep-alive), and a new connection
 * resumes the last TLS session so a weak CPU pays the full handshake about once a day, not once a
 * round. Every step has a deadline (timeout_ms from the start of the request).
 *
 * Results are classified for the caller's retry policy: UPLOAD_OK (2xx: stored, or a duplicate
 * key the collector already has), UPLOAD_RETRY (network, TLS, timeouts, 408, 429, 5xx: keep the
 * profile and try later), UPLOAD_PERMANENT (any other 4xx: the collector will never take this
 * profile; drop and count it). State changes (connected, unreachable, certificate refused) are
 * logged once each, not once per retry.
 */
#ifndef EDGEPROF_AGENT_UPLOAD_H
#define EDGEPROF_AGENT_UPLOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define UPLOAD_MAX_LABELS 32	/* labels per profile, ours included */
#define UPLOAD_MAX_RESPONSE (64u * 1024) /* collector replies are small JSON documents */

enum upload_result {
	UPLOAD_OK = 0,
	UPLOAD_RETRY = 1,
	UPLOAD_PERMANENT = 2,
};

/* The uploader's view of the collector, for logging once per change. */
enum upload_state {
	UPLOAD_STATE_UNKNOWN = 0,
	UPLOAD_STATE_CONNECTED,
	UPLOAD_STATE_UNREACHABLE,	/* connect/handshake/IO failed or timed out, or 5xx */
	UPLOAD_STATE_CERT_REFUSED,	/* a certificate was refused (by us or by the collector) */
};

struct upload_label {
	const char *key;	/* [A-Za-z0-9_.-]+ */
	const char *value;	/* no ',' '=' '{' '}' (they separate labels on the wire) */
};

struct upload_opts {
	const char *url;	/* https://HOST[:PORT][/], HOST a name, IPv4 or [IPv6] */
	const char *ca_file;	/* the collector's CA, pinned: nothing else is trusted */
	const char *cert_file;	/* this device's certificate (its CN becomes the device label) */
	const char *key_file;
	unsigned timeout_ms;	/* per request, connect and handshake included; 0 = 15 s */
};

struct upload_req {
	const char *service;
	const char *type;	/* "cpu" */
	const char *key;	/* idempotency key, sent as X-Edgeprof-Key (NULL = none) */
	const struct upload_label *labels;
	size_t n_labels;
	const void *data;	/* the gzip pprof */
	size_t len;
};

struct upload_stats {
	uint64_t requests;	/* POSTs attempted */
	uint64_t ok, retry, permanent;
	uint64_t connects;	/* TCP connections opened */
	uint64_t handshakes, resumed;	/* TLS handshakes, and how many resumed a session */
	uint64_t reused;	/* requests sent on a kept-alive connection */
	uint64_t bytes_out;	/* HTTP bytes written (head + body), before TLS framing */
	uint64_t handshake_cpu_ns; /* process CPU time inside handshakes (full + resumed) */
	uint64_t full_cpu_ns, resumed_cpu_ns; /* the same, split by kind */
	int last_status;	/* HTTP status of the last response, 0 when none */
};

/*
 * The fleet's duty-cycling schedule the collector answered with (collector --duty-percent):
 * whether to sample in the window [window_start, +window_s) and when this device's next window
 * starts (unix seconds), and the budget for the agent's own default once it expired.
 */
struct upload_schedule {
	bool valid, sample;
	uint64_t window_s, window_start, next_start;
	unsigned budget_percent;
};

struct uploader;

/* NULL on error with the reason (bad URL, unreadable or invalid PEM file) in err. */
struct uploader *upload__new(const struct upload_opts *opts, char *err, size_t errlen);
void upload__free(struct uploader *u);	/* NULL-safe; closes the connection */

/* Posts one profile; see enum upload_result. upload__error() tells why it was not UPLOAD_OK. */
enum upload_result upload__post(struct uploader *u, const struct upload_req *req);
const char *upload__error(const struct uploader *u);
/* The last answer's Retry-After in seconds (a 429 or 503 that had one), else 0. */
unsigned upload__retry_after(const struct uploader *u);

/* Ends a batch: closes the kept-alive connection (the TLS session stays for resumption). */
void upload__close(struct uploader *u);
/* Forgets the TLS session: the next connection does a full handshake (benchmarks). */
void upload__forget_session(struct uploader *u);

enum upload_state upload__state(const struct uploader *u);
/* This device's identity: the CN of its certificate (what the collector labels it with). */
const char *upload__device(const struct uploader *u);
/* The subject CN of a PEM certificate file: 0, -EINVAL (unreadable), -ENOENT, -ENAMETOOLONG. */
int upload_cert_cn(const char *path, char *buf, size_t len);
void upload__stats(const struct uploader *u, struct upload_stats *st);
/* The last schedule received (valid false when none was). */
void upload__schedule(const struct uploader *u, struct upload_schedule *s);
/*
 * The duty window (unix s / window) a profile taken at t_s was sampled in when a schedule told
 * this device to sample then (one of the last UPLOAD_TOLD windows told), else 0: sent as the
 * duty_window label, so that the collector weighs only profiles taken under its schedule.
 */
#define UPLOAD_TOLD 4
uint64_t upload__told_window(const struct uploader *u, uint64_t t_s);
/* Reads a collector answer's "schedule" object; false when there is none. */
bool upload_schedule__parse(const char *body, struct upload_schedule *s);

/* Validates a label for the wire: 0 or -EINVAL. */
int upload_label__check(const char *key, const char *value);

#endif /* EDGEPROF_AGENT_UPLOAD_H */
