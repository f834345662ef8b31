/* SPDX-License-Identifier: MIT */
/*
 * agent/core/aggregate.h — the per-round stack table: (pid, tid, label set, kernel/user frames) →
 * sample count and CPU weight. Preallocated and bounded (entries, frame pool, label sets);
 * what does not fit is dropped and counted, never allocated.
 */
#ifndef EDGEPROF_AGENT_AGGREGATE_H
#define EDGEPROF_AGENT_AGGREGATE_H

#include <stddef.h>
#include <stdint.h>

#include "agent/core/sample.h"

struct agg_opts {
	size_t max_entries;    /* 0: CONFIG_STACK_TABLE_ENTRIES */
	size_t max_frames;     /* frame pool; 0: max_entries * 32 */
	size_t max_label_sets; /* 0: 256 */
	size_t label_bytes;    /* label blob pool; 0: 16 KiB */
	size_t max_snapshots;  /* samples kept with their snapshot; 0: CONFIG_SNAPSHOTS_PER_ROUND */
};

struct agg_entry {
	uint32_t pid, tid;
	uint32_t labels; /* 0 = none, else aggregate__labels() id */
	uint16_t n_kernel, n_user;
	uint16_t flags;
	uint64_t count, weight_ns;
	const uint64_t *frames; /* n_kernel kernel frames then n_user user frames, leaf first */
	const uint8_t *snapshot; /* SAMPLE_F_SNAPSHOT: one sample's (count 1), else NULL */
	uint32_t snapshot_len;
};

struct agg_stats {
	uint64_t samples, weight_ns; /* accepted */
	uint64_t dropped_table, dropped_frames, dropped_labels, truncated;
	uint64_t snapshots;	    /* samples kept with their snapshot: each an entry of its own */
	uint64_t dropped_snapshots; /* beyond max_snapshots: kept without it, aggregated */
	size_t entries;
};

struct aggregate;

/*
 * Entries for a round of seconds at hz samples a CPU-second on cpus CPUs: as many as the CPU
 * samples it can take (each adds one entry at most), so that no short process's stack is
 * dropped for want of room, and CONFIG_STACK_TABLE_ENTRIES at least; at most 2^20. The table's
 * memory is touched only as it fills (an entry ~60 bytes and its frames).
 */
size_t aggregate__entries_for(unsigned long hz, unsigned long cpus, unsigned long seconds);

struct aggregate *aggregate__new(const struct agg_opts *opts);
void aggregate__free(struct aggregate *a); /* NULL-safe */

/* Adds one sample: 0, or -ENOSPC when a bound dropped it (counted). Labels with s->comm. */
int aggregate__add(struct aggregate *a, const struct agent_sample *s);
/* sample_sink_fn adapter: ctx is the struct aggregate *. */
int aggregate__sink(void *ctx, const struct agent_sample *s);

/* Visits every entry; stops at fn's first nonzero return and returns it. */
int aggregate__foreach(const struct aggregate *a, int (*fn)(void *ctx, const struct agg_entry *e),
		       void *ctx);
/* The label set of id as n pairs (keys[i], values[i]); 0 pairs for id 0 or unknown ids. */
size_t aggregate__labels(const struct aggregate *a, uint32_t id, const char **keys,
			 const char **values, size_t max);
void aggregate__stats(const struct aggregate *a, struct agg_stats *st);
/* Empties the table for the next round (keeps the memory). */
void aggregate__reset(struct aggregate *a);

#endif /* EDGEPROF_AGENT_AGGREGATE_H */
