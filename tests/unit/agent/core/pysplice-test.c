// SPDX-License-Identifier: MIT
/*
 * Unit tests of agent/core/pysplice.c, the splice both samplers use: each native activation of
 * the eval loop is replaced by the Python frames it runs (down to its entry frame), native
 * frames between activations stay in order, an activation with no known frames keeps its
 * native frame, the output and Python-frame bounds cut the sample (and say so), and a stack
 * without the eval loop comes out as it went in.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "agent/core/pyname.h"

#define EVAL_LO 0x1000
#define EVAL_HI 0x2000
#define ENTRY (1ull << 63) /* this test's entry mark on its chain */

/* A thread's chain, newest first, as the BPF record gives it: entry-marked frames. */
struct chain {
	const uint64_t *f;
	unsigned int n, i;
};

static unsigned int next(void *ctx, uint64_t *out, unsigned int room, bool *cut)
{
	struct chain *c = ctx;
	unsigned int k = 0;

	while (c->i < c->n) {
		uint64_t w = c->f[c->i];

		if (k == room) {
			*cut = true;
			break;
		}
		out[k++] = pyframe__tag((uintptr_t)(w & ~ENTRY), 0);
		c->i++;
		if (w & ENTRY)
			break;
	}
	return k;
}

static unsigned int splice(const uint64_t *frames, unsigned int n, struct chain *c,
			   unsigned int budget, uint64_t *out, unsigned int max, bool *truncated)
{
	const struct pysplice sp = {.eval_lo = EVAL_LO, .eval_hi = EVAL_HI, .budget = budget,
				    .next = next, .ctx = c};
	unsigned int pushed, activations;

	*truncated = false;
	return pyframes__splice_into(&sp, frames, n, out, max, &pushed, &activations, truncated);
}

/* A C function calling back into Python: eval (leaf), PyObject_Call, eval, main. */
static void two_activations_in_order(void **state)
{
	const uint64_t frames[] = {0x1800, 0x5000, 0x1a01, 0x7000};
	const uint64_t py[] = {0xa0, 0xb0 | ENTRY, 0xc0 | ENTRY};
	struct chain c = {py, 3, 0};
	uint64_t out[16];
	bool cut;
	unsigned int n = splice(frames, 4, &c, 64, out, 16, &cut);

	(void)state;
	assert_int_equal(n, 5);
	assert_true(out[0] == pyframe__tag(0xa0, 0) && out[1] == pyframe__tag(0xb0, 0));
	assert_int_equal(out[2], 0x5000);
	assert_true(out[3] == pyframe__tag(0xc0, 0));
	assert_int_equal(out[4], 0x7000);
	assert_false(cut);
}

/* A return address one past the function's end is its call: still the eval loop (pc - 1). */
static void return_address_at_the_end_is_inside(void **state)
{
	const uint64_t frames[] = {0x9000, EVAL_HI, 0x7000};
	const uint64_t py[] = {0xa0 | ENTRY};
	struct chain c = {py, 1, 0};
	uint64_t out[8];
	bool cut;

	(void)state;
	assert_int_equal(splice(frames, 3, &c, 64, out, 8, &cut), 3);
	assert_true(out[1] == pyframe__tag(0xa0, 0));
}

/* More activations than the chain knows: the last keeps its native frame. */
static void unknown_activation_keeps_native_frame(void **state)
{
	const uint64_t frames[] = {0x1800, 0x1901, 0x7000};
	const uint64_t py[] = {0xa0 | ENTRY};
	struct chain c = {py, 1, 0};
	uint64_t out[8];
	bool cut;

	(void)state;
	assert_int_equal(splice(frames, 3, &c, 64, out, 8, &cut), 3);
	assert_true(out[0] == pyframe__tag(0xa0, 0));
	assert_int_equal(out[1], 0x1901);
	assert_int_equal(out[2], 0x7000);
}

/* The output bound: Python frames take the room, the sample says it was cut. */
static void bounds_cut_and_say_so(void **state)
{
	const uint64_t frames[] = {0x1800, 0x7000, 0x7100};
	const uint64_t py[] = {0xa0, 0xb0, 0xc0, 0xd0 | ENTRY};
	struct chain c = {py, 4, 0};
	uint64_t out[3];
	bool cut;

	(void)state;
	assert_int_equal(splice(frames, 3, &c, 64, out, 3, &cut), 3);
	assert_true(cut);
	c.i = 0;
	assert_int_equal(splice(frames, 3, &c, 2, out, 3, &cut), 3); /* budget 2 frames */
	assert_true(cut);
	assert_true(out[1] == pyframe__tag(0xb0, 0));
	assert_int_equal(out[2], 0x7000);
}

static void no_eval_loop_unchanged(void **state)
{
	const uint64_t frames[] = {0x9000, 0x9100, 0x7000};
	struct chain c = {NULL, 0, 0};
	uint64_t out[8];
	bool cut;

	(void)state;
	assert_int_equal(splice(frames, 3, &c, 64, out, 8, &cut), 3);
	assert_memory_equal(out, frames, sizeof(frames));
	assert_false(cut);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(two_activations_in_order),
		cmocka_unit_test(return_address_at_the_end_is_inside),
		cmocka_unit_test(unknown_activation_keeps_native_frame),
		cmocka_unit_test(bounds_cut_and_say_so),
		cmocka_unit_test(no_eval_loop_unchanged),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
