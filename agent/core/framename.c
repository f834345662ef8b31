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

/*
 * A new text generation: never 0 (an entry not named). Entries name a text by (index, gen): when
 * the counter wraps, once in 2^32 fills, they are all forgotten, or one untouched since could
 * match a text refilled with its old gen.
 */
static uint32_t next_gen(struct framename_cache *c)
{
	if (!++c->gen) {
		memset(c->fn, 0, c->fns * sizeof(*c->fn));
		if (c->line)
			memset(c->line, 0, c->lines * sizeof(*c->line));
		c->gen++;
	}
	return c->gen;
}

/* A key's two sets among sets, by its mixed hash: the low half's and the high half's, never one. */
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

/* The way of set used longest ago that no unreleased round pins (empty ones first); -1: none. */
static int free_way(const struct framename_entry *set, bool empty_only)
{
	for (int w = FRAMENAME_WAYS - 1; w >= 0; w--)
		if (!set[w].pid || (!empty_only && !pinned(set[w].round)))
			return w;
	return -1;
}

/*
 * A new, empty entry for (pid, key) at the front of one of its sets: an empty way of either,
 * else the way used longest ago among those no unreleased round pins (the first set's, else the
 * second's; a function's counted in *evicted, if given). Both all pinned: a drain pass's (round)
 * pushes out the first set's used longest ago (counted: dropped); the writer's (round 0) gets
 * NULL and caches nothing.
 */
static struct framename_entry *entry_insert(struct framename_cache *c,
					    struct framename_entry *base, unsigned int n,
					    uint32_t pid, uint64_t key, uint32_t round,
					    uint64_t *evicted)
{
	struct framename_entry *set[2], *e;
	int i, w = -1;

	sets_of(base, n, pid, key, set);
	for (int pass = 0; pass < 4 && w < 0; pass++) {
		i = pass & 1;
		w = free_way(set[i], pass < 2);
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

/* 0: empty, 1: released, 2: pinned to a round not yet released. */
static int text_class(const struct framename_text *t)
{
	return t->hash ? 1 + pinned(t->round) : 0;
}

/* Is a less worth keeping than b: empty, released, pinned; then the older round, the older use. */
static bool keep_less(const struct framename_text *a, const struct framename_text *b)
{
	if (text_class(a) != text_class(b))
		return text_class(a) < text_class(b);
	if (a->round != b->round)
		return a->round < b->round;
	return (int32_t)(a->used - b->used) < 0;
}

static void text_use(struct framename_cache *c, struct framename_text *t, uint32_t round)
{
	t->used = ++c->tick;
	if (round)
		t->round = round;
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
				text_use(c, t, round);
				return (int)i;
			}
			if (keep_less(t, &c->text[v]))
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
	text_use(c, t, round);
	return (int)v;
}

/* The text entry e names, if it is still held (not refilled since); else NULL. */
static struct framename_text *text_of(struct framename_cache *c, const struct framename_entry *e)
{
	struct framename_text *t;

	if (!e || e->val < 0 || !e->gen || e->text >= c->texts)
		return NULL;
	t = &c->text[e->text];
	return t->hash && t->gen == e->gen ? t : NULL;
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
};

/* A new entry for the word (its line), or for its function. */
static struct framename_entry *insert_word(struct lookup *q)
{
	return entry_insert(q->c, q->c->line, q->c->lines, q->pid, q->key, q->round, NULL);
}

static struct framename_entry *insert_function(struct lookup *q)
{
	return entry_insert(q->c, q->c->fn, q->c->fns, q->pid, q->fn, q->round, &q->c->evicted);
}

static void name_entry(struct framename_entry *e, int32_t val, int ti,
		       const struct framename_text *t)
{
	e->val = val;
	e->text = (uint32_t)ti;
	e->gen = t->gen;
}

static void pin_entry(struct lookup *q, struct framename_entry *e)
{
	if (e && q->round)
		e->round = q->round;
}

/*
 * A word read: its text interned, the function's entry and the word's (a cache with lines)
 * naming it. Nothing cached when the writer finds no room for the text.
 */
static void cache_named(struct lookup *q, struct framename_entry *f, struct framename_entry *l,
			struct framename *n, int32_t line)
{
	struct framename_cache *c = q->c;
	int ti;

	if (c->line)
		n->line = 0; /* a line per word, not per text */
	ti = text_intern(c, n, q->round);
	if (ti < 0)
		return;
	if (!f)
		f = insert_function(q);
	if (f) /* the function's text now: another's if it changed */
		name_entry(f, 0, ti, &c->text[ti]);
	if (c->line && !l)
		l = insert_word(q);
	if (c->line && l) /* the word keeps the text it was read with */
		name_entry(l, line, ti, &c->text[ti]);
}

/* A word that could not be read: the error cached (the word's; without lines, the function's). */
static void cache_error(struct lookup *q, struct framename_entry *f, struct framename_entry *l,
			int err)
{
	struct framename_cache *c = q->c;
	struct framename_entry *e = c->line ? l : f;

	if (!e)
		e = c->line ? insert_word(q) : insert_function(q);
	if (e)
		*e = (struct framename_entry){.key = e->key, .pid = e->pid, .round = e->round,
					      .val = err};
}

/*
 * Reads the word on a miss. A word that cannot be read now (its process exited before the drain
 * pass came to it, or before the writer did, its line having gone) whose function was named while
 * the process ran gets that function's name, as last read at its address, with the first line
 * (counted once: the unknown line is cached). 0 or -errno.
 */
static int read_word(struct lookup *q, struct framename_entry *l, framename_read_fn read,
		     struct framename *out)
{
	struct framename_cache *c = q->c;
	struct framename_entry *f = entry_find(c->fn, c->fns, q->pid, q->fn);
	struct framename_text *ft = c->line ? text_of(c, f) : NULL;
	struct framename n;
	int err = read(q->pid, q->key, &n);

	pin_entry(q, f);
	if (!err) {
		*out = n;
		out->line = line_of(n.line);
		cache_named(q, f, l, &n, (int32_t)out->line);
	} else if (ft) {
		c->lines_lost++;
		*out = ft->n;
		out->line = 0;
		text_use(c, ft, q->round);
		if (!l)
			l = insert_word(q);
		if (l)
			name_entry(l, 0, (int)f->text, ft);
		err = 0;
	} else {
		cache_error(q, f, l, err);
	}
	return err;
}

static int lookup(struct lookup *q, framename_read_fn read, struct framename *out)
{
	struct framename_cache *c = q->c;
	struct framename_entry *e;
	struct framename_text *t;
	int err;

	if (!c->line)
		q->fn = q->key; /* names by the whole word */
	pthread_mutex_lock(&c->lock);
	e = c->line ? entry_find(c->line, c->lines, q->pid, q->key)
		    : entry_find(c->fn, c->fns, q->pid, q->fn);
	t = text_of(c, e);
	if (e && (t || e->val < 0)) {
		c->cached++;
		err = e->val < 0 ? e->val : 0;
		pin_entry(q, e);
		if (t) {
			text_use(c, t, q->round);
			*out = t->n;
			out->line = c->line ? e->val : line_of(t->n.line);
		}
	} else {
		err = read_word(q, c->line ? e : NULL, read, out);
	}
	pthread_mutex_unlock(&c->lock);
	return err;
}

int framename__resolve(struct framename_cache *c, uint32_t pid, uint64_t key, uint64_t fn,
		       framename_read_fn read, struct framename *out)
{
	struct lookup q = {.c = c, .pid = pid, .key = key, .fn = fn};

	return lookup(&q, read, out);
}

/*
 * The round is read before the lock: a drain pass on another thread than the releases' (none
 * here: the agent drains and writes on its main thread, libedgeprof.so never releases) could pin
 * a name to a round released meanwhile, which only makes it evictable a round early.
 */
void framename__pin(struct framename_cache *c, uint32_t pid, uint64_t key, uint64_t fn,
		    framename_read_fn read)
{
	struct lookup q = {.c = c, .pid = pid, .key = key, .fn = fn, .round = framename__round()};
	struct framename tmp;

	lookup(&q, read, &tmp);
}

void framename__counters(struct framename_cache *c, struct framename_counters *u)
{
	pthread_mutex_lock(&c->lock);
	*u = (struct framename_counters){.cached = c->cached, .evicted = c->evicted,
					 .dropped = c->dropped, .lines_lost = c->lines_lost};
	for (unsigned int i = 0; i < c->texts; i++)
		u->texts += c->text[i].hash != 0;
	for (unsigned int i = 0; i < c->fns; i++)
		u->fns += c->fn[i].pid != 0;
	for (unsigned int i = 0; i < c->lines; i++)
		u->lines += c->line[i].pid != 0;
	pthread_mutex_unlock(&c->lock);
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
