/* SPDX-License-Identifier: MIT */
/*
 * agent/core/perfmap.h — names of JIT code from perf maps (CONFIG_PERFMAP): /tmp/perf-<pid>.map,
 * the text file a JIT appends one line to per code object ("START SIZE name", hex without 0x;
 * linux tools/perf/Documentation/jit-interface.txt). Node.js writes it with --perf-basic-prof
 * (V8: "JS:*fib /app/fib.js:1:13"; node <= 18: "LazyCompile:*fib /app/fib.js:1"), and so do
 * LuaJIT, the JVM's perf-map-agent, .NET, Mono.
 *
 * Used for addresses in anonymous executable mappings only (file-backed code has its own
 * symbols). The file is read incrementally: the offset of the last complete line is kept and
 * only what was appended since is parsed, when a lookup misses and the file has grown (stat'ed
 * at most every PERFMAP_RECHECK_MS per process). Later lines win where ranges overlap (freed
 * code whose range was reused), as in perf.
 *
 * The file is opened O_NOFOLLOW and must be a regular file owned by the process's owner (or
 * root), as perf requires: /tmp is world-writable, and a symlink or another user's file must
 * not put another process's names (or another file's text) into a profile.
 *
 * Bounded: CONFIG_PERFMAP_PROCS processes (least recently used dropped), CONFIG_PERFMAP_ENTRIES
 * entries per process and CONFIG_PERFMAP_KB bytes (entries and names) over all processes;
 * lines past a bound are skipped and counted (dropped), never retried.
 */
#ifndef EDGEPROF_AGENT_PERFMAP_H
#define EDGEPROF_AGENT_PERFMAP_H

#include <stddef.h>
#include <stdint.h>

#define PERFMAP_NAME 256 /* a name is cut to this (counted: long) */

struct perfmaps;

struct perfmap_stats {
	uint64_t files, reads, entries, superseded, dropped, bad_lines, long_names, refused;
	uint64_t hits, misses, evictions;
	uint64_t after_exit; /* reads of an exited process's file (the one read while it ran) */
	size_t bytes;
};

/* One entry, its V8 form taken apart where it has one. */
struct perfmap_sym {
	char name[PERFMAP_NAME];     /* the function ("fib"; "(anonymous)"), else the raw name */
	char raw[PERFMAP_NAME];	     /* the line's name as written ("JS:*fib /app/fib.js:1:13") */
	char file[PERFMAP_NAME];     /* "/app/fib.js", "" when the name has no location */
	int64_t line;		     /* the function's first line, 0: unknown */
	const char *runtime;	     /* "node" for V8's JS entries, else "jit" */
};

/* Splits a perf-map name into sym (V8's "Tag:<marker>name file:line[:col]"). */
void perfmap__parse_name(const char *raw, size_t len, struct perfmap_sym *sym);

#ifdef CONFIG_PERFMAP
/* dir: where perf-<pid>.map files are (tests); NULL: /proc/<pid>/root/tmp. */
struct perfmaps *perfmaps__new(const char *dir, size_t max_bytes, unsigned int max_entries);
void perfmaps__free(struct perfmaps *p);
/*
 * The entry of pid's perf map covering addr: 1 and sym filled; 0: the process has a perf map
 * but no entry covers addr; -ENOENT: it has none (or it was refused).
 */
int perfmaps__lookup(struct perfmaps *p, uint32_t pid, uint64_t addr, struct perfmap_sym *sym);
/*
 * Reads what pid's map has gained (at most every PERFMAP_RECHECK_MS): called while pid runs
 * (a sample in its anonymous code), so that names given after it exited, at the round's end,
 * are there. A file read while its process ran is read on after the exit, from /tmp, when it
 * is the same file (device and inode).
 */
void perfmaps__sync(struct perfmaps *p, uint32_t pid);
void perfmaps__stats(struct perfmaps *p, struct perfmap_stats *st);
/* The one every profile writer of this process shares (made on first use; locked). */
struct perfmaps *perfmaps__shared(void);
#else
static inline struct perfmaps *perfmaps__new(const char *dir, size_t max_bytes,
					     unsigned int max_entries)
{
	return NULL;
}
static inline void perfmaps__free(struct perfmaps *p)
{
}
static inline int perfmaps__lookup(struct perfmaps *p, uint32_t pid, uint64_t addr,
				   struct perfmap_sym *sym)
{
	return -2; /* -ENOENT */
}
static inline void perfmaps__sync(struct perfmaps *p, uint32_t pid)
{
}
static inline void perfmaps__stats(struct perfmaps *p, struct perfmap_stats *st)
{
	*st = (struct perfmap_stats){0};
}
static inline struct perfmaps *perfmaps__shared(void)
{
	return NULL;
}
#endif /* CONFIG_PERFMAP */

#endif /* EDGEPROF_AGENT_PERFMAP_H */
