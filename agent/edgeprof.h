/* SPDX-License-Identifier: MIT */
/*
 * edgeprof.h — the public interface of libedgeprof.so, the in-process CPU sampler.
 *
 * Preloaded:  LD_PRELOAD=libedgeprof.so EDGEPROF_OUTPUT=/tmp/cpu.pb.gz ./program
 * Linked in:  cc ... -ledgeprof, then edgeprof_start() / edgeprof_stop().
 *
 * Environment (read by edgeprof_start(), which the preloaded library calls by itself):
 *   EDGEPROF_HZ=n          samples per CPU-second of each thread (default: CONFIG_SAMPLE_HZ)
 *   EDGEPROF_OUTPUT=path   standalone: write a pprof (gzip) there at exit ("%p" = pid,
 *                          "%t" = the profile type: cpu, heap, wall; without "%t" the first
 *                          of cpu, wall, heap recorded gets PATH, the others PATH.<type>.pb.gz);
 *                          without it, samples go to the agent through a shared ring
 *   EDGEPROF_PROFILES=cpu,heap,wall  what to record (default cpu); heap: sampled allocations
 *                          (alloc/inuse objects and bytes; with the agent, a snapshot per round);
 *                          wall: every thread's wall time, running or waiting (no signal to a
 *                          waiting thread: agent/lib/wall.h)
 *   EDGEPROF_HEAP_RATE=n   mean bytes between sampled allocations (default 524288)
 *   EDGEPROF_SERVICE=name  service of the profile (default: the program's name)
 *   EDGEPROF_REGISTRY=dir  where rings live for the agent (default /dev/shm/edgeprof)
 *   EDGEPROF_RING_KB=n     ring size (default CONFIG_RING_KB)
 *   EDGEPROF_UNWIND=fp|cfi frame pointers only, or leaf frame from .eh_frame (default cfi)
 *   EDGEPROF_SNAPSHOT_EVERY=n  armv7: one sample in n of a thread also carries its registers and
 *                          stack for the collector to unwind (default CONFIG_SNAPSHOT_EVERY, 0:
 *                          none); EDGEPROF_SNAPSHOT_BYTES=n the stack copied (CONFIG_SNAPSHOT_BYTES);
 *                          EDGEPROF_SNAPSHOTS_MAX=n standalone: kept for the whole run (default
 *                          CONFIG_SNAPSHOTS_PER_ROUND). See docs/transport.md.
 *   EDGEPROF_SIGNAL=rt|prof|n  the timers' signal (default CONFIG_SAMPLER_SIGNAL_*: SIGRTMAX-2)
 *   EDGEPROF_DISABLE=1     do nothing
 *
 * Every thread is sampled by its own CPU-time timer (threads created later too, through the
 * library's pthread_create). Each sample weighs the CPU time it stands for (timer overruns
 * included), so the profile's cpu total matches the process's CPU time.
 *
 * fork(): timers are not inherited, so a forked child is not sampled (it starts clean and
 * writes nothing at exit); after exec the preloaded library starts again in the new program.
 */
#ifndef EDGEPROF_H
#define EDGEPROF_H

#ifdef __cplusplus
extern "C" {
#endif

/* Starts sampling every thread of the process: 0 or -errno (-EALREADY when running). */
int edgeprof_start(void);
/* Stops sampling; in standalone mode writes the profile. Safe to call twice. */
void edgeprof_stop(void);

/*
 * Tags the samples taken on this thread until the matching pop, like Go's pprof.Do:
 * key and value are copied. 0, or -ENOSPC when the thread's label stack is full (8 pairs /
 * 240 bytes) or the process's table of distinct label sets is full.
 */
int edgeprof_labels_push(const char *key, const char *value);
void edgeprof_labels_pop(void);

#ifdef __cplusplus
}
#endif

#endif /* EDGEPROF_H */
