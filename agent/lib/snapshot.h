/* SPDX-License-Identifier: MIT */
/*
 * agent/lib/snapshot.h — one sample in CONFIG_SNAPSHOT_EVERY (per thread; EDGEPROF_SNAPSHOT_EVERY
 * at run time, 0 = none) also carries the interrupted registers and up to CONFIG_SNAPSHOT_BYTES
 * of the user stack from sp (pprof/snapshot.h's blob), written into the same ring record as its
 * frames: the ring is the bounded store (a record that does not fit is written without its
 * snapshot, counted). The collector unwinds it with the uploaded debug files.
 * armv7 only (CONFIG_ARCH_ARM): elsewhere the stubs below take none.
 */
#ifndef EDGEPROF_AGENT_SNAPSHOT_H
#define EDGEPROF_AGENT_SNAPSHOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct snapshot_stats {
	uint64_t taken;	  /* snapshots written into the ring */
	uint64_t no_room; /* due, but the ring had no room for them: the sample went without */
	uint64_t short_stack; /* stack copies cut short by the stack's end (normal near the top) */
};

#if defined(CONFIG_ARCH_ARM)
/* Reads EDGEPROF_SNAPSHOT_EVERY (default CONFIG_SNAPSHOT_EVERY). Not for signal handlers. */
void snapshot__init(void);
/* Async-signal-safe: whether this thread's sample is one to snapshot (*countdown is per thread). */
bool snapshot__due(unsigned int *countdown);
/* Bytes the blob of a snapshot needs at most. */
size_t snapshot__max_bytes(void);
/*
 * Async-signal-safe: writes the blob of the interrupted context uctx into out (at least
 * snapshot__max_bytes()): its length. stack_lo/hi bound the thread's stack (0/0: unknown, the
 * kernel checks the read).
 */
size_t snapshot__take(const void *uctx, uintptr_t stack_lo, uintptr_t stack_hi, uint8_t *out);
void snapshot__count_no_room(void);
void snapshot__stats(struct snapshot_stats *st);
#else
static inline void snapshot__init(void)
{
}
static inline bool snapshot__due(unsigned int *countdown)
{
	(void)countdown;
	return false;
}
static inline size_t snapshot__max_bytes(void)
{
	return 0;
}
static inline size_t snapshot__take(const void *uctx, uintptr_t stack_lo, uintptr_t stack_hi,
				    uint8_t *out)
{
	(void)uctx, (void)stack_lo, (void)stack_hi, (void)out;
	return 0;
}
static inline void snapshot__count_no_room(void)
{
}
static inline void snapshot__stats(struct snapshot_stats *st)
{
	*st = (struct snapshot_stats){0};
}
#endif /* CONFIG_ARCH_ARM */

#endif /* EDGEPROF_AGENT_SNAPSHOT_H */
