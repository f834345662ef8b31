#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# What a fault-free read of the process's own memory costs in a SIGPROF handler
# (agent/lib/selfread.h: the interpreter walkers' only way to read), against the same read
# repeated at once: a CPU-time timer interrupts a loop every 10 ms, the handler times
#   pvr1     process_vm_readv of 96 bytes (the first of the handler)
#   pvr2     the same again (warm)
#   pvr8     8 reads of 96 bytes, 40 KB apart, as one process_vm_readv (iovecs: a chain)
#   pipe     write() of 96 bytes into a pipe and read() back (the other EFAULT-not-SIGSEGV
#            read; not used: it would need a file descriptor the program would see)
# and prints the medians in ns. Why the Lua walker's handler costs what it does
# (tests/bench/lua-bench.sh): the first read of a sample, and each page after it.
#   tests/bench/selfread-bench.sh [--seconds 3]
set -eu
seconds=3
[ "${1:-}" = --seconds ] && seconds=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/sr.c" <<'C'
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#define MAX 4096
static long t[4][MAX];
static int n, p[2];
static char *heap;
static long now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000L + ts.tv_nsec;
}
static void on_prof(int sig)
{
	char b[8 * 96];
	struct iovec l[8], r[8];
	long t0, t1, t2, t3, t4;
	(void)sig;
	if (n == MAX)
		return;
	for (int i = 0; i < 8; i++) {
		l[i] = (struct iovec){b + 96 * i, 96};
		r[i] = (struct iovec){heap + 40000 * i + 123, 96};
	}
	t0 = now();
	process_vm_readv(getpid(), l, 1, r + 1, 1, 0);
	t1 = now();
	process_vm_readv(getpid(), l, 1, r + 1, 1, 0);
	t2 = now();
	process_vm_readv(getpid(), l, 8, r, 8, 0);
	t3 = now();
	if (write(p[1], heap + 5000, 96) == 96 && read(p[0], b, 96) != 96)
		return;
	t4 = now();
	t[0][n] = t1 - t0, t[1][n] = t2 - t1, t[2][n] = t3 - t2, t[3][n] = t4 - t3;
	n++;
}
static int cmp(const void *a, const void *b)
{
	return (*(const long *)a > *(const long *)b) - (*(const long *)a < *(const long *)b);
}
int main(int argc, char **argv)
{
	struct itimerval it = {{0, 10000}, {0, 10000}};
	volatile double x = 0;
	long end = now() + atol(argv[1]) * 1000000000L;
	const char *name[] = {"pvr1", "pvr2", "pvr8", "pipe"};
	(void)argc;
	heap = malloc(1 << 20);
	for (int i = 0; i < 1 << 20; i++)
		heap[i] = (char)i;
	if (pipe2(p, O_NONBLOCK))
		return 1;
	signal(SIGPROF, on_prof);
	setitimer(ITIMER_PROF, &it, NULL);
	while (now() < end)
		for (int i = 0; i < 100000; i++)
			x += heap[i & 1023] * 1.0001;
	signal(SIGPROF, SIG_IGN);
	for (int k = 0; k < 4; k++) {
		qsort(t[k], (size_t)n, sizeof(long), cmp);
		printf("%s %ld ", name[k], n ? t[k][n / 2] : 0);
	}
	printf("(samples %d)\n", n);
	return 0;
}
C
cc -O2 -o "$tmp/sr" "$tmp/sr.c"
echo "$(uname -r), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
"$tmp/sr" "$seconds"
