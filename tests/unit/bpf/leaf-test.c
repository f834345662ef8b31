// SPDX-License-Identifier: MIT
/*
 * Unit tests of bpf/leaf.c on this process itself (its own file, maps and .eh_frame; also
 * under qemu-user for aarch64): a sample taken in a frameless leaf gets the leaf's caller put
 * back from the stack words (x86_64) or the link register (aarch64); a stack that already has
 * it is left alone; a word that points nowhere is refused; a return address beyond the words
 * copied is counted, not guessed; a frame the frame pointer shows linked needs no word (aarch64).
 * Cold and cached rules give the same answer.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "bpf/leaf.h"

/* Built -O2: no frame; the return address stays at [sp] (x86_64) or in the link register. */
__attribute__((noinline)) uint64_t leaf_test_leaf(uint64_t x)
{
	for (int i = 0; i < 100; i++) {
		x = x * 31 + (uint64_t)i;
		__asm__ volatile("" : "+r"(x));
	}
	return x;
}

__attribute__((noinline)) uint64_t leaf_test_caller(uint64_t x)
{
	return leaf_test_leaf(x) + 1;
}

static uint64_t leaf_test_ra; /* where leaf_test_note_ra last returned to */

__attribute__((noinline)) uint64_t leaf_test_note_ra(uint64_t x)
{
	leaf_test_ra = (uintptr_t)__builtin_return_address(0);
	return x + 1;
}

/* A function that links its frame, and a pc in it after the prologue (leaf_test_ra). */
__attribute__((noinline)) uint64_t leaf_test_framed(uint64_t x)
{
	return leaf_test_note_ra(x) * 3;
}

struct fixture {
	struct leaf *leaf;
	struct proctab *procs;
	uint64_t stack[8];
	struct sample_user_context uc;
	uint64_t in[4];
	struct agent_sample s;
};

/* A sample in leaf_test_leaf, its caller's return address on the stack and in the LR. */
static void make_sample(struct fixture *f, uint64_t ra, uint64_t caller_caller)
{
	memset(f->stack, 0, sizeof(f->stack));
	f->stack[0] = ra;
	f->uc = (struct sample_user_context){
	    .sp = (uintptr_t)f->stack, .words = f->stack, .n_words = 8};
#if defined(__aarch64__)
	f->uc.lr = ra;
#endif
	f->in[0] = (uintptr_t)leaf_test_leaf + 8;
	f->in[1] = caller_caller;
	f->s = (struct agent_sample){
	    .pid = (uint32_t)getpid(), .n_user = 2, .frames = f->in, .user = &f->uc};
}

static int setup(void **state)
{
	static struct fixture f;

	f.leaf = leaf__new(4, 64, 1024);
	f.procs = proctab__new(4, 256);
	assert_non_null(f.leaf);
	assert_non_null(f.procs);
	*state = &f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	leaf__free(f->leaf);
	proctab__free(f->procs);
	return 0;
}

/* A return address inside main's caller chain: any executable address of this binary. */
static uint64_t some_ra(void)
{
	return (uintptr_t)leaf_test_caller + 4;
}

static void caller_put_back(void **state)
{
	struct fixture *f = *state;
	uint64_t out[8], outer = (uintptr_t)setup + 4;
	struct agent_sample fixed;
	struct leaf_stats st;

	for (int round = 0; round < 2; round++) { /* cold, then from the rule cache */
		make_sample(f, some_ra(), outer);
		assert_true(leaf__fix(f->leaf, f->procs, &f->s, 64, out, &fixed));
		assert_int_equal(fixed.n_user, 3);
		assert_ptr_equal(fixed.frames, out);
		assert_int_equal(out[0], (uintptr_t)leaf_test_leaf + 8);
		assert_int_equal(out[1], some_ra());
		assert_int_equal(out[2], outer);
	}
	leaf__stats(f->leaf, &st);
	assert_int_equal(st.fixed, 2);
	assert_true(st.rule_hits >= 1);
	assert_int_equal(st.tables_mapped, 1);
}

static void linked_stack_left_alone(void **state)
{
	struct fixture *f = *state;
	uint64_t out[8];
	struct agent_sample fixed;
	struct leaf_stats before, after;

	leaf__stats(f->leaf, &before);
	make_sample(f, some_ra(), some_ra()); /* the walk found the caller already */
	assert_false(leaf__fix(f->leaf, f->procs, &f->s, 64, out, &fixed));
	leaf__stats(f->leaf, &after);
	assert_int_equal(after.linked, before.linked + 1);
	assert_int_equal(after.fixed, before.fixed);
}

static void wild_word_refused(void **state)
{
	struct fixture *f = *state;
	uint64_t out[8];
	struct agent_sample fixed;
	struct leaf_stats before, after;

	leaf__stats(f->leaf, &before);
	make_sample(f, 0x10, (uintptr_t)setup + 4); /* no mapping holds 0x10 */
	assert_false(leaf__fix(f->leaf, f->procs, &f->s, 64, out, &fixed));
	leaf__stats(f->leaf, &after);
	assert_int_equal(after.implausible, before.implausible + 1);
}

static void bounded_depth_and_words(void **state)
{
	struct fixture *f = *state;
	uint64_t out[8];
	struct agent_sample fixed;
	struct leaf_stats before, after;

	/* a full user stack stays at the bound: the outermost frame goes, flagged */
	make_sample(f, some_ra(), (uintptr_t)setup + 4);
	assert_true(leaf__fix(f->leaf, f->procs, &f->s, 2, out, &fixed));
	assert_int_equal(fixed.n_user, 2);
	assert_int_equal(out[1], some_ra());
	assert_true(fixed.flags & SAMPLE_F_TRUNCATED);
#if defined(__x86_64__)
	/* the return address is a stack word: none copied, nothing guessed */
	leaf__stats(f->leaf, &before);
	make_sample(f, some_ra(), (uintptr_t)setup + 4);
	f->uc.n_words = 0;
	assert_false(leaf__fix(f->leaf, f->procs, &f->s, 64, out, &fixed));
	leaf__stats(f->leaf, &after);
	assert_int_equal(after.deep, before.deep + 1);
#else
	(void)before;
	(void)after;
#endif
	assert_int_equal(leaf_test_caller(1), leaf_test_leaf(1) + 1);
}

/*
 * A sample in leaf_test_framed just after its call: its frame is linked (the frame pointer
 * holds its record), so no stack word is needed to know the walk has its caller.
 */
static void linked_frame_needs_no_words(void **state)
{
	struct fixture *f = *state;
	uint64_t out[8];
	struct agent_sample fixed;
	struct leaf_stats before, after;

	assert_int_equal(leaf_test_framed(1), 6);
	make_sample(f, 0, (uintptr_t)setup + 4);
	f->in[0] = leaf_test_ra;
	f->uc.n_words = 0;
	f->uc.lr = 0;
	f->uc.fp = f->uc.sp; /* aarch64: stp x29, x30, [sp, #-N]!; mov x29, sp */
	leaf__stats(f->leaf, &before);
	assert_false(leaf__fix(f->leaf, f->procs, &f->s, 64, out, &fixed));
	leaf__stats(f->leaf, &after);
	assert_int_equal(after.linked, before.linked + 1);
	assert_int_equal(after.deep, before.deep);
#if defined(__aarch64__)
	/* a frame pointer elsewhere: the return address is a stack word, and none was copied */
	f->uc.fp = f->uc.sp + 64;
	assert_false(leaf__fix(f->leaf, f->procs, &f->s, 64, out, &fixed));
	leaf__stats(f->leaf, &after);
	assert_int_equal(after.deep, before.deep + 1);
#endif
}

#if defined(__x86_64__)
/* What leaf_test_snap saw: its pc, its stack pointer there, the 64 words above it. */
static uint64_t snap_pc, snap_sp, snap_words[64];

/* frameless, as Debian builds libc: the test is built with frame pointers */
#define FRAMELESS __attribute__((noinline, optimize("omit-frame-pointer")))

/* Words across the callers' frames, as the BPF program copies them: not one object, so the
 * copy is not instrumented (the SAN build's redzones lie between frames). */
__attribute__((no_sanitize_address)) static void copy_stack_words(uint64_t sp)
{
	const volatile uint64_t *w = (const volatile uint64_t *)(uintptr_t)sp;

	for (size_t i = 0; i < 64; i++)
		snap_words[i] = w[i];
}

FRAMELESS uint64_t leaf_test_snap(uint64_t x)
{
	uint64_t pc, sp;

	/* one point: the pc and the stack pointer its rules apply to */
	__asm__ volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1" : "=r"(pc), "=r"(sp));
	snap_pc = pc;
	snap_sp = sp;
	copy_stack_words(sp);
	return x + 1;
}

FRAMELESS uint64_t leaf_test_mid2(uint64_t x)
{
	return leaf_test_snap(x * 3) * 5; /* not a tail call: its frame stays */
}

FRAMELESS uint64_t leaf_test_mid1(uint64_t x)
{
	return leaf_test_mid2(x * 7) * 11;
}

/*
 * A blocked call's stack as an off-CPU record carries it: the pc, no frame the kernel's walk
 * found (none of the three functions links a frame), 64 words. Every caller comes back, frame
 * by frame by the rules, in order, up to this test's frame, which the frame pointer the
 * sample carries (untouched by the three) says is where the kernel's walk started.
 */
static void callers_walked_from_words(void **state)
{
	struct fixture *f = *state;
	uint64_t out[16], in[1];
	struct agent_sample fixed, s;
	struct sample_user_context uc;
	struct leaf_stats before, after;

	assert_int_equal(leaf_test_mid1(1), ((1 * 7 * 3) + 1) * 5 * 11);
	in[0] = snap_pc;
	uc = (struct sample_user_context){.sp = snap_sp, .fp = 1, .words = snap_words,
					  .n_words = 64};
	s = (struct agent_sample){.pid = (uint32_t)getpid(), .n_user = 1, .frames = in,
				  .user = &uc};
	leaf__stats(f->leaf, &before);
	assert_true(leaf__fix(f->leaf, f->procs, &s, 16, out, &fixed));
	leaf__stats(f->leaf, &after);
	assert_true(fixed.n_user >= 4);
	assert_int_equal(out[0], snap_pc);
	/* return addresses into mid2, mid1, then this test (each after its call) */
	assert_true(out[1] > (uintptr_t)leaf_test_mid2 && out[1] < (uintptr_t)leaf_test_mid2 + 64);
	assert_true(out[2] > (uintptr_t)leaf_test_mid1 && out[2] < (uintptr_t)leaf_test_mid1 + 64);
	assert_true(out[3] > (uintptr_t)callers_walked_from_words &&
		    out[3] < (uintptr_t)callers_walked_from_words + 512);
	assert_int_equal(after.fixed, before.fixed + 1);
	assert_true(after.callers >= before.callers + 2);
	/* fewer words, no more callers: each frame comes only from words that hold it */
	unsigned int last = 1;

	for (uc.n_words = 0; uc.n_words <= 64; uc.n_words++) {
		unsigned int got = leaf__fix(f->leaf, f->procs, &s, 16, out, &fixed) ? fixed.n_user
										      : 1;

		assert_true(got >= last);
		last = got;
	}
	assert_true(last >= 4);
}
#endif

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(caller_put_back),
	    cmocka_unit_test(linked_stack_left_alone),
	    cmocka_unit_test(wild_word_refused),
	    cmocka_unit_test(bounded_depth_and_words),
	    cmocka_unit_test(linked_frame_needs_no_words),
#if defined(__x86_64__)
	    cmocka_unit_test(callers_walked_from_words),
#endif
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
