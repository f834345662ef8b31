/* SPDX-License-Identifier: MIT */
/*
 * agent/daemon/services.h — the services' aggregates (one per service and kind, made on first
 * use), the samplers' way into them, and where a finished profile goes (the output directory
 * and the transport). Below every feature's glue: the samplers (bpf.c, sigprof-rings.c), the
 * profilers (heap.c, scrape-loop.c) and the round (round.c) call down into it, never the
 * reverse.
 */
#ifndef EDGEPROF_AGENT_DAEMON_SERVICES_H
#define EDGEPROF_AGENT_DAEMON_SERVICES_H

#include "agent/core/output.h"
#include "agent/core/sample.h"
#include "agent/daemon/agent.h"
#include "agent/daemon/stats.h"

/* The counters of a CPU profile's aggregate (struct agg_stats), for its comment. */
extern const struct stat_field agg_stat_fields[];
extern const size_t n_agg_stat_fields;

/* The service's aggregates, made on first use; NULL beyond MAX_SERVICES (counted). */
struct service *agent__service(struct agent *a, const char *name);
/* Its aggregate of kind (KIND_WALL, KIND_OFFCPU), made on first use; NULL without memory. */
struct aggregate *agent__service_kind(struct agent *a, struct service *s, int kind);
/* Empties every service's aggregates: a round starts. */
void agent__services_reset(struct agent *a);
/*
 * A round's profiles written (or its samples thrown away): the interpreter frame names pinned
 * to it (agent/core/framename.h) may go, unless a pulled profile begun in or before it still
 * holds its samples (pull_finish releases them).
 */
void agent__names_round_done(struct agent *a);
void agent__services_free(struct agent *a);

/* A CPU sample of service, into the profile a pull asked for while one is sampled. */
void agent__pull_add(struct agent *a, const struct agent_sample *s, const char *service);

/*
 * One encoded profile of service (heap, or scraped) to where profiles go: the output directory
 * (<service>-<type>-<time>-<n>.pb.gz, written atomically) and the transport. err: the encoder's.
 * Frees bp's data.
 */
void agent__ship(struct agent *a, const char *service, const char *type,
		 const struct output_opts *o, struct pprof_buf *bp, int err);

#endif /* EDGEPROF_AGENT_DAEMON_SERVICES_H */
