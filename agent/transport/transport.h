/* SPDX-License-Identifier: MIT */
/*
 * agent/transport/transport.h — gets every round's profile to the collector: upload now when the link is
 * up, otherwise keep it in the offline spool (flash) and drain the spool oldest first, in order,
 * once the exponential backoff (with jitter) allows another attempt.
 *
 * Order: a profile never overtakes an older one. While anything waits in the spool (or the
 * backoff runs), a new profile goes to the spool too, behind the others.
 * Exactly once: a spooled profile is consumed only after the collector acknowledged it; a crash
 * between the acknowledgement and the consume marker re-sends it, and its idempotency key makes
 * that re-send a no-op at the collector.
 * Without CONFIG_SPOOL a profile that cannot be uploaded is dropped and counted.
 *
 * Threads: not thread-safe; one thread (the agent's main loop) calls it. submit() and poll()
 * block for at most the upload timeout per request.
 *
 * Devices without a real-time clock: an item stamped with clock_unset carries a monotonic time;
 * it is sent with the label clock=unset (and age_s, its age at upload when known), and the
 * collector places it at receive time.
 */
#ifndef EDGEPROF_AGENT_TRANSPORT_H
#define EDGEPROF_AGENT_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/transport/item.h"
#include "agent/transport/upload.h"

struct transport_opts {
	struct upload_opts upload;
	const char *spool_path;		/* NULL = no spool (also without CONFIG_SPOOL) */
	uint64_t spool_size;		/* bytes; 0 = CONFIG_SPOOL_KB */
	uint64_t backoff_min_ns;	/* 0 = 2 s */
	uint64_t backoff_max_ns;	/* 0 = 10 min */
	unsigned batch_max;		/* uploads per transport__poll(); 0 = 64 */
};

struct transport_stats {
	uint64_t submitted;
	uint64_t uploaded;		/* acknowledged by the collector */
	uint64_t spooled;		/* written to the spool */
	uint64_t from_spool;		/* uploaded out of the spool */
	uint64_t dropped_permanent;	/* refused for good by the collector (4xx) */
	uint64_t dropped_spool_full;	/* evicted from the spool before they could be sent */
	uint64_t dropped_no_spool;	/* upload failed and there was no spool to keep it */
	uint64_t dropped_too_big;	/* larger than the whole spool */
	uint64_t dropped_corrupt;	/* spool records that failed their CRC on read */
	uint64_t spool_pending;		/* records waiting now */
	uint64_t spool_bytes;		/* bytes they take */
	uint64_t backoff_ns;		/* current backoff, 0 when the link is fine */
	unsigned failures;		/* consecutive failed attempts */
	struct upload_stats upload;
};

struct transport;

/* Kconfig defaults: CONFIG_UPLOAD_URL, spool size CONFIG_SPOOL_KB (no spool path). */
void transport_opts__init(struct transport_opts *o);
/*
 * Applies one of the agent's transport flags by its long name without dashes: "upload",
 * "tls-ca", "tls-cert", "tls-key", "spool", "spool-size" (bytes, or K/M/G suffix). value is
 * kept by reference. 0, -ENOENT (not a transport flag) or -EINVAL (bad value).
 */
int transport_opts__set(struct transport_opts *o, const char *name, const char *value);
/* "1048576", "1024K", "1M", "1G" -> bytes: 0 or -EINVAL. */
int transport_parse_size(const char *s, uint64_t *out);

/* NULL on error with the reason in err (bad URL, certificate files, spool file). */
struct transport *transport__new(const struct transport_opts *opts, char *err, size_t errlen);
/* NULL-safe; closes the connection, syncs the spool. */
void transport__free(struct transport *t);

/*
 * Hands over one profile (data is copied or written out before the call returns). Returns 0 when
 * it was uploaded or spooled, -EAGAIN when the upload failed and there is no spool (dropped,
 * counted), -EPERM when the collector refused it for good (dropped, counted), -EFBIG when it
 * does not fit in the spool, -EINVAL for a bad item, or -errno from the spool.
 */
int transport__submit(struct transport *t, const struct transport_item *item);

/*
 * Drains the spool when the backoff allows (now = CLOCK_MONOTONIC ns): uploads up to batch_max
 * records oldest first and closes the connection after the batch. Returns how many were
 * acknowledged, or -errno from the spool.
 */
int transport__poll(struct transport *t, uint64_t now);

/* CLOCK_MONOTONIC ns at which poll() has something to do; UINT64_MAX when the spool is empty. */
uint64_t transport__next_poll_ns(const struct transport *t);
/* Nothing waits in the spool. */
bool transport__idle(const struct transport *t);
void transport__stats(const struct transport *t, struct transport_stats *st);

/*
 * Whether a round starting now (unix seconds) samples under the fleet's duty-cycling schedule
 * (the collector's answer to the last upload, collector --duty-percent): without one, always
 * (the configured rounds); in the schedule's window, as it says; before this device's next
 * window, no; in it, yes; once that window passed with no new schedule (the collector
 * unreachable), with probability budget % (the fleet's budget kept on average, uncoordinated).
 */
bool transport__sample_round(const struct transport *t, uint64_t now_s);
/* The duty window a round started at start_s was told to sample in, else 0 (upload.h). */
uint64_t transport__told_window(const struct transport *t, uint64_t start_s);

/* This device's name: its certificate's CN (the collector's device label; prefix of keys). */
const char *transport__device(const struct transport *t);

/* The next connection does a full TLS handshake (benchmarks). */
void transport__forget_session(struct transport *t);

/* Fills time_ns and clock_unset for a profile made now. */
void transport_item__stamp(struct transport_item *item);

/* Backoff after n consecutive failures: min * 2^(n-1) capped at max, then "equal jitter"
 * (half fixed, half uniform random) so a fleet that lost its collector does not return in step. */
uint64_t transport_backoff_ns(unsigned failures, uint64_t min_ns, uint64_t max_ns);

#endif /* EDGEPROF_AGENT_TRANSPORT_H */
