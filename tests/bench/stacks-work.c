// SPDX-License-Identifier: MIT
/*
 * tests/bench/stacks-work.c — the stacks benchmark's own workload, built -O2
 * -fomit-frame-pointer (no frame pointer anywhere): a fixed call chain of several depths,
 * a recursion, a call through a function pointer and a callback from libc (qsort), so a walk
 * must follow unwind tables through this program and through libc.
 *   stacks-work ROUNDS
 */
#include <stdio.h>
#include <stdlib.h>

#define NOINLINE __attribute__((noinline))

static volatile unsigned long sink;

NOINLINE static unsigned long leaf_mix(unsigned long x, int n)
{
	for (int i = 0; i < n; i++)
		x = x * 6364136223846793005ul + 1442695040888963407ul;
	return x;
}

NOINLINE static unsigned long recurse(unsigned long x, int depth)
{
	if (depth == 0)
		return leaf_mix(x, 20000);
	x = recurse(x + 1, depth - 1);
	sink = x;
	return x ^ (unsigned long)depth;
}

static int cmp_words(const void *a, const void *b)
{
	unsigned long x = leaf_mix(*(const unsigned long *)a, 8);
	unsigned long y = leaf_mix(*(const unsigned long *)b, 8);

	return (x > y) - (x < y);
}

NOINLINE static void sort_some(unsigned long seed)
{
	unsigned long v[512];

	for (int i = 0; i < 512; i++)
		v[i] = seed = leaf_mix(seed, 1);
	qsort(v, 512, sizeof(v[0]), cmp_words);
	sink = v[7];
}

NOINLINE static unsigned long stage_c(unsigned long x)
{
	char pad[200]; /* a frame of its own size */

	for (int i = 0; i < 200; i++)
		pad[i] = (char)(x >> (i & 31));
	sink = (unsigned long)pad[x & 127];
	return leaf_mix(x, 40000);
}

NOINLINE static unsigned long stage_b(unsigned long x)
{
	return stage_c(x + 3) + recurse(x, 12);
}

static unsigned long (*volatile stage_ptr)(unsigned long) = stage_b;

NOINLINE static unsigned long stage_a(unsigned long x)
{
	sort_some(x);
	return stage_ptr(x) * 3;
}

int main(int argc, char **argv)
{
	long rounds = argc > 1 ? atol(argv[1]) : 300;
	unsigned long x = 1;

	for (long r = 0; r < rounds; r++)
		x = stage_a(x);
	printf("%lu\n", x);
	return 0;
}
