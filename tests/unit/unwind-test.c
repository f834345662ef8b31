// SPDX-License-Identifier: MIT
/*
 * Unit tests of agent/unwind.c with synthetic interrupted contexts (no signals: deterministic,
 * also under qemu-user): a sample taken in a frameless leaf function keeps the leaf's caller
 * with the .eh_frame leaf step and loses it with frame pointers alone; broken chains stop
 * cleanly, with known and with unknown stack bounds.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <ucontext.h>
#include <cmocka.h>

#include "agent/unwind.h"

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

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(leaf_caller_found_with_eh_frame),
	    cmocka_unit_test(depth_is_bounded),
	    cmocka_unit_test(broken_chains_stop_cleanly),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
