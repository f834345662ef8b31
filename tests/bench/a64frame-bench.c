// SPDX-License-Identifier: MIT
/*
 * tests/bench/a64frame-bench.c — the cost of reading one arm64 frame from the code
 * (elf/a64frame.h), natively on this machine's CPU, over real Debian arm64 code: every call
 * site (return address: the walk's frames past the leaf) and every 8th instruction as an
 * interrupted pc (leaves; literal pools and data among the text are not found and read the
 * whole budget). Prints per file the median and 99th percentile wall ns per reading, the mean
 * CPU ns of all readings in a row, the instructions read, and the share found. A walk reads a
 * return address's frame once per thread until its cache evicts it (the handler's cost on a
 * hit is a cache line), so these are the costs of a cold frame.
 *   a64frame-bench FILE...
 */
#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "elf/a64frame.h"

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

/* The first executable load segment of an ELF64 AArch64 file as code, or false. */
static bool load(const char *path, struct a64frame_code *c)
{
	FILE *fp = fopen(path, "rb");
	const Elf64_Ehdr *eh;
	uint8_t *d;
	long len;

	if (!fp)
		return false;
	fseek(fp, 0, SEEK_END);
	len = ftell(fp);
	rewind(fp);
	d = malloc((size_t)len);
	if (!d || len < (long)sizeof(*eh) || fread(d, 1, (size_t)len, fp) != (size_t)len) {
		fclose(fp);
		free(d);
		return false;
	}
	fclose(fp);
	eh = (const Elf64_Ehdr *)d;
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh->e_machine != EM_AARCH64)
		return false;
	for (unsigned int i = 0; i < eh->e_phnum; i++) {
		const Elf64_Phdr *ph = (const Elf64_Phdr *)(d + eh->e_phoff) + i;

		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
			*c = (struct a64frame_code){d + ph->p_offset, ph->p_vaddr,
						    ph->p_vaddr + ph->p_filesz};
			return true;
		}
	}
	return false;
}

struct run {
	uint64_t *ns, *pcs;
	unsigned int *insns, n, found;
	bool exact;
	double cpu_ns; /* mean CPU time per reading over a second pass, all readings in a row */
};

static struct a64frame_work work; /* as the unwinder gives it: a thread's room */

static void one(const struct a64frame_code *c, uint64_t pc, bool exact, struct run *r,
		unsigned int budget)
{
	struct a64frame f;
	uint64_t t0 = now_ns();
	bool ok = a64frame__analyze(c, pc, exact, budget, &f, &work);

	r->ns[r->n] = now_ns() - t0;
	r->pcs[r->n] = pc;
	r->exact = exact;
	r->insns[r->n++] = f.insns;
	r->found += ok;
}

/* The readings again, in a row, timed by the process's CPU clock: the machine's other load
 * (preemption) left out, which the per-reading wall times above include. */
static void again(const struct a64frame_code *c, struct run *r, unsigned int budget)
{
	struct timespec a, b;
	struct a64frame f;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
	for (unsigned int i = 0; i < r->n; i++)
		a64frame__analyze(c, r->pcs[i], r->exact, budget, &f, &work);
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
	r->cpu_ns = ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) /
		    (r->n ? r->n : 1);
}

static void report(const char *what, struct run *r)
{
	uint64_t *in = malloc((r->n + 1) * sizeof(*in));

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

static void alloc_run(struct run *r, size_t cap)
{
	r->ns = malloc(cap * sizeof(*r->ns));
	r->pcs = malloc(cap * sizeof(*r->pcs));
	r->insns = malloc(cap * sizeof(*r->insns));
}

static void free_run(struct run *r)
{
	free(r->ns);
	free(r->pcs);
	free(r->insns);
}

int main(int argc, char **argv)
{
	unsigned int budget = getenv("BUDGET") ? (unsigned int)atoi(getenv("BUDGET")) : 384;

	for (int i = 1; i < argc; i++) {
		struct a64frame_code c;
		struct run ras = {0}, leaves = {0};
		size_t cap;

		if (!load(argv[i], &c)) {
			printf("%s: not an ELF64 AArch64 file\n", argv[i]);
			continue;
		}
		cap = (c.hi - c.lo) / 4 + 1;
		alloc_run(&ras, cap);
		alloc_run(&leaves, cap);
		for (uint64_t a = c.lo; a + 4 <= c.hi; a += 4) {
			uint32_t w;

			memcpy(&w, c.mem + (a - c.lo), 4);
			if (((a - c.lo) & 31) == 0)
				one(&c, a, true, &leaves, budget);
			if ((w & 0xfc000000) == 0x94000000 || (w & 0xfffffc1f) == 0xd63f0000)
				one(&c, a + 4, false, &ras, budget);
		}
		again(&c, &ras, budget);
		again(&c, &leaves, budget);
		printf("%s (budget %u, this CPU, not ARM):\n", argv[i], budget);
		report("return addresses", &ras);
		report("leaf pcs", &leaves);
		free_run(&ras);
		free_run(&leaves);
		free((void *)(c.mem));
	}
	return 0;
}
