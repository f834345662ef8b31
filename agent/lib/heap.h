/* SPDX-License-Identifier: MIT */
/*
 * agent/lib/heap.h — libedgeprof.so's heap profiler: sampled allocation tracking.
 *
 * The library interposes malloc, calloc, realloc, reallocarray, free, posix_memalign,
 * aligned_alloc, memalign, valloc and pvalloc (C++ new/delete reach them through libstdc++),
 * forwarding each to the next definition (the C library's, whatever it is: glibc or musl).
 * Allocations are sampled as a Poisson process over the bytes allocated (mean rate R,
 * CONFIG_HEAP_SAMPLE_BYTES or EDGEPROF_HEAP_RATE): an allocation of s bytes is sampled with
 * probability 1 - exp(-s/R), so each sample weighs 1/(1 - exp(-s/R)) allocations (Go's
 * runtime/pprof and gperftools unbias the same way). A sampled allocation's stack is walked by
 * the CPU sampler's unwinder (from the malloc call, not a signal) and the allocation is kept in
 * a bounded table of live sampled blocks until free(): the profile has alloc_objects/count,
 * alloc_space/bytes (everything since start) and inuse_objects/count, inuse_space/bytes (what is
 * still allocated when it is written).
 *
 * Bounded: CONFIG_HEAP_STACKS distinct stacks, CONFIG_HEAP_LIVE_ENTRIES live sampled blocks
 * (both mmap'ed at start; pages are touched as they fill). A sample beyond a bound is counted
 * (stacks_dropped, live_overflow) and its weight is missing from the profile.
 */
#ifndef EDGEPROF_AGENT_HEAP_H
#define EDGEPROF_AGENT_HEAP_H

#include <errno.h>
#include <stdint.h>

#include "agent/core/output.h"
#include "agent/lib/unwind.h"

struct heap_opts {
	uint64_t rate;		 /* mean bytes between samples */
	const char *shared_path; /* the table where the agent reads it (agent/core/heapfile.h); NULL:
				    private (standalone) */
	enum unwind_mode unwind;
	unsigned int max_depth;
};

/* What the sampler's thread knows of the calling thread's stack (agent/lib/sigprof.c): 0/0 unknown. */
void sigprof__stack_bounds(uintptr_t *lo, uintptr_t *hi);

#ifdef CONFIG_PROFILE_HEAP
#define HEAP_DEFAULT_RATE CONFIG_HEAP_SAMPLE_BYTES
/* Starts sampling allocations: 0 or -errno (-ENOMEM: the tables could not be mapped). */
int heap__start(const struct heap_opts *o);
/* Stops sampling (the tables stay for heap__write_file); unlinks the shared table if any. */
void heap__stop(void);
/* Writes the heap profile (gzip pprof) of this process to path: 0 or -errno. */
int heap__write_file(struct output_opts *o, const char *path);
#else
#define HEAP_DEFAULT_RATE 524288
static inline int heap__start(const struct heap_opts *o)
{
	return -ENOTSUP;
}
static inline void heap__stop(void)
{
}
static inline int heap__write_file(struct output_opts *o, const char *path)
{
	return -ENOTSUP;
}
#endif /* CONFIG_PROFILE_HEAP */

#endif /* EDGEPROF_AGENT_HEAP_H */
