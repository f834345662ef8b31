/* SPDX-License-Identifier: MIT */
/*
 * agent/daemon/heap.h — heap profiles of the SIGPROF producers that record them: each one's
 * table (<registry>/<pid>.heap beside its ring, agent/core/heapfile.h) read at the round's end,
 * one heap profile per service. Without CONFIG_PROFILE_HEAP: empty stubs.
 */
#ifndef EDGEPROF_AGENT_DAEMON_HEAP_H
#define EDGEPROF_AGENT_DAEMON_HEAP_H

#include <errno.h>

#include "agent/core/output.h"
#include "agent/daemon/agent.h"

#ifdef CONFIG_PROFILE_HEAP
/*
 * The heap profile of service's producers now (service NULL: every producer's): a snapshot of
 * their tables (alloc_* since each started, inuse_* now), one sample per stack and process,
 * encoded into buf. -ENOENT when none of them records the heap.
 */
int agent_heap__encode(struct agent *a, const char *service, struct output_opts o,
		       struct pprof_buf *buf);
/* The service's heap profile, written and submitted like the CPU profile. */
void agent_heap__round(struct agent *a, const struct service *s, struct output_opts o);
/* A producer that is gone leaves no heap table (killed before its destructor ran). */
void agent_heap__forget(struct agent *a, unsigned int ring);
#else
static inline int agent_heap__encode(struct agent *a, const char *service,
				     struct output_opts o, struct pprof_buf *buf)
{
	return -ENOENT;
}
static inline void agent_heap__round(struct agent *a, const struct service *s,
				     struct output_opts o)
{
}
static inline void agent_heap__forget(struct agent *a, unsigned int ring)
{
}
#endif /* CONFIG_PROFILE_HEAP */

#endif /* EDGEPROF_AGENT_DAEMON_HEAP_H */
