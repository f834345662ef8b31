// SPDX-License-Identifier: MIT
/* agent/core/procmaps.c — see procmaps.h. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/core/procmaps.h"
#include "agent/core/ring.h"
#include "port/hash.h"

/*
 * Build-ids of the files seen, keyed by the device and inode the maps line itself shows (and
 * the path, so that two views of one inode never mix): the same libc mapped by a hundred
 * processes is read once, and a new process costs no stat per mapping. The file's size and
 * mtime are checked with one stat per file per generation (a round): a file rewritten in place,
 * or a new file that got a freed inode number, is read again at its first use in the next
 * round. Bounded (set-associative, see build_id_slot()); failures are remembered too ("").
 */
struct build_id_slot {
	uint64_t dev, ino, path_hash; /* the key, from the maps line */
	off_t size;
	struct timespec mtime;
	uint64_t checked; /* generation of the last stat */
	uint64_t used_at; /* build_id_clock at the last lookup: the set's oldest is replaced */
	bool used;
	char hex[ELF_BUILD_ID_HEX];
};

struct file_key {
	uint64_t dev, ino, path_hash;
};

static struct build_id_slot build_ids[PROCMAPS_BUILD_ID_CACHE];
static struct procmaps_stats pm_stats;
static uint64_t generation = 1, build_id_clock;

void procmaps__revalidate(void)
{
	generation++;
}

uint64_t procmaps__hash(const char *path)
{
	return hash_fnv64_str(path);
}

/*
 * Sets of BUILD_ID_WAYS slots: a file is looked for in its set; a new one replaces the set's
 * least recently used slot, so that a stream of files seen once (a busy build machine) does not
 * push out the libraries every process maps.
 */
#define BUILD_ID_WAYS 4
#define BUILD_ID_SETS (PROCMAPS_BUILD_ID_CACHE / BUILD_ID_WAYS)

static struct build_id_slot *build_id_slot(const struct file_key *k, bool *hit)
{
	uint64_t h = (k->dev * 0x9E3779B97F4A7C15ull) ^ k->ino ^ k->path_hash;
	struct build_id_slot *set = &build_ids[(h * 0x9E3779B97F4A7C15ull >> 40) % BUILD_ID_SETS *
					       BUILD_ID_WAYS];
	struct build_id_slot *oldest = set;

	for (int i = 0; i < BUILD_ID_WAYS; i++) {
		struct build_id_slot *b = &set[i];

		if (b->used && b->dev == k->dev && b->ino == k->ino &&
		    b->path_hash == k->path_hash) {
			b->used_at = ++build_id_clock;
			*hit = true;
			return b;
		}
		if (b->used_at < oldest->used_at)
			oldest = b;
	}
	*hit = false;
	return oldest; /* stamped when filled */
}

/* The cached build-id when the file was checked this generation: no system call at all. */
static bool fresh_build_id(const struct file_key *k, char *hex, size_t hexlen)
{
	bool hit;
	struct build_id_slot *b = build_id_slot(k, &hit);

	if (!hit || b->checked != generation)
		return false;
	pm_stats.build_id_hits++;
	snprintf(hex, hexlen, "%s", b->hex);
	return true;
}

static bool same_file(const struct build_id_slot *b, const struct stat *st)
{
	return b->size == st->st_size && b->mtime.tv_sec == st->st_mtim.tv_sec &&
	       b->mtime.tv_nsec == st->st_mtim.tv_nsec;
}

/* The build-id of path (hex, "" when none): one stat, and the ELF notes if the file changed. */
static int cached_build_id(const char *path, const struct file_key *k, char *hex, size_t hexlen)
{
	struct build_id_slot *b;
	struct stat st;
	bool hit;
	int err;

	pm_stats.file_stats++;
	if (stat(path, &st))
		return -errno;
	b = build_id_slot(k, &hit);
	if (!hit || !same_file(b, &st)) {
		char id[ELF_BUILD_ID_HEX] = "";

		err = elf__build_id(path, id, sizeof(id));
		if (err && err != -ENOENT && err != -EINVAL)
			return err; /* unreadable now: not remembered */
		/* no note, or not ELF: remembered as such ("") */
		*b = (struct build_id_slot){.dev = k->dev, .ino = k->ino,
					    .path_hash = k->path_hash, .size = st.st_size,
					    .mtime = st.st_mtim, .used_at = ++build_id_clock,
					    .used = true};
		snprintf(b->hex, sizeof(b->hex), "%s", err ? "" : id);
		pm_stats.build_id_reads++;
	} else {
		pm_stats.build_id_hits++;
	}
	b->checked = generation;
	snprintf(hex, hexlen, "%s", b->hex);
	return 0;
}

/* The file behind a mapping, seen through the process's root when it lives (containers). */
static void map_build_id(uint32_t pid, struct procmap *m, struct file_key *k)
{
	char p[PROCMAP_PATH + 32];

	m->build_id[0] = 0;
	if (m->path[0] != '/')
		return;
	k->path_hash = procmaps__hash(m->path);
	if (fresh_build_id(k, m->build_id, sizeof(m->build_id)))
		return;
	snprintf(p, sizeof(p), "/proc/%u/root%s", pid, m->path);
	if (pid == 0 || cached_build_id(p, k, m->build_id, sizeof(m->build_id)) != 0)
		cached_build_id(m->path, k, m->build_id, sizeof(m->build_id));
}

void procmaps__stats(struct procmaps_stats *st)
{
	*st = pm_stats;
}

/* One number of a maps line, in base, that must end with stop: *p moves past stop. */
static bool maps_field(char **p, int base, char stop, uint64_t *v)
{
	char *end;

	*v = strtoull(*p, &end, base);
	if (end == *p || *end != stop)
		return false;
	*p = end + 1;
	return true;
}

/*
 * "start-end perms offset major:minor inode   path": parsed by hand (sscanf was a tenth of
 * the agent's user time on a machine that starts many processes).
 */
static bool parse_fields(char *line, struct procmap *m, struct file_key *k, char **path)
{
	uint64_t major, minor;
	char *p = line;

	*m = (struct procmap){0};
	*k = (struct file_key){0};
	if (!maps_field(&p, 16, '-', &m->start) || !maps_field(&p, 16, ' ', &m->limit))
		return false;
	if (strnlen(p, 5) < 5 || p[2] != 'x' || p[4] != ' ')
		return false;
	p += 5;
	if (!maps_field(&p, 16, ' ', &m->offset) || !maps_field(&p, 16, ':', &major) ||
	    !maps_field(&p, 16, ' ', &minor))
		return false;
	k->ino = strtoull(p, &p, 10);
	k->dev = major << 32 | minor;
	*path = p + strspn(p, " \t\n");
	return true;
}

/*
 * One maps line: an executable, file-backed (or vDSO) mapping into m, its path copied into
 * pathbuf (PROCMAP_PATH bytes); false otherwise.
 */
static bool parse_line(char *line, uint32_t pid, struct procmap *m, char *pathbuf)
{
	struct file_key k;
	char *path, *sp = strchr(line, ' ');

	/* most lines map data: skip them first */
	if (!sp || strnlen(sp, 4) < 4 || sp[3] != 'x')
		return false;
	if (!parse_fields(line, m, &k, &path))
		return false;
	path[strcspn(path, "\n")] = 0;
	if (!strcmp(path, "[vsyscall]"))
		return false;
	snprintf(pathbuf, PROCMAP_PATH, "%s", path);
	m->path = pathbuf;
	map_build_id(pid, m, &k);
	return true;
}

/*
 * Room for max_maps mappings, then for their paths while parsing (PROCMAP_PATH each). Only the
 * header is cleared: each mapping is written whole when parsed (clearing ~80 KB for a process
 * with a dozen mappings was a visible share of the agent's time on a machine starting many).
 */
static struct procmaps *procmaps_alloc(uint32_t pid, unsigned int max_maps)
{
	struct procmaps *pm =
	    malloc(sizeof(*pm) + max_maps * (sizeof(struct procmap) + PROCMAP_PATH));

	if (pm) {
		memset(pm, 0, sizeof(*pm));
		pm->pid = pid;
		pm->max = max_maps;
		pm->exe = -1;
	}
	return pm;
}

static char *path_scratch(struct procmaps *pm, unsigned int i)
{
	return (char *)&pm->maps[pm->max] + (size_t)i * PROCMAP_PATH;
}

struct procmaps *procmaps__new(uint32_t pid, unsigned int max_maps)
{
	return procmaps_alloc(pid, max_maps);
}

bool procmaps__add(struct procmaps *pm, const struct procmap_desc *d)
{
	struct file_key k = {.dev = d->dev, .ino = d->ino};
	size_t len = strnlen(d->path, PROCMAP_PATH - 1); /* cut as a text line's path is */
	struct procmap *m;
	char *pathbuf;

	if (pm->n >= pm->max)
		return false;
	m = &pm->maps[pm->n];
	pathbuf = path_scratch(pm, pm->n);
	*m = (struct procmap){.start = d->start, .limit = d->limit, .offset = d->offset};
	memcpy(pathbuf, d->path, len);
	pathbuf[len] = 0;
	m->path = pathbuf;
	if (d->build_id)
		snprintf(m->build_id, sizeof(m->build_id), "%s", d->build_id);
	else
		map_build_id(pm->pid, m, &k);
	pm->n++;
	return true;
}

/*
 * Copies the mappings in use and their paths, end to end, into one block of their size: a
 * cached process costs what it maps (~100 bytes a mapping), not max_maps full-size paths.
 * Without memory for the copy the parse block is kept (still valid, only bigger).
 */
static struct procmaps *procmaps_pack(struct procmaps *pm)
{
	size_t paths = 0, head = sizeof(*pm) + pm->n * sizeof(struct procmap);
	struct procmaps *small;
	char *p;

	for (unsigned int i = 0; i < pm->n; i++)
		paths += strlen(pm->maps[i].path) + 1;
	small = malloc(head + paths);
	if (!small)
		return pm;
	memcpy(small, pm, head);
	small->max = small->n;
	p = (char *)small + head;
	for (unsigned int i = 0; i < pm->n; i++) {
		size_t len = strlen(pm->maps[i].path) + 1;

		memcpy(p, pm->maps[i].path, len);
		small->maps[i].path = p;
		p += len;
	}
	free(pm);
	return small;
}

struct procmaps *procmaps__done(struct procmaps *pm, int exe)
{
	pm->exe = exe >= 0 && (unsigned int)exe < pm->n ? exe : -1;
	return procmaps_pack(pm);
}

/* The executable mappings of a maps file's text; f is closed. */
static int parse_stream(FILE *f, uint32_t pid, unsigned int max_maps, struct procmaps **out)
{
	struct procmaps *pm;
	char line[PROCMAP_PATH + 128], buf[16384];

	/* stdio would read a /proc file 1 KiB a call (its st_blksize): 16 KiB is most maps whole */
	setvbuf(f, buf, _IOFBF, sizeof(buf));
	pm_stats.maps_reads++;
	pm = procmaps_alloc(pid, max_maps);
	if (!pm) {
		fclose(f);
		return -ENOMEM;
	}
	while (fgets(line, sizeof(line), f) && pm->n < max_maps)
		if (parse_line(line, pid, &pm->maps[pm->n], path_scratch(pm, pm->n)))
			pm->n++;
	fclose(f);
	*out = procmaps_pack(pm);
	return 0;
}

int procmaps__parse_file(const char *maps_path, uint32_t pid, unsigned int max_maps,
			 struct procmaps **out)
{
	FILE *f;

	*out = NULL;
	f = fopen(maps_path, "re");
	if (!f)
		return -errno;
	return parse_stream(f, pid, max_maps, out);
}

int procmaps__parse_text(const char *text, uint32_t pid, unsigned int max_maps,
			 struct procmaps **out)
{
	struct procmaps *pm = procmaps_alloc(pid, max_maps);
	char line[PROCMAP_PATH + 128];

	*out = NULL;
	if (!pm)
		return -ENOMEM;
	while (*text && pm->n < max_maps) {
		size_t n = strcspn(text, "\n");

		snprintf(line, sizeof(line), "%.*s", (int)n, text);
		if (parse_line(line, pid, &pm->maps[pm->n], path_scratch(pm, pm->n)))
			pm->n++;
		text += n + (text[n] == '\n');
	}
	*out = procmaps_pack(pm);
	return 0;
}

size_t procmaps__exec_lines(const char *text, char *out, size_t max)
{
	size_t len = 0;

	while (*text) {
		size_t n = strcspn(text, "\n");
		const char *sp = memchr(text, ' ', n);

		if (sp && (size_t)(sp - text) + 3 < n && sp[3] == 'x' && len + n + 2 <= max) {
			memcpy(out + len, text, n);
			len += n;
			out[len++] = '\n';
		}
		text += n + (text[n] == '\n');
	}
	if (len < max)
		out[len] = 0;
	return len;
}

/*
 * PROCMAP_QUERY (Linux 6.11, uapi linux/fs.h): the kernel hands over one mapping per ioctl on
 * the maps file, here only the executable ones, instead of formatting every mapping as text (a
 * compiler maps ~100 regions, ~10 of them code; the text cost ~3x the queries). Declared here:
 * build hosts' headers may predate it. Older kernels answer ENOTTY: text from then on.
 */
struct procmap_query {
	uint64_t size, query_flags, query_addr;
	uint64_t vma_start, vma_end, vma_flags, vma_page_size, vma_offset, inode;
	uint32_t dev_major, dev_minor, vma_name_size, build_id_size;
	uint64_t vma_name_addr, build_id_addr;
};

#define PROCMAP_QUERY _IOWR('f', 17, struct procmap_query)
#define PROCMAP_QUERY_VMA_EXECUTABLE 0x04
#define PROCMAP_QUERY_COVERING_OR_NEXT_VMA 0x10

static bool query_missing;

/* One queried mapping into pm (the same fields parse_line() takes from a text line). */
static void query_add(struct procmaps *pm, const struct procmap_query *q, const char *name)
{
	struct procmap_desc d = {.start = q->vma_start, .limit = q->vma_end,
				 .offset = q->vma_offset, .path = name, .ino = q->inode,
				 .dev = (uint64_t)q->dev_major << 32 | q->dev_minor};

	if (strcmp(name, "[vsyscall]"))
		procmaps__add(pm, &d);
}

/* The executable mappings of the process whose maps file is fd, by PROCMAP_QUERY; or -errno. */
static int query_maps(int fd, struct procmaps *pm)
{
	char name[PATH_MAX];
	uint64_t addr = 0;

	while (pm->n < pm->max) {
		struct procmap_query q = {
		    .size = sizeof(q),
		    .query_flags =
			PROCMAP_QUERY_VMA_EXECUTABLE | PROCMAP_QUERY_COVERING_OR_NEXT_VMA,
		    .query_addr = addr,
		    .vma_name_addr = (uintptr_t)name,
		    .vma_name_size = sizeof(name),
		};

		if (ioctl(fd, PROCMAP_QUERY, &q))
			return errno == ENOENT ? 0 : -errno; /* ENOENT: no mapping above addr */
		if (!q.vma_name_size)
			name[0] = 0; /* anonymous code (a JIT) */
		query_add(pm, &q, name);
		addr = q.vma_end;
	}
	return 0;
}

/* The executable mappings of pid (0: self): queried where the kernel can, else its maps text. */
static int read_maps(uint32_t pid, uint32_t real, unsigned int max_maps, struct procmaps **out)
{
	char path[64];
	struct procmaps *pm;
	FILE *f;
	int fd, err;

	*out = NULL;
	if (pid == 0)
		snprintf(path, sizeof(path), "/proc/self/maps");
	else
		snprintf(path, sizeof(path), "/proc/%u/maps", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (!query_missing) {
		pm = procmaps_alloc(real, max_maps);
		err = pm ? query_maps(fd, pm) : -ENOMEM;
		if (!err) {
			close(fd);
			pm_stats.maps_reads++;
			*out = procmaps_pack(pm);
			return 0;
		}
		free(pm);
		if (err == -ENOTTY || err == -EINVAL || err == -EOPNOTSUPP)
			query_missing = true;
		/* else (a name longer than PATH_MAX, ...): this once as text */
	}
	f = fdopen(fd, "r");
	if (!f) {
		err = -errno;
		close(fd);
		return err;
	}
	return parse_stream(f, real, max_maps, out);
}

/*
 * The mapping of the main program's text, found by its start (/proc/<pid>/stat's startcode, set
 * by the kernel's ELF loader): the path /proc/<pid>/exe names, without a readlink per process.
 */
static void find_exe(struct procmaps *pm, uint64_t start_code)
{
	for (unsigned int i = 0; start_code > 1 && i < pm->n; i++) {
		if (start_code >= pm->maps[i].start && start_code < pm->maps[i].limit &&
		    pm->maps[i].path[0] == '/') {
			pm->exe = (int)i;
			return;
		}
	}
}

/*
 * The stat line is read first: its start time must belong to the process whose maps follow. If
 * the pid is reused in between, the newer maps carry the older start time, and the round's end
 * drops them (proctab_stale) rather than keeping them under the new process's start time.
 */
int procmaps__read(uint32_t pid, unsigned int max_maps, struct procmaps **out)
{
	uint32_t real = pid ? pid : (uint32_t)getpid();
	uint64_t start_time = 0, start_code = 0;
	int err;

	ring_proc_stat(pid, &start_time, &start_code);
	err = read_maps(pid, real, max_maps, out);
	if (err)
		return err;
	if (!(*out)->n) { /* an exiting process: its memory is gone, /proc shows no mapping */
		procmaps__free(*out);
		*out = NULL;
		return -ESRCH;
	}
	(*out)->start_time = start_time;
	find_exe(*out, start_code);
	return 0;
}

const char *procmaps__exe(const struct procmaps *pm)
{
	return pm && pm->exe >= 0 ? pm->maps[pm->exe].path : NULL;
}

const struct procmap *procmaps__find(const struct procmaps *pm, uint64_t addr)
{
	for (unsigned int i = 0; pm && i < pm->n; i++)
		if (addr >= pm->maps[i].start && addr < pm->maps[i].limit)
			return &pm->maps[i];
	return NULL;
}

void procmaps__free(struct procmaps *pm)
{
	free(pm);
}

struct proc_slot {
	struct procmaps *pm;
	uint64_t last_used;  /* access clock: of the least used slots, the oldest is evicted */
	uint64_t used_round; /* round of the last use */
	uint32_t round_uses; /* lookups in used_round: about its samples there */
	bool loaded;	     /* the maps came from the loader: ask it again on a miss */
	uint64_t refreshed;  /* round of the last re-read */
	uint64_t read_ns;    /* when they were read (monotonic) */
	uint64_t missed;     /* round + 1 of the last re-read a miss asked for, 0: none */
	uint64_t comm;       /* hash of the main thread's comm seen with these maps, 0: none */
	bool settled;	     /* read again after the first read (or from the loader) */
	uint32_t touches;    /* samples since the first read, until settled */
	int next;	     /* next slot in the same hash bucket, -1: last */
};

/*
 * A miss in maps read this round is read again once in the round, if they are this old: a
 * process's first sample may come while its loader still maps its libraries, and a round's
 * names come at its end (a one-round --once run would else name none of them).
 */
#define PROCTAB_REREAD_NS (100 * 1000 * 1000ull)
/*
 * Every process's maps (from /proc) are read once more at this use (a sample each): by then it
 * has run past its loader. Counted, not timed: one second left the libc frames of stacks-
 * bench's own program (0.9 s of CPU) unnamed.
 */
#define PROCTAB_SETTLE_TOUCHES 8

/* CLOCK_MONOTONIC, ns (not port/clock: every program and test that links this file would
 * need it too). */
static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Pids whose maps could not be read this round (exited before we looked): not retried. */
#define PROCTAB_GONE CONFIG_PROC_GONE_ENTRIES

/*
 * Slots are found by pid through hash buckets (a sample's lookup costs a few compares, not a
 * scan of the table); evicting the least recently used slot scans it, once per new process.
 */
struct proctab {
	unsigned int max_procs, max_maps, n_buckets;
	struct proc_slot *slots;
	int *buckets; /* first slot of each bucket, -1: empty */
	uint64_t round, clock;
	uint32_t gone[PROCTAB_GONE]; /* direct-mapped by pid; cleared each round */
	proctab_loader_fn loader;
	void *loader_ctx;
	struct proctab_stats st;
};

static unsigned int bucket_count(unsigned int max_procs)
{
	unsigned int n = 16;

	while (n < max_procs && n < (1u << 20))
		n <<= 1;
	return n;
}

struct proctab *proctab__new(unsigned int max_procs, unsigned int max_maps)
{
	struct proctab *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->max_procs = max_procs;
	t->max_maps = max_maps;
	t->n_buckets = bucket_count(max_procs);
	t->slots = calloc(max_procs, sizeof(*t->slots));
	t->buckets = malloc(t->n_buckets * sizeof(*t->buckets));
	if (!t->slots || !t->buckets) {
		proctab__free(t);
		return NULL;
	}
	memset(t->buckets, -1, t->n_buckets * sizeof(*t->buckets));
	t->round = 1;
	return t;
}

void proctab__free(struct proctab *t)
{
	if (!t)
		return;
	for (unsigned int i = 0; t->slots && i < t->max_procs; i++)
		procmaps__free(t->slots[i].pm);
	free(t->slots);
	free(t->buckets);
	free(t);
}

static int *proctab_bucket(struct proctab *t, uint32_t pid)
{
	return &t->buckets[(pid * 2654435761u) & (t->n_buckets - 1)];
}

static struct proc_slot *proctab_find(struct proctab *t, uint32_t pid)
{
	for (int i = *proctab_bucket(t, pid); i >= 0; i = t->slots[i].next)
		if (t->slots[i].pm->pid == pid)
			return &t->slots[i];
	return NULL;
}

/* Puts pm into the empty slot s and links it into its pid's bucket. */
static void proctab_link(struct proctab *t, struct proc_slot *s, struct procmaps *pm)
{
	int *head = proctab_bucket(t, pm->pid);

	s->pm = pm;
	s->next = *head;
	*head = (int)(s - t->slots);
}

/* Empties slot s: unlinked from its bucket, its maps freed. */
static void proctab_drop(struct proctab *t, struct proc_slot *s)
{
	int idx = (int)(s - t->slots);

	for (int *p = proctab_bucket(t, s->pm->pid); *p >= 0; p = &t->slots[*p].next) {
		if (*p == idx) {
			*p = s->next;
			break;
		}
	}
	procmaps__free(s->pm);
	s->pm = NULL;
}

static void proctab_use(struct proctab *t, struct proc_slot *s)
{
	s->last_used = ++t->clock;
	if (s->used_round != t->round)
		s->round_uses = 0;
	s->used_round = t->round;
	s->round_uses++;
}

static uint32_t round_uses(const struct proctab *t, const struct proc_slot *s)
{
	return s->used_round == t->round ? s->round_uses : 0;
}

/*
 * A free slot, or one emptied (counted): the one least used this round, the oldest of those.
 * Names are given at the round's end from this table, so a process evicted loses its round's
 * samples: on a machine starting more processes a round than the table holds, a thousand
 * one-sample programs must not push out the process with most of the samples.
 */
static struct proc_slot *proctab_free_slot(struct proctab *t)
{
	struct proc_slot *victim = NULL;

	for (unsigned int i = 0; i < t->max_procs; i++) {
		struct proc_slot *s = &t->slots[i];

		if (!s->pm) {
			s->round_uses = 0;
			return s;
		}
		if (!victim || round_uses(t, s) < round_uses(t, victim) ||
		    (round_uses(t, s) == round_uses(t, victim) && s->last_used < victim->last_used))
			victim = s;
	}
	proctab_drop(t, victim);
	t->st.evicted++;
	victim->round_uses = 0;
	return victim;
}

static uint32_t *proctab_gone(struct proctab *t, uint32_t pid)
{
	return &t->gone[pid % PROCTAB_GONE];
}

static int proctab_load(struct proctab *t, uint32_t pid, struct proc_slot **out)
{
	struct proc_slot *s = proctab_find(t, pid);
	struct procmaps *pm;
	bool loaded = false;
	int err;

	if (pid && *proctab_gone(t, pid) == pid)
		return -ESRCH;
	/* the loader may forget other pids, never this one: it is not in the table (!s) */
	pm = !s && t->loader ? t->loader(t->loader_ctx, pid, t->max_maps) : NULL;
	if (pm) {
		t->st.loaded++;
		loaded = true;
	} else {
		err = procmaps__read(pid, t->max_maps, &pm);
		if (err) {
			*proctab_gone(t, pid) = pid;
			t->st.lost += !s; /* sampled, its maps never known: counted, not silent */
			return err;
		}
		t->st.reads++;
	}
	if (s) {
		proctab_drop(t, s);
		t->st.refreshes++;
	} else {
		s = proctab_free_slot(t);
		s->missed = 0;
		s->comm = 0;
		s->settled = loaded;
		s->touches = 0;
	}
	proctab_link(t, s, pm);
	s->refreshed = t->round;
	s->read_ns = mono_ns();
	s->loaded = loaded;
	proctab_use(t, s);
	*out = s;
	return 0;
}

/* Whether a miss in s's maps should read them again (see PROCTAB_REREAD_NS). */
static bool proctab_reread(struct proctab *t, struct proc_slot *s)
{
	/*
	 * Maps from the loader that it has nothing more for (asked again above) are read from
	 * /proc too: its stage was given to another program, or overflowed. They used to wait
	 * for the next round, and a program that ended within the round had its libraries
	 * unknown for good (lua5.4: libc never named, 30 % <unknown> leaves).
	 */
	if (s->refreshed != t->round)
		return true;
	if (s->missed == t->round + 1 || mono_ns() - s->read_ns < PROCTAB_REREAD_NS)
		return false;
	s->missed = t->round + 1;
	return true;
}

/*
 * A miss in maps that came from the loader: it may have more now (libraries mapped after the
 * first sample); the loader answers NULL when nothing was mapped since.
 */
static bool proctab_reload(struct proctab *t, struct proc_slot *s)
{
	struct procmaps *pm = t->loader ? t->loader(t->loader_ctx, s->pm->pid, t->max_maps) : NULL;

	if (!pm)
		return false;
	procmaps__free(s->pm);
	s->pm = pm; /* same pid: same bucket */
	t->st.loaded++;
	return true;
}

void proctab__adopt(struct proctab *t, struct procmaps *pm)
{
	struct proc_slot *s = proctab_find(t, pm->pid);

	if (s) {
		procmaps__free(pm);
		return;
	}
	s = proctab_free_slot(t);
	proctab_link(t, s, pm);
	s->refreshed = t->round;
	s->read_ns = mono_ns();
	s->missed = 0;
	s->comm = 0;
	s->settled = true; /* from the kernel's records: whole */
	s->touches = 0;
	s->loaded = false;
	proctab_use(t, s);
}

void proctab__set_loader(struct proctab *t, proctab_loader_fn fn, void *ctx)
{
	t->loader = fn;
	t->loader_ctx = ctx;
}

void proctab__forget(struct proctab *t, uint32_t pid)
{
	struct proc_slot *s = proctab_find(t, pid);

	if (s) {
		proctab_drop(t, s);
		t->st.forgotten++;
	}
}

void proctab__main_comm(struct proctab *t, uint32_t pid, const char *comm)
{
	struct proc_slot *s = proctab_find(t, pid);
	uint64_t h;

	if (!s || !comm || !comm[0])
		return;
	h = procmaps__hash(comm) | 1; /* never 0: none */
	if (!s->comm) {
		s->comm = h;
	} else if (s->comm != h) {
		proctab_drop(t, s);
		t->st.forgotten++;
	}
}

const struct procmaps *proctab__maps(struct proctab *t, uint32_t pid)
{
	struct proc_slot *s = proctab_find(t, pid);

	return s ? s->pm : NULL;
}

int proctab__refresh(struct proctab *t, uint32_t pid, uint64_t min_age_ns)
{
	struct proc_slot *s = proctab_find(t, pid);

	if (!s)
		return -ENOENT;
	if (mono_ns() - s->read_ns < min_age_ns)
		return -EAGAIN;
	if (s->loaded && proctab_reload(t, s)) { /* the kernel's records: no system call */
		s->read_ns = mono_ns();
		return 0;
	}
	return proctab_load(t, pid, &s);
}

const struct procmaps *proctab__loaded_maps(struct proctab *t, uint32_t pid)
{
	struct proc_slot *s = proctab_find(t, pid);

	if (!s || !s->loaded)
		return NULL;
	proctab_reload(t, s); /* what was mapped since its last sample; NULL: nothing */
	return s->pm;
}

const char *proctab__exe(struct proctab *t, uint32_t pid)
{
	struct proc_slot *s = proctab_find(t, pid);

	return s ? procmaps__exe(s->pm) : NULL;
}

int proctab__touch(struct proctab *t, uint32_t pid)
{
	struct proc_slot *s = proctab_find(t, pid);

	if (s) {
		proctab_use(t, s);
		/*
		 * Maps read at a first sample may be the loader's work in progress (libraries
		 * not all mapped yet): read once more at its 8th sample, while it lives
		 * (its names come at the round's end, when it may have exited).
		 */
		if (!s->settled && ++s->touches >= PROCTAB_SETTLE_TOUCHES) {
			s->settled = true;
			proctab_load(t, pid, &s); /* gone: the maps it had stay */
		}
		return 0;
	}
	return proctab_load(t, pid, &s);
}

const struct procmap *proctab__resolve(struct proctab *t, uint32_t pid, uint64_t addr)
{
	struct proc_slot *s = proctab_find(t, pid);
	const struct procmap *m = NULL;

	if (s) {
		proctab_use(t, s);
		m = procmaps__find(s->pm, addr);
		if (!m && s->loaded && proctab_reload(t, s))
			m = procmaps__find(s->pm, addr);
		if (m || !proctab_reread(t, s))
			goto out;
	}
	if (proctab_load(t, pid, &s) == 0)
		m = procmaps__find(s->pm, addr);
out:
	if (!m)
		t->st.unknown_addr++;
	return m;
}

/*
 * Whether slot s should go at a round's end: its pid now names another process (its maps
 * would misname the new one's addresses), or it exited and had no sample in the round (a
 * process that exited during the round stays one more, for samples still in flight).
 */
static bool proctab_stale(struct proctab *t, const struct proc_slot *s)
{
	uint64_t now;

	if (kill((pid_t)s->pm->pid, 0) < 0 && errno == ESRCH)
		return s->used_round < t->round;
	now = ring_proc_start(s->pm->pid);
	if (s->pm->start_time && now && now != s->pm->start_time) {
		t->st.reused_pids++;
		return true;
	}
	return false;
}

void proctab__new_round(struct proctab *t)
{
	for (unsigned int i = 0; i < t->max_procs; i++) {
		struct proc_slot *s = &t->slots[i];

		if (s->pm && proctab_stale(t, s))
			proctab_drop(t, s);
	}
	memset(t->gone, 0, sizeof(t->gone));
	procmaps__revalidate();
	t->round++;
}

void proctab__stats(const struct proctab *t, struct proctab_stats *st)
{
	*st = t->st;
	st->procs = 0;
	for (unsigned int i = 0; i < t->max_procs; i++)
		st->procs += t->slots[i].pm != NULL;
}
