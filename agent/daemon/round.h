/* SPDX-License-Identifier: MIT */
/*
 * agent/daemon/round.h — the services' aggregates, and a round's profiles written out: one
 * pprof per service and kind into the output directory and to the transport.
 */
#ifndef EDGEPROF_AGENT_DAEMON_ROUND_H
#define EDGEPROF_AGENT_DAEMON_ROUND_H

#include "agent/core/output.h"
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
void agent__services_free(struct agent *a);

/* Writes each service's profiles of the round that lasted duration_ns. */
void agent__write_round(struct agent *a, uint64_t duration_ns);

/*
 * One encoded profile of service (heap, or scraped) to where profiles go: the output directory
 * (<service>-<type>-<time>-<n>.pb.gz, written atomically) and the transport. err: the encoder's.
 * Frees bp's data.
 */
void agent__ship(struct agent *a, const char *service, const char *type,
		 const struct output_opts *o, struct pprof_buf *bp, int err);

#endif /* EDGEPROF_AGENT_DAEMON_ROUND_H */
