// SPDX-License-Identifier: MIT
/* agent/core/framename.c — see framename.h. */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "agent/core/framename.h"

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

int framename__resolve(struct framename_cache *c, uint32_t pid, uint64_t key, uint64_t hash,
		       framename_read_fn read, struct framename *out)
{
	/* the set: FRAMENAME_WAYS slots, the one used last first */
	struct framename_slot *s =
	    &c->slot[(hash ^ pid * 2654435761u) % (c->slots / FRAMENAME_WAYS) * FRAMENAME_WAYS];
	struct framename_slot hit;
	unsigned int w = 0;
	int err;

	pthread_mutex_lock(&c->lock);
	while (w < FRAMENAME_WAYS - 1 && !(s[w].pid == pid && s[w].key == key))
		w++;
	if (s[w].pid == pid && s[w].key == key) {
		c->cached++;
		hit = s[w];
	} else { /* the one used longest ago goes */
		hit = (struct framename_slot){.pid = pid, .key = key};
		hit.err = read(pid, key, &hit.n);
	}
	memmove(&s[1], &s[0], w * sizeof(s[0]));
	s[0] = hit;
	err = s->err;
	if (!err)
		*out = s->n;
	pthread_mutex_unlock(&c->lock);
	return err;
}

void framename__forget(struct framename_cache *c, uint32_t pid)
{
	pthread_mutex_lock(&c->lock);
	for (unsigned int i = 0; i < c->slots; i++)
		if (c->slot[i].pid == pid)
			c->slot[i].pid = 0, c->slot[i].key = 0;
	pthread_mutex_unlock(&c->lock);
}
