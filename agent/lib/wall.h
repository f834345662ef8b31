/* SPDX-License-Identifier: MIT */
/*
 * agent/lib/wall.h — wall-clock profiles in libedgeprof.so (EDGEPROF_PROFILES=wall), without any
 * signal of its own: a blocked thread is never interrupted, so no system call of the program
 * returns EINTR because of it (agent/README.md, "Wall-clock profiles").
 *
 * A thread's wall time is the CPU time its CPU-clock timer samples (agent/lib/sigprof.c: those
 * records count in the wall profile too) plus the rest, which a ticker thread charges every
 * period: the wall time since the last tick less what the thread's CPU samples stood for
 * meanwhile, to the stack it waits in. That stack is the one of the blocking
 * call it is in (the library interposes the blocking calls of libc and libpthread: their entry
 * leaves the registers of a frame that stays put while the call blocks, and the ticker unwinds
 * from them through process_vm_readv), else the stack of its last CPU sample.
 */
#ifndef EDGEPROF_AGENT_WALL_H
#define EDGEPROF_AGENT_WALL_H

#include <errno.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent/lib/unwind.h"

struct ring;

struct wall_opts {
	struct ring *ring;  /* where the ticker writes the blocked time */
	uint64_t period_ns; /* the ticker's period (1e9 / EDGEPROF_HZ) */
	enum unwind_mode unwind;
	unsigned int max_depth;
	pid_t pid;
};

struct wall_stats {
	uint64_t ticks, late_ticks;  /* ticker passes; those a full period late or more */
	uint64_t threads, untracked; /* threads tracked now; threads beyond CONFIG_WALL_THREADS */
	uint64_t call_ns, last_ns;   /* blocked time charged: to a blocking call's stack, to the
					thread's last CPU sample */
	uint64_t unattributed_ns;    /* wall time not in the profile: threads with no stack known
					yet, the last tick of each */
	uint64_t torn;		     /* walks of a call that ended while the ticker read it */
	uint64_t dropped;	     /* records the ring had no room for */
};

#ifdef CONFIG_PROFILE_WALL
/* Maps the thread table (CONFIG_WALL_THREADS slots): 0 or -errno. */
int wall__start(const struct wall_opts *o);
/* The ticker: run it on a thread of its own (not itself a tracked thread); returns at stop. */
void *wall__main(void *unused);
/* Ends the ticker's loop (the caller joins its thread); records nothing more. */
void wall__stop(void);
/* Tracks a thread: the calling one (self != 0), or another one by tid (existing threads). */
void wall__thread_add(pid_t tid, int self);
void wall__thread_end(void);
/* From the CPU sampler's handler (async-signal-safe): this thread's latest stack. */
void wall__note(const uint64_t *frames, unsigned int n, uint32_t labels_id, uint64_t weight_ns);
void wall__stats(struct wall_stats *st);
#else
static inline int wall__start(const struct wall_opts *o)
{
	return -ENOTSUP;
}
static inline void *wall__main(void *unused)
{
	return NULL;
}
static inline void wall__stop(void)
{
}
static inline void wall__thread_add(pid_t tid, int self)
{
}
static inline void wall__thread_end(void)
{
}
static inline void wall__note(const uint64_t *frames, unsigned int n, uint32_t labels_id,
			      uint64_t weight_ns)
{
}
static inline void wall__stats(struct wall_stats *st)
{
	*st = (struct wall_stats){0};
}
#endif /* CONFIG_PROFILE_WALL */

#endif /* EDGEPROF_AGENT_WALL_H */
