/* SPDX-License-Identifier: MIT */
/*
 * agent/daemon/pull-loop.h — the main loop's side of pull mode (agent/daemon/pull.h): it
 * samples what the server thread asked for (a CPU profile of N seconds from now, the heap now)
 * and answers it. Without CONFIG_PULL_SERVER: empty stubs.
 */
#ifndef EDGEPROF_AGENT_DAEMON_PULL_LOOP_H
#define EDGEPROF_AGENT_DAEMON_PULL_LOOP_H

#include <stddef.h>
#include <stdint.h>

#include "agent/daemon/agent.h"

struct agent_sample;

#ifdef CONFIG_PULL_SERVER
/* Its option: an entry {name, has_arg, help} of the agent's options table (main.c). */
#define AGENT_PULL_OPTS                                                                   \
	{"pull-listen", 1, "serve /debug/pprof/ to operators over mutual TLS at HOST:PORT"},
/* With --pull-listen: the server, or -EINVAL (said on stderr). */
int agent_pull__start(struct agent *a);
/* Main loop: starts or finishes what the pull server asked for. */
void agent_pull__poll(struct agent *a, uint64_t now);
/* Appends " pull: conns=..." (the server's counters since start) to the string in buf. */
void agent_pull__comment(struct agent *a, char *buf, size_t len);
/* At exit: the counters said, the server stopped. */
void agent_pull__stop(struct agent *a);
#else
#define AGENT_PULL_OPTS
static inline int agent_pull__start(struct agent *a)
{
	return 0;
}
static inline void agent_pull__poll(struct agent *a, uint64_t now)
{
}
static inline void agent_pull__comment(struct agent *a, char *buf, size_t len)
{
}
static inline void agent_pull__stop(struct agent *a)
{
}
#endif /* CONFIG_PULL_SERVER */

#endif /* EDGEPROF_AGENT_DAEMON_PULL_LOOP_H */
