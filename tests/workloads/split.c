// SPDX-License-Identifier: MIT
/*
 * tests/workloads/split.c — a CPU workload with a known split, for the sampler tests and
 * benchmarks (build: -O2 -fno-omit-frame-pointer, so work_a/b/c are leaf functions that set up
 * no frame: their caller run_split() is only found by an unwinder that handles leaves).
 *
 *   split --seconds N [--threads T] [--labels] [--rounds R]
 *
 * work_a, work_b and work_c run the same loop for 5:3:2 iterations: 50/30/20 % of the CPU.
 * Each round's length is drawn at random (fixed seed per thread, so --rounds is still fixed
 * work): CPU-time timers fire on kernel ticks, and a workload whose round evenly divides the
 * tick would be sampled at the same phase every time (aliasing, not the sampler's error).
 * --threads T runs T threads (thread i named split-i), each doing the split.
 * --labels tags each call through edgeprof_labels_push("fn", "a"|"b"|"c") when libedgeprof
 *   is loaded (found with dlsym, so the workload runs without it too).
 * --rounds R does exactly R rounds per thread instead of a time (fixed work: per-sample cost).
 * At exit it prints "cpu_ns=<getrusage user+sys of the process>" on stdout.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <time.h>

#define UNIT 100000L

static double seconds = 5;
static long rounds;
static int (*push)(const char *, const char *);
static void (*pop)(void);
static volatile uint64_t sink;

__attribute__((noinline)) uint64_t work_a(uint64_t x, long unit)
{
	for (long i = 0; i < 5 * unit; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		__asm__ volatile("" : "+r"(x));
	}
	return x;
}

__attribute__((noinline)) uint64_t work_b(uint64_t x, long unit)
{
	for (long i = 0; i < 3 * unit; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		__asm__ volatile("" : "+r"(x));
	}
	return x;
}

__attribute__((noinline)) uint64_t work_c(uint64_t x, long unit)
{
	for (long i = 0; i < 2 * unit; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		__asm__ volatile("" : "+r"(x));
	}
	return x;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint64_t call(uint64_t (*fn)(uint64_t, long), const char *label, uint64_t x, long unit)
{
	if (push)
		push("fn", label);
	x = fn(x, unit);
	if (pop)
		pop();
	return x;
}

__attribute__((noinline)) void *run_split(void *arg)
{
	double end = now() + seconds;
	uint64_t x = (uintptr_t)arg, seed = 0x9e3779b97f4a7c15ull * ((uintptr_t)arg + 1);
	char name[16];
	long unit;

	snprintf(name, sizeof(name), "split-%d", (int)(uintptr_t)arg);
	prctl(PR_SET_NAME, name);
	for (long r = 0; rounds ? r < rounds : now() < end; r++) {
		seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17; /* xorshift64 */
		unit = UNIT / 2 + (long)(seed % UNIT); /* 0.5..1.5 UNIT: UNIT on average */
		x = call(work_a, "a", x, unit);
		x = call(work_b, "b", x, unit);
		x = call(work_c, "c", x, unit);
	}
	sink = x;
	return NULL;
}

int main(int argc, char **argv)
{
	int threads = 1, labels = 0;
	pthread_t t[64];
	struct rusage ru;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
			seconds = atof(argv[++i]);
		else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
			threads = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
			rounds = atol(argv[++i]);
		else if (!strcmp(argv[i], "--labels"))
			labels = 1;
		else {
			fprintf(stderr,
				"usage: split --seconds N [--threads T] [--rounds R] [--labels]\n");
			return 2;
		}
	}
	if (threads < 1 || threads > 64)
		threads = 1;
	if (labels) {
		*(void **)&push = dlsym(RTLD_DEFAULT, "edgeprof_labels_push");
		*(void **)&pop = dlsym(RTLD_DEFAULT, "edgeprof_labels_pop");
	}
	if (threads == 1) {
		run_split((void *)0);
	} else {
		for (int i = 0; i < threads; i++)
			pthread_create(&t[i], NULL, run_split, (void *)(uintptr_t)i);
		for (int i = 0; i < threads; i++)
			pthread_join(t[i], NULL);
	}
	getrusage(RUSAGE_SELF, &ru);
	printf("cpu_ns=%lld\n", (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000LL +
				    (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000LL);
	return 0;
}
