/* SPDX-License-Identifier: MIT */
/*
 * agent/core/framename.h — names of interpreter frames (agent/core/pyname.h, luaname.h), read
 * from a process's memory and cached.
 *
 * A frame is a tagged word (the interpreter's code object, and what else its tag holds); its
 * name is read once, while the process runs (a drain pass: the interpreter frees its code at
 * exit, before a standalone profile is written), and kept in a cache of slots keyed by (pid,
 * word): the reader's error too, so a frame that cannot be named is not read again.
 * FRAMENAME_WAYS slots per set, the one used last first: a name evicted by a colliding word is
 * read again later, maybe after its object was freed (the program exits), so the ~100 names of
 * a script's hot paths must not evict one another (direct-mapped, main()'s was lost in 2 runs
 * of 5 of sigprof-python313). One lock per cache: the profile writer and the drain thread
 * share it. At least FRAMENAME_WAYS slots.
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

struct framename_slot {
	uint32_t pid;
	uint64_t key;
	int err;
	struct framename n;
};

struct framename_cache {
	struct framename_slot *slot;
	unsigned int slots;
	uint64_t cached; /* answers from the cache */
	pthread_mutex_t lock;
};

#define FRAMENAME_CACHE(array)                                                                    \
	{                                                                                         \
		.slot = (array), .slots = sizeof(array) / sizeof((array)[0]),                       \
		.lock = PTHREAD_MUTEX_INITIALIZER                                                 \
	}

/* Reads the name of key in pid: 0 or -errno. Called with the cache's lock held. */
typedef int (*framename_read_fn)(uint32_t pid, uint64_t key, struct framename *out);

/* The name of key (hash picks its slot), read on a miss: 0, or the reader's -errno. */
int framename__resolve(struct framename_cache *c, uint32_t pid, uint64_t key, uint64_t hash,
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
