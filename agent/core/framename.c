// SPDX-License-Identifier: MIT
/* agent/core/framename.c — see framename.h. */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "agent/core/framename.h"
#include "port/hash.h"

/* Through /proc/self/mem: 1 proven right, -1 not (or not tried yet: 0). */
static int self_mem_ok;

static int self_mem_read(uint64_t addr, void *buf, size_t len)
{
	int fd = open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
	ssize_t r = fd < 0 ? -1 : pread(fd, buf, len, (off_t)addr);

	if (fd >= 0)
		close(fd);
	return r == (ssize_t)len ? 0 : -EFAULT;
}

static bool self_mem_proven(void)
{
	static const char canary[] = "edgeprof: /proc/self/mem reads our own addresses";
	char back[sizeof(canary)] = {0};
	int ok = __atomic_load_n(&self_mem_ok, __ATOMIC_RELAXED);

	if (!ok) {
		ok = !self_mem_read((uintptr_t)canary, back, sizeof(back)) &&
			     !memcmp(back, canary, sizeof(canary))
			 ? 1
			 : -1;
		__atomic_store_n(&self_mem_ok, ok, __ATOMIC_RELAXED);
	}
	return ok == 1;
}

/*
 * Through a pipe: write(2) from our own address fails with EFAULT where nothing is mapped (as
 * qemu-user checks a guest's buffers), and what went in comes back out. For a 32-bit guest
 * under qemu, where /proc/self/mem reads the emulator's addresses. One pipe, made on first use,
 * kept (two descriptors) and shared under a lock: the namers' caches have locks of their own.
 */
#define PIPE_CHUNK 4096 /* below any pipe's capacity: a write never blocks or splits */
static int self_pipe_read(uint64_t addr, void *buf, size_t len)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	static int fd[2] = {-1, -1};
	int err = 0;

	pthread_mutex_lock(&lock);
	if (fd[0] < 0 && pipe2(fd, O_CLOEXEC | O_NONBLOCK))
		fd[0] = fd[1] = -1;
	for (size_t done = 0; !err && done < len;) {
		size_t n = len - done < PIPE_CHUNK ? len - done : PIPE_CHUNK;

		if (fd[0] < 0 || write(fd[1], (const void *)(uintptr_t)(addr + done), n) != (ssize_t)n ||
		    read(fd[0], (char *)buf + done, n) != (ssize_t)n)
			err = -EFAULT;
		done += n;
	}
	if (err && fd[0] >= 0) { /* a write cut short at a fault left bytes in it: a new one */
		close(fd[0]);
		close(fd[1]);
		fd[0] = fd[1] = -1;
	}
	pthread_mutex_unlock(&lock);
	return err;
}

int framename__peek(uint32_t pid, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = {buf, len}, remote = {(void *)(uintptr_t)addr, len};
	ssize_t r;

	if (!len)
		return 0;
	if (!addr)
		return -EFAULT;
	r = process_vm_readv((pid_t)pid, &local, 1, &remote, 1, 0);
	if (r == (ssize_t)len)
		return 0;
	if (r >= 0 || errno != ENOSYS || pid != (uint32_t)getpid())
		return -EFAULT;
	return self_mem_proven() ? self_mem_read(addr, buf, len) : self_pipe_read(addr, buf, len);
}

/* Slots and lines are handled alike through their first member (the key, pid and gen). */
_Static_assert(offsetof(struct framename_slot, id) == 0, "a slot starts with its key");

/* The first of the FRAMENAME_WAYS entries (size bytes each) of (pid, key)'s set among n. */
static char *set_of(void *base, size_t size, unsigned int n, uint32_t pid, uint64_t key)
{
	/*
	 * Every bit of the word and pid mixed into every bit of the set: a multiply's high bits
	 * left bits 40..44 of a function's words alike, and its positions (bits 45..55) in the
	 * same set of any cache of 32 sets or fewer, in 32 sets of a larger one.
	 */
	uint64_t mix = hash_mix64(key ^ (uint64_t)pid << 32 ^ pid);

	return (char *)base + mix % (n / FRAMENAME_WAYS) * FRAMENAME_WAYS * size;
}

/* Moves way w of set to its front (the one used last first): nothing to move when it is there,
 * as a warm pass's lookups mostly find it. */
static struct framename_line *to_front(char *set, size_t size, unsigned int w)
{
	unsigned char keep[sizeof(struct framename_slot)];

	if (w) {
		memcpy(keep, set + w * size, size);
		memmove(set + size, set, w * size);
		memcpy(set, keep, size);
	}
	return (struct framename_line *)set;
}

/* (pid, key)'s entry, moved to the front of its set; NULL when it has none. */
static struct framename_line *set_find(void *base, size_t size, unsigned int n, uint32_t pid,
				       uint64_t key)
{
	char *set = set_of(base, size, n, pid, key);

	for (unsigned int w = 0; w < FRAMENAME_WAYS; w++) {
		struct framename_line *e = (struct framename_line *)(set + w * size);

		if (e->pid == pid && e->key == key)
			return to_front(set, size, w);
	}
	return NULL;
}

/* A new, empty entry for (pid, key) at the front of its set, in place of the one used longest
 * ago (a live one counted in *evicted, if given). */
static struct framename_line *set_insert(void *base, size_t size, unsigned int n, uint32_t pid,
					 uint64_t key, uint64_t *evicted)
{
	char *set = set_of(base, size, n, pid, key);
	struct framename_line *e = to_front(set, size, FRAMENAME_WAYS - 1);

	if (e->pid && evicted)
		(*evicted)++;
	memset(e, 0, size);
	e->pid = pid;
	e->key = key;
	return e;
}

static bool same_function(const struct framename *a, const struct framename *b)
{
	return a->start_line == b->start_line && !strcmp(a->name, b->name) &&
	       !strcmp(a->file, b->file);
}

/* A line as an entry holds it: 0 (unknown) for what is not a line number. */
static int32_t line_of(int64_t line)
{
	return line > 0 && line <= INT32_MAX ? (int32_t)line : 0;
}

/*
 * Reads key's name on a miss, into its function's slot s (made when NULL) and its lines entry
 * l (made when NULL and the cache has lines). A function named while its process ran, whose
 * word cannot be read now (the process exited since the word's line was pushed out), keeps its
 * name, with the first line (counted). A function read anew, or found changed (its object
 * freed and the address reused by another), gets a new generation: the lines read with the old
 * one are read again. 0 or -errno.
 */
static int read_into(struct framename_cache *c, uint32_t pid, uint64_t key, uint64_t fn,
		     framename_read_fn read, struct framename_slot *s, struct framename_line *l,
		     int64_t *line, struct framename *out)
{
	struct framename n;
	int err = read(pid, key, &n);

	if (err && s && !s->err) {
		c->lines_lost++;
		err = 0;
		*out = s->n;
		*line = 0;
	} else {
		if (!s)
			s = (struct framename_slot *)set_insert(c->slot, sizeof(*s), c->slots, pid, fn,
								&c->evicted);
		if (err ? !s->id.gen : s->err || !s->id.gen || !same_function(&n, &s->n)) {
			s->err = err;
			if (!err)
				s->n = n;
			if (!++c->gen) /* never 0: an empty entry's */
				c->gen++;
			s->id.gen = c->gen;
		}
		if (!err) {
			*out = n;
			*line = line_of(n.line);
		}
	}
	if (c->line) {
		if (!l)
			l = set_insert(c->line, sizeof(*l), c->lines, pid, key, NULL);
		l->gen = s->id.gen;
		l->line = err ? err : (int32_t)*line;
	}
	return err;
}

int framename__resolve(struct framename_cache *c, uint32_t pid, uint64_t key, uint64_t fn,
		       framename_read_fn read, struct framename *out)
{
	struct framename_slot *s;
	struct framename_line *l = NULL;
	int64_t line = 0;
	bool fresh;
	int err;

	if (!c->line)
		fn = key; /* names by the whole word */
	pthread_mutex_lock(&c->lock);
	if (c->line)
		l = set_find(c->line, sizeof(*l), c->lines, pid, key);
	s = (struct framename_slot *)set_find(c->slot, sizeof(*s), c->slots, pid, fn);
	fresh = l && s && l->gen == s->id.gen; /* read with the function's name as it is */
	if (fresh && l->line < 0) { /* this word could not be named */
		c->cached++;
		err = l->line;
	} else if (s && (!c->line || (fresh && !s->err))) {
		c->cached++;
		err = s->err;
		if (!err) {
			*out = s->n;
			line = l ? l->line : line_of(s->n.line);
		}
	} else {
		err = read_into(c, pid, key, fn, read, s, l, &line, out);
	}
	if (!err)
		out->line = line;
	pthread_mutex_unlock(&c->lock);
	return err;
}

void framename__forget(struct framename_cache *c, uint32_t pid)
{
	pthread_mutex_lock(&c->lock);
	for (unsigned int i = 0; i < c->slots; i++)
		if (c->slot[i].id.pid == pid)
			c->slot[i].id = (struct framename_line){0};
	for (unsigned int i = 0; i < c->lines; i++)
		if (c->line[i].pid == pid)
			c->line[i] = (struct framename_line){0};
	pthread_mutex_unlock(&c->lock);
}
