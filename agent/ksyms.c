// SPDX-License-Identifier: MIT
/*
 * agent/ksyms.c — /proc/kallsyms in two arrays: symbols {address, name offset} sorted by
 * address, and one pool of names. A lookup is a binary search.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/ksyms.h"
#include "port/log.h"

/* Past the last symbol we still name addresses up to this far (the last function's body). */
#define KSYMS_TAIL_BYTES (1u << 20)

struct ksym {
	uint64_t addr;
	uint32_t name; /* offset in pool */
};

struct ksyms {
	struct ksym *syms;
	unsigned n, cap;
	char *pool;
	size_t pool_len, pool_cap;
	bool hidden;
};

static int ksyms__grow(struct ksyms *ks, size_t name_len)
{
	if (ks->n == ks->cap) {
		unsigned cap = ks->cap ? ks->cap * 2 : 4096;
		struct ksym *p = realloc(ks->syms, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		ks->syms = p;
		ks->cap = cap;
	}
	if (ks->pool_len + name_len + 1 > ks->pool_cap) {
		size_t cap = ks->pool_cap ? ks->pool_cap * 2 : 65536;
		char *p;

		while (cap < ks->pool_len + name_len + 1)
			cap *= 2;
		p = realloc(ks->pool, cap);
		if (!p)
			return -ENOMEM;
		ks->pool = p;
		ks->pool_cap = cap;
	}
	return 0;
}

/* Text symbols only (t T w W); the 6.x __pfx_ padding symbols would double the table. */
static bool ksyms__wanted(char type, const char *name)
{
	if (type != 't' && type != 'T' && type != 'w' && type != 'W')
		return false;
	return strncmp(name, "__pfx_", 6) != 0;
}

static int ksyms__add(struct ksyms *ks, uint64_t addr, const char *name)
{
	size_t len = strlen(name);

	if (ksyms__grow(ks, len))
		return -ENOMEM;
	ks->syms[ks->n].addr = addr;
	ks->syms[ks->n].name = (uint32_t)ks->pool_len;
	memcpy(ks->pool + ks->pool_len, name, len + 1);
	ks->pool_len += len + 1;
	ks->n++;
	return 0;
}

static int ksym__cmp(const void *a, const void *b)
{
	const struct ksym *x = a, *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	return x->name < y->name ? -1 : x->name > y->name; /* stable: first listed wins */
}

/* Sorts, drops aliases (same address: keep the first listed), and gives back spare memory. */
static void ksyms__finish(struct ksyms *ks)
{
	unsigned out = 0;

	if (!ks->n)
		return;
	qsort(ks->syms, ks->n, sizeof(*ks->syms), ksym__cmp);
	for (unsigned i = 0; i < ks->n; i++) {
		if (out && ks->syms[out - 1].addr == ks->syms[i].addr)
			continue;
		ks->syms[out++] = ks->syms[i];
	}
	ks->n = out;
	if (ks->pool_len) {
		char *p = realloc(ks->pool, ks->pool_len);

		if (p) {
			ks->pool = p;
			ks->pool_cap = ks->pool_len;
		}
	}
	if (out) {
		struct ksym *p = realloc(ks->syms, out * sizeof(*p));

		if (p) {
			ks->syms = p;
			ks->cap = out;
		}
	}
}

static int ksyms__parse(struct ksyms *ks, FILE *f)
{
	char line[512], name[256], type;
	unsigned long long addr;
	unsigned listed = 0, zero = 0;

	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%llx %c %255s", &addr, &type, name) != 3)
			continue;
		listed++;
		if (!addr) {
			zero++;
			continue;
		}
		if (ksyms__wanted(type, name) && ksyms__add(ks, addr, name))
			return -ENOMEM;
	}
	ks->hidden = listed > 0 && zero == listed;
	return 0;
}

struct ksyms *ksyms__load_file(const char *path)
{
	static bool told;
	struct ksyms *ks;
	FILE *f;
	int ret;

	f = fopen(path, "re");
	if (!f)
		return NULL;
	ks = calloc(1, sizeof(*ks));
	if (!ks) {
		fclose(f);
		errno = ENOMEM;
		return NULL;
	}
	ret = ksyms__parse(ks, f);
	fclose(f);
	if (ret) {
		ksyms__free(ks);
		errno = -ret;
		return NULL;
	}
	ksyms__finish(ks);
	if (ks->hidden && !told) {
		told = true;
		pr_warn("kernel addresses are hidden (kernel.kptr_restrict, or no CAP_SYSLOG): "
			"kernel frames stay unnamed");
	}
	return ks;
}

struct ksyms *ksyms__load(void)
{
	return ksyms__load_file("/proc/kallsyms");
}

const char *ksyms__resolve(const struct ksyms *ks, uint64_t addr, uint64_t *sym_start)
{
	unsigned lo = 0, hi;

	if (!ks || !ks->n || addr < ks->syms[0].addr)
		return NULL;
	hi = ks->n;
	/* Last symbol with start <= addr. */
	while (hi - lo > 1) {
		unsigned mid = lo + (hi - lo) / 2;

		if (ks->syms[mid].addr <= addr)
			lo = mid;
		else
			hi = mid;
	}
	if (lo == ks->n - 1 && addr - ks->syms[lo].addr > KSYMS_TAIL_BYTES)
		return NULL;
	if (sym_start)
		*sym_start = ks->syms[lo].addr;
	return ks->pool + ks->syms[lo].name;
}

bool ksyms__hidden(const struct ksyms *ks)
{
	return ks && ks->hidden;
}

unsigned ksyms__count(const struct ksyms *ks)
{
	return ks ? ks->n : 0;
}

void ksyms__free(struct ksyms *ks)
{
	if (!ks)
		return;
	free(ks->syms);
	free(ks->pool);
	free(ks);
}
