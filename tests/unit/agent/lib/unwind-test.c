// SPDX-License-Identifier: MIT
/*
 * Unit tests of agent/lib/unwind.c with synthetic interrupted contexts (no signals: deterministic,
 * also under qemu-user): a sample taken in a frameless leaf function keeps the leaf's caller
 * with the .eh_frame leaf step and loses it with frame pointers alone; broken chains stop
 * cleanly, with known and with unknown stack bounds; a module unloaded behind the table's back
 * (glibc's own dlclose of gconv modules) is never read. One test takes real signals: a walk
 * from a handler interrupted inside another handler, through libc's qsort and functions
 * without frame pointers, must cross the signal frame and reach the test function.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <ucontext.h>
#include <cmocka.h>

#include "agent/lib/unwind.h"

/* Built -O2: no frame, return address stays at [sp] (x86_64) or in the link register. */
__attribute__((noinline)) uint64_t unwind_test_leaf(uint64_t x)
{
	for (int i = 0; i < 100; i++) {
		x = x * 31 + (uint64_t)i;
		__asm__ volatile("" : "+r"(x));
	}
	return x;
}

__attribute__((noinline)) uint64_t unwind_test_caller(uint64_t x)
{
	return unwind_test_leaf(x) + 1;
}

struct fake {
	ucontext_t uc;
	uintptr_t stack[8]; /* what the leaf's stack holds at the sample */
};

/* Interrupted at leaf+8 (past any endbr64), called from caller+16, our frame above it. */
static void make_leaf_context(struct fake *f, uintptr_t caller_ra)
{
	uintptr_t pc = (uintptr_t)unwind_test_leaf + 8;

	memset(f, 0, sizeof(*f));
#if defined(__x86_64__)
	f->stack[0] = caller_ra;
	f->uc.uc_mcontext.gregs[REG_RIP] = (greg_t)pc;
	f->uc.uc_mcontext.gregs[REG_RSP] = (greg_t)(uintptr_t)&f->stack[0];
	f->uc.uc_mcontext.gregs[REG_RBP] = (greg_t)(uintptr_t)__builtin_frame_address(0);
#elif defined(__aarch64__)
	f->uc.uc_mcontext.pc = pc;
	f->uc.uc_mcontext.sp = (uintptr_t)&f->stack[0];
	f->uc.uc_mcontext.regs[29] = (uintptr_t)__builtin_frame_address(0);
	f->uc.uc_mcontext.regs[30] = caller_ra;
#elif defined(__arm__)
	f->uc.uc_mcontext.arm_pc = pc;
	f->uc.uc_mcontext.arm_sp = (uintptr_t)&f->stack[0];
	f->uc.uc_mcontext.arm_lr = caller_ra;
#endif
}

static uintptr_t lo_of(void)
{
	volatile char here;

	return ((uintptr_t)&here - 65536) & ~(uintptr_t)7;
}

static void leaf_caller_found_with_eh_frame(void **state)
{
	uintptr_t ra = (uintptr_t)unwind_test_caller + 16, lo = lo_of();
	struct unwind_cache cache;
	struct fake f;
	uint64_t frames[16];
	bool trunc;
	unsigned int n;

#if defined(__arm__)
	/* this context is not one the leaf's code can be in on ARM (it pushes {r7, lr} first):
	 * the armv7 walk is tested on real contexts (walks_a_frameless_chain_by_tables) */
	skip();
#endif
	assert_true(unwind__init() > 0);
	memset(&cache, 0, sizeof(cache));
	make_leaf_context(&f, ra);
	for (int round = 0; round < 2; round++) { /* cold, then from the cache */
		n = unwind__stack(&f.uc, lo, lo + 8 * 1024 * 1024, UNWIND_CFI, &cache,
				  frames, 16, &trunc);
		assert_true(n >= 2);
		assert_int_equal(frames[0], (uintptr_t)unwind_test_leaf + 8);
		assert_int_equal(frames[1], ra);
	}
#if defined(__x86_64__) || defined(__aarch64__)
	assert_true(cache.hits >= 1);
	/* frame pointers alone skip the caller: the frame pointer still is the caller's caller's */
	n = unwind__stack(&f.uc, lo, lo + 8 * 1024 * 1024, UNWIND_FP, NULL, frames, 16, &trunc);
	assert_true(n >= 1);
	assert_true(n < 2 || frames[1] != ra);
#endif
	assert_int_equal(unwind_test_caller(1), unwind_test_leaf(1) + 1);
}

static void depth_is_bounded(void **state)
{
	uintptr_t ra = (uintptr_t)unwind_test_caller + 16, lo = lo_of();
	struct fake f;
	uint64_t frames[1];
	bool trunc;

	make_leaf_context(&f, ra);
	assert_int_equal(unwind__stack(&f.uc, lo, lo + 8 * 1024 * 1024, UNWIND_CFI, NULL,
				       frames, 1, &trunc),
			 1);
#if defined(__x86_64__) || defined(__aarch64__)
	assert_true(trunc);
#endif
}

static void broken_chains_stop_cleanly(void **state)
{
	static const uintptr_t bad[] = {0, 8, 0x1234, (uintptr_t)-16, (uintptr_t)0x7fffdeadbee0ull};
	uintptr_t lo = lo_of();
	struct fake f;
	uint64_t frames[16];
	bool trunc;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		make_leaf_context(&f, bad[i]);
#if defined(__x86_64__)
		f.uc.uc_mcontext.gregs[REG_RBP] = (greg_t)bad[i];
#elif defined(__aarch64__)
		f.uc.uc_mcontext.regs[29] = bad[i];
#endif
		/* known bounds, then unknown bounds (reads checked by the kernel) */
		assert_true(unwind__stack(&f.uc, lo, lo + 8 * 1024 * 1024, UNWIND_CFI, NULL,
					  frames, 16, &trunc) <= 2);
		assert_true(
		    unwind__stack(&f.uc, 0, 0, UNWIND_CFI, NULL, frames, 16, &trunc) <= 2);
		assert_true(unwind__stack(&f.uc, 0, 0, UNWIND_FP, NULL, frames, 16, &trunc) <= 2);
	}
}

/*
 * The table is built while a library is loaded, then the library is unloaded without the
 * table hearing of it (glibc unloads gconv and NSS modules itself, through no interposable
 * call). A sample with a pc in the unmapped text must not read the unwind table that was
 * there: before agent/lib/modules.c it did, and died with SIGSEGV.
 */
static void unloaded_module_is_not_read(void **state)
{
	static const char *const libs[] = {"libz.so.1", "libzstd.so.1", "libm.so.6"};
	uintptr_t lo = lo_of(), pc = 0;
	struct fake f;
	uint64_t frames[16];
	bool trunc;
	void *h = NULL;

	for (size_t i = 0; i < sizeof(libs) / sizeof(libs[0]) && !h; i++) {
		if (dlopen(libs[i], RTLD_NOW | RTLD_NOLOAD))
			continue; /* already loaded: dlclose would not unmap it */
		h = dlopen(libs[i], RTLD_NOW | RTLD_LOCAL);
	}
	if (!h)
		skip();
	Dl_info di;
	void *sym = dlsym(h, "crc32");

	if (!sym)
		sym = dlsym(h, "ZSTD_versionNumber");
	if (!sym)
		sym = dlsym(h, "cos");
	assert_non_null(sym);
	assert_true(dladdr(sym, &di));
	pc = (uintptr_t)sym + 4;
	assert_true(unwind__init() > 0);
	assert_int_equal(dlclose(h), 0);
	assert_null(dlopen(di.dli_fname, RTLD_NOW | RTLD_NOLOAD)); /* really gone */
	make_leaf_context(&f, (uintptr_t)unwind_test_caller + 16);
#if defined(__x86_64__)
	f.uc.uc_mcontext.gregs[REG_RIP] = (greg_t)pc;
#elif defined(__aarch64__)
	f.uc.uc_mcontext.pc = pc;
#elif defined(__arm__)
	f.uc.uc_mcontext.arm_pc = pc;
#endif
	assert_true(unwind__stack(&f.uc, lo, lo + 8 * 1024 * 1024, UNWIND_CFI, NULL, frames,
				  16, &trunc) >= 1);
	assert_int_equal(frames[0], pc);
	/* and the table follows the unload at the next check outside the handler */
	unwind__init();
}

/* ---- a real walk: frameless functions, libc, a signal frame ------------------------------ */

#define NOFP __attribute__((noinline, optimize("omit-frame-pointer")))

static struct {
	uintptr_t lo, hi;
	uint64_t frames[64];
	unsigned int n;
	uintptr_t ra_handler, ra_cmp, ra_outer;
	volatile int fired;
	struct unwind_cache cache;
} sig;

static void on_usr2(int s, siginfo_t *si, void *uc)
{
	bool trunc;

	sig.n = unwind__stack(uc, sig.lo, sig.hi, UNWIND_CFI, &sig.cache, sig.frames, 64, &trunc);
}

NOFP static void on_usr1(int s)
{
	sig.ra_handler = (uintptr_t)__builtin_return_address(0); /* the signal trampoline */
	raise(SIGUSR2);
	__asm__ volatile("" ::: "memory");
}

NOFP static int cmp_ints(const void *a, const void *b)
{
	if (!sig.fired) {
		sig.fired = 1;
		sig.ra_cmp = (uintptr_t)__builtin_return_address(0); /* into libc's qsort */
		raise(SIGUSR1);
	}
	return *(const int *)a - *(const int *)b;
}

NOFP static void outer(void)
{
	int v[16];

	sig.ra_outer = (uintptr_t)__builtin_return_address(0); /* into the test */
	for (int i = 0; i < 16; i++)
		v[i] = (i * 7) % 16;
	qsort(v, 16, sizeof(v[0]), cmp_ints);
	__asm__ volatile("" ::: "memory");
}

/* A chain of functions without frame pointers, walked from a context taken in the innermost:
 * by .eh_frame on x86_64 and aarch64, by .ARM.exidx on armv7 (this file is built with
 * -funwind-tables: gcc gives ARM C code no tables without it). */
static struct {
	ucontext_t uc;
	uintptr_t ra_inner, ra_mid, ra_outer;
	uint64_t frames[32];
	unsigned int n;
} chain;

NOFP static void chain_inner(void)
{
	bool trunc;

	chain.ra_inner = (uintptr_t)__builtin_return_address(0);
	getcontext(&chain.uc);
	chain.n = unwind__stack(&chain.uc, sig.lo, sig.hi, UNWIND_CFI, NULL, chain.frames, 32,
				&trunc);
	__asm__ volatile("" ::: "memory");
}

NOFP static void chain_mid(void)
{
	chain.ra_mid = (uintptr_t)__builtin_return_address(0);
	chain_inner();
	__asm__ volatile("" ::: "memory");
}

NOFP static void chain_outer(void)
{
	chain.ra_outer = (uintptr_t)__builtin_return_address(0);
	chain_mid();
	__asm__ volatile("" ::: "memory");
}

static void stack_bounds(void)
{
	pthread_attr_t attr;
	void *addr;
	size_t size;

	assert_int_equal(pthread_getattr_np(pthread_self(), &attr), 0);
	assert_int_equal(pthread_attr_getstack(&attr, &addr, &size), 0);
	pthread_attr_destroy(&attr);
	sig.lo = (uintptr_t)addr;
	sig.hi = (uintptr_t)addr + size;
}

static void walks_a_frameless_chain_by_tables(void **state)
{
	int i = -1;

	stack_bounds();
	assert_true(unwind__init() > 0);
	chain_outer();
	print_message("walk of %u frames\n", chain.n);
	for (unsigned int k = 0; k < chain.n; k++)
		if ((chain.frames[k] & ~(uint64_t)1) == (chain.ra_inner & ~(uintptr_t)1))
			i = (int)k;
	assert_true(i >= 1);
	assert_true((unsigned int)i + 2 < chain.n);
	assert_int_equal(chain.frames[i + 1] & ~(uint64_t)1, chain.ra_mid & ~(uintptr_t)1);
	assert_int_equal(chain.frames[i + 2] & ~(uint64_t)1, chain.ra_outer & ~(uintptr_t)1);
}

static int frame_index(uintptr_t pc)
{
	for (unsigned int i = 0; i < sig.n; i++)
		if (sig.frames[i] == pc)
			return (int)i;
	return -1;
}

static void walks_through_libc_and_a_signal_frame(void **state)
{
	struct sigaction sa1 = {.sa_handler = on_usr1}, sa2 = {.sa_sigaction = on_usr2};

#if !defined(__x86_64__) && !defined(__aarch64__)
	skip(); /* 32-bit ARM: Debian armhf libc's raise() has no unwind tables */
#endif
	stack_bounds();
	assert_true(unwind__init() > 0);
	sa2.sa_flags = SA_SIGINFO;
	assert_int_equal(sigaction(SIGUSR1, &sa1, NULL), 0);
	assert_int_equal(sigaction(SIGUSR2, &sa2, NULL), 0);
	outer();
	signal(SIGUSR1, SIG_DFL);
	signal(SIGUSR2, SIG_DFL);
	assert_true(sig.n > 4);
	int h = frame_index(sig.ra_handler), c = frame_index(sig.ra_cmp),
	    o = frame_index(sig.ra_outer);

	print_message("walk of %u frames: trampoline at %d, into qsort at %d, into the test at %d\n",
		      sig.n, h, c, o);
	assert_true(h > 0);		  /* the handler's caller: the signal trampoline */
	assert_true(c > h);		  /* then, past the signal frame, cmp_ints' caller */
	assert_true(o > c);		  /* then through libc's qsort into outer's caller */
	assert_true((unsigned int)o + 1 < sig.n); /* and on (cmocka, main) */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(leaf_caller_found_with_eh_frame),
	    cmocka_unit_test(depth_is_bounded),
	    cmocka_unit_test(broken_chains_stop_cleanly),
	    cmocka_unit_test(unloaded_module_is_not_read),
	    cmocka_unit_test(walks_a_frameless_chain_by_tables),
	    cmocka_unit_test(walks_through_libc_and_a_signal_frame),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
