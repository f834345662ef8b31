// SPDX-License-Identifier: MIT
/*
 * tests/bench/armframe-bench.c — the cost of reading one armv7 frame from the code
 * (elf/armframe.h), natively on this machine's CPU, over real Debian armhf code: every call
 * site (return address, the walk's frames past the leaf) and every 16th halfword as an
 * interrupted pc (leaves: literal pools and ARM code among them, which are not found and
 * read the whole budget). Prints per file the median and 99th percentile wall ns per reading,
 * the mean CPU ns of all readings in a row, the instructions read, and the share found.
 * A walk reads a return address's frame once per thread until its cache evicts it.
 *   armframe-bench FILE...
 */
#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "elf/armframe.h"

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/* The executable load segment of an ELF32 file as code, or false. */
static bool load(const char *path, struct armframe_code *c)
{
	FILE *fp = fopen(path, "rb");
	uint8_t *d;
	long len;
	Elf32_Ehdr eh;

	if (!fp)
		return false;
	fseek(fp, 0, SEEK_END);
	len = ftell(fp);
	rewind(fp);
	d = malloc((size_t)len);
	if (!d || fread(d, 1, (size_t)len, fp) != (size_t)len) {
		fclose(fp);
		return false;
	}
	fclose(fp);
	memcpy(&eh, d, sizeof(eh));
	if (memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_ident[EI_CLASS] != ELFCLASS32)
		return false;
	for (unsigned int i = 0; i < eh.e_phnum; i++) {
		Elf32_Phdr ph;

		memcpy(&ph, d + eh.e_phoff + i * eh.e_phentsize, sizeof(ph));
		if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X)) {
			*c = (struct armframe_code){d + ph.p_offset, ph.p_vaddr,
						    ph.p_vaddr + ph.p_filesz};
			return true;
		}
	}
	return false;
}

struct run {
	uint64_t *ns;
	unsigned int *insns, n, found;
	uint32_t *pcs;
	bool exact;
	double cpu_ns; /* mean CPU time per reading over a second pass, all readings in a row */
};

static void one(const struct armframe_code *c, uint32_t pc, bool exact, struct run *r,
		unsigned int budget)
{
	struct armframe f;
	uint64_t t0 = now_ns();
	bool ok = armframe__analyze(c, pc, exact, budget, &f);

	r->ns[r->n] = now_ns() - t0;
	r->pcs[r->n] = pc;
	r->exact = exact;
	r->insns[r->n++] = f.insns;
	r->found += ok;
}

/* The readings again, in a row, timed by the process's CPU clock: the machine's other load
 * (preemption) left out, which the per-reading wall times above include. */
static void again(const struct armframe_code *c, struct run *r, unsigned int budget)
{
	struct timespec a, b;
	struct armframe f;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
	for (unsigned int i = 0; i < r->n; i++)
		armframe__analyze(c, r->pcs[i], r->exact, budget, &f);
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
	r->cpu_ns = ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) /
		    (r->n ? r->n : 1);
}

static void report(const char *what, struct run *r)
{
	uint64_t *in = malloc(r->n * sizeof(*in));

	for (unsigned int i = 0; i < r->n; i++)
		in[i] = r->insns[i];
	qsort(r->ns, r->n, sizeof(*r->ns), cmp64);
	qsort(in, r->n, sizeof(*in), cmp64);
	printf("  %-16s %7u readings, found %5.1f %%, ns median %5llu p99 %6llu, CPU mean %5.0f, "
	       "instructions median %4llu p99 %5llu\n",
	       what, r->n, 100.0 * r->found / (r->n ? r->n : 1),
	       (unsigned long long)r->ns[r->n / 2], (unsigned long long)r->ns[r->n * 99 / 100],
	       r->cpu_ns, (unsigned long long)in[r->n / 2], (unsigned long long)in[r->n * 99 / 100]);
	free(in);
}

int main(int argc, char **argv)
{
	unsigned int budget = getenv("BUDGET") ? (unsigned int)atoi(getenv("BUDGET")) : 384;

	for (int i = 1; i < argc; i++) {
		struct armframe_code c;
		size_t cap;
		struct run ras = {0}, leaves = {0};

		if (!load(argv[i], &c)) {
			printf("%s: not an ELF32 file\n", argv[i]);
			continue;
		}
		cap = (c.hi - c.lo) / 2 + 1;
		ras.ns = malloc(cap * sizeof(uint64_t));
		ras.insns = malloc(cap * sizeof(unsigned int));
		leaves.ns = malloc(cap * sizeof(uint64_t));
		leaves.insns = malloc(cap * sizeof(unsigned int));
		ras.pcs = malloc(cap * sizeof(uint32_t));
		leaves.pcs = malloc(cap * sizeof(uint32_t));
		/* Thumb call sites (bl, blx imm) by a linear decode of the text, and leaf pcs */
		for (uint32_t a = c.lo; a + 4 <= c.hi;) {
			uint16_t hw1, hw2;

			memcpy(&hw1, c.mem + (a - c.lo), 2);
			memcpy(&hw2, c.mem + (a - c.lo) + 2, 2);
			if (((a - c.lo) & 31) == 0)
				one(&c, a | 1, true, &leaves, budget);
			if ((hw1 >> 11) < 0x1d) {
				a += 2;
				continue;
			}
			if ((hw1 & 0xf800) == 0xf000 && (hw2 & 0xc000) == 0xc000 && a + 8 <= c.hi)
				one(&c, (a + 4) | 1, false, &ras, budget);
			a += 4;
		}
		again(&c, &ras, budget);
		again(&c, &leaves, budget);
		printf("%s (budget %u, this CPU, not ARM):\n", argv[i], budget);
		report("return addresses", &ras);
		report("leaf pcs", &leaves);
	}
	return 0;
}
