/* SPDX-License-Identifier: MIT */
/*
 * agent/core/framename.h — names of interpreter frames (agent/core/pyname.h, luaname.h,
 * v8name.h), read from a process's memory and kept until the profile that shows them is
 * written.
 *
 * A frame is a tagged word (the interpreter's code object, and what else its tag holds). Its
 * name is read while the process runs, by a drain pass (framename__pin): the interpreter frees
 * its code at exit, and a process may exit long before its round is written (42 short python3
 * runs in one round lost 96 % of their names when names were merely cached: those of the first
 * runs were pushed out by the later ones, 2026-11-29). So what a drain pass reads or uses is
 * pinned to the round (framename__round_end): it is not pushed out for a newer name until that
 * round is released (framename__release), once its profiles are written. Only a full set pushes
 * out a pinned entry (counted: dropped; the frame may come out unnamed, or at its first line).
 *
 * Three tables, each bounded by Kconfig:
 *   - texts: a function's name, file and first line (~350 bytes), shared by every process that
 *     runs the same function (the same script, the same library module: its name read once);
 *   - functions: (pid, function) -> the text last read at the function's address (32 bytes);
 *     in a cache without lines, a word is its function, and its entry holds the reader's error;
 *   - lines: (pid, word) -> the word's text and line, where the word holds a position as well
 *     (Python's code unit, Lua's pc; 32 bytes), or the reader's error. A word keeps the text
 *     it was read with: its function's address reused by another function (exec'd code, an
 *     import's module body, freed) names the new words anew, not the old ones. A word that
 *     cannot be read (its process exited before it was) is given its function's text, as last
 *     read at that address, with the first line (counted: lines_lost).
 * Sets of FRAMENAME_WAYS entries, the one used last first, two sets per key (the second when the
 * first is all pinned); an entry of a released round pushed out for another is counted
 * (evicted: read again if asked, while the process lives). One lock per cache: the profile
 * writer and the drain thread share it.
 */
#ifndef EDGEPROF_AGENT_FRAMENAME_H
#define EDGEPROF_AGENT_FRAMENAME_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define FRAMENAME_MAX 160
#define FRAMENAME_WAYS 8      /* functions and lines per set: at least this many of each */
#define FRAMENAME_TEXT_WAYS 8 /* texts per set: at least this many */

struct framename {
	char name[FRAMENAME_MAX]; /* the function */
	char file[FRAMENAME_MAX]; /* its source file; "" unknown */
	int64_t start_line;	  /* its first line */
	int64_t line;		  /* the frame's current line; 0: unknown (the first line shown) */
};

/* A function's text. In a cache with lines, its line is 0 (the words' own are in the lines). */
struct framename_text {
	uint32_t hash;	/* of the text; 0: empty */
	uint32_t gen;	/* new each time it is filled */
	uint32_t round; /* the last round a drain pass used it in */
	uint32_t used;	/* when it was last used (the cache's tick): the oldest goes first */
	struct framename n;
};

/* A (pid, function)'s text (the last read at its address), or a (pid, word)'s text and line. */
struct framename_entry {
	uint64_t key;
	uint32_t pid;	/* 0: empty */
	uint32_t round; /* the last round a drain pass used it in; 0: none (the writer's read) */
	int32_t val;	/* -errno: not named; else a word's line (0 unknown), or 0 */
	uint32_t text;	/* named: its text's index */
	uint32_t gen;	/* named: that text's gen (another: the text was refilled) */
};

struct framename_cache {
	struct framename_text *text;
	unsigned int texts;
	struct framename_entry *fn;
	unsigned int fns;
	struct framename_entry *line; /* NULL: a word names its function alone (no position) */
	unsigned int lines;
	uint64_t cached;     /* answers from the cache */
	uint64_t evicted;    /* functions of released rounds pushed out (read again if asked) */
	uint64_t dropped;    /* entries of a round not yet released pushed out: a set was full */
	uint64_t lines_lost; /* frames named without their line: it was gone, then unreadable */
	uint32_t gen;	     /* the last text generation given */
	uint32_t tick;	     /* texts' uses, counted */
	pthread_mutex_t lock;
};

/* A cache for the profile's comments: its entries in use (to size the tables: CONFIG_*NAME_CACHE,
 * _FUNCS, _LINES) and its counters. */
struct framename_counters {
	uint64_t texts, fns, lines;
	uint64_t cached, evicted, dropped, lines_lost;
};

#define FRAMENAME_N(a) (sizeof(a) / sizeof((a)[0]))

/* A cache whose words are functions (texts and functions: arrays). */
#define FRAMENAME_CACHE(texts_, fns_)                                                             \
	{                                                                                         \
		.text = (texts_), .texts = FRAMENAME_N(texts_), .fn = (fns_),                     \
		.fns = FRAMENAME_N(fns_), .lock = PTHREAD_MUTEX_INITIALIZER                       \
	}

/* A cache whose words hold a position too: their lines in lines_. */
#define FRAMENAME_CACHE_LINES(texts_, fns_, lines_)                                               \
	{                                                                                         \
		.text = (texts_), .texts = FRAMENAME_N(texts_), .fn = (fns_),                     \
		.fns = FRAMENAME_N(fns_), .line = (lines_), .lines = FRAMENAME_N(lines_),         \
		.lock = PTHREAD_MUTEX_INITIALIZER                                                 \
	}

/*
 * Rounds, for every cache of the process: what a drain pass reads or uses is pinned to the
 * current round. framename__round_end() starts a new round and returns the one that ended;
 * framename__release(r) lets the names of rounds up to r be pushed out (their profiles are
 * written, or their samples thrown away). A process that never releases (libedgeprof.so
 * standalone: one profile at exit) keeps every name pinned.
 */
#ifdef CONFIG_FRAMENAMES
uint32_t framename__round(void);
uint32_t framename__round_end(void);
void framename__release(uint32_t upto);
#else
static inline uint32_t framename__round(void)
{
	return 1;
}
static inline uint32_t framename__round_end(void)
{
	return 1;
}
static inline void framename__release(uint32_t upto)
{
}
#endif

/* Reads the name of key in pid: 0 or -errno. Called with the cache's lock held. */
typedef int (*framename_read_fn)(uint32_t pid, uint64_t key, struct framename *out);

/*
 * The name of the frame word key, whose function is fn (key without its position; key itself
 * in a cache without lines), read on a miss: 0, or the reader's -errno. The profile writer's:
 * it pins nothing, and what it reads pushes out no pinned entry.
 */
int framename__resolve(struct framename_cache *c, uint32_t pid, uint64_t key, uint64_t fn,
		       framename_read_fn read, struct framename *out);

/* A drain pass's: key's name read now if it is not held, and pinned to the current round. */
void framename__pin(struct framename_cache *c, uint32_t pid, uint64_t key, uint64_t fn,
		    framename_read_fn read);

/*
 * len bytes of pid's memory at addr: 0 or -EFAULT. process_vm_readv; where it is missing
 * (qemu-user), this process's own /proc/self/mem, once a canary read through it came back
 * right; else (a 32-bit guest, whose addresses are not the emulator's) through a pipe, written
 * from the address (EFAULT where unmapped) and read back. Not async-signal-safe: the namers'
 * drain pass and the profile writer.
 */
int framename__peek(uint32_t pid, uint64_t addr, void *buf, size_t len);

/* The entries in use now (a scan of the tables) and the counters, under the lock. */
void framename__counters(struct framename_cache *c, struct framename_counters *out);

/* Forgets pid's functions and lines (it exec'd: the same words may now be other code). */
void framename__forget(struct framename_cache *c, uint32_t pid);

#endif /* EDGEPROF_AGENT_FRAMENAME_H */
