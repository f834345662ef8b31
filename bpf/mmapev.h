/* SPDX-License-Identifier: MIT */
/*
 * bpf/mmapev.h — the code mappings of new programs, from the kernel's own mmap events.
 *
 * A machine that starts many short processes (a build, a shell loop) made the agent read
 * /proc/<pid>/maps and /proc/<pid>/stat for each one it sampled, and wake up early so that it
 * read them before the process exited. Instead, a dummy perf event per CPU asks the kernel for
 * PERF_RECORD_COMM (exec), PERF_RECORD_MMAP2 (executable mappings only, with device and inode:
 * the build-id is read from the file, see want_build_ids() in mmapev.c for why the kernel is not
 * asked for it), PERF_RECORD_FORK and PERF_RECORD_EXIT, as perf record does. A program exec'd since the agent
 * started has its mappings staged here from those records; its first sample adopts them into
 * the process table (proctab__set_loader), without a system call. Processes that were running
 * before, or whose records were lost, are read from /proc as before.
 *
 * The records are taken in time order with the samples (as perf report orders its events): up to
 * each sample's time, so a program that exited is unstaged once no sample can still need it.
 *
 * Bounded: CONFIG_BPF_MMAP_RING_KB of records per CPU (a full ring loses records: counted, and
 * the processes they could belong to are read from /proc), CONFIG_BPF_MMAP_PROCS programs
 * staged (when full, one already handed to the table is replaced first, else the oldest:
 * counted),
 * MMAPEV_MAPS mappings and MMAPEV_PATH_BYTES of paths each (more: read from /proc).
 */
#ifndef EDGEPROF_BPF_MMAPEV_H
#define EDGEPROF_BPF_MMAPEV_H

#include <stddef.h>
#include <stdint.h>

#include "agent/core/procmaps.h"

struct mmapev_stats {
	uint64_t execs;	   /* exec records (programs staged) */
	uint64_t forks;	   /* new processes staged with their parent's mappings */
	uint64_t adopted;  /* staged mappings handed to the process table (first sample, misses) */
	uint64_t evicted;  /* staged programs replaced while they could still be sampled */
	uint64_t overflow; /* programs with more mappings or path bytes than a stage holds */
	uint64_t lost;	   /* records the kernel could not write (ring full) */
	unsigned cpus;	   /* CPUs with an event open */
	uint64_t cpu_offline; /* events dropped: their CPU went offline (reopened once back) */
	int build_ids;	   /* 1: the kernel puts build-ids in the records (EDGEPROF_BPF_MMAP_BUILD_IDS=1) */
};

struct mmapev;

#ifdef CONFIG_BPF_MMAP_EVENTS
/*
 * One event per online CPU, system-wide. NULL with a reason in err when the kernel refuses
 * (perf_event_paranoid, no capability): the caller reads /proc for every process instead.
 * t: the process table whose entries an exec makes stale (proctab__forget).
 */
struct mmapev *mmapev__open(struct proctab *t, char *err, size_t errlen);
/*
 * Takes the records of everything that happened up to until_ns (CLOCK_MONOTONIC), in time
 * order: call it with each sample's time before the sample is symbolized, and with the time
 * now after the samples were drained. samples_done: every sample taken before until_ns has
 * been delivered (a time-ordered ring, or drained to the end), so programs that exited before
 * it need not stay staged.
 */
void mmapev__advance(struct mmapev *ev, uint64_t until_ns, bool samples_done);
/*
 * Adds the rings to epoll_fd (the sampler's: bpf_sampler__fd), readable when one is half full
 * (a machine starting programs faster than the samples wake the agent), so that records are
 * taken before the ring loses any. Nothing else: the waiter needs no event data from them.
 */
int mmapev__watch(struct mmapev *ev, int epoll_fd);
/*
 * CPU hotplug, every CPUS_RESCAN_NS: drops the event of a CPU that went offline (it stays off
 * even once the CPU is back) and opens one for each online CPU without one. A CPU back online
 * before the rescan ran programs whose records are missing: the staged programs are marked
 * incomplete (read from /proc), as for lost records. A stage already handed over in that window
 * (at most CPUS_RESCAN_NS) keeps what it had.
 */
void mmapev__rescan(struct mmapev *ev);
/*
 * The staged mappings of pid, handed over (a copy: the stage stays until the program exits, so
 * that mappings made after its first sample, the libraries ld.so maps, reach the table on a
 * miss); NULL when pid has not exec'd since the start (up to the last advance), its records
 * are incomplete, or nothing was mapped since the last time. Shaped as proctab_loader_fn.
 */
struct procmaps *mmapev__take(void *ev, uint32_t pid, unsigned int max_maps);
void mmapev__stats(const struct mmapev *ev, struct mmapev_stats *st);
void mmapev__free(struct mmapev *ev); /* NULL-safe */
#else
static inline struct mmapev *mmapev__open(struct proctab *t, char *err, size_t errlen)
{
	(void)t;
	if (err && errlen)
		err[0] = 0;
	return NULL;
}
static inline void mmapev__advance(struct mmapev *ev, uint64_t until_ns, bool samples_done) {}
static inline int mmapev__watch(struct mmapev *ev, int epoll_fd)
{
	return 0;
}
static inline void mmapev__rescan(struct mmapev *ev) {}
static inline struct procmaps *mmapev__take(void *ev, uint32_t pid, unsigned int max_maps)
{
	return NULL;
}
static inline void mmapev__stats(const struct mmapev *ev, struct mmapev_stats *st)
{
	*st = (struct mmapev_stats){0};
}
static inline void mmapev__free(struct mmapev *ev) {}
#endif

#endif /* EDGEPROF_BPF_MMAPEV_H */
