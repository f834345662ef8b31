// SPDX-License-Identifier: MIT
/*
 * tests/bench/armwalk-bench.c — the armv7 walk (agent/lib/unwind.c) of one real stack, timed:
 * a recursion DEPTH deep raises a signal whose handler walks the interrupted stack REPS times
 * with the thread's cache (as libedgeprof.so's handler does) or without it (NOCACHE=1: every
 * frame read again). Built twice by armwalk-bench.sh: without -funwind-tables (frames read from
 * the code) and with it (frames by .ARM.exidx), to compare the two per frame. Under qemu-arm
 * the figures are qemu's, not an ARM core's.
 *   armwalk-bench REPS DEPTH
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <ucontext.h>

#include "agent/lib/modules.h"
#include "agent/lib/unwind.h"

static struct unwind_cache cache;
static uintptr_t lo, hi;
static int reps;

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void on_signal(int sig, siginfo_t *si, void *uc)
{
	struct unwind_cache *c = getenv("NOCACHE") ? NULL : &cache;
	uint64_t frames[64], t0 = now_ns();
	unsigned int n = 0;
	bool truncated;

	(void)sig;
	(void)si;
	for (int i = 0; i < reps; i++)
		n = unwind__stack(uc, lo, hi, UNWIND_CFI, c, frames, 64, &truncated);
	uint64_t dt = now_ns() - t0;

	printf("%u frames, %.2f us a walk, %.3f us a frame", n, (double)dt / 1000.0 / reps,
	       (double)dt / 1000.0 / reps / n);
	if (c)
		printf(" (%u of them read from the code)", c->inferred);
	printf("\n");
}

__attribute__((noinline)) static int recurse(int depth)
{
	int r;

	if (depth == 0) {
		raise(SIGUSR1);
		return 1;
	}
	r = recurse(depth - 1);
	__asm__ volatile("" ::: "memory");
	return r + depth;
}

int main(int argc, char **argv)
{
	struct sigaction sa = {.sa_sigaction = on_signal, .sa_flags = SA_SIGINFO};
	pthread_attr_t a;
	void *addr;
	size_t size;

	if (argc < 3)
		return 2;
	pthread_getattr_np(pthread_self(), &a);
	pthread_attr_getstack(&a, &addr, &size);
	lo = (uintptr_t)addr;
	hi = lo + size;
	reps = atoi(argv[1]);
	modules__trust_table(true); /* as the handler with _dl_find_object: the table's word */
	unwind__init();
	sigaction(SIGUSR1, &sa, NULL);
	return recurse(atoi(argv[2])) > 0 ? 0 : 1;
}
