// SPDX-License-Identifier: MIT
/*
 * agent/core/ksyms.c — /proc/kallsyms read in one streaming pass (a hand-written line parser: sscanf
 * cost more than the kernel's own side of the read), kept either resident or lazily.
 *
 * Resident: addresses and name offsets (parallel arrays sorted by address, 12 bytes a symbol)
 * and one pool of names; a lookup is a binary search. The sort is an in-place heapsort, skipped
 * when the kernel listed them in order (it nearly does): qsort's temporary copy would double
 * the table at the peak RSS.
 *
 * Lazy: the addresses wanted are sorted, and each symbol read is offered to the first wanted
 * address at or above it (one binary search a line); an address with no symbol of its own in
 * its gap takes the best of the next lower one. That finds, for every wanted address, the
 * highest symbol start at or below it — what the resident lookup finds — in one pass and
 * without holding the table, whatever order the kernel lists its modules in.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/core/ksyms.h"
#include "port/log.h"

/* Past the last symbol we still name addresses up to this far (the last function's body). */
#define KSYMS_TAIL_BYTES (1u << 20)
#define KSYMS_NAME_MAX   128          /* longer names are cut (the kernel's own KSYM_NAME_LEN) */
#define KSYMS_READ_BYTES (16u << 10)  /* read buffer: kallsyms lines are well under 1 KB */
#define KSYMS_UNNAMED    UINT32_MAX   /* a cached address that no text symbol holds */

/* An address already looked up: its symbol's start and name (offset in the name pool). */
struct ksym_named {
	uint64_t addr, start;
	uint32_t name;
};

struct ksyms {
	bool hidden, lazy;
	/* resident */
	uint64_t *addr;
	uint32_t *name; /* offset in pool */
	unsigned n, cap;
	char *pool;
	size_t pool_len, pool_cap;
	/* lazy */
	char path[256];
	unsigned max_entries;
	struct ksym_named *cache; /* sorted by addr */
	ksyms_namer_fn namer;
	void *namer_ctx;
	unsigned n_cache;
	uint64_t *want;           /* open-addressed set of wanted addresses, 0 = free */
	unsigned want_mask, n_want;
	struct ksyms_stats st;
};

typedef bool (*ksyms_line_fn)(void *ctx, uint64_t addr, char type, const char *name,
			      size_t len);

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* "<hex address> <type> <name>[\t[module]]"; false for anything else. */
static bool ksyms__parse_line(const char *p, const char *end, uint64_t *addr, char *type,
			      const char **name, size_t *len)
{
	uint64_t a = 0;
	int digits = 0, d;

	for (; p < end && (d = hex_digit(*p)) >= 0; p++, digits++)
		a = a << 4 | (uint64_t)d;
	if (!digits || digits > 16 || end - p < 4 || p[0] != ' ' || p[1] == ' ' || p[2] != ' ')
		return false;
	*type = p[1];
	p += 3;
	*name = p;
	while (p < end && *p != ' ' && *p != '\t' && *p != '\r')
		p++;
	*len = (size_t)(p - *name);
	if (*len >= KSYMS_NAME_MAX)
		*len = KSYMS_NAME_MAX - 1;
	*addr = a;
	return *len > 0;
}

/*
 * Calls fn for every well-formed line of path, in the order listed, until it returns false.
 * A line longer than the buffer is skipped whole.
 */
static int ksyms__scan(const char *path, ksyms_line_fn fn, void *ctx)
{
	char *buf = malloc(KSYMS_READ_BYTES);
	size_t have = 0;
	bool skipping = false, go = true;
	int fd = open(path, O_RDONLY | O_CLOEXEC), err = 0;

	if (fd < 0 || !buf) {
		err = fd < 0 ? -errno : -ENOMEM;
		goto out;
	}
	while (go) {
		ssize_t n = read(fd, buf + have, KSYMS_READ_BYTES - have);
		char *p = buf, *end, *nl;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			err = -errno;
			break;
		}
		if (n == 0 && have)
			buf[have++] = '\n'; /* the last line had no newline: room was kept for one */
		else if (n == 0)
			break;
		else
			have += (size_t)n;
		end = buf + have;
		while (go && (nl = memchr(p, '\n', (size_t)(end - p)))) {
			uint64_t addr;
			const char *name;
			size_t len;
			char type;

			if (!skipping && ksyms__parse_line(p, nl, &addr, &type, &name, &len))
				go = fn(ctx, addr, type, name, len);
			skipping = false;
			p = nl + 1;
		}
		have = (size_t)(end - p);
		memmove(buf, p, have);
		if (have >= KSYMS_READ_BYTES - 1) {
			skipping = true;
			have = 0;
		}
	}
out:
	if (fd >= 0)
		close(fd);
	free(buf);
	return err;
}

/* Text symbols only (t T w W); the 6.x __pfx_ padding symbols would double the table. */
static bool ksyms__wanted(char type, const char *name, size_t len)
{
	if (type != 't' && type != 'T' && type != 'w' && type != 'W')
		return false;
	return len < 6 || strncmp(name, "__pfx_", 6) != 0;
}

static void ksyms__tell_hidden(const struct ksyms *ks)
{
	static bool told;

	if (ks->hidden && !told) {
		told = true;
		pr_warn("kernel addresses are hidden (kernel.kptr_restrict, or no CAP_SYSLOG): "
			"kernel frames stay unnamed");
	}
}

/* ---- resident ----------------------------------------------------------------------------- */

/* Room for one more name of len bytes in the pool. */
static int ksyms__pool_grow(struct ksyms *ks, size_t len)
{
	size_t cap = ks->pool_cap ? ks->pool_cap * 2 : 65536;
	char *p;

	if (ks->pool_len + len + 1 <= ks->pool_cap)
		return 0;
	while (cap < ks->pool_len + len + 1)
		cap *= 2;
	p = realloc(ks->pool, cap);
	if (!p)
		return -ENOMEM;
	ks->pool = p;
	ks->pool_cap = cap;
	return 0;
}

static int ksyms__grow(struct ksyms *ks, size_t name_len)
{
	if (ks->n == ks->cap) {
		unsigned cap = ks->cap ? ks->cap * 2 : 4096;
		uint64_t *a = realloc(ks->addr, cap * sizeof(*a));
		uint32_t *nm;

		if (!a)
			return -ENOMEM;
		ks->addr = a;
		nm = realloc(ks->name, cap * sizeof(*nm));
		if (!nm)
			return -ENOMEM;
		ks->name = nm;
		ks->cap = cap;
	}
	return ksyms__pool_grow(ks, name_len);
}

static int ksyms__add(struct ksyms *ks, uint64_t addr, const char *name, size_t len)
{
	if (ksyms__grow(ks, len))
		return -ENOMEM;
	ks->addr[ks->n] = addr;
	ks->name[ks->n] = (uint32_t)ks->pool_len;
	memcpy(ks->pool + ks->pool_len, name, len);
	ks->pool[ks->pool_len + len] = 0;
	ks->pool_len += len + 1;
	ks->n++;
	return 0;
}

/* Order: address, then the order listed (name offsets grow as lines are read). */
static bool ksyms__less(const struct ksyms *ks, unsigned i, unsigned j)
{
	if (ks->addr[i] != ks->addr[j])
		return ks->addr[i] < ks->addr[j];
	return ks->name[i] < ks->name[j];
}

static void ksyms__swap(struct ksyms *ks, unsigned i, unsigned j)
{
	uint64_t a = ks->addr[i];
	uint32_t n = ks->name[i];

	ks->addr[i] = ks->addr[j];
	ks->name[i] = ks->name[j];
	ks->addr[j] = a;
	ks->name[j] = n;
}

static void ksyms__sift_down(struct ksyms *ks, unsigned root, unsigned end)
{
	for (;;) {
		unsigned child = 2 * root + 1;

		if (child >= end)
			return;
		if (child + 1 < end && ksyms__less(ks, child, child + 1))
			child++;
		if (!ksyms__less(ks, root, child))
			return;
		ksyms__swap(ks, root, child);
		root = child;
	}
}

static void ksyms__sort(struct ksyms *ks)
{
	unsigned i;

	for (i = 1; i < ks->n && !ksyms__less(ks, i, i - 1); i++)
		;
	if (i >= ks->n)
		return; /* already in order */
	for (i = ks->n / 2; i-- > 0;)
		ksyms__sift_down(ks, i, ks->n);
	for (i = ks->n; i-- > 1;) {
		ksyms__swap(ks, 0, i);
		ksyms__sift_down(ks, 0, i);
	}
}

/* Gives back the unused tail of the arrays (a failed shrink keeps the larger block). */
static void ksyms__shrink(struct ksyms *ks, unsigned n)
{
	uint64_t *a = realloc(ks->addr, n * sizeof(*a));
	uint32_t *nm;

	if (a)
		ks->addr = a;
	nm = realloc(ks->name, n * sizeof(*nm));
	if (nm)
		ks->name = nm;
	ks->cap = n;
}

/* Sorts, drops aliases (same address: keep the first listed), and gives back spare memory. */
static void ksyms__finish(struct ksyms *ks)
{
	unsigned out = 0;

	if (!ks->n)
		return;
	ksyms__sort(ks);
	for (unsigned i = 0; i < ks->n; i++) {
		if (out && ks->addr[out - 1] == ks->addr[i])
			continue;
		ks->addr[out] = ks->addr[i];
		ks->name[out++] = ks->name[i];
	}
	ks->n = out;
	if (ks->pool_len) {
		char *p = realloc(ks->pool, ks->pool_len);

		if (p) {
			ks->pool = p;
			ks->pool_cap = ks->pool_len;
		}
	}
	ksyms__shrink(ks, out);
}

struct resident_ctx {
	struct ksyms *ks;
	unsigned listed, zero;
	int err;
};

static bool resident_line(void *ctx, uint64_t addr, char type, const char *name, size_t len)
{
	struct resident_ctx *rc = ctx;

	rc->listed++;
	if (!addr) {
		rc->zero++;
		return true;
	}
	if (ksyms__wanted(type, name, len) && ksyms__add(rc->ks, addr, name, len)) {
		rc->err = -ENOMEM;
		return false;
	}
	return true;
}

struct ksyms *ksyms__load_file(const char *path)
{
	struct ksyms *ks = calloc(1, sizeof(*ks));
	struct resident_ctx rc = {.ks = ks};
	int ret;

	if (!ks) {
		errno = ENOMEM;
		return NULL;
	}
	ret = ksyms__scan(path, resident_line, &rc);
	if (ret || rc.err) {
		ksyms__free(ks);
		errno = ret ? -ret : -rc.err;
		return NULL;
	}
	ks->hidden = rc.listed > 0 && rc.zero == rc.listed;
	ksyms__finish(ks);
	ksyms__tell_hidden(ks);
	return ks;
}

struct ksyms *ksyms__load(void)
{
	return ksyms__load_file("/proc/kallsyms");
}

static const char *resident_resolve(const struct ksyms *ks, uint64_t addr, uint64_t *sym_start)
{
	unsigned lo = 0, hi;

	if (!ks->n || addr < ks->addr[0])
		return NULL;
	hi = ks->n;
	/* Last symbol with start <= addr. */
	while (hi - lo > 1) {
		unsigned mid = lo + (hi - lo) / 2;

		if (ks->addr[mid] <= addr)
			lo = mid;
		else
			hi = mid;
	}
	if (lo == ks->n - 1 && addr - ks->addr[lo] > KSYMS_TAIL_BYTES)
		return NULL;
	if (sym_start)
		*sym_start = ks->addr[lo];
	return ks->pool + ks->name[lo];
}

/* ---- lazy --------------------------------------------------------------------------------- */

/* Hidden when every address listed reads 0: stops at the first one that does not. */
static bool probe_line(void *ctx, uint64_t addr, char type, const char *name, size_t len)
{
	unsigned *counts = ctx;

	counts[0]++;
	counts[1] += addr == 0;
	return addr == 0;
}

struct ksyms *ksyms__open(const char *path, unsigned max_entries)
{
	struct ksyms *ks = calloc(1, sizeof(*ks));
	unsigned counts[2] = {0, 0}, slots = 2;
	int ret;

	if (!ks) {
		errno = ENOMEM;
		return NULL;
	}
	ks->lazy = true;
	ks->max_entries = max_entries ? max_entries : 1;
	snprintf(ks->path, sizeof(ks->path), "%s", path);
	while (slots < 2 * ks->max_entries)
		slots <<= 1;
	ks->want_mask = slots - 1;
	ks->want = calloc(slots, sizeof(*ks->want));
	ks->cache = malloc(ks->max_entries * sizeof(*ks->cache));
	ret = ks->want && ks->cache ? ksyms__scan(path, probe_line, counts) : -ENOMEM;
	if (ret) {
		ksyms__free(ks);
		errno = -ret;
		return NULL;
	}
	ks->hidden = counts[0] > 0 && counts[1] == counts[0];
	ksyms__tell_hidden(ks);
	return ks;
}

static const struct ksym_named *cache_find(const struct ksyms *ks, uint64_t addr)
{
	unsigned lo = 0, hi = ks->n_cache;

	while (lo < hi) {
		unsigned mid = lo + (hi - lo) / 2;

		if (ks->cache[mid].addr < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < ks->n_cache && ks->cache[lo].addr == addr ? &ks->cache[lo] : NULL;
}

void ksyms__want(struct ksyms *ks, uint64_t addr)
{
	unsigned i;

	if (!ks || !ks->lazy || ks->hidden || !addr || cache_find(ks, addr))
		return;
	for (i = (unsigned)((addr * 0x9E3779B97F4A7C15ull) >> 32) & ks->want_mask;
	     ks->want[i]; i = (i + 1) & ks->want_mask)
		if (ks->want[i] == addr)
			return;
	if (ks->n_want >= ks->max_entries) {
		ks->st.dropped++;
		return;
	}
	ks->want[i] = addr;
	ks->n_want++;
}

/* The best symbol found so far for one wanted address: the highest start at or below it. */
struct ksym_best {
	uint64_t start;
	bool has;
	char name[KSYMS_NAME_MAX];
};

struct lazy_ctx {
	const uint64_t *addrs; /* sorted */
	struct ksym_best *best;
	unsigned n;
	uint64_t max_start; /* of all text symbols: the tail rule */
};

static bool lazy_line(void *ctx, uint64_t addr, char type, const char *name, size_t len)
{
	struct lazy_ctx *lc = ctx;
	unsigned lo = 0, hi = lc->n;

	if (!addr || !ksyms__wanted(type, name, len))
		return true;
	if (addr > lc->max_start)
		lc->max_start = addr;
	while (lo < hi) { /* the first wanted address at or above this symbol */
		unsigned mid = lo + (hi - lo) / 2;

		if (lc->addrs[mid] < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < lc->n && (!lc->best[lo].has || addr > lc->best[lo].start)) {
		lc->best[lo].has = true;
		lc->best[lo].start = addr;
		memcpy(lc->best[lo].name, name, len);
		lc->best[lo].name[len] = 0;
	}
	return true;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int cmp_named(const void *a, const void *b)
{
	return cmp_u64(&((const struct ksym_named *)a)->addr, &((const struct ksym_named *)b)->addr);
}

/* The wanted set as a sorted array; the set is emptied. */
static uint64_t *take_wants(struct ksyms *ks, unsigned *n)
{
	uint64_t *addrs = malloc(ks->n_want * sizeof(*addrs));

	*n = 0;
	if (!addrs)
		return NULL;
	for (unsigned i = 0; i <= ks->want_mask; i++) {
		if (ks->want[i])
			addrs[(*n)++] = ks->want[i];
		ks->want[i] = 0;
	}
	ks->n_want = 0;
	qsort(addrs, *n, sizeof(*addrs), cmp_u64);
	return addrs;
}

static int cache_add(struct ksyms *ks, uint64_t addr, const struct ksym_best *b)
{
	struct ksym_named *e = &ks->cache[ks->n_cache];

	e->addr = addr;
	e->start = b ? b->start : 0;
	e->name = KSYMS_UNNAMED;
	if (b) {
		size_t len = strlen(b->name);

		if (ksyms__pool_grow(ks, len))
			return -ENOMEM;
		e->name = (uint32_t)ks->pool_len;
		memcpy(ks->pool + ks->pool_len, b->name, len + 1);
		ks->pool_len += len + 1;
		ks->st.named++;
	} else {
		ks->st.unnamed++;
	}
	ks->n_cache++;
	return 0;
}

/*
 * Caches each wanted address with its symbol. After a kallsyms pass (propagate) an address with
 * no symbol of its own in its gap takes the next lower one's (see the head comment).
 */
static int commit(struct ksyms *ks, const struct lazy_ctx *lc, bool propagate)
{
	const struct ksym_best *b = NULL;

	if (ks->n_cache + lc->n > ks->max_entries) {
		ks->n_cache = 0;
		ks->pool_len = 0;
		ks->st.resets++;
	}
	for (unsigned j = 0; j < lc->n; j++) {
		const struct ksym_best *use;

		if (lc->best[j].has || !propagate)
			b = &lc->best[j];
		use = b && b->has &&
			      !(propagate && b->start == lc->max_start &&
				lc->addrs[j] - b->start > KSYMS_TAIL_BYTES)
			      ? b
			      : NULL;
		if (cache_add(ks, lc->addrs[j], use))
			return -ENOMEM;
	}
	qsort(ks->cache, ks->n_cache, sizeof(*ks->cache), cmp_named);
	return 0;
}

void ksyms__set_namer(struct ksyms *ks, ksyms_namer_fn fn, void *ctx)
{
	if (!ks)
		return;
	ks->namer = fn;
	ks->namer_ctx = ctx;
}

/* Asks the namer for each address; false (and it is dropped) when it cannot answer at all. */
static bool ask_namer(struct ksyms *ks, struct lazy_ctx *lc)
{
	for (unsigned j = 0; j < lc->n; j++) {
		struct ksym_best *b = &lc->best[j];
		int err = ks->namer(ks->namer_ctx, lc->addrs[j], b->name, sizeof(b->name),
				    &b->start);

		ks->st.lookups++;
		if (err && err != -ENOENT) {
			/* EOPNOTSUPP: the namer's owner said why when it was left out */
			if (err != -EOPNOTSUPP)
				pr_info("kernel symbol lookup through BPF failed (%s): reading "
					"/proc/kallsyms instead", strerror(-err));
			ks->namer = NULL;
			memset(lc->best, 0, lc->n * sizeof(*lc->best));
			return false;
		}
		b->has = !err;
	}
	return true;
}

int ksyms__update(struct ksyms *ks)
{
	struct lazy_ctx lc = {0};
	uint64_t *addrs;
	bool named = false;
	int ret;

	if (!ks || !ks->lazy || !ks->n_want)
		return 0;
	addrs = take_wants(ks, &lc.n);
	lc.addrs = addrs;
	lc.best = calloc(lc.n ? lc.n : 1, sizeof(*lc.best));
	if (!addrs || !lc.best) {
		ret = -ENOMEM;
		goto out;
	}
	if (ks->namer)
		named = ask_namer(ks, &lc);
	if (!named) {
		ret = ksyms__scan(ks->path, lazy_line, &lc);
		ks->st.passes++;
		if (ret)
			goto out;
	}
	ret = commit(ks, &lc, !named);
out:
	free(lc.best);
	free(addrs);
	return ret;
}

static const char *lazy_resolve(const struct ksyms *ks, uint64_t addr, uint64_t *sym_start)
{
	const struct ksym_named *e = cache_find(ks, addr);

	if (!e || e->name == KSYMS_UNNAMED)
		return NULL;
	if (sym_start)
		*sym_start = e->start;
	return ks->pool + e->name;
}

/* ---- both --------------------------------------------------------------------------------- */

const char *ksyms__resolve(const struct ksyms *ks, uint64_t addr, uint64_t *sym_start)
{
	if (!ks || ks->hidden)
		return NULL;
	return ks->lazy ? lazy_resolve(ks, addr, sym_start) : resident_resolve(ks, addr, sym_start);
}

bool ksyms__hidden(const struct ksyms *ks)
{
	return ks && ks->hidden;
}

unsigned ksyms__count(const struct ksyms *ks)
{
	if (!ks)
		return 0;
	return ks->lazy ? ks->n_cache : ks->n;
}

void ksyms__stats(const struct ksyms *ks, struct ksyms_stats *st)
{
	*st = ks ? ks->st : (struct ksyms_stats){0};
	st->cached = ks && ks->lazy ? ks->n_cache : 0;
}

void ksyms__free(struct ksyms *ks)
{
	if (!ks)
		return;
	free(ks->addr);
	free(ks->name);
	free(ks->pool);
	free(ks->cache);
	free(ks->want);
	free(ks);
}
