// SPDX-License-Identifier: MIT
/* agent/core/perfmap.c — see perfmap.h. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/core/perfmap.h"
#include "port/clock.h"

#define PERFMAP_RECHECK_MS 200
#define PERFMAP_CHUNK 65536

struct pm_entry {
	uint64_t start, end;
	uint32_t seq;  /* line number: the later line wins an overlap */
	uint32_t name; /* offset in names */
};

struct pm_proc {
	uint32_t pid;
	bool missing;	   /* no usable file at the last check */
	bool dirty;	   /* entries appended since the last sort */
	uint64_t dev, ino; /* the file read so far: another one starts over */
	uint64_t off;	   /* end of the last complete line read */
	uint64_t checked_ns, last_used;
	struct pm_entry *e;
	uint32_t n, cap, seq;
	char *names;
	size_t names_len, names_cap;
};

struct perfmaps {
	pthread_mutex_t lock; /* the round's and the pull's writers may share one */
	const char *dir;
	size_t max_bytes, bytes;
	unsigned int max_entries;
	uint64_t clock;
	struct pm_proc procs[CONFIG_PERFMAP_PROCS];
	struct perfmap_stats st;
};

struct perfmaps *perfmaps__new(const char *dir, size_t max_bytes, unsigned int max_entries)
{
	struct perfmaps *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	pthread_mutex_init(&p->lock, NULL);
	p->dir = dir;
	p->max_bytes = max_bytes ? max_bytes : (size_t)CONFIG_PERFMAP_KB * 1024;
	p->max_entries = max_entries ? max_entries : CONFIG_PERFMAP_ENTRIES;
	return p;
}

static size_t proc_bytes(const struct pm_proc *pp)
{
	return pp->cap * sizeof(*pp->e) + pp->names_cap;
}

static void proc_reset(struct perfmaps *p, struct pm_proc *pp)
{
	uint32_t pid = pp->pid;

	p->bytes -= proc_bytes(pp);
	free(pp->e);
	free(pp->names);
	memset(pp, 0, sizeof(*pp));
	pp->pid = pid;
}

void perfmaps__free(struct perfmaps *p)
{
	if (!p)
		return;
	for (int i = 0; i < CONFIG_PERFMAP_PROCS; i++)
		proc_reset(p, &p->procs[i]);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

/* Frees the least recently used other process's table: false when there is none. */
static bool evict_one(struct perfmaps *p, const struct pm_proc *keep)
{
	struct pm_proc *v = NULL;

	for (int i = 0; i < CONFIG_PERFMAP_PROCS; i++) {
		struct pm_proc *pp = &p->procs[i];

		if (pp != keep && proc_bytes(pp) && (!v || pp->last_used < v->last_used))
			v = pp;
	}
	if (!v)
		return false;
	proc_reset(p, v);
	v->pid = 0;
	p->st.evictions++;
	return true;
}

/* Grows *buf (cap elements of size) to hold need: within the byte bound, else false. */
static bool grow(struct perfmaps *p, struct pm_proc *pp, void **buf, size_t *cap, size_t need,
		 size_t size)
{
	size_t ncap = *cap ? *cap : 64;
	void *nb;

	while (ncap < need)
		ncap *= 2;
	if (ncap == *cap)
		return true;
	while (p->bytes + (ncap - *cap) * size > p->max_bytes)
		if (!evict_one(p, pp)) {
			ncap = (p->max_bytes - p->bytes) / size + *cap;
			if (ncap < need)
				return false;
			break;
		}
	nb = realloc(*buf, ncap * size);
	if (!nb)
		return false;
	p->bytes += (ncap - *cap) * size;
	*buf = nb;
	*cap = ncap;
	return true;
}

static bool add_entry(struct perfmaps *p, struct pm_proc *pp, uint64_t start, uint64_t size,
		      const char *name, size_t len)
{
	size_t cap = pp->cap;
	void *e = pp->e;

	if (len >= PERFMAP_NAME) {
		len = PERFMAP_NAME - 1;
		p->st.long_names++;
	}
	if (pp->n >= p->max_entries || !grow(p, pp, &e, &cap, pp->n + 1, sizeof(*pp->e)))
		return false;
	pp->e = e;
	pp->cap = (uint32_t)cap;
	if (!grow(p, pp, (void **)&pp->names, &pp->names_cap, pp->names_len + len + 1, 1))
		return false;
	memcpy(pp->names + pp->names_len, name, len);
	pp->names[pp->names_len + len] = 0;
	pp->e[pp->n++] = (struct pm_entry){.start = start, .end = start + size, .seq = pp->seq++,
					   .name = (uint32_t)pp->names_len};
	pp->names_len += len + 1;
	pp->dirty = true;
	return true;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* A hex number ending at a space: its end, or NULL. */
static const char *parse_hex(const char *s, const char *end, uint64_t *v)
{
	const char *b = s;

	*v = 0;
	if (end - s > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
		s += 2, b = s;
	for (; s < end && hexval(*s) >= 0 && s - b < 16; s++)
		*v = *v << 4 | (uint64_t)hexval(*s);
	return s > b && s < end && *s == ' ' ? s + 1 : NULL;
}

/* One line (without its newline) of the map. */
static void parse_line(struct perfmaps *p, struct pm_proc *pp, const char *s, const char *end)
{
	uint64_t start, size;

	s = parse_hex(s, end, &start);
	if (s)
		s = parse_hex(s, end, &size);
	if (!s || !size || start + size < start || s >= end) {
		p->st.bad_lines++;
		return;
	}
	if (end > s && end[-1] == '\r')
		end--;
	if (add_entry(p, pp, start, size, s, (size_t)(end - s)))
		p->st.entries++;
	else
		p->st.dropped++;
}

/* Reads what was appended since pp->off (complete lines only) from fd. */
static void read_new(struct perfmaps *p, struct pm_proc *pp, int fd, uint64_t size)
{
	char *buf = malloc(PERFMAP_CHUNK);
	size_t have = 0;

	if (!buf)
		return;
	while (pp->off + have < size) {
		ssize_t r = pread(fd, buf + have, PERFMAP_CHUNK - have, (off_t)(pp->off + have));
		char *s = buf, *nl;

		if (r <= 0)
			break;
		have += (size_t)r;
		while ((nl = memchr(s, '\n', have - (size_t)(s - buf))) != NULL) {
			parse_line(p, pp, s, nl);
			s = nl + 1;
		}
		if (s == buf && have == PERFMAP_CHUNK) { /* a line longer than the chunk */
			p->st.bad_lines++;
			s = buf + have;
		}
		pp->off += (uint64_t)(s - buf);
		have -= (size_t)(s - buf);
		memmove(buf, s, have);
	}
	free(buf);
	p->st.reads++;
}

/* The owner of pid (its /proc directory), or -1. */
static long long proc_uid(uint32_t pid)
{
	char path[32];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%u", pid);
	return stat(path, &st) ? -1 : (long long)st.st_uid;
}

/* Opens pid's map if it is one we may read: fd, or -errno. */
static int open_map(struct perfmaps *p, uint32_t pid, struct stat *st)
{
	char path[96];
	int fd;

	if (p->dir)
		snprintf(path, sizeof(path), "%s/perf-%u.map", p->dir, pid);
	else
		snprintf(path, sizeof(path), "/proc/%u/root/tmp/perf-%u.map", pid, pid);
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	if (fstat(fd, st) || !S_ISREG(st->st_mode) ||
	    (st->st_uid != 0 && (long long)st->st_uid != proc_uid(pid))) {
		close(fd);
		p->st.refused++;
		return -EPERM;
	}
	return fd;
}

static bool proc_gone(uint32_t pid)
{
	return kill((pid_t)pid, 0) < 0 && errno == ESRCH;
}

/*
 * The map of pp's process after its exit: its /proc root went with it, but the file stays in
 * /tmp. Read only when it is the very file read while the process ran (same device and inode,
 * checked on the open file): another root's /tmp, a replaced file or a symlink is refused.
 */
static int open_exited(struct perfmaps *p, struct pm_proc *pp, struct stat *st)
{
	char path[48];
	int fd;

	if (p->dir || !pp->ino || !proc_gone(pp->pid))
		return -ENOENT;
	snprintf(path, sizeof(path), "/tmp/perf-%u.map", pp->pid);
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	if (fstat(fd, st) || !S_ISREG(st->st_mode) || (uint64_t)st->st_dev != pp->dev ||
	    (uint64_t)st->st_ino != pp->ino) {
		close(fd);
		return -ESTALE;
	}
	p->st.after_exit++;
	return fd;
}

/* Brings pp up to date with its file (at most every PERFMAP_RECHECK_MS). */
static void refresh(struct perfmaps *p, struct pm_proc *pp)
{
	uint64_t now = port_clock_mono_ns();
	struct stat st;
	int fd;

	if (pp->checked_ns && now - pp->checked_ns < PERFMAP_RECHECK_MS * 1000000ull)
		return;
	pp->checked_ns = now;
	fd = open_map(p, pp->pid, &st);
	if (fd < 0)
		fd = open_exited(p, pp, &st);
	if (fd < 0) {
		/*
		 * A process that exited (its /proc root gone with it) keeps the names read while
		 * it ran: its samples of the round are named at the round's end, often after
		 * (node's JIT frames turned <unknown> once a miss came after its exit). A pid in
		 * use again is alive: its file is checked as a new one's.
		 */
		pp->missing = !pp->off || !proc_gone(pp->pid);
		return;
	}
	if (pp->missing || pp->dev != (uint64_t)st.st_dev || pp->ino != (uint64_t)st.st_ino ||
	    (uint64_t)st.st_size < pp->off) { /* new, replaced or truncated: from the start */
		proc_reset(p, pp);
		pp->checked_ns = now;
		pp->dev = (uint64_t)st.st_dev;
		pp->ino = (uint64_t)st.st_ino;
		p->st.files++;
	}
	pp->missing = false;
	if ((uint64_t)st.st_size > pp->off)
		read_new(p, pp, fd, (uint64_t)st.st_size);
	close(fd);
}

static int cmp_entry(const void *a, const void *b)
{
	const struct pm_entry *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Sorts by start and drops the older of overlapping entries (their range was reused). */
static void settle(struct perfmaps *p, struct pm_proc *pp)
{
	uint32_t n = 0;

	qsort(pp->e, pp->n, sizeof(*pp->e), cmp_entry);
	for (uint32_t i = 0; i < pp->n; i++) {
		struct pm_entry x = pp->e[i];
		bool keep = true;

		while (n && pp->e[n - 1].end > x.start) {
			p->st.superseded++;
			if (pp->e[n - 1].seq > x.seq) {
				keep = false;
				break;
			}
			n--;
		}
		if (keep)
			pp->e[n++] = x;
	}
	pp->n = n;
	pp->dirty = false;
}

static const struct pm_entry *find(const struct pm_proc *pp, uint64_t addr)
{
	uint32_t lo = 0, hi = pp->n;

	while (lo < hi) { /* first entry starting above addr */
		uint32_t mid = lo + (hi - lo) / 2;

		if (pp->e[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo && addr < pp->e[lo - 1].end ? &pp->e[lo - 1] : NULL;
}

static struct pm_proc *proc_slot(struct perfmaps *p, uint32_t pid)
{
	struct pm_proc *v = NULL;

	for (int i = 0; i < CONFIG_PERFMAP_PROCS; i++) {
		struct pm_proc *pp = &p->procs[i];

		if (pp->pid == pid)
			return pp;
		if (!v || pp->last_used < v->last_used)
			v = pp;
	}
	if (v->pid && proc_bytes(v))
		p->st.evictions++;
	proc_reset(p, v);
	v->pid = pid;
	return v;
}

static int lookup(struct perfmaps *p, uint32_t pid, uint64_t addr, struct perfmap_sym *sym)
{
	struct pm_proc *pp;
	const struct pm_entry *e;

	pp = proc_slot(p, pid);
	pp->last_used = ++p->clock;
	if (pp->dirty)
		settle(p, pp);
	e = find(pp, addr);
	if (!e) { /* the JIT may have appended it since: read what is new */
		refresh(p, pp);
		if (pp->dirty)
			settle(p, pp);
		e = find(pp, addr);
	}
	if (pp->missing)
		return -ENOENT;
	if (!e) {
		p->st.misses++;
		return 0;
	}
	p->st.hits++;
	perfmap__parse_name(pp->names + e->name, strlen(pp->names + e->name), sym);
	return 1;
}

int perfmaps__lookup(struct perfmaps *p, uint32_t pid, uint64_t addr, struct perfmap_sym *sym)
{
	int ret;

	if (!p || !pid)
		return -ENOENT;
	pthread_mutex_lock(&p->lock);
	ret = lookup(p, pid, addr, sym);
	pthread_mutex_unlock(&p->lock);
	return ret;
}

void perfmaps__sync(struct perfmaps *p, uint32_t pid)
{
	struct pm_proc *pp;

	if (!p || !pid)
		return;
	pthread_mutex_lock(&p->lock);
	pp = proc_slot(p, pid);
	pp->last_used = ++p->clock;
	refresh(p, pp);
	pthread_mutex_unlock(&p->lock);
}

void perfmaps__stats(struct perfmaps *p, struct perfmap_stats *st)
{
	pthread_mutex_lock(&p->lock);
	*st = p->st;
	st->bytes = p->bytes;
	pthread_mutex_unlock(&p->lock);
}

static pthread_mutex_t shared_lock = PTHREAD_MUTEX_INITIALIZER;

struct perfmaps *perfmaps__shared(void)
{
	static struct perfmaps *shared;

	pthread_mutex_lock(&shared_lock);
	if (!shared)
		shared = perfmaps__new(NULL, 0, 0);
	pthread_mutex_unlock(&shared_lock);
	return shared;
}

/* V8's tags for JS functions (log.cc/code-events: LazyCompile, Function, Script, Eval; JS since
 * V8 ~11); the others (Builtin, BytecodeHandler, Stub, RegExp, Handler) name runtime code. */
static bool js_tag(const char *s, size_t n)
{
	static const char *const tags[] = {"JS", "LazyCompile", "Function", "Script", "Eval"};

	for (size_t i = 0; i < sizeof(tags) / sizeof(tags[0]); i++)
		if (strlen(tags[i]) == n && !memcmp(s, tags[i], n))
			return true;
	return false;
}

/* Digits in s[0..n): their value, else -1. */
static long long number(const char *s, size_t n)
{
	long long v = 0;

	if (!n || n > 9)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	return v;
}

/* "file:line[:col]" into sym->file and sym->line: false when it is not one. */
static bool location(const char *s, size_t n, struct perfmap_sym *sym)
{
	const char *c1 = memrchr(s, ':', n), *c2;
	long long a, b;

	if (!c1)
		return false;
	a = number(c1 + 1, (size_t)(s + n - c1 - 1));
	c2 = c1 > s ? memrchr(s, ':', (size_t)(c1 - s)) : NULL;
	b = c2 ? number(c2 + 1, (size_t)(c1 - c2 - 1)) : -1;
	if (a < 0)
		return false;
	if (b >= 0) /* file:line:col */
		c1 = c2, a = b;
	if (c1 == s)
		return false;
	snprintf(sym->file, sizeof(sym->file), "%.*s", (int)(c1 - s), s);
	sym->line = a;
	return true;
}

void perfmap__parse_name(const char *raw, size_t len, struct perfmap_sym *sym)
{
	const char *colon = memchr(raw, ':', len), *s, *sp, *end = raw + len;
	size_t tag = colon ? (size_t)(colon - raw) : 0;

	snprintf(sym->raw, sizeof(sym->raw), "%.*s", (int)len, raw);
	snprintf(sym->name, sizeof(sym->name), "%s", sym->raw);
	sym->file[0] = 0;
	sym->line = 0;
	sym->runtime = "jit";
	if (!colon || !js_tag(raw, tag))
		return;
	sym->runtime = "node";
	s = colon + 1;
	if (s < end && *s && strchr("~^+*", *s)) /* tier: interpreted .. optimized */
		s++;
	sp = s < end ? memrchr(s, ' ', (size_t)(end - s)) : NULL;
	if (!sp || !location(sp + 1, (size_t)(end - sp - 1), sym)) /* no location: all name */
		sp = end;
	if (sp > s)
		snprintf(sym->name, sizeof(sym->name), "%.*s", (int)(sp - s), s);
	else
		snprintf(sym->name, sizeof(sym->name), "(anonymous)");
}
