// SPDX-License-Identifier: MIT
/* agent/core/heapfile.c — see heapfile.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/core/heapfile.h"

#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

size_t heapfile__size(uint64_t stack_slots, unsigned int max_depth)
{
	return sizeof(struct heapfile_hdr) + stack_slots * sizeof(struct heapfile_stack) +
	       stack_slots * max_depth * sizeof(uint64_t);
}

int heapfile__view(void *map, size_t len, struct heapfile_view *v)
{
	struct heapfile_hdr *h = map;

	if (len < sizeof(*h) || h->magic != HEAPFILE_MAGIC || h->version != HEAPFILE_VERSION ||
	    !h->stack_slots || (h->stack_slots & (h->stack_slots - 1)) || !h->max_depth ||
	    h->max_depth > 1024 || h->stack_slots > (1u << 24) ||
	    heapfile__size(h->stack_slots, h->max_depth) > len)
		return -EINVAL;
	v->h = h;
	v->stacks = (struct heapfile_stack *)(h + 1);
	v->frames = (uint64_t *)(v->stacks + h->stack_slots);
	return 0;
}

static const char *const types[] = {"alloc_objects", "alloc_space", "inuse_objects", "inuse_space"};
static const char *const units[] = {"count", "bytes", "count", "bytes"};

void heapfile__kind(const struct heapfile_view *v, struct output_kind *k)
{
	*k = (struct output_kind){
	    types, units, 4, "space", "bytes", "inuse_space", (int64_t)v->h->rate};
}

static int64_t thousandths(int64_t m)
{
	return (m + (m >= 0 ? 500 : -500)) / 1000;
}

size_t heapfile__collect(const struct heapfile_view *v, struct output_stack *st, int64_t *vals,
			 size_t max)
{
	size_t n = 0;

	for (uint64_t i = 0; i < v->h->stack_slots && n < max; i++) {
		struct heapfile_stack *s = &v->stacks[i];
		uint16_t nf = __atomic_load_n(&s->n_frames, __ATOMIC_ACQUIRE);
		int64_t *x = vals + 4 * n;

		if (!nf || nf > v->h->max_depth)
			continue;
		x[0] = thousandths(LOAD(s->alloc_mobjects));
		x[1] = LOAD(s->alloc_bytes);
		x[2] = thousandths(LOAD(s->inuse_mobjects));
		x[3] = LOAD(s->inuse_bytes);
		if (!x[0] && !x[1] && !x[2] && !x[3])
			continue;
		st[n++] = (struct output_stack){v->h->pid, nf, v->frames + i * v->h->max_depth, x};
	}
	return n;
}

void heapfile__comment(const struct heapfile_view *v, char *buf, size_t len)
{
	const struct heapfile_hdr *h = v->h;

	snprintf(buf, len,
		 "edgeprof heap: rate_bytes=%llu samples=%llu stacks=%llu/%llu stacks_dropped=%llu "
		 "live=%llu live_overflow=%llu truncated=%llu",
		 (unsigned long long)h->rate, (unsigned long long)LOAD(h->samples),
		 (unsigned long long)LOAD(h->n_stacks), (unsigned long long)h->stack_slots / 2,
		 (unsigned long long)LOAD(h->stacks_dropped), (unsigned long long)LOAD(h->n_live),
		 (unsigned long long)LOAD(h->live_overflow),
		 (unsigned long long)LOAD(h->truncated));
}

int heapfile__map(const char *path, void **map, size_t *len, struct heapfile_view *v)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC), err = 0;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		err = -errno;
		goto out_close;
	}
	*len = (size_t)st.st_size;
	*map = *len ? mmap(NULL, *len, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
	if (*map == MAP_FAILED) {
		err = *len ? -errno : -EINVAL;
		goto out_close;
	}
	err = heapfile__view(*map, *len, v);
	if (err)
		munmap(*map, *len);
out_close:
	close(fd);
	return err;
}

void heapfile__unmap(void *map, size_t len)
{
	if (map)
		munmap(map, len);
}
