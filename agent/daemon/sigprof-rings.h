/* SPDX-License-Identifier: MIT */
/*
 * agent/daemon/sigprof-rings.h — the shared-memory rings of the SIGPROF producers (processes
 * running libedgeprof.so): found in the registry directory, drained into the services'
 * aggregates, paused between rounds, and closed once their producer exited and they are empty.
 */
#ifndef EDGEPROF_AGENT_DAEMON_SIGPROF_RINGS_H
#define EDGEPROF_AGENT_DAEMON_SIGPROF_RINGS_H

#include <stdbool.h>
#include <stdint.h>

#include "agent/daemon/agent.h"

/* One service's rings, summed for its round profile's comments. */
struct rings_round {
	uint64_t dropped_full, torn;	   /* since each ring was opened */
	uint64_t skipped, blocking, aside; /* the producers' misses (agent/lib/sigctl.h) */
	unsigned int rings;		   /* rings of the service */
	uint32_t hz;			   /* the rate of the last of them */
};

/* Opens rings that appeared in the registry directory. */
void agent_rings__scan(struct agent *a);
/* Drains every ring; rings of processes that exited are closed and removed once empty. */
void agent_rings__drain(struct agent *a, bool final);
/* SIGPROF producers stop taking samples (their rings' flag), or start again. */
void agent_rings__pause(struct agent *a, bool paused);
void agent_rings__round(struct agent *a, const char *service, struct rings_round *rr);
void agent_rings__free(struct agent *a);

#endif /* EDGEPROF_AGENT_DAEMON_SIGPROF_RINGS_H */
