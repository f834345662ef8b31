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

/* The round drain passes pin to, and the last released: a name pinned to a later one stays. */
static uint32_t round_now = 1, round_released;

uint32_t framename__round(void)
{
	return __atomic_load_n(&round_now, __ATOMIC_RELAXED);
}

uint32_t framename__round_end(void)
{
	return __atomic_fetch_add(&round_now, 1, __ATOMIC_RELAXED);
}

void framename__release(uint32_t upto)
{
	uint32_t was = __atomic_load_n(&round_released, __ATOMIC_RELAXED);

	while (upto > was && !__atomic_compare_exchange_n(&round_released, &was, upto, false,
							 __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

static bool pinned(uint32_t round)
{
	return round > __atomic_load_n(&round_released, __ATOMIC_RELAXED);
}

/* A new generation: never 0 (an empty text's, an entry not named yet). */
static uint32_t next_gen(struct framename_cache *c)
{
	if (!++c->gen)
		c->gen++;
	return c->gen;
}

/*
 * The first entries of (pid, key)'s two sets among n (FRAMENAME_WAYS each): a key lives in
 * either. Pinned entries cannot make room, so one set's chance excess is what is lost: 8-way
 * sets a third full overflowed here and there (12 entries dropped in bpf-interp-short); a key
 * goes to its second set when its first is all pinned, and is dropped only when both are.
 */
/* Two sets of sets by a mixed hash: its low half's and its high half's, never the same one. */
static void two_sets(uint64_t mix, unsigned int sets, unsigned int at[2])
{
	at[0] = (unsigned int)(mix % sets);
	at[1] = (unsigned int)((mix >> 32) % sets);
	if (at[1] == at[0])
		at[1] = (at[0] + 1) % sets;
}

static void sets_of(struct framename_entry *base, unsigned int n, uint32_t pid, uint64_t key,
		    struct framename_entry *set[2])
{
	/*
	 * Every bit of the word and pid mixed into every bit of the sets: a multiply's high bits
	 * left bits 40..44 of a function's words alike, and its positions (bits 45..55) in the
	 * same set of any cache of 32 sets or fewer, in 32 sets of a larger one.
	 */
	unsigned int at[2];

	two_sets(hash_mix64(key ^ (uint64_t)pid << 32 ^ pid), n / FRAMENAME_WAYS, at);
	set[0] = base + at[0] * FRAMENAME_WAYS;
	set[1] = base + at[1] * FRAMENAME_WAYS;
}

/* Moves way w of set to its front (the one used last first). */
static struct framename_entry *to_front(struct framename_entry *set, unsigned int w)
{
	struct framename_entry keep = set[w];

	memmove(set + 1, set, w * sizeof(*set));
	set[0] = keep;
	return set;
}

/* (pid, key)'s entry, moved to the front of its set; NULL when it has none. */
static struct framename_entry *entry_find(struct framename_entry *base, unsigned int n,
					  uint32_t pid, uint64_t key)
{
	struct framename_entry *set[2];

	sets_of(base, n, pid, key, set);
	for (unsigned int i = 0; i < 2; i++)
		for (unsigned int w = 0; w < FRAMENAME_WAYS; w++)
			if (set[i][w].pid == pid && set[i][w].key == key)
				return to_front(set[i], w);
	return NULL;
}

/* The way of set used longest ago that no unreleased round pins (or empty); -1: none. */
static int free_way(const struct framename_entry *set)
{
	for (int w = FRAMENAME_WAYS - 1; w >= 0; w--)
		if (!set[w].pid || !pinned(set[w].round))
			return w;
	return -1;
}

/*
 * A new, empty entry for (pid, key) at the front of one of its sets, in place of the one used
 * longest ago among those no unreleased round pins (the first set's, else the second's; a
 * function's counted in *evicted, if given). Both all pinned: a drain pass's (round) pushes out
 * the first set's used longest ago (counted: dropped); the writer's (round 0) gets NULL and
 * caches nothing.
 */
static struct framename_entry *entry_insert(struct framename_cache *c,
					    struct framename_entry *base, unsigned int n,
					    uint32_t pid, uint64_t key, uint32_t round,
					    uint64_t *evicted)
{
	struct framename_entry *set[2], *e;
	int i = 0, w;

	sets_of(base, n, pid, key, set);
	w = free_way(set[0]);
	if (w < 0) {
		i = 1;
		w = free_way(set[1]);
	}
	if (w < 0) { /* every way of both pinned */
		if (!round)
			return NULL;
		i = 0;
		w = FRAMENAME_WAYS - 1;
		c->dropped++;
	} else if (set[i][w].pid && evicted) {
		(*evicted)++;
	}
	e = to_front(set[i], (unsigned int)w);
	*e = (struct framename_entry){.key = key, .pid = pid, .round = round};
	return e;
}

/* The text's hash, mixed: every bit of it moves the sets (FNV's low bits alone are weak). */
static uint64_t text_hash(const struct framename *n)
{
	uint64_t h = hash_fnv64_add_str(HASH_FNV64_BASIS, n->name);

	h = hash_fnv64_add(h, "", 1); /* ("ab", "c") is not ("a", "bc") */
	h = hash_fnv64_add_str(h, n->file);
	h = hash_fnv64_add(h, &n->start_line, sizeof(n->start_line));
	h = hash_fnv64_add(h, &n->line, sizeof(n->line));
	return hash_mix64(h);
}

static bool same_text(const struct framename_text *t, uint32_t hash, const struct framename *n)
{
	return t->hash == hash && t->n.start_line == n->start_line && t->n.line == n->line &&
	       !strcmp(t->n.name, n->name) && !strcmp(t->n.file, n->file);
}

/* How much a text is worth keeping, the least pushed out first: empty, released, pinned; the
 * oldest round of those. */
static uint64_t keep_rank(const struct framename_text *t)
{
	return t->hash ? (uint64_t)(1 + pinned(t->round)) << 32 | t->round : 0;
}

/*
 * The index of text n: the one held, or a new one in place of the one least worth keeping in
 * its two sets (as entries': a text shared by many processes, dropped, unnames them all; a
 * pinned one pushed out as entry_insert() does). -1: no room for the writer's.
 */
static int text_intern(struct framename_cache *c, const struct framename *n, uint32_t round)
{
	uint64_t mix = text_hash(n);
	uint32_t hash = (uint32_t)mix | 1; /* never 0: an empty text's */
	unsigned int at[2], v;
	struct framename_text *t;

	two_sets(mix, c->texts / FRAMENAME_TEXT_WAYS, at);
	v = at[0] * FRAMENAME_TEXT_WAYS;
	for (unsigned int k = 0; k < 2; k++)
		for (unsigned int i = at[k] * FRAMENAME_TEXT_WAYS;
		     i < (at[k] + 1) * FRAMENAME_TEXT_WAYS; i++) {
			t = &c->text[i];
			if (same_text(t, hash, n)) {
				if (round)
					t->round = round;
				return (int)i;
			}
			if (keep_rank(t) < keep_rank(&c->text[v]))
				v = i;
		}
	t = &c->text[v];
	if (t->hash && pinned(t->round)) {
		if (!round)
			return -1;
		c->dropped++;
	}
	t->hash = hash;
	t->gen = next_gen(c);
	t->round = round;
	t->n = *n;
	return (int)v;
}

/* f's text if it is named and its text still held; else NULL. */
static struct framename_text *text_of(struct framename_cache *c, const struct framename_entry *f)
{
	struct framename_text *t;

	if (!f || f->val < 0 || (unsigned int)f->val >= c->texts)
		return NULL;
	t = &c->text[f->val];
	return t->hash && t->gen == f->gen ? t : NULL;
}

/* A line as an entry holds it: 0 (unknown) for what is not a line number. */
static int32_t line_of(int64_t line)
{
	return line > 0 && line <= INT32_MAX ? (int32_t)line : 0;
}

struct lookup {
	struct framename_cache *c;
	uint32_t pid, round; /* round: the drain pass's (pinned), 0: the writer's */
	uint64_t key, fn;
	struct framename_entry *f, *l; /* the function's entry, the word's; NULL: none */
	struct framename_text *t;      /* the function's text, when it is held */
};

static void stamp(struct lookup *q)
{
	if (!q->round)
		return;
	if (q->f)
		q->f->round = q->round;
	if (q->l)
		q->l->round = q->round;
	if (q->t)
		q->t->round = q->round;
}

/* The function's entry named by the read n (its text interned), or given the error err. */
static void fill_function(struct lookup *q, int err, const struct framename *n)
{
	struct framename_cache *c = q->c;
	int ti = -1;

	if (!err) {
		ti = text_intern(c, n, q->round);
		if (ti < 0)
			return; /* no room: nothing cached */
	}
	if (!q->f)
		q->f = entry_insert(c, c->fn, c->fns, q->pid, q->fn, q->round, &c->evicted);
	if (!q->f)
		return;
	if (!err) {
		q->t = &c->text[ti];
		q->f->val = ti;
		q->f->gen = q->t->gen; /* another text: its old lines are read again */
	} else if (q->f->val >= 0 || !q->f->gen) { /* a failure kept: its lines stay valid */
		q->f->val = err;
		q->f->gen = next_gen(c);
	}
}

/*
 * Reads the word on a miss. A function named while its process ran, whose word cannot be read
 * now (the process exited since the word's line went), keeps its name, with the first line
 * (counted once: the unknown line is cached). 0 or -errno.
 */
static int read_word(struct lookup *q, framename_read_fn read, struct framename *out)
{
	struct framename_cache *c = q->c;
	struct framename n;
	int32_t line = 0;
	int err = read(q->pid, q->key, &n);

	if (err && q->t) {
		c->lines_lost++;
		*out = q->t->n;
		err = 0;
	} else {
		if (!err) {
			line = line_of(n.line);
			*out = n;
			if (c->line)
				n.line = 0; /* a line per word, not per text */
		}
		fill_function(q, err, &n);
	}
	if (c->line && q->f) {
		if (!q->l)
			q->l = entry_insert(c, c->line, c->lines, q->pid, q->key, q->round, NULL);
		if (q->l) {
			q->l->gen = q->f->gen;
			q->l->val = err ? err : line;
		}
	}
	if (!err)
		out->line = line;
	return err;
}

static int lookup(struct lookup *q, framename_read_fn read, struct framename *out)
{
	struct framename_cache *c = q->c;
	int err;

	if (!c->line)
		q->fn = q->key; /* names by the whole word */
	pthread_mutex_lock(&c->lock);
	if (c->line)
		q->l = entry_find(c->line, c->lines, q->pid, q->key);
	q->f = entry_find(c->fn, c->fns, q->pid, q->fn);
	q->t = text_of(c, q->f);
	if (q->f && (q->t || q->f->val < 0) && (!c->line || (q->l && q->l->gen == q->f->gen))) {
		c->cached++;
		err = q->l && q->l->val < 0 ? q->l->val : q->f->val < 0 ? q->f->val : 0;
		if (!err) {
			*out = q->t->n;
			out->line = q->l ? q->l->val : line_of(q->t->n.line);
		}
	} else {
		err = read_word(q, read, out);
	}
	stamp(q);
	pthread_mutex_unlock(&c->lock);
	return err;
}

int framename__resolve(struct framename_cache *c, uint32_t pid, uint64_t key, uint64_t fn,
		       framename_read_fn read, struct framename *out)
{
	struct lookup q = {.c = c, .pid = pid, .key = key, .fn = fn};

	return lookup(&q, read, out);
}

void framename__pin(struct framename_cache *c, uint32_t pid, uint64_t key, uint64_t fn,
		    framename_read_fn read)
{
	struct lookup q = {.c = c, .pid = pid, .key = key, .fn = fn, .round = framename__round()};
	struct framename tmp;

	lookup(&q, read, &tmp);
}

void framename__forget(struct framename_cache *c, uint32_t pid)
{
	pthread_mutex_lock(&c->lock);
	for (unsigned int i = 0; i < c->fns; i++)
		if (c->fn[i].pid == pid)
			c->fn[i] = (struct framename_entry){0};
	for (unsigned int i = 0; i < c->lines; i++)
		if (c->line[i].pid == pid)
			c->line[i] = (struct framename_entry){0};
	pthread_mutex_unlock(&c->lock);
}
