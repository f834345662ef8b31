/* SPDX-License-Identifier: MIT */
/*
 * agent/daemon/upload.h — the daemon's profiles to the collector (agent/transport/transport.h):
 * its options (--upload, --tls-*, --spool...), each profile handed over keyed by device, round
 * and sequence, and the fleet's duty cycle the collector schedules.
 * Without CONFIG_UPLOAD_MTLS: empty stubs (the options are unknown, every round samples).
 */
#ifndef EDGEPROF_AGENT_DAEMON_UPLOAD_H
#define EDGEPROF_AGENT_DAEMON_UPLOAD_H

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

#include "agent/core/output.h"
#include "agent/daemon/agent.h"

#ifdef CONFIG_UPLOAD_MTLS
/* Its options: entries {name, has_arg, help} of the agent's options table (main.c). */
#define AGENT_UPLOAD_OPTS                                                                 \
	{"upload", 1, "push each profile to this collector URL over mutual TLS"},            \
	{"tls-ca", 1, "the collector's CA certificate (pinned)"},                            \
	{"tls-cert", 1, "this device's certificate (its CN is the device)"},                 \
	{"tls-key", 1, "this device's private key"},                                         \
	{"spool", 1, "offline spool file for profiles that could not be uploaded"},          \
	{"spool-size", 1, "spool size (bytes, or K/M/G)"},
/* The transport's options' defaults (Kconfig's). */
void agent_upload__defaults(struct config *c);
/* Applies the transport's option name: 0, -EINVAL (said on stderr), -ENOENT: not one of its. */
int agent_upload__opt(struct config *c, const char *name, const char *v);
/* With --upload: the transport, or -EINVAL (said on stderr). */
int agent_upload__start(struct agent *a);
/* One encoded profile of service (type cpu, heap...) to the transport; err: encoding's. */
void agent_upload__submit_buf(struct agent *a, const char *service, const char *type,
			      const struct output_opts *o, struct pprof_buf *bp, int err);
/* One service's aggregate, encoded, to the transport (uploaded now, or spooled for later). */
void agent_upload__submit(struct agent *a, const char *service, const struct aggregate *agg,
			  const struct output_opts *o);
void agent_upload__poll(struct agent *a);
void agent_upload__stop(struct agent *a);
/* A round starting at start_s (wall clock, s) samples: the collector's duty-cycling schedule. */
bool agent_upload__round_samples(struct agent *a, uint64_t start_s);
/* The duty window a schedule told us to sample in that holds start_s, else 0. */
uint64_t agent_upload__told_window(struct agent *a, uint64_t start_s);
#else
#define AGENT_UPLOAD_OPTS
static inline void agent_upload__defaults(struct config *c)
{
}
static inline int agent_upload__opt(struct config *c, const char *name, const char *v)
{
	return -ENOENT;
}
static inline int agent_upload__start(struct agent *a)
{
	return 0;
}
static inline void agent_upload__submit_buf(struct agent *a, const char *service,
					    const char *type, const struct output_opts *o,
					    struct pprof_buf *bp, int err)
{
	free(bp->data);
}
static inline void agent_upload__submit(struct agent *a, const char *service,
					const struct aggregate *agg, const struct output_opts *o)
{
}
static inline void agent_upload__poll(struct agent *a)
{
}
static inline void agent_upload__stop(struct agent *a)
{
}
static inline bool agent_upload__round_samples(struct agent *a, uint64_t start_s)
{
	return true;
}
static inline uint64_t agent_upload__told_window(struct agent *a, uint64_t start_s)
{
	return 0;
}
#endif /* CONFIG_UPLOAD_MTLS */

#endif /* EDGEPROF_AGENT_DAEMON_UPLOAD_H */
