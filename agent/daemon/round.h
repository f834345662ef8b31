/* SPDX-License-Identifier: MIT */
/*
 * agent/daemon/round.h — a round's profiles written out: one pprof per service and kind into
 * the output directory and to the transport (agent/daemon/services.h), with each feature's
 * counters as comments.
 */
#ifndef EDGEPROF_AGENT_DAEMON_ROUND_H
#define EDGEPROF_AGENT_DAEMON_ROUND_H

#include <stdint.h>

#include "agent/daemon/agent.h"

/*
 * Writes each service's profiles of the round that lasted duration_ns, saying its losses in
 * words; returns how many CPU, wall and off-CPU profiles it wrote (0: nothing was sampled).
 */
unsigned agent__write_round(struct agent *a, uint64_t duration_ns);

#endif /* EDGEPROF_AGENT_DAEMON_ROUND_H */
