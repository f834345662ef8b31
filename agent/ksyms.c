// SPDX-License-Identifier: MIT
/*
 * agent/ksyms.c — /proc/kallsyms as addresses and name offsets (parallel arrays sorted by
 * address, 12 bytes a symbol) and one pool of names. A lookup is a binary search. The sort is
 * an in-place heapsort, skipped when the kernel listed them in order (it nearly does): qsort's
 * temporary copy would double the table at the agent's peak RSS.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/ksyms.h"
#include "port/log.h"

/* Past the last symbol we still name addresses up to this far (the last function's body). */
#define KSYMS_TAIL_BYTES (1u << 20)

struct ksyms {
	uint64_t *addr;
	uint32_t *name; /* offset in pool */
	unsigned n, cap;
	char *pool;
	size_t pool_len, pool_cap;
	bool hidden;
};

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
	ks->addr[ks->n] = addr;
	ks->name[ks->n] = (uint32_t)ks->pool_len;
	memcpy(ks->pool + ks->pool_len, name, len + 1);
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

	if (!ks || !ks->n || addr < ks->addr[0])
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
	free(ks->addr);
	free(ks->name);
	free(ks->pool);
	free(ks);
}
