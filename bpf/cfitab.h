/* SPDX-License-Identifier: MIT */
/*
 * bpf/cfitab.h — the CFI tables the BPF program unwinds user stacks with (CONFIG_BPF_CFI).
 *
 * The kernel walks user stacks by frame pointers, and code built without them (Debian's
 * libraries and programs, most firmware) gives a few frames under a junk root. The program
 * walks instead by rows of call frame information: for each code mapping of a process, the
 * rules of its file's .eh_frame (elf/cfi.c), packed 8 bytes a row (bpf/profile.h) behind a
 * page index of the file's code (an entry per page: the rule at its start, and the rows that
 * start later in it), one array for every file (CONFIG_BPF_CFI_ROWS entries: a file's rows are
 * loaded once, shared by every process that maps it), and per process the sorted list of its
 * code mappings (CONFIG_BPF_CFI_PROCS processes, PROFILE_CFI_MAPS mappings each).
 *
 * A process is listed at its fourth sample (the sampler calls cfitab__want()), from the maps
 * the agent took from the kernel's mmap records for its samples (cfitab__set_maps()), else
 * read from /proc/<pid>/maps; until then and when it does not fit (rows full, too many
 * mappings, a file with too many rows) its samples are walked by frame pointers as before:
 * counted, never walked by a partial table. A walk that meets a pc in no listed mapping
 * (dlopen, exec) makes the process be read again from /proc (cfitab__stale(), at most once a
 * second). Exited processes leave the map every few seconds (cfitab__sweep()). When rows are
 * needed, the files no listed process maps go first (least recently used), then the
 * processes sampled least lately of those listed 10 s ago or sampled far less than the one
 * that wants room (they are listed again at their next samples); a process that found no
 * room is tried again once its samples have doubled.
 */
#ifndef EDGEPROF_BPF_CFITAB_H
#define EDGEPROF_BPF_CFITAB_H

#include <stdbool.h>
#include <stdint.h>

#include <linux/types.h>

#include "bpf/profile.h"

struct cfitab_stats {
	uint64_t procs;        /* processes listed now */
	uint64_t loads;        /* times a process was listed (again) */
	uint64_t maps_known;   /* listings from the agent's maps (mmap records): no /proc read */
	uint64_t unfit;        /* times a process was left to frame pointers: a bound */
	uint64_t no_room;      /* of those, for want of room (tried again sooner, see cfitab.c) */
	uint64_t fp_built;     /* times a program built with frame pointers was left to them */
	uint64_t procs_evicted; /* listed processes dropped to make room (listed again later) */
	uint64_t partial;      /* listings with a file too big for the array: its frames end walks */
	uint64_t files;        /* files whose rows are loaded now */
	uint64_t files_unfit;  /* files too big for the search or the array */
	uint64_t files_evicted; /* files dropped to make room */
	uint64_t no_table;     /* files without a usable .eh_frame: frame pointers there */
	uint64_t rows;         /* rows in use, of CONFIG_BPF_CFI_ROWS */
	uint64_t pages;        /* entries of the files' page indexes in the same array */
	uint64_t rows_unfit;   /* rules a row cannot say (kept as "no rule": the walk ends there) */
	uint64_t load_ns;      /* time spent building and loading tables */
	uint64_t walks[CFI_END_MAX]; /* samples walked by tables, by why the walk ended */
	uint64_t cached;       /* walks whose callers came from the thread's last walk */
	uint64_t cache_changed; /* walks that matched the last one where a stack word had changed */
};

struct cfitab;
struct procmaps;

/*
 * Where a process's maps come from when it is listed at its fourth sample: the agent's copy
 * (the kernel's mmap records, already read for its samples), or NULL: /proc/<pid>/stat and
 * maps are read (the only source for a process listed again after a walk found no mapping).
 * The maps returned stay valid until the listing ends.
 */
typedef const struct procmaps *(*cfitab_maps_fn)(void *ctx, uint32_t pid);

#ifdef CONFIG_BPF_CFI
/*
 * rows_fd: the cfi_rows array (max_rows; mmapable: created BPF_F_MMAPABLE); procs_fd: the
 * cfi_procs array and slots_fd the cfi_slots hash (max_procs each); maybe_fd: cfi_maybe.
 */
struct cfitab *cfitab__new(int rows_fd, bool mmapable, int procs_fd, int slots_fd,
			   int maybe_fd, unsigned int max_rows, unsigned int max_procs,
			   unsigned int max_files);
/*
 * The sample of pid (comm: the sample's) was walked by frame pointers: list it at its fourth
 * such sample, unless tried lately with that comm (an exec changes it: a fork listed before
 * its exec is listed again).
 */
void cfitab__want(struct cfitab *c, uint32_t pid, const char *comm);
/* Where a process's maps come from when it is listed (cfitab__set_maps). */
void cfitab__set_maps(struct cfitab *c, cfitab_maps_fn fn, void *ctx);
/* A walk of pid met a pc in no listed mapping: read its maps again (at most once a second). */
void cfitab__stale(struct cfitab *c, uint32_t pid, const char *comm);
/*
 * Counts a walk's end (profile_event.cfi_end) and its use of the walk cache (flags), and the
 * sample to pid's share (a process sampled more may take the room of one sampled less).
 */
void cfitab__count(struct cfitab *c, uint32_t pid, uint32_t end, uint32_t flags);
/* Drops the processes that exited from the map (their files stay until room is needed). */
void cfitab__sweep(struct cfitab *c);
void cfitab__stats(const struct cfitab *c, struct cfitab_stats *st);
void cfitab__free(struct cfitab *c); /* NULL-safe */
#else
static inline struct cfitab *cfitab__new(int rows_fd, bool mmapable, int procs_fd,
					 int slots_fd, int maybe_fd, unsigned int max_rows,
					 unsigned int max_procs, unsigned int max_files)
{
	return NULL;
}
static inline void cfitab__set_maps(struct cfitab *c, cfitab_maps_fn fn, void *ctx) {}
static inline void cfitab__want(struct cfitab *c, uint32_t pid, const char *comm) {}
static inline void cfitab__stale(struct cfitab *c, uint32_t pid, const char *comm) {}
static inline void cfitab__count(struct cfitab *c, uint32_t pid, uint32_t end, uint32_t flags)
{
}
static inline void cfitab__sweep(struct cfitab *c) {}
static inline void cfitab__stats(const struct cfitab *c, struct cfitab_stats *st)
{
	*st = (struct cfitab_stats){0};
}
static inline void cfitab__free(struct cfitab *c) {}
#endif /* CONFIG_BPF_CFI */

#endif /* EDGEPROF_BPF_CFITAB_H */
