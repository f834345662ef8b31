// SPDX-License-Identifier: MIT
/*
 * selfread-test — agent/lib/selfread.h: reads of our own memory that fail instead of faulting,
 * on the direct path (plain loads inside the brk heap) and through process_vm_readv: unmapped,
 * PROT_NONE, freed (an mmap'd chunk given back, a heap top trimmed away), above the break, a
 * null page; and the cases where the direct path must stand down (other threads, a sample that
 * interrupted brk()). A read that faulted would kill the test.
 */
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>
#include <cmocka.h>

#include "agent/lib/selfread.h"

static long page;

/*
 * ASan's allocator (make test SAN=1) takes no memory from the break, keeps freed memory mapped
 * (its quarantine) and trims nothing: there the heap cases use the break itself, by sbrk().
 */
#if defined(__SANITIZE_ADDRESS__)
static const bool glibc_malloc = false;
#else
static const bool glibc_malloc = true;
#endif

/* qemu-user has no process_vm_readv: what only it can read is checked where it exists. */
static bool have_pvr(void)
{
	char a = 1, b = 0;
	struct iovec l = {&b, 1}, r = {&a, 1};

	return syscall(SYS_process_vm_readv, getpid(), &l, 1UL, &r, 1UL, 0UL) == 1;
}

static struct selfread_stats stats(void)
{
	struct selfread_stats st;

	selfread__stats(&st);
	return st;
}

static void alone(void)
{
	selfread__begin(NULL, 0, true, 0);
}

static void brk_heap_reads_directly(void **state)
{
	uint64_t errors = 0, v = 0;
	/* small: glibc's main arena, below the break */
	uint64_t *obj = glibc_malloc ? malloc(64) : sbrk(64);
	struct selfread_stats before;

	(void)state;
	assert_true(obj && obj != (void *)-1);
	assert_true(stats().direct_on);
	obj[3] = 0x1234567890abcdefull;
	alone();
	before = stats();
	assert_true(selfread__peek((uintptr_t)&obj[3], &v, sizeof(v), &errors));
	assert_int_equal(v, 0x1234567890abcdefull);
	assert_int_equal(stats().direct, before.direct + 1);
	assert_int_equal(stats().syscalls, before.syscalls);
	assert_int_equal(errors, 0);
	if (glibc_malloc)
		free(obj);
	else
		sbrk(-64);
}

static void bad_pointers_fail_without_faulting(void **state)
{
	uint64_t errors = 0, v;
	char *unmapped = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE,
			      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *none = mmap(NULL, (size_t)page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *big = malloc(4u << 20); /* past the mmap threshold: its own mapping */
	uintptr_t brk_end, freed = (uintptr_t)big + 4096;
	struct selfread_window w = {0};

	(void)state;
	assert_true(unmapped != MAP_FAILED && none != MAP_FAILED && big);
	munmap(unmapped, (size_t)page);
	free(big); /* unmapped by free() */
	alone();
	brk_end = (uintptr_t)sbrk(0);
	const uintptr_t bad[] = {0, 8, 4095, (uintptr_t)unmapped, (uintptr_t)none + 16,
				 glibc_malloc ? freed : 0, brk_end, brk_end + (uintptr_t)page,
				 UINTPTR_MAX - 4};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_false(selfread__peek(bad[i], &v, sizeof(v), &errors));
		selfread__reset(&w);
		assert_false(selfread__fetch(&w, bad[i], &v, sizeof(v), &errors));
	}
	assert_int_equal(errors, 2 * (sizeof(bad) / sizeof(bad[0])));
	/* straddling the break: the first bytes are the heap's, the last are not */
	assert_false(selfread__peek(brk_end - 4, &v, sizeof(v), &errors));
	munmap(none, (size_t)page);
}

/* A heap top trimmed away by free() + malloc_trim(): the address was readable, is not now. */
static void trimmed_heap_top_fails(void **state)
{
	uint64_t errors = 0, v;
	enum { N = 64 };
	char *blocks[N];
	uintptr_t top = 0;

	(void)state;
	if (!glibc_malloc) {
		char *p = sbrk(256 << 10); /* the break raised, then lowered again */

		assert_true(p != (void *)-1);
		memset(p, 1, 256 << 10);
		alone();
		assert_true(selfread__peek((uintptr_t)p + (128 << 10), &v, sizeof(v), &errors));
		sbrk(-(256 << 10));
		alone();
		assert_false(selfread__peek((uintptr_t)p + (128 << 10), &v, sizeof(v), &errors));
		return;
	}
	mallopt(M_MMAP_THRESHOLD, 1 << 20); /* 64 KiB blocks from the break */
	for (int i = 0; i < N; i++) {
		blocks[i] = malloc(64 << 10);
		assert_non_null(blocks[i]);
		memset(blocks[i], 1, 64 << 10);
		if ((uintptr_t)blocks[i] > top)
			top = (uintptr_t)blocks[i];
	}
	alone();
	assert_true(selfread__peek(top + 1000, &v, sizeof(v), &errors));
	for (int i = N - 1; i >= 0; i--)
		free(blocks[i]);
	malloc_trim(0);
	alone(); /* the next sample: the break as glibc now has it */
	assert_true((uintptr_t)sbrk(0) <= top + 1000); /* trimmed below it: gone */
	assert_false(selfread__peek(top + 1000, &v, sizeof(v), &errors));
	mallopt(M_MMAP_THRESHOLD, 128 << 10);
}

/*
 * The break lowered by the raw system call (a program's own allocator might): __curbrk still says
 * the old top, the pages above the kernel's break are gone; a read there must fail, not fault.
 */
static void raw_brk_lowered_fails(void **state)
{
	uint64_t errors = 0, v;
	uintptr_t old = (uintptr_t)sbrk(0), probe;

	(void)state;
	assert_true(old != (uintptr_t)-1);
	assert_true(sbrk(256 << 10) != (void *)-1); /* __curbrk: old + 256 KiB */
	memset((void *)old, 1, 256 << 10);
	probe = old + (128 << 10);
	alone();
	assert_true(selfread__peek(probe, &v, sizeof(v), &errors));
	assert_int_equal(syscall(SYS_brk, old), (long)old); /* the kernel's break: back to old */
	alone();
	assert_false(selfread__peek(probe, &v, sizeof(v), &errors));
	assert_int_equal(errors, 1);
	assert_int_equal(syscall(SYS_brk, old + (256 << 10)), (long)(old + (256 << 10)));
	sbrk(-(256 << 10)); /* glibc's view and the kernel's agree again */
}

/* Other program threads, or a sample inside brk(): the same read goes by system call. */
static void direct_path_stands_down(void **state)
{
	uint64_t errors = 0, v = 0, *obj = malloc(64);
	void *brk_fn = dlsym(RTLD_DEFAULT, "brk");
	uint64_t in_brk[2] = {0x1000, (uint64_t)(uintptr_t)brk_fn + 7};
	struct selfread_stats before;
	bool pvr = have_pvr();

	(void)state;
	assert_true(obj && brk_fn);
	*obj = 42;
	before = stats();
	selfread__begin(NULL, 0, false, 0);
	assert_int_equal(stats().not_alone, before.not_alone + 1);
	before = stats();
	assert_int_equal(selfread__peek((uintptr_t)obj, &v, sizeof(v), &errors), pvr);
	assert_int_equal(stats().direct, before.direct);
	assert_int_equal(stats().syscalls, before.syscalls + 1);
	before = stats();
	selfread__begin(in_brk, 2, true, 0);
	assert_int_equal(stats().in_brk, before.in_brk + 1);
	before = stats();
	assert_int_equal(selfread__peek((uintptr_t)obj, &v, sizeof(v), &errors), pvr);
	assert_int_equal(stats().direct, before.direct);
	if (pvr)
		assert_int_equal(v, 42);
	free(obj);
}

/* readv: whole ranges in order up to the first that failed, direct ones and system calls. */
static void readv_counts_whole_ranges(void **state)
{
	uint64_t *obj = malloc(64), a = 0, b = 0, c = 0;
	char *none = mmap(NULL, (size_t)page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct iovec l[3] = {{&a, 8}, {&b, 8}, {&c, 8}}, r[3];

	(void)state;
	assert_true(obj && none != MAP_FAILED);
	obj[0] = 1, obj[1] = 2;
	alone();
	r[0] = (struct iovec){&obj[0], 8};
	r[1] = (struct iovec){&obj[1], 8};
	r[2] = (struct iovec){none, 8};
	assert_int_equal(selfread__readv(l, r, 3), 16); /* the third is PROT_NONE */
	assert_int_equal(a, 1);
	assert_int_equal(b, 2);
	r[0] = (struct iovec){none, 8};
	assert_int_equal(selfread__readv(l, r, 2), -1);
	munmap(none, (size_t)page);
	free(obj);
}

/* A vouched range is read directly for one sample only; the live stack from our frame up. */
static void vouched_and_live_stack(void **state)
{
	char *m = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);
	uint64_t errors = 0, v = 0, here = 7;
	struct selfread_stats before;
	unsigned int n = 0;

	(void)state;
	assert_true(m != MAP_FAILED);
	memcpy(m + 64, &here, sizeof(here));
	alone();
	before = stats();
	assert_true(selfread__vouch((uintptr_t)m, (uintptr_t)m + (uintptr_t)page));
	assert_true(selfread__peek((uintptr_t)m + 64, &v, sizeof(v), &errors));
	assert_int_equal(v, 7);
	assert_int_equal(stats().direct, before.direct + 1);
	assert_false(selfread__vouch(4095, 8192)); /* the null page */
	assert_false(selfread__vouch(8192, 8192));
	while (selfread__vouch((uintptr_t)m, (uintptr_t)m + 8))
		n++;
	assert_int_equal(n, SELFREAD_VOUCHED - 1);
	munmap(m, (size_t)page);
	alone(); /* a new sample: the vouch is gone with it */
	before = stats();
	assert_false(selfread__peek((uintptr_t)m + 64, &v, sizeof(v), &errors));
	assert_int_equal(stats().direct, before.direct);
	/* this frame is above selfread__begin's, below the stack's end */
	selfread__begin(NULL, 0, false, (uintptr_t)&here + 4096);
	before = stats();
	v = 0;
	assert_true(selfread__peek((uintptr_t)&here, &v, sizeof(v), &errors));
	assert_int_equal(v, 7);
	assert_int_equal(stats().direct, before.direct + 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(brk_heap_reads_directly),
	    cmocka_unit_test(bad_pointers_fail_without_faulting),
	    cmocka_unit_test(trimmed_heap_top_fails),
	    cmocka_unit_test(raw_brk_lowered_fails),
	    cmocka_unit_test(direct_path_stands_down),
	    cmocka_unit_test(readv_counts_whole_ranges),
	    cmocka_unit_test(vouched_and_live_stack),
	};

	page = sysconf(_SC_PAGESIZE);
	selfread__init();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
