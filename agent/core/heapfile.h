/* SPDX-License-Identifier: MIT */
/*
 * agent/core/heapfile.h — the heap profiler's stack table (agent/lib/heap.h), laid out so that the agent
 * can read it: with an agent, libedgeprof.so keeps it in <registry>/<pid>.heap (shared memory,
 * beside the process's ring) and the agent turns a snapshot of it into each round's heap
 * profile; standalone, the same layout lives in anonymous memory and is written at exit.
 *
 * Why a snapshot, not ring records: in-use memory is a state (what was sampled and not yet
 * freed), not a stream of events. Sending every sampled allocation and every free of a sampled
 * block through the ring would cost ring space per free and lose the state on any drop; the
 * table is bounded (CONFIG_HEAP_STACKS), and the agent reads it once per round.
 *
 * Concurrency: the producer changes a stack's counters with atomic adds under its own lock and
 * publishes a new stack by storing n_frames last (release); the reader loads n_frames (acquire)
 * and every counter atomically, so each value is whole, though two values of one stack may be
 * a few allocations apart.
 */
#ifndef EDGEPROF_AGENT_HEAPFILE_H
#define EDGEPROF_AGENT_HEAPFILE_H

#include <stddef.h>
#include <stdint.h>

#include "agent/core/output.h"

#define HEAPFILE_MAGIC 0x70616568u /* "heap" */
#define HEAPFILE_VERSION 1

struct heapfile_hdr {
	uint32_t magic, version;
	uint32_t pid, max_depth;
	uint64_t rate;	      /* mean bytes between samples */
	uint64_t stack_slots; /* power of two; at most half are used */
	uint64_t samples, stacks_dropped, live_overflow, truncated, n_stacks, n_live; /* atomics */
};

struct heapfile_stack {
	uint32_t hash;
	uint16_t n_frames; /* published last: 0 = free slot */
	uint16_t pad;
	uint64_t samples;
	/* unbiased totals (atomics): objects in thousandths, so small weights add up */
	int64_t alloc_mobjects, alloc_bytes, inuse_mobjects, inuse_bytes;
};

struct heapfile_view {
	struct heapfile_hdr *h;
	struct heapfile_stack *stacks;
	uint64_t *frames; /* max_depth per slot */
};

/* Bytes of a table with that many slots and frames per stack. */
size_t heapfile__size(uint64_t stack_slots, unsigned int max_depth);
/* Points v into a mapping of len bytes: 0, or -EINVAL when it is not a whole heap table. */
int heapfile__view(void *map, size_t len, struct heapfile_view *v);

/* The pprof kind: alloc_objects, alloc_space, inuse_objects, inuse_space; period space/bytes. */
void heapfile__kind(const struct heapfile_view *v, struct output_kind *k);
/*
 * Appends the table's stacks to st (values 4 per stack in vals), at most max: returns how many.
 * Stacks whose four values are all zero are left out.
 */
size_t heapfile__collect(const struct heapfile_view *v, struct output_stack *st, int64_t *vals,
			 size_t max);
/* The counters as a profile comment. */
void heapfile__comment(const struct heapfile_view *v, char *buf, size_t len);

/* Maps path read-only (the agent): 0 or -errno; heapfile__unmap undoes it. */
int heapfile__map(const char *path, void **map, size_t *len, struct heapfile_view *v);
void heapfile__unmap(void *map, size_t len);

#endif /* EDGEPROF_AGENT_HEAPFILE_H */
