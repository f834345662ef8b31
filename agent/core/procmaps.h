/* SPDX-License-Identifier: MIT */
/*
 * agent/core/procmaps.h — executable mappings of processes (/proc/<pid>/maps) with each file's
 * build-id, and a bounded per-process cache of them.
 *
 * The cache (proctab) captures a process's mappings the first time one of its samples is seen
 * and again when an address falls in no known mapping (at most once a round), so a process that
 * exits before the end of the round is still symbolized. It holds at most max_procs processes
 * (least recently used evicted, counted) and at most max_maps executable mappings per process.
 * A process is known by its pid and start time: at each new round the processes that exited, or
 * whose pid now belongs to another process, are dropped.
 *
 * Build-ids are cached per file (device and inode as the maps line shows them, and path;
 * CONFIG_BUILD_ID_CACHE_ENTRIES slots, shared by all processes): a file is stat'ed at most once
 * per round (size and mtime tell a rewritten file) and its ELF notes read only when it changed.
 */
#ifndef EDGEPROF_AGENT_PROCMAPS_H
#define EDGEPROF_AGENT_PROCMAPS_H

#include <stdbool.h>
#include <stdint.h>

#include "elf/elf.h"

#define PROCMAP_PATH 240
#define PROCMAPS_BUILD_ID_CACHE CONFIG_BUILD_ID_CACHE_ENTRIES

struct procmap {
	uint64_t start, limit, offset;
	const char *path;		 /* as in maps (at most PROCMAP_PATH - 1 bytes kept);
					  * "[vdso]" for the vDSO; lives as long as its procmaps */
	char build_id[ELF_BUILD_ID_HEX]; /* "" when the file has none */
};

struct procmaps {
	uint32_t pid;
	uint64_t start_time; /* clock ticks after boot (/proc/<pid>/stat), 0: unknown */
	unsigned int n, max; /* mappings, and room for them */
	int exe;	     /* maps[exe] holds the main program's text; -1: unknown */
	struct procmap maps[];
};

/* Reads the executable mappings of pid (0 = self) from maps_path or /proc/<pid>/maps. */
int procmaps__read(uint32_t pid, unsigned int max_maps, struct procmaps **out);
int procmaps__parse_file(const char *maps_path, uint32_t pid, unsigned int max_maps,
			 struct procmaps **out);
/* Same, from maps text (e.g. the copy a producer left in its ring). */
int procmaps__parse_text(const char *text, uint32_t pid, unsigned int max_maps,
			 struct procmaps **out);
/* Only the executable lines of maps text, into out (at most max bytes): what a ring keeps. */
size_t procmaps__exec_lines(const char *text, char *out, size_t max);
/* One mapping as the kernel describes it (a maps line, PROCMAP_QUERY, a perf mmap record). */
struct procmap_desc {
	uint64_t start, limit, offset;
	uint64_t dev, ino;    /* major << 32 | minor and inode: the build-id cache's key */
	const char *path;     /* cut to PROCMAP_PATH - 1 bytes */
	const char *build_id; /* hex, when the kernel gave it; NULL: read from the file (cached) */
};

/* Builds a procmaps mapping by mapping: new, add (false: max_maps reached), done (packs it). */
struct procmaps *procmaps__new(uint32_t pid, unsigned int max_maps);
bool procmaps__add(struct procmaps *pm, const struct procmap_desc *d);
/* exe: index of the main program's mapping, -1: unknown. pm is consumed. */
struct procmaps *procmaps__done(struct procmaps *pm, int exe);
const struct procmap *procmaps__find(const struct procmaps *pm, uint64_t addr);
/* The main program's path as /proc/<pid>/exe names it (procmaps__read only), or NULL. */
const char *procmaps__exe(const struct procmaps *pm);
void procmaps__free(struct procmaps *pm);
/* FNV-1a of a path or build-id: the key of the caches that name files. */
uint64_t procmaps__hash(const char *s);

struct procmaps_stats {
	uint64_t build_id_reads, build_id_hits; /* files opened, and lookups served from cache */
	uint64_t maps_reads, file_stats;	/* /proc/<pid>/maps opened, stat() of mapped files */
};

void procmaps__stats(struct procmaps_stats *st);
/* Mapped files are stat'ed again at their next use (once per round: proctab__new_round). */
void procmaps__revalidate(void);

struct proctab;

struct proctab_stats {
	uint64_t reads, refreshes, evicted, unknown_addr, reused_pids;
	uint64_t lost; /* processes sampled whose maps could not be read (gone before): unnamed */
	uint64_t loaded, forgotten; /* maps from the loader, and processes forgotten (exec) */
	unsigned int procs;
};

struct proctab *proctab__new(unsigned int max_procs, unsigned int max_maps);
void proctab__free(struct proctab *t);
/*
 * Where the maps of a pid not yet known come from before /proc is read (bpf/mmapev: the
 * kernel's mmap records): the maps, owned by the caller now, or NULL. It may call
 * proctab__forget() for other pids.
 */
typedef struct procmaps *(*proctab_loader_fn)(void *ctx, uint32_t pid, unsigned int max_maps);
void proctab__set_loader(struct proctab *t, proctab_loader_fn fn, void *ctx);
/* pid exec'd another program: its maps are dropped now, so its next sample loads new ones. */
void proctab__forget(struct proctab *t, uint32_t pid);
/*
 * comm: the main thread's name in a sample of pid (tid == pid). The first one is kept with the
 * maps; another one means an exec the table was not told of (no mmap records: the /proc
 * path): the maps are forgotten (counted as such), read again at the next use.
 */
void proctab__main_comm(struct proctab *t, uint32_t pid, const char *comm);
/* Captures pid's mappings now if not yet known (call while the process lives). */
int proctab__touch(struct proctab *t, uint32_t pid);
/*
 * Reads a known pid's maps again when they are at least min_age_ns old (a JIT's code pages,
 * mapped as it runs, must be known before it exits: names come at the round's end). 0, or
 * -errno (unknown, too recent: -EAGAIN; gone: its maps stay).
 */
int proctab__refresh(struct proctab *t, uint32_t pid, uint64_t min_age_ns);
/* The maps of a known pid, or NULL: no system call. Valid until the table changes. */
const struct procmaps *proctab__maps(struct proctab *t, uint32_t pid);
/*
 * The maps of a known pid when they came from the loader (the kernel's mmap records), brought
 * up to date by it: no system call. NULL when they came from /proc or pid is not known.
 */
const struct procmaps *proctab__loaded_maps(struct proctab *t, uint32_t pid);
/* The exe of a known pid (procmaps__exe), or NULL: no system call. */
const char *proctab__exe(struct proctab *t, uint32_t pid);
/* Takes pm for its pid when the pid is not known yet (a process that already exited). */
void proctab__adopt(struct proctab *t, struct procmaps *pm);
/* The mapping holding addr in pid; re-reads the maps (once per round) on a miss. */
const struct procmap *proctab__resolve(struct proctab *t, uint32_t pid, uint64_t addr);
/* A new round: processes no longer alive and unused in the last round are dropped. */
void proctab__new_round(struct proctab *t);
void proctab__stats(const struct proctab *t, struct proctab_stats *st);

#endif /* EDGEPROF_AGENT_PROCMAPS_H */
