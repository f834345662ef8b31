// SPDX-License-Identifier: MIT
/*
 * tests/workloads/bpf-work.c — workloads for the BPF sampler tests (built -O1, frame pointers,
 * not PIE, so nm(1) names their addresses):
 *   bpf-work split SECONDS [THREADS]  work_a/work_b/work_c burn CPU 50/30/20 (same loop,
 *                                      iteration counts 5:3:2, rounds of random length);
 *                                      THREADS (default 1) run it
 *   bpf-work syscall SECONDS           sys_reader() reads /dev/zero: most time in the kernel
 *   bpf-work fixed ROUNDS [DEPTH]      ROUNDS rounds of the split, then exit: a fixed amount of
 *                                      work whose slowdown gives a profiler's per-sample cost;
 *                                      DEPTH nested calls (nest()) under it for deeper stacks
 *   bpf-work via SECONDS               main calls via_a(spin_a) and via_b(spin_b) in turn
 *                                      (~0.3 ms each, from the same stack pointer), each calls
 *                                      hub(), which calls its argument from one call site: the
 *                                      hub frame is the same (pc, sp) under both, its caller is
 *                                      not (the BPF walk cache must see that: bpf/README.md)
 *   bpf-work fixed-syscall ROUNDS      ROUNDS x 100 reads of 64 KiB from /dev/zero: fixed work
 *                                      spent mostly in the kernel (kernel stacks in samples)
 *   bpf-work leaf SECONDS              leaf_thread() spends its time in leaves that do not link
 *                                      their frame: memcpy and read() in libc (no frame
 *                                      pointers in Debian's build), and the prologue and
 *                                      epilogue of a tiny function. The leaf's caller
 *                                      (leaf_copy, leaf_read, leaf_tiny) is what a
 *                                      frame-pointer walk alone loses
 * The comm is set to "bpfw-<mode>" so comm filters can find it.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#define UNIT 200000L /* loop iterations per share point: a round is ~10 UNITs */

static double seconds;
static struct timespec start;

static int expired(void)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (now.tv_sec - start.tv_sec) + (now.tv_nsec - start.tv_nsec) / 1e9 >= seconds;
}

__attribute__((noinline, aligned(64))) void work_a(long unit)
{
	for (volatile long i = 0; i < 5 * unit; i++)
		;
}

__attribute__((noinline, aligned(64))) void work_b(long unit)
{
	for (volatile long i = 0; i < 3 * unit; i++)
		;
}

__attribute__((noinline, aligned(64))) void work_c(long unit)
{
	for (volatile long i = 0; i < 2 * unit; i++)
		;
}

/*
 * Each round's length is drawn at random (0.5..1.5 UNIT, the split kept within the round): a
 * strictly periodic loop can alias with a sampler's fixed period, and its shares then drift by
 * a few points from run to run whatever the sampler does.
 */
static void *split_thread(void *arg)
{
	uint64_t seed = 0x9e3779b97f4a7c15ull * ((uintptr_t)arg + 1);

	while (!expired()) {
		long unit;

		seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17; /* xorshift64 */
		unit = UNIT / 2 + (long)(seed % UNIT);
		work_a(unit);
		work_b(unit);
		work_c(unit);
	}
	return NULL;
}

/*
 * read(2) issued right here, not through libc's read(): glibc is built without frame pointers,
 * so a frame-pointer walk from inside its read() skips the caller. With the syscall inlined,
 * the user leaf of every in-kernel sample is sys_reader() itself.
 */
static inline __attribute__((always_inline)) long raw_read(int fd, void *buf, unsigned long n)
{
#if defined(__x86_64__)
	long ret;

	__asm__ volatile("syscall" : "=a"(ret) : "0"(0L /* SYS_read */), "D"((long)fd), "S"(buf),
			 "d"(n) : "rcx", "r11", "memory");
	return ret;
#elif defined(__aarch64__)
	register long x0 __asm__("x0") = fd;
	register long x1 __asm__("x1") = (long)buf;
	register long x2 __asm__("x2") = (long)n;
	register long x8 __asm__("x8") = 63; /* __NR_read */

	__asm__ volatile("svc #0" : "+r"(x0) : "r"(x1), "r"(x2), "r"(x8) : "memory");
	return x0;
#else
	return read(fd, buf, n);
#endif
}

__attribute__((noinline)) void sys_reader(int fd)
{
	static char buf[65536];

	while (!expired()) {
		if (raw_read(fd, buf, sizeof(buf)) < 0)
			break;
	}
}

static void fixed_rounds(long rounds)
{
	for (; rounds > 0; rounds--) {
		work_a(UNIT);
		work_b(UNIT);
		work_c(UNIT);
	}
}

/* depth frames, then the rounds: the volatile result keeps each call from being a tail call */
__attribute__((noinline)) long nest(int depth, long rounds)
{
	volatile long r = 0;

	if (depth > 0)
		r = nest(depth - 1, rounds) + 1;
	else
		fixed_rounds(rounds);
	return r;
}

/* ---- via mode ---- */

__attribute__((noinline)) void spin_a(void)
{
	for (volatile long i = 0; i < UNIT / 2; i++)
		;
}

__attribute__((noinline)) void spin_b(void)
{
	for (volatile long i = 0; i < UNIT / 2; i++)
		;
}

/* one call site for both leaves; the volatile result keeps the calls from being tail calls */
__attribute__((noinline)) long hub(void (*fn)(void), long tag)
{
	volatile long r = tag;

	fn();
	return r;
}

/* the same frame, not one function (the tags keep the compiler from folding them into one) */
__attribute__((noinline)) long via_a(void (*fn)(void))
{
	volatile long r = hub(fn, 1);

	return r;
}

__attribute__((noinline)) long via_b(void (*fn)(void))
{
	volatile long r = hub(fn, 2);

	return r;
}

/* ---- leaf mode ---- */

static char copy_src[1 << 18], copy_dst[1 << 18];
static int zero_fd = -1;

__attribute__((noinline)) void leaf_copy(void)
{
	for (int i = 0; i < 40; i++) {
		memcpy(copy_dst, copy_src, sizeof(copy_dst));
		__asm__ volatile("" ::: "memory");
	}
}

__attribute__((noinline)) void leaf_read(void)
{
	for (int i = 0; i < 40; i++)
		if (read(zero_fd, copy_dst, sizeof(copy_dst)) < 0)
			break;
}

/* With frame pointers, but so short that a good part of its samples fall in its prologue
 * (before rbp is set) or epilogue (after it is restored). */
__attribute__((noinline)) long tiny(long x)
{
	return x * 3 + 1;
}

__attribute__((noinline)) void leaf_tiny(void)
{
	long x = 1;

	for (long i = 0; i < 2000000; i++) {
		x = tiny(x);
		__asm__ volatile("" : "+r"(x));
	}
}

__attribute__((noinline)) void *leaf_thread(void *arg)
{
	while (!expired()) {
		leaf_copy();
		leaf_read();
		leaf_tiny();
	}
	return arg;
}

int main(int argc, char **argv)
{
	char comm[16];

	if (argc < 3) {
		fprintf(stderr, "usage: bpf-work split|syscall|leaf|via SECONDS [THREADS] | "
				"fixed ROUNDS [DEPTH] | fixed-syscall ROUNDS\n");
		return 2;
	}
	seconds = atof(argv[2]);
	clock_gettime(CLOCK_MONOTONIC, &start);
	snprintf(comm, sizeof(comm), "bpfw-%s", argv[1]);
	prctl(PR_SET_NAME, comm);
	if (!strcmp(argv[1], "split")) {
		int n = argc > 3 ? atoi(argv[3]) : 1;
		pthread_t t[16];

		for (int i = 1; i < n && i < 16; i++)
			pthread_create(&t[i], NULL, split_thread, (void *)(uintptr_t)i);
		split_thread(NULL);
		for (int i = 1; i < n && i < 16; i++)
			pthread_join(t[i], NULL);
		return 0;
	}
	if (!strcmp(argv[1], "fixed")) {
		nest(argc > 3 ? atoi(argv[3]) : 0, atol(argv[2]));
		return 0;
	}
	if (!strcmp(argv[1], "via")) {
		while (!expired()) {
			via_a(spin_a);
			via_b(spin_b);
		}
		return 0;
	}
	if (!strcmp(argv[1], "fixed-syscall")) {
		static char buf[65536];
		int fd = open("/dev/zero", O_RDONLY);

		for (long r = 100 * atol(argv[2]); fd >= 0 && r > 0; r--)
			if (raw_read(fd, buf, sizeof(buf)) < 0)
				return 1;
		return fd < 0;
	}
	if (!strcmp(argv[1], "leaf")) {
		zero_fd = open("/dev/zero", O_RDONLY);
		if (zero_fd < 0)
			return 1;
		leaf_thread(NULL);
		return 0;
	}
	if (!strcmp(argv[1], "syscall")) {
		int fd = open("/dev/zero", O_RDONLY);

		if (fd < 0)
			return 1;
		sys_reader(fd);
		return 0;
	}
	return 2;
}
