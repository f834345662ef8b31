// SPDX-License-Identifier: MIT
/*
 * heapsplit — allocations with a known split, for the heap profiler's tests.
 *
 *   heapsplit MIB   allocates about MIB MiB in blocks of 64 B .. 64 KiB (a fixed sequence):
 *                   alloc_a 60 %, alloc_b 30 % (through calloc/realloc), alloc_c 10 % (in a
 *                   thread, through posix_memalign), and keeps blocks live: alloc_a 64 MiB,
 *                   alloc_b 32 MiB, early_alloc 16 MiB (before main, in a constructor).
 * Prints the truth: "alloc <fn> <bytes>" and "inuse <fn> <bytes>" per function.
 *
 *   heapsplit churn MILLIONS THREADS   the benchmark's allocation-heavy load: MILLIONS small
 *                   blocks (16 B .. 1 KiB) allocated and freed per thread, 8192 live at a time
 *                   per thread (a malloc-bound program: ~50 ns per allocation here).
 *
 *   heapsplit leak SECONDS   a leak for the agent's heap rounds: steady_hold keeps 8 MiB from
 *                   the start; every 10 ms leak_here allocates 64 KiB and never frees it, and
 *                   churn_alloc allocates and frees 64 KiB.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t seed = 12345;
/* global: a static array nothing reads would lose its stores (and leak_here its frame) */
void *keep[1 << 16];
static size_t n_keep;

static size_t next_size(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return 64 + (size_t)((*s >> 33) % (64 * 1024 - 64));
}

struct work {
	uint64_t budget, keep_bytes, allocated, kept, seed;
};

static void *retain(struct work *w, void *p, size_t n)
{
	if (w->kept < w->keep_bytes && n_keep < sizeof(keep) / sizeof(keep[0])) {
		keep[n_keep++] = p;
		w->kept += n;
		return NULL;
	}
	return p;
}

__attribute__((noinline)) void alloc_a(struct work *w)
{
	while (w->allocated < w->budget) {
		size_t n = next_size(&w->seed);
		char *p = malloc(n);

		p[0] = 1;
		w->allocated += n;
		free(retain(w, p, n));
	}
}

/* calloc then realloc: both allocations are this function's */
__attribute__((noinline)) void alloc_b(struct work *w)
{
	while (w->allocated < w->budget) {
		size_t n = next_size(&w->seed), m = next_size(&w->seed);
		char *p = calloc(1, n), *q;

		w->allocated += n;
		q = realloc(p, m);
		if (!q)
			abort();
		w->allocated += m;
		free(retain(w, q, m));
	}
}

__attribute__((noinline)) void alloc_c(struct work *w)
{
	while (w->allocated < w->budget) {
		size_t n = next_size(&w->seed);
		void *p;

		if (posix_memalign(&p, 64, n))
			abort();
		((char *)p)[0] = 1;
		w->allocated += n;
		free(retain(w, p, n));
	}
}

static void *thread_c(void *arg)
{
	alloc_c(arg);
	return NULL;
}

static struct work early = {.budget = 16 << 20, .keep_bytes = 16 << 20, .seed = 7};

__attribute__((noinline)) void early_alloc(struct work *w)
{
	while (w->allocated < w->budget) {
		size_t n = next_size(&w->seed);
		char *p = malloc(n);

		p[0] = 1;
		w->allocated += n;
		free(retain(w, p, n));
	}
}

__attribute__((constructor)) static void before_main(void)
{
	early_alloc(&early);
}

struct churn {
	uint64_t n, seed, sum;
};

__attribute__((noinline)) void *churn_alloc(size_t n)
{
	char *p = malloc(n);

	p[0] = (char)n;
	return p;
}

static void *churn(void *arg)
{
	struct churn *c = arg;
	static __thread void *win[8192];

	for (uint64_t i = 0; i < c->n; i++) {
		size_t k = i % 8192, n;

		c->seed = c->seed * 6364136223846793005ull + 1442695040888963407ull;
		n = 16 + (size_t)((c->seed >> 33) % 1008);
		if (win[k]) {
			c->sum += *(unsigned char *)win[k];
			free(win[k]);
		}
		win[k] = churn_alloc(n);
	}
	for (size_t k = 0; k < 8192; k++)
		free(win[k]);
	return NULL;
}

static int churn_main(uint64_t millions, int threads)
{
	struct churn c[64];
	pthread_t t[64];
	uint64_t sum = 0;
	struct timespec t0, t1;

	threads = threads < 1 ? 1 : threads > 64 ? 64 : threads;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < threads; i++) {
		c[i] = (struct churn){millions * 1000000, seed + (uint64_t)i, 0};
		if (pthread_create(&t[i], NULL, churn, &c[i]))
			return 1;
	}
	for (int i = 0; i < threads; i++) {
		pthread_join(t[i], NULL);
		sum += c[i].sum;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	/* the allocation-heavy part alone: start and exit (the profile's writing) excluded */
	printf("churn sum %llu\nchurn_ns %lld\n", (unsigned long long)sum,
	       (long long)(t1.tv_sec - t0.tv_sec) * 1000000000ll + (t1.tv_nsec - t0.tv_nsec));
	return 0;
}

__attribute__((noinline)) void steady_hold(void)
{
	for (int i = 0; i < 128; i++)
		keep[n_keep++] = churn_alloc(64 * 1024);
}

__attribute__((noinline)) void leak_here(void)
{
	if (n_keep < sizeof(keep) / sizeof(keep[0]))
		keep[n_keep++] = churn_alloc(64 * 1024);
}

static int leak_main(double secs)
{
	struct timespec ts = {0, 10 * 1000 * 1000};
	size_t before = n_keep;

	steady_hold();
	for (long i = 0; i < (long)(secs * 100); i++) {
		leak_here();
		free(churn_alloc(64 * 1024));
		nanosleep(&ts, NULL);
	}
	printf("leaked %zu blocks\n", n_keep - before - 128);
	return 0;
}

int main(int argc, char **argv)
{
	uint64_t total = (argc > 1 ? strtoull(argv[1], NULL, 0) : 2048) << 20;
	struct work a = {.budget = total * 6 / 10, .keep_bytes = 64 << 20, .seed = seed};
	struct work b = {.budget = total * 3 / 10, .keep_bytes = 32 << 20, .seed = seed + 1};
	struct work c = {.budget = total / 10, .keep_bytes = 0, .seed = seed + 2};
	pthread_t t;

	if (argc > 2 && !strcmp(argv[1], "leak"))
		return leak_main(atof(argv[2]));
	if (argc > 3 && !strcmp(argv[1], "churn"))
		return churn_main(strtoull(argv[2], NULL, 0), atoi(argv[3]));
	if (pthread_create(&t, NULL, thread_c, &c))
		return 1;
	alloc_a(&a);
	alloc_b(&b);
	pthread_join(t, NULL);
	printf(
	    "alloc alloc_a %llu\nalloc alloc_b %llu\nalloc alloc_c %llu\nalloc early_alloc %llu\n",
	    (unsigned long long)a.allocated, (unsigned long long)b.allocated,
	    (unsigned long long)c.allocated, (unsigned long long)early.allocated);
	printf(
	    "inuse alloc_a %llu\ninuse alloc_b %llu\ninuse alloc_c %llu\ninuse early_alloc %llu\n",
	    (unsigned long long)a.kept, (unsigned long long)b.kept, (unsigned long long)c.kept,
	    (unsigned long long)early.kept);
	return 0;
}
