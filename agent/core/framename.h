/* SPDX-License-Identifier: MIT */
/*
 * agent/core/framename.h — names of interpreter frames (agent/core/pyname.h, luaname.h), read
 * from a process's memory and cached.
 *
 * A frame is a tagged word (the interpreter's code object, and what else its tag holds); its
 * name is read once, while the process runs (a drain pass: the interpreter frees its code at
 * exit, before a standalone profile is written), and cached: the reader's error too, so a frame
 * that cannot be named is not read again. Where a word holds the frame's position as well as its
 * function (Python's code unit, Lua's pc), two caches: names by (pid, function) in slots of
 * ~350 bytes, lines by (pid, word) in entries of 24. Keyed by the whole word, a function's
 * dozen positions took a dozen name slots, evicted one another, and were read again when the
 * profile was written, after the process had exited: unnamed (bpf-python, 2026-11-29: 193 of
 * 651 words, work_dict's many units most, its share 8 pp under). Now a word whose line was
 * evicted, read again after its process exited, still has its function's name, with the first
 * line (counted: lines_lost). FRAMENAME_WAYS entries per set, the one used last first; a name
 * evicted by a colliding key is counted (evicted). One lock per cache: the profile writer and
 * the drain thread share it. At least FRAMENAME_WAYS slots and lines.
 */
#ifndef EDGEPROF_AGENT_FRAMENAME_H
#define EDGEPROF_AGENT_FRAMENAME_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define FRAMENAME_MAX 160
#define FRAMENAME_WAYS 4

struct framename {
	char name[FRAMENAME_MAX]; /* the function */
	char file[FRAMENAME_MAX]; /* its source file; "" unknown */
	int64_t start_line;	  /* its first line */
	int64_t line;		  /* the frame's current line; 0: unknown (the first line shown) */
};

/*
 * A word's line (by the whole word), or a name slot's key (by the function: the slot's first
 * member). gen: a slot's, new each time its name is read anew; a line's, the slot's it was read
 * with (another gen: read again, its function's slot was refilled since).
 */
struct framename_line {
	uint64_t key;
	uint32_t pid;
	uint32_t gen;
	int32_t line; /* the frame's line, 0 unknown; or -errno: it could not be named */
};

struct framename_slot {
	struct framename_line id;
	int err;
	struct framename n;
};

struct framename_cache {
	struct framename_slot *slot;
	unsigned int slots;
	struct framename_line *line; /* NULL: a word names its function alone (no position) */
	unsigned int lines;
	uint64_t cached;     /* answers from the cache */
	uint64_t evicted;    /* names pushed out by a colliding key (read again if asked) */
	uint64_t lines_lost; /* frames named without their line: it was evicted, then unreadable */
	uint32_t gen;	     /* the last slot generation given */
	pthread_mutex_t lock;
};

#define FRAMENAME_CACHE(array)                                                                    \
	{                                                                                         \
		.slot = (array), .slots = sizeof(array) / sizeof((array)[0]),                       \
		.lock = PTHREAD_MUTEX_INITIALIZER                                                 \
	}

/* Names in slots, lines in lines (arrays): for words that hold a position too. */
#define FRAMENAME_CACHE_LINES(array, lines_array)                                                 \
	{                                                                                         \
		.slot = (array), .slots = sizeof(array) / sizeof((array)[0]),                       \
		.line = (lines_array), .lines = sizeof(lines_array) / sizeof((lines_array)[0]),   \
		.lock = PTHREAD_MUTEX_INITIALIZER                                                 \
	}

/* Reads the name of key in pid: 0 or -errno. Called with the cache's lock held. */
typedef int (*framename_read_fn)(uint32_t pid, uint64_t key, struct framename *out);

/*
 * The name of the frame word key, whose function is fn (key without its position; key itself
 * in a cache without lines), read on a miss: 0, or the reader's -errno.
 */
int framename__resolve(struct framename_cache *c, uint32_t pid, uint64_t key, uint64_t fn,
		       framename_read_fn read, struct framename *out);

/*
 * len bytes of pid's memory at addr: 0 or -EFAULT. process_vm_readv; where it is missing
 * (qemu-user), this process's own /proc/self/mem, once a canary read through it came back
 * right; else (a 32-bit guest, whose addresses are not the emulator's) through a pipe, written
 * from the address (EFAULT where unmapped) and read back. Not async-signal-safe: the namers'
 * drain pass and the profile writer.
 */
int framename__peek(uint32_t pid, uint64_t addr, void *buf, size_t len);

/* Forgets pid's names (it exec'd: the same words may now be other code). */
void framename__forget(struct framename_cache *c, uint32_t pid);

#endif /* EDGEPROF_AGENT_FRAMENAME_H */
