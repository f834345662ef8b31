// SPDX-License-Identifier: MIT
/* bpf/mmapev.c — see mmapev.h. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <linux/perf_event.h>

#include "elf/elf.h"
#include "bpf/cpus.h"
#include "bpf/mmapev.h"

#define MMAPEV_MAPS       24   /* code mappings a staged program may have (libc, ld.so, ...) */
#define MMAPEV_PATH_BYTES 1536 /* their paths, end to end */
#define BUILD_ID_MAX      20
#define RECORD_MAX        (sizeof(struct perf_event_header) + 64 + 4096 + 8)
/*
 * The BPF ring buffer holds samples in the order they were reserved, a little after their time
 * was taken: a sample this much older than one already delivered cannot still be waiting.
 */
#define MMAPEV_SLACK_NS   (10 * 1000 * 1000ull)

/* One executable mapping of a staged program, as its PERF_RECORD_MMAP2 gave it. */
struct staged_map {
	uint64_t start, limit, offset, dev, ino;
	uint16_t path; /* offset in the program's paths */
	bool id_known; /* build_id holds it (length 0: the file has none); else look it up */
	uint8_t build_id_len;
	uint8_t build_id[BUILD_ID_MAX];
};

/* A program exec'd since the agent started, whose process has not been sampled yet. */
struct staged {
	uint32_t pid; /* 0: free slot */
	bool incomplete; /* records lost, or more than a stage holds: read /proc instead */
	bool taken;	 /* handed to the process table, and nothing mapped since */
	int exe; /* the main program's mapping: the first one after the exec */
	uint64_t exec_ns; /* mappings older than the exec belong to the previous program */
	uint64_t exit_ns; /* 0: running */
	uint64_t used; /* stage clock at the exec: the oldest is replaced first */
	unsigned n, paths_len;
	struct staged_map maps[MMAPEV_MAPS];
	char paths[MMAPEV_PATH_BYTES];
};

struct cpu_ring {
	int fd;			      /* -1: no event on this CPU (offline, or its event died) */
	uint64_t enabled_ns;	      /* the event's time enabled at the last rescan */
	struct perf_event_mmap_page *meta;
	char *data;
	uint64_t size;
	uint64_t pos, head;	      /* being read, and where the kernel's writing stood */
	bool ready;		      /* next and next_ns hold the record at pos */
	struct perf_event_header next;
	uint64_t next_ns;
};

struct mmapev {
	struct proctab *procs;
	struct cpu_ring *rings;
	unsigned n_rings, n_staged; /* n_rings: one slot per CPU the system can have */
	int epoll_fd;		    /* where the rings are watched (mmapev__watch), or -1 */
	bool build_id;		    /* the kernel takes attr.build_id (5.12+) */
	size_t map_bytes;
	uint64_t clock;
	uint64_t samples_done_ns; /* every sample taken before this was delivered */
	struct mmapev_stats st;
	struct staged *staged;
	char rec[RECORD_MAX]; /* a record that wraps around the end of its ring, copied whole */
};

/* ---- the staged programs ------------------------------------------------------------------ */

static struct staged *stage_find(struct mmapev *ev, uint32_t pid)
{
	for (unsigned i = 0; i < ev->n_staged; i++)
		if (ev->staged[i].pid == pid)
			return &ev->staged[i];
	return NULL;
}

/*
 * A free stage, or one whose program exited before every sample still waiting was taken (none
 * can need it any more), else the oldest (counted: a running program is read from /proc then).
 */
static struct staged *stage_slot(struct mmapev *ev)
{
	struct staged *oldest = NULL, *taken = NULL;

	for (unsigned i = 0; i < ev->n_staged; i++) {
		struct staged *p = &ev->staged[i];

		if (!p->pid || (p->exit_ns && p->exit_ns < ev->samples_done_ns))
			return p;
		if (p->taken && (!taken || p->used < taken->used))
			taken = p;
		if (!oldest || p->used < oldest->used)
			oldest = p;
	}
	if (taken)
		return taken; /* the table has its maps: only later mappings go to /proc */
	ev->st.evicted++;
	return oldest;
}

static void stage_exec(struct mmapev *ev, uint32_t pid, uint64_t time_ns)
{
	struct staged *p = stage_find(ev, pid);

	if (p && p->exec_ns >= time_ns)
		return; /* an older exec seen after a newer one (two CPUs' rings) */
	if (!p)
		p = stage_slot(ev);
	p->pid = pid;
	p->exit_ns = 0;
	p->incomplete = false;
	p->taken = false;
	p->exe = -1;
	p->exec_ns = time_ns;
	p->used = ++ev->clock;
	p->n = p->paths_len = 0;
	ev->st.execs++;
	/* the table's maps of pid name the program it ran before */
	proctab__forget(ev->procs, pid);
}

/* Staged mappings that [start, limit) maps over are gone (MAP_FIXED, a JIT's new code). */
static void stage_unmap(struct staged *p, uint64_t start, uint64_t limit)
{
	unsigned k = 0;
	int exe = -1;

	for (unsigned i = 0; i < p->n; i++) {
		if (p->maps[i].limit > start && p->maps[i].start < limit)
			continue;
		if ((int)i == p->exe)
			exe = (int)k;
		p->maps[k++] = p->maps[i];
	}
	p->exe = exe;
	p->n = k;
}

/* The fields of a PERF_RECORD_MMAP2 that a staged mapping keeps. */
struct mmap_rec {
	uint32_t pid;
	uint64_t time_ns, start, len, offset, dev, ino;
	uint8_t build_id_len;
	const uint8_t *build_id;
	const char *path;
};

static void stage_mmap(struct mmapev *ev, const struct mmap_rec *r)
{
	struct staged *p = stage_find(ev, r->pid);
	const char *path = r->path;
	size_t len;
	struct staged_map *m;

	if (!p || p->incomplete || r->time_ns < p->exec_ns || !strcmp(r->path, "[vsyscall]"))
		return;
	if (!strcmp(r->path, "//anon"))
		path = ""; /* anonymous code (a JIT), as the maps show it: no file to open */
	len = strnlen(path, PROCMAP_PATH - 1);
	stage_unmap(p, r->start, r->start + r->len);
	if (p->n == MMAPEV_MAPS || p->paths_len + len + 1 > MMAPEV_PATH_BYTES) {
		p->incomplete = true;
		ev->st.overflow++;
		return;
	}
	m = &p->maps[p->n];
	*m = (struct staged_map){.start = r->start, .limit = r->start + r->len,
				 .offset = r->offset, .dev = r->dev, .ino = r->ino,
				 .path = (uint16_t)p->paths_len, .id_known = r->build_id_len > 0,
				 .build_id_len = r->build_id_len};
	if (r->build_id_len)
		memcpy(m->build_id, r->build_id, r->build_id_len);
	memcpy(p->paths + p->paths_len, path, len);
	p->paths[p->paths_len + len] = 0;
	p->paths_len += (unsigned)len + 1;
	if (p->exe < 0 && path[0] == '/')
		p->exe = (int)p->n; /* the kernel maps the program before its interpreter */
	p->n++;
	p->taken = false; /* the table's copy misses this one: a miss takes the stage again */
}

static unsigned nibble(char c)
{
	return c <= '9' ? (unsigned)(c - '0') : (unsigned)(c - 'a' + 10) & 15;
}

/* pm's mappings into p (build-ids back to bytes): a fork's parent that was sampled. */
static void stage_copy_maps(struct staged *p, const struct procmaps *pm)
{
	for (unsigned i = 0; i < pm->n && !p->incomplete; i++) {
		const struct procmap *m = &pm->maps[i];
		size_t len = strlen(m->path), idlen = strlen(m->build_id) / 2;
		struct staged_map *sm = &p->maps[p->n];

		if (p->n == MMAPEV_MAPS || p->paths_len + len + 1 > MMAPEV_PATH_BYTES ||
		    idlen > BUILD_ID_MAX) {
			p->incomplete = true;
			break;
		}
		*sm = (struct staged_map){.start = m->start, .limit = m->limit,
					  .offset = m->offset, .path = (uint16_t)p->paths_len,
					  .id_known = true, .build_id_len = (uint8_t)idlen};
		for (size_t k = 0; k < idlen; k++)
			sm->build_id[k] = (uint8_t)(nibble(m->build_id[2 * k]) << 4 |
						    nibble(m->build_id[2 * k + 1]));
		memcpy(p->paths + p->paths_len, m->path, len + 1);
		p->paths_len += (unsigned)len + 1;
		if ((int)i == pm->exe)
			p->exe = (int)p->n;
		p->n++;
	}
}

/*
 * A new process (not a thread) runs its parent's program until it execs, maybe long enough to
 * be sampled (a shell's subshell, a server's worker): it starts with the parent's mappings,
 * staged or in the process table. A parent known to neither is left to /proc.
 */
static void stage_fork(struct mmapev *ev, uint32_t pid, uint32_t ppid, uint64_t time_ns)
{
	struct staged *parent = stage_find(ev, ppid), *p;
	const struct procmaps *pm = parent ? NULL : proctab__maps(ev->procs, ppid);

	if ((!parent || parent->incomplete || parent->exit_ns) && !pm)
		return;
	p = stage_find(ev, pid);
	if (!p)
		p = stage_slot(ev);
	if (parent) {
		if (p != parent)
			memcpy(p, parent, sizeof(*p));
	} else {
		p->n = p->paths_len = 0;
		p->incomplete = false;
		p->exe = -1;
		stage_copy_maps(p, pm);
	}
	p->pid = pid;
	p->exec_ns = time_ns;
	p->exit_ns = 0;
	p->taken = false;
	p->used = ++ev->clock;
	ev->st.forks++;
}

static void stage_free(struct staged *p)
{
	p->pid = 0;
}

/* ---- records -------------------------------------------------------------------------------- */

static void on_comm(struct mmapev *ev, const struct perf_event_header *h, uint64_t time_ns)
{
	uint32_t pid;

	if (!(h->misc & PERF_RECORD_MISC_COMM_EXEC) || h->size < sizeof(*h) + 8 + 8)
		return;
	memcpy(&pid, h + 1, sizeof(pid));
	stage_exec(ev, pid, time_ns);
}

/*
 * PERF_RECORD_MMAP2: pid, tid, addr, len, pgoff, then maj, min, ino, ino_generation (or, with
 * PERF_RECORD_MISC_MMAP_BUILD_ID, the build-id's size and 20 bytes), prot, flags, filename.
 */
static void on_mmap2(struct mmapev *ev, const struct perf_event_header *h, uint64_t time_ns)
{
	const char *b = (const char *)(h + 1), *end = (const char *)h + h->size - 8;
	struct mmap_rec r = {.time_ns = time_ns};
	uint32_t maj, min;

	if (end < b + 65)
		return;
	memcpy(&r.pid, b, 4);
	memcpy(&r.start, b + 8, 8);
	memcpy(&r.len, b + 16, 8);
	memcpy(&r.offset, b + 24, 8);
	if (h->misc & PERF_RECORD_MISC_MMAP_BUILD_ID) {
		r.build_id_len = (uint8_t)b[32] < BUILD_ID_MAX ? (uint8_t)b[32] : BUILD_ID_MAX;
		r.build_id = (const uint8_t *)b + 36;
	} else {
		memcpy(&maj, b + 32, 4);
		memcpy(&min, b + 36, 4);
		memcpy(&r.ino, b + 40, 8);
		r.dev = (uint64_t)maj << 32 | min;
	}
	r.path = b + 64;
	if (!memchr(r.path, 0, (size_t)(end - r.path)))
		return; /* not terminated: not a record we understand */
	stage_mmap(ev, &r);
}

/* PERF_RECORD_FORK and _EXIT: pid, ppid, tid, ptid; a process's when pid is tid. */
static void on_task(struct mmapev *ev, const struct perf_event_header *h, uint64_t time_ns)
{
	uint32_t ids[4];
	struct staged *p;

	if (h->size < sizeof(*h) + sizeof(ids))
		return;
	memcpy(ids, h + 1, sizeof(ids));
	if (ids[0] != ids[2] || ids[0] == ids[1])
		return; /* a thread */
	if (h->type == PERF_RECORD_FORK) {
		stage_fork(ev, ids[0], ids[1], time_ns);
		return;
	}
	p = stage_find(ev, ids[0]);
	if (p && !p->exit_ns && time_ns >= p->exec_ns)
		p->exit_ns = time_ns;
}

/* Records were missed, whose is not known: every staged program may miss mappings or an exec. */
static void stages_incomplete(struct mmapev *ev)
{
	for (unsigned i = 0; i < ev->n_staged; i++)
		ev->staged[i].incomplete = true;
}

static void on_lost(struct mmapev *ev, const struct perf_event_header *h)
{
	uint64_t n;

	if (h->size < sizeof(*h) + 16)
		return;
	memcpy(&n, (const char *)(h + 1) + 8, sizeof(n));
	ev->st.lost += n;
	stages_incomplete(ev);
}

static void on_record(struct mmapev *ev, const struct perf_event_header *h, uint64_t time_ns)
{
	switch (h->type) {
	case PERF_RECORD_COMM:
		on_comm(ev, h, time_ns);
		break;
	case PERF_RECORD_MMAP2:
		on_mmap2(ev, h, time_ns);
		break;
	case PERF_RECORD_FORK:
	case PERF_RECORD_EXIT:
		on_task(ev, h, time_ns);
		break;
	case PERF_RECORD_LOST:
		on_lost(ev, h);
		break;
	}
}

/* ---- the rings ------------------------------------------------------------------------------ */

/* n bytes at position pos of ring r (which may wrap around its end) into out. */
static void ring_copy(const struct cpu_ring *r, uint64_t pos, void *out, size_t n)
{
	uint64_t off = pos & (r->size - 1);
	size_t first = off + n <= r->size ? n : (size_t)(r->size - off);

	memcpy(out, r->data + off, first);
	memcpy((char *)out + first, r->data, n - first);
}

/*
 * Whether ring r has a record waiting (read up to the head seen at the start of this pass);
 * its header and time (every record but samples ends in its sample_id: here only the time,
 * PERF_SAMPLE_TIME) in r->next and r->next_ns.
 */
static bool ring_peek(struct cpu_ring *r)
{
	if (r->pos >= r->head)
		return false;
	ring_copy(r, r->pos, &r->next, sizeof(r->next));
	if (r->next.size < sizeof(r->next) + 8 || r->next.size > RECORD_MAX ||
	    r->pos + r->next.size > r->head) {
		r->pos = r->head; /* cannot happen: skip the rest rather than misread it */
		return false;
	}
	ring_copy(r, r->pos + r->next.size - 8, &r->next_ns, sizeof(r->next_ns));
	return true;
}

/* The record r->next, whole and contiguous: in place, or copied out when it wraps. */
static const struct perf_event_header *ring_record(struct mmapev *ev, const struct cpu_ring *r)
{
	uint64_t off = r->pos & (r->size - 1);

	if (off + r->next.size <= r->size)
		return (const struct perf_event_header *)(r->data + off);
	ring_copy(r, r->pos, ev->rec, r->next.size);
	return (const struct perf_event_header *)ev->rec;
}

/*
 * Takes the records of every ring up to until_ns, oldest first across the rings (each ring is
 * in time order): a program's exec, its libraries' mmaps and its exit may sit in the rings of
 * different CPUs, and a pid may exit and be reused.
 */
static void take_records(struct mmapev *ev, uint64_t until_ns)
{
	for (unsigned i = 0; i < ev->n_rings; i++) {
		struct cpu_ring *r = &ev->rings[i];

		if (r->fd < 0) {
			r->ready = false;
			continue;
		}
		r->pos = r->meta->data_tail;
		r->head = __atomic_load_n(&r->meta->data_head, __ATOMIC_ACQUIRE);
		r->ready = ring_peek(r);
	}
	for (;;) {
		struct cpu_ring *oldest = NULL;

		for (unsigned i = 0; i < ev->n_rings; i++) {
			struct cpu_ring *r = &ev->rings[i];

			if (r->ready && r->next_ns <= until_ns &&
			    (!oldest || r->next_ns < oldest->next_ns))
				oldest = r;
		}
		if (!oldest)
			break;
		on_record(ev, ring_record(ev, oldest), oldest->next_ns);
		oldest->pos += oldest->next.size;
		oldest->ready = ring_peek(oldest);
	}
	for (unsigned i = 0; i < ev->n_rings; i++) /* per sample: write only what moved */
		if (ev->rings[i].fd >= 0 && ev->rings[i].pos != ev->rings[i].meta->data_tail)
			__atomic_store_n(&ev->rings[i].meta->data_tail, ev->rings[i].pos,
					 __ATOMIC_RELEASE);
}

void mmapev__advance(struct mmapev *ev, uint64_t until_ns, bool samples_done)
{
	if (!ev)
		return;
	/* first: the stages of programs that exited before it are free while records are taken */
	if (samples_done && until_ns > MMAPEV_SLACK_NS &&
	    until_ns - MMAPEV_SLACK_NS > ev->samples_done_ns)
		ev->samples_done_ns = until_ns - MMAPEV_SLACK_NS;
	take_records(ev, until_ns);
}

static int watch_ring(int epoll_fd, const struct cpu_ring *r)
{
	struct epoll_event e = {.events = EPOLLIN, .data.u64 = UINT64_MAX};

	return epoll_ctl(epoll_fd, EPOLL_CTL_ADD, r->fd, &e) ? -errno : 0;
}

int mmapev__watch(struct mmapev *ev, int epoll_fd)
{
	if (!ev)
		return 0;
	ev->epoll_fd = epoll_fd;
	for (unsigned i = 0; i < ev->n_rings; i++) {
		int err = ev->rings[i].fd >= 0 ? watch_ring(epoll_fd, &ev->rings[i]) : 0;

		if (err)
			return err;
	}
	return 0;
}

/* ---- handing over --------------------------------------------------------------------------- */

struct procmaps *mmapev__take(void *ctx, uint32_t pid, unsigned int max_maps)
{
	struct mmapev *ev = ctx;
	struct staged *p;
	struct procmaps *pm;

	p = stage_find(ev, pid);
	if (p && p->incomplete)
		stage_free(p);
	if (!p || !p->pid || p->taken)
		return NULL;
	/* none yet (a sample inside execve): handed over empty, filled in at the next miss */
	pm = procmaps__new(pid, p->n < max_maps ? p->n : max_maps);
	for (unsigned i = 0; pm && i < p->n; i++) {
		const struct staged_map *m = &p->maps[i];
		char id[2 * BUILD_ID_MAX + 1];
		struct procmap_desc d = {.start = m->start, .limit = m->limit, .offset = m->offset,
					 .dev = m->dev, .ino = m->ino, .path = p->paths + m->path};

		if (m->id_known) {
			elf__build_id_hex(m->build_id, m->build_id_len, id, sizeof(id));
			d.build_id = id;
		}
		procmaps__add(pm, &d);
	}
	if (pm) {
		pm = procmaps__done(pm, p->exe);
		ev->st.adopted++;
		p->taken = true; /* kept: its libraries may still be mapped (ld.so runs first) */
	}
	return pm;
}

void mmapev__stats(const struct mmapev *ev, struct mmapev_stats *st)
{
	*st = ev ? ev->st : (struct mmapev_stats){0};
}

/* ---- opening -------------------------------------------------------------------------------- */

static int open_event(int cpu, bool build_id, size_t wake_bytes)
{
	struct perf_event_attr a = {
	    .type = PERF_TYPE_SOFTWARE,
	    .config = PERF_COUNT_SW_DUMMY,
	    .size = sizeof(a),
	    .sample_type = PERF_SAMPLE_TIME,
	    .read_format = PERF_FORMAT_TOTAL_TIME_ENABLED, /* cpus__event_alive() */
	    .sample_id_all = 1,
	    .mmap = 1,
	    .mmap2 = 1, /* executable mappings only: mmap_data stays 0 */
	    .comm = 1,
	    .comm_exec = 1,
	    .task = 1,
	    .build_id = build_id,
	    .use_clockid = 1,
	    .clockid = CLOCK_MONOTONIC,
	    .watermark = 1,
	    .wakeup_watermark = (uint32_t)wake_bytes, /* half the ring (mmapev__watch) */
	};
	int fd = (int)syscall(SYS_perf_event_open, &a, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);

	return fd < 0 ? -errno : fd;
}

static int map_ring(struct cpu_ring *r, size_t bytes, size_t page)
{
	void *base = mmap(NULL, bytes + page, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);

	if (base == MAP_FAILED)
		return -errno;
	r->meta = base;
	r->data = (char *)base + (r->meta->data_offset ? r->meta->data_offset : page);
	r->size = r->meta->data_size ? r->meta->data_size : bytes;
	return 0;
}

static size_t ring_size(size_t page)
{
	size_t want = (size_t)CONFIG_BPF_MMAP_RING_KB * 1024, sz = page;

	while (sz < want)
		sz <<= 1; /* the kernel wants a power-of-two number of pages */
	return sz;
}

/* The event and ring of cpu; 0, or -errno (offline: -ENODEV). */
static int ring_open(struct mmapev *ev, int cpu)
{
	struct cpu_ring *r = &ev->rings[cpu];
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	int fd = open_event(cpu, ev->build_id, ev->map_bytes / 2), err;

	if (fd == -EINVAL && ev->build_id) { /* before Linux 5.12: dev and inode */
		ev->build_id = false;
		fd = open_event(cpu, false, ev->map_bytes / 2);
	}
	if (fd < 0)
		return fd;
	r->fd = fd;
	r->enabled_ns = 0;
	err = map_ring(r, ev->map_bytes, page);
	if (err) {
		close(fd);
		r->fd = -1;
	}
	return err;
}

static void ring_close(struct mmapev *ev, struct cpu_ring *r)
{
	munmap(r->meta, ev->map_bytes + (size_t)sysconf(_SC_PAGESIZE));
	close(r->fd); /* leaves the epoll set with it */
	*r = (struct cpu_ring){.fd = -1};
}

/*
 * Whether to ask the kernel for build-ids in the records (attr.build_id, Linux 5.12+): off
 * unless EDGEPROF_BPF_MMAP_BUILD_IDS=1. The kernel writes each mmap record once per listening
 * event from one shared header, and an event with attr.build_id ORs
 * PERF_RECORD_MISC_MMAP_BUILD_ID into that header's misc without clearing it after
 * (kernel/events/core.c, perf_event_mmap_output(), 5.12 to at least 6.18): every event served
 * after ours -- another session's perf record -- gets records flagged as carrying a build-id
 * whose bodies hold the device and inode; Debian 12's perf then asserts in
 * util/build-id.c and dies of a smashed stack. The build-ids come from the mapped files instead
 * (procmaps__add, cached by device and inode), which the agent opens anyway for their tables.
 */
static bool want_build_ids(void)
{
	const char *env = getenv("EDGEPROF_BPF_MMAP_BUILD_IDS");

	return env && *env == '1';
}

/* One event and ring per CPU the kernel accepts (offline CPUs are skipped: ENODEV). */
static int open_rings(struct mmapev *ev, char *err, size_t errlen)
{
	long ncpus = sysconf(_SC_NPROCESSORS_CONF);
	int first_err = 0;

	ev->map_bytes = ring_size((size_t)sysconf(_SC_PAGESIZE));
	ev->n_rings = (unsigned)(ncpus > 0 ? ncpus : 1);
	ev->rings = calloc(ev->n_rings, sizeof(*ev->rings));
	if (!ev->rings)
		return -ENOMEM;
	ev->build_id = want_build_ids();
	for (unsigned cpu = 0; cpu < ev->n_rings; cpu++) {
		int ret;

		ev->rings[cpu].fd = -1;
		ret = ring_open(ev, (int)cpu);
		if (ret)
			first_err = first_err ? first_err : ret;
		else
			ev->st.cpus++;
	}
	ev->st.build_ids = ev->build_id;
	if (!ev->st.cpus) {
		snprintf(err, errlen, "perf_event_open(dummy, mmap records): %s",
			 strerror(first_err ? -first_err : ENODEV));
		return first_err ? first_err : -ENODEV;
	}
	return 0;
}

void mmapev__rescan(struct mmapev *ev)
{
	for (unsigned cpu = 0; ev && cpu < ev->n_rings; cpu++) {
		struct cpu_ring *r = &ev->rings[cpu];

		if (r->fd >= 0 && !cpus__event_alive(r->fd, (int)cpu, &r->enabled_ns)) {
			ring_close(ev, r);
			ev->st.cpus--;
			ev->st.cpu_offline++;
			/* back online before this rescan: its records since then are missing */
			stages_incomplete(ev);
		}
		if (r->fd >= 0 || !cpus__online((int)cpu) || ring_open(ev, (int)cpu))
			continue;
		if (ev->epoll_fd >= 0 && watch_ring(ev->epoll_fd, r))
			ring_close(ev, r);
		else
			ev->st.cpus++;
	}
}

struct mmapev *mmapev__open(struct proctab *t, char *err, size_t errlen)
{
	struct mmapev *ev = calloc(1, sizeof(*ev));

	if (!ev)
		return NULL;
	ev->procs = t;
	ev->epoll_fd = -1;
	ev->n_staged = CONFIG_BPF_MMAP_PROCS;
	ev->staged = calloc(ev->n_staged, sizeof(*ev->staged));
	if (!ev->staged || open_rings(ev, err, errlen)) {
		mmapev__free(ev);
		return NULL;
	}
	return ev;
}

void mmapev__free(struct mmapev *ev)
{
	if (!ev)
		return;
	for (unsigned i = 0; ev->rings && i < ev->n_rings; i++)
		if (ev->rings[i].fd >= 0)
			ring_close(ev, &ev->rings[i]);
	free(ev->rings);
	free(ev->staged);
	free(ev);
}
