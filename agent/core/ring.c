// SPDX-License-Identifier: MIT
/* agent/core/ring.c — see ring.h for the protocol. */
#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/core/ring.h"

#define RING_PAGE 4096u
_Static_assert(sizeof(struct ring_shared) <= RING_PAGE, "the shared header is one page");
#define RING_REC_MIN (8 + sizeof(struct ring_rec))

struct ring {
	struct ring_shared *sh;
	unsigned char *data;
	struct ring_label_set *labels;
	size_t map_len;
	uint64_t mask;
	/* consumer-local: where the consumer first saw an unfinished record, and when */
	uint64_t stall_pos, stall_since, stall_ns;
};

/* A position's tag: hashed so bytes of old records never look like a header by accident. */
static inline uint32_t ring_tag(uint64_t pos)
{
	return (uint32_t)(((pos >> 3) + 1) * 0x9E3779B97F4A7C15ull >> 32) | 1u;
}

static inline uint64_t *ring_hdr_at(struct ring *r, uint64_t pos)
{
	return (uint64_t *)(r->data + (pos & r->mask));
}

static size_t ring_map_len(uint32_t data_size)
{
	return RING_PAGE + sizeof(struct ring_label_set) * RING_LABEL_SETS + RING_MAPS_BYTES +
	       data_size;
}

static int ring_attach(struct ring *r, void *map, size_t len)
{
	r->sh = map;
	r->map_len = len;
	r->labels = (struct ring_label_set *)((unsigned char *)map + r->sh->labels_off);
	r->data = (unsigned char *)map + r->sh->data_off;
	r->mask = r->sh->data_size - 1;
	r->stall_ns = 1000000000ull;
	r->stall_pos = UINT64_MAX;
	return 0;
}

int ring__create(const char *path, size_t data_bytes, const char *service, uint32_t hz,
		 struct ring **out)
{
	uint32_t size = 4096;
	struct ring *r;
	size_t len;
	void *map;
	int fd = -1;

	*out = NULL;
	if (data_bytes > (1u << 30))
		return -EINVAL;
	while (size < data_bytes)
		size <<= 1;
	len = ring_map_len(size);
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	if (path) {
		unlink(path);
		fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0 || ftruncate(fd, (off_t)len) < 0)
			goto err_errno;
		map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	} else {
		map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	}
	if (map == MAP_FAILED)
		goto err_errno;
	if (fd >= 0)
		close(fd);
	struct ring_shared *sh = map;

	sh->version = RING_VERSION;
	sh->labels_off = RING_PAGE;
	sh->maps_off = RING_PAGE + sizeof(struct ring_label_set) * RING_LABEL_SETS;
	sh->data_off = sh->maps_off + RING_MAPS_BYTES;
	sh->data_size = size;
	sh->pid = (uint32_t)getpid();
	sh->proc_start = path ? ring_proc_start(0) : 0;
	sh->hz = hz;
	if (service)
		strncpy(sh->service, service, sizeof(sh->service) - 1);
	/* magic last: a consumer that sees it sees a complete header */
	__atomic_store_n(&sh->magic, RING_MAGIC, __ATOMIC_RELEASE);
	ring_attach(r, map, len);
	*out = r;
	return 0;

err_errno:;
	int err = -errno;

	if (fd >= 0) {
		close(fd);
		unlink(path);
	}
	free(r);
	return err;
}

int ring__open(const char *path, struct ring **out)
{
	struct ring_shared hdr;
	struct ring *r;
	struct stat st;
	void *map;
	int fd, err;

	*out = NULL;
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || pread(fd, &hdr, sizeof(hdr), 0) != (ssize_t)sizeof(hdr)) {
		err = -EINVAL;
		goto out_close;
	}
	err = -EINVAL;
	if (hdr.magic != RING_MAGIC || hdr.version != RING_VERSION || hdr.data_size < 4096 ||
	    (hdr.data_size & (hdr.data_size - 1)) || hdr.labels_off != RING_PAGE ||
	    hdr.maps_off != RING_PAGE + sizeof(struct ring_label_set) * RING_LABEL_SETS ||
	    hdr.data_off != hdr.maps_off + RING_MAPS_BYTES ||
	    (uint64_t)st.st_size != ring_map_len(hdr.data_size))
		goto out_close;
	map = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		err = -errno;
		goto out_close;
	}
	r = calloc(1, sizeof(*r));
	if (!r) {
		munmap(map, (size_t)st.st_size);
		err = -ENOMEM;
		goto out_close;
	}
	ring_attach(r, map, (size_t)st.st_size);
	*out = r;
	err = 0;
out_close:
	close(fd);
	return err;
}

void ring__free(struct ring *r)
{
	if (!r)
		return;
	munmap(r->sh, r->map_len);
	free(r);
}

struct ring_shared *ring__shared(struct ring *r)
{
	return r->sh;
}

void ring__set_stall_timeout(struct ring *r, uint64_t stall_ns)
{
	r->stall_ns = stall_ns;
}

static struct ring_rec *reserve(struct ring *r, unsigned int n_frames, bool count_drop)
{
	struct ring_shared *sh = r->sh;
	uint64_t need = (RING_REC_MIN + 8ull * n_frames + 7) & ~7ull;
	uint64_t head, tail, off, pad, total;

	if (need > sh->data_size / 2)
		goto drop;
	head = __atomic_load_n(&sh->head, __ATOMIC_RELAXED);
	do {
		tail = __atomic_load_n(&sh->tail, __ATOMIC_ACQUIRE);
		off = head & r->mask;
		pad = off + need > sh->data_size ? sh->data_size - off : 0;
		total = pad + need;
		if (head - tail + total > sh->data_size)
			goto drop;
	} while (!__atomic_compare_exchange_n(&sh->head, &head, head + total, true,
					      __ATOMIC_ACQ_REL, __ATOMIC_RELAXED));
	if (pad) {
		__atomic_store_n(ring_hdr_at(r, head),
				 (uint64_t)ring_tag(head) << 32 | RING_HDR_COMMIT | RING_HDR_PAD |
				     pad,
				 __ATOMIC_RELEASE);
		head += pad;
	}
	uint64_t *hdr = ring_hdr_at(r, head);

	__atomic_store_n(hdr, (uint64_t)ring_tag(head) << 32 | need, __ATOMIC_RELAXED);
	return (struct ring_rec *)(hdr + 1);
drop:
	if (count_drop)
		__atomic_fetch_add(&sh->dropped_full, 1, __ATOMIC_RELAXED);
	return NULL;
}

struct ring_rec *ring__reserve(struct ring *r, unsigned int n_frames)
{
	return reserve(r, n_frames, true);
}

struct ring_rec *ring__try_reserve(struct ring *r, unsigned int n_frames)
{
	return reserve(r, n_frames, false);
}

void ring__commit(struct ring *r, struct ring_rec *rec)
{
	uint64_t *hdr = (uint64_t *)rec - 1;
	uint64_t v = __atomic_load_n(hdr, __ATOMIC_RELAXED);

	__atomic_store_n(hdr, v | RING_HDR_COMMIT, __ATOMIC_RELEASE);
	__atomic_fetch_add(&r->sh->written, 1, __ATOMIC_RELAXED);
}

int ring__write(struct ring *r, const struct ring_rec *h, const uint64_t *frames, unsigned n)
{
	struct ring_rec *rec = ring__reserve(r, n);

	if (!rec)
		return -ENOSPC;
	*rec = *h;
	rec->n_frames = (uint16_t)n;
	for (unsigned int i = 0; i < n; i++)
		rec->frames[i] = frames[i];
	ring__commit(r, rec);
	return 0;
}

/* Frees [tail, tail + len): zeroed so that free space never holds a plausible header. */
static void ring_release(struct ring *r, uint64_t tail, uint64_t len)
{
	memset(r->data + (tail & r->mask), 0, len);
	__atomic_store_n(&r->sh->tail, tail + len, __ATOMIC_RELEASE);
}

/* An unfinished record at tail: wait for it up to stall_ns, then skip it (or all to head). */
static bool ring_stalled(struct ring *r, uint64_t tail, uint64_t now_ns)
{
	if (r->stall_pos != tail) {
		r->stall_pos = tail;
		r->stall_since = now_ns;
	}
	return now_ns - r->stall_since >= r->stall_ns;
}

static void ring_skip(struct ring *r, uint64_t tail, uint64_t len)
{
	struct ring_shared *sh = r->sh;
	uint64_t off = tail & r->mask;

	/* the ring's end is a hard boundary: a skip never wraps in one memset */
	while (len) {
		uint64_t chunk = len < sh->data_size - off ? len : sh->data_size - off;

		ring_release(r, tail, chunk);
		tail += chunk;
		len -= chunk;
		off = 0;
	}
	sh->torn++;
	r->stall_pos = UINT64_MAX;
}

int ring__drain(struct ring *r, unsigned int max, uint64_t now_ns, ring_rec_fn fn, void *ctx)
{
	struct ring_shared *sh = r->sh;
	int n = 0, rc;

	while ((unsigned int)n < max) {
		uint64_t tail = sh->tail;
		uint64_t head = __atomic_load_n(&sh->head, __ATOMIC_ACQUIRE);
		uint64_t hdr, len, room;

		if (tail == head)
			break;
		hdr = __atomic_load_n(ring_hdr_at(r, tail), __ATOMIC_ACQUIRE);
		len = hdr & RING_HDR_LEN;
		room = sh->data_size - (tail & r->mask);
		if ((uint32_t)(hdr >> 32) != ring_tag(tail) || len < 8 || (len & 7) || len > room ||
		    len > head - tail) {
			/* header not written yet (producer between CAS and store, or dead there) */
			if (!ring_stalled(r, tail, now_ns))
				break;
			sh->torn_bytes += head - tail;
			ring_skip(r, tail, head - tail);
			continue;
		}
		if (!(hdr & RING_HDR_COMMIT)) {
			if (!ring_stalled(r, tail, now_ns))
				break;
			sh->torn_bytes += len;
			ring_skip(r, tail, len);
			continue;
		}
		r->stall_pos = UINT64_MAX;
		if (hdr & RING_HDR_PAD) {
			ring_release(r, tail, len);
			continue;
		}
		const struct ring_rec *rec = (const void *)(r->data + (tail & r->mask) + 8);

		rc = 0;
		if (len >= RING_REC_MIN && rec->n_frames <= (len - RING_REC_MIN) / 8)
			rc = fn(ctx, rec);
		else
			sh->torn++; /* committed but inconsistent: never parse it */
		sh->consumed++;
		ring_release(r, tail, len);
		if (rc < 0)
			return rc;
		n++;
	}
	return n;
}

bool ring__is_empty(struct ring *r)
{
	return __atomic_load_n(&r->sh->head, __ATOMIC_ACQUIRE) == r->sh->tail;
}

void ring__stats(struct ring *r, struct ring_stats *st)
{
	struct ring_shared *sh = r->sh;

	st->written = __atomic_load_n(&sh->written, __ATOMIC_RELAXED);
	st->dropped_full = __atomic_load_n(&sh->dropped_full, __ATOMIC_RELAXED);
	st->labels_dropped = __atomic_load_n(&sh->labels_dropped, __ATOMIC_RELAXED);
	st->consumed = sh->consumed;
	st->torn = sh->torn;
	st->torn_bytes = sh->torn_bytes;
}

uint32_t ring__labels_intern(struct ring *r, const char *blob, size_t len)
{
	if (len == 0)
		return 0;
	if (len > sizeof(r->labels[0].blob))
		goto drop;
	for (uint32_t i = 0; i < RING_LABEL_SETS; i++) {
		struct ring_label_set *ls = &r->labels[i];
		uint32_t state = __atomic_load_n(&ls->state, __ATOMIC_ACQUIRE);

		if (state == 0) {
			uint32_t expect = 0;

			if (!__atomic_compare_exchange_n(&ls->state, &expect, 1, false,
							 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
				state = expect;
			} else {
				memcpy(ls->blob, blob, len);
				ls->len = (uint32_t)len;
				__atomic_store_n(&ls->state, 2, __ATOMIC_RELEASE);
				return i + 1;
			}
		}
		while (state == 1) /* another thread is writing this slot: a few stores away */
			state = __atomic_load_n(&ls->state, __ATOMIC_ACQUIRE);
		if (ls->len == len && !memcmp(ls->blob, blob, len))
			return i + 1;
	}
drop:
	__atomic_fetch_add(&r->sh->labels_dropped, 1, __ATOMIC_RELAXED);
	return 0;
}

const char *ring__labels_get(struct ring *r, uint32_t id, size_t *len)
{
	struct ring_label_set *ls;

	if (id == 0 || id > RING_LABEL_SETS)
		return NULL;
	ls = &r->labels[id - 1];
	if (__atomic_load_n(&ls->state, __ATOMIC_ACQUIRE) != 2 || ls->len > sizeof(ls->blob))
		return NULL;
	*len = ls->len;
	return ls->blob;
}

/* The chain and the snapshot of a SAMPLE_F_SNAPSHOT record; a bad descriptor drops the snapshot */
static void split_snapshot(const struct ring_rec *rec, struct agent_sample *s)
{
	uint64_t desc = rec->n_frames ? rec->frames[rec->n_frames - 1] : 0;
	uint32_t n_chain = (uint32_t)(desc & 0xffff), len = (uint32_t)(desc >> 16);

	s->flags &= (uint16_t)~SAMPLE_F_SNAPSHOT;
	if (desc >> 48 || n_chain + RING_SNAP_WORDS((uint64_t)len) != rec->n_frames) {
		s->n_user = 0; /* the producer's words are not what it said: no chain either */
		return;
	}
	s->n_user = (uint16_t)n_chain;
	s->snapshot = (const uint8_t *)&rec->frames[n_chain];
	s->snapshot_len = len;
	s->flags |= SAMPLE_F_SNAPSHOT;
}

void ring__rec_to_sample(struct ring *r, const struct ring_rec *rec, struct agent_sample *s)
{
	size_t len = 0;
	const char *p = ring__labels_get(r, rec->labels_id, &len), *end = p ? p + len : NULL;

	*s = (struct agent_sample){.time_ns = rec->time_ns,
				   .pid = rec->pid,
				   .tid = rec->tid,
				   .n_user = rec->n_frames,
				   .flags = rec->flags,
				   .frames = rec->frames,
				   .weight_ns = rec->weight_ns};
	if (rec->flags & SAMPLE_F_SNAPSHOT)
		split_snapshot(rec, s);
	while (p && p < end && s->n_labels < SAMPLE_MAX_LABELS) {
		const char *k = p, *v = memchr(k, 0, (size_t)(end - k));

		if (!v || ++v >= end || !memchr(v, 0, (size_t)(end - v)))
			break; /* blobs are written by the producer: never trust them */
		s->labels[s->n_labels++] = (struct sample_label){k, v};
		p = v + strlen(v) + 1;
	}
}

void ring__set_maps(struct ring *r, const char *text, size_t len)
{
	char *dst = (char *)r->sh + r->sh->maps_off;

	if (len >= RING_MAPS_BYTES) { /* keep whole lines */
		len = RING_MAPS_BYTES - 1;
		while (len && text[len - 1] != '\n')
			len--;
	}
	__atomic_store_n(&r->sh->maps_len, 0, __ATOMIC_RELEASE);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	memcpy(dst, text, len);
	__atomic_store_n(&r->sh->maps_len, (uint32_t)len, __ATOMIC_RELEASE);
}

static size_t ring_copy_maps(struct ring *r, char *buf, size_t max)
{
	const char *src = (const char *)r->sh + r->sh->maps_off;
	uint32_t len = __atomic_load_n(&r->sh->maps_len, __ATOMIC_ACQUIRE);

	if (len >= RING_MAPS_BYTES || len >= max)
		len = 0;
	memcpy(buf, src, len);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (__atomic_load_n(&r->sh->maps_len, __ATOMIC_ACQUIRE) != len)
		len = 0; /* rewritten meanwhile */
	buf[len] = 0;
	return len;
}

/*
 * A producer republishes its maps as it exits (libraries dlopen'ed since the start): a reader
 * that lands in that rewrite sees none, and the process may be gone before the next look. The
 * rewrite is one memcpy of at most RING_MAPS_BYTES, so a few yields outlast it.
 */
size_t ring__get_maps(struct ring *r, char *buf, size_t max)
{
	size_t len = 0;

	if (!max)
		return 0;
	for (int try = 0; try < 8 && !len; try++) {
		if (try)
			sched_yield();
		len = ring_copy_maps(r, buf, max);
	}
	return len;
}

/* The field-th number of a stat line after the ")" that ends the comm (3: the state's). */
static uint64_t stat_field(const char *p, int field)
{
	for (int i = 3; i < field && p; i++) {
		p = strchr(p, ' ');
		p = p ? p + 1 : NULL;
	}
	return p ? strtoull(p, NULL, 10) : 0;
}

int ring_proc_stat(uint32_t pid, uint64_t *start_time, uint64_t *start_code)
{
	char path[64], buf[1024], *p;
	ssize_t n;
	int fd;

	if (pid)
		snprintf(path, sizeof(path), "/proc/%u/stat", pid);
	else
		snprintf(path, sizeof(path), "/proc/self/stat");
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -EIO;
	buf[n] = 0;
	p = strrchr(buf, ')'); /* the comm may hold spaces and parentheses */
	if (!p || p[1] != ' ')
		return -EIO;
	/* by hand: sscanf of the line was a visible share of the agent's time under churn */
	*start_time = stat_field(p + 2, 22);
	if (start_code)
		*start_code = stat_field(p + 2, 26);
	return 0;
}

uint64_t ring_proc_start(uint32_t pid)
{
	uint64_t start = 0;

	return ring_proc_stat(pid, &start, NULL) ? 0 : start;
}

bool ring__producer_alive(struct ring *r)
{
	struct ring_shared *sh = r->sh;

	if (kill((pid_t)sh->pid, 0) < 0 && errno == ESRCH)
		return false;
	/* the pid may be someone else's now */
	return !sh->proc_start || ring_proc_start(sh->pid) == sh->proc_start;
}

bool ring__release(struct ring *r, const char *path)
{
	struct ring_shared *sh = r->sh;
	bool agent_seen = __atomic_load_n(&sh->tail, __ATOMIC_ACQUIRE) ||
			  __atomic_load_n(&sh->paused, __ATOMIC_ACQUIRE);

	if (__atomic_load_n(&sh->written, __ATOMIC_ACQUIRE) && !agent_seen)
		return false;
	return unlink(path) == 0;
}

struct dead_ring {
	time_t mtime;
	char name[64];
};

static int by_mtime(const void *a, const void *b)
{
	const struct dead_ring *x = a, *y = b;

	return (x->mtime > y->mtime) - (x->mtime < y->mtime);
}

/* "<pid>.ring" of a process that no longer runs (a live pid is kept, even if reused). */
static bool dead_ring_name(const char *name)
{
	char *end;
	long pid = strtol(name, &end, 10);

	return pid > 0 && !strcmp(end, ".ring") && kill((pid_t)pid, 0) < 0 && errno == ESRCH;
}

int ring__registry_trim(const char *dir, unsigned int max)
{
	struct dead_ring *dead = NULL;
	unsigned int n = 0, cap = 0, removed = 0;
	struct dirent *e;
	struct stat st;
	char path[4200];
	DIR *d = opendir(dir);

	if (!d)
		return 0;
	while ((e = readdir(d))) {
		size_t len = strlen(e->d_name);

		if (len >= sizeof(dead[0].name) || !dead_ring_name(e->d_name))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (stat(path, &st))
			continue;
		if (n == cap) {
			struct dead_ring *m = realloc(dead, (cap = cap ? 2 * cap : 32) * sizeof(*m));

			if (!m)
				break;
			dead = m;
		}
		dead[n].mtime = st.st_mtime;
		memcpy(dead[n].name, e->d_name, len + 1);
		n++;
	}
	closedir(d);
	if (n > max) {
		qsort(dead, n, sizeof(*dead), by_mtime);
		for (unsigned int i = 0; i < n - max; i++) {
			snprintf(path, sizeof(path), "%s/%s", dir, dead[i].name);
			removed += unlink(path) == 0;
		}
	}
	free(dead);
	return (int)removed;
}
