// SPDX-License-Identifier: MIT
/* Unit tests of agent/core/rounds.c with a fake clock and a scripted random source. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "agent/core/rounds.h"

#define S 1000000000ull

static uint64_t lcg = 12345;

static uint64_t fake_rand(uint64_t bound)
{
	lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
	return bound ? (lcg >> 11) % bound : 0;
}

static uint64_t zero_rand(uint64_t bound)
{
	return bound / 2; /* the middle: no jitter */
}

/* Drives the schedule with 1 ms ticks; records starts and ends. */
static size_t run(struct rounds *r, uint64_t from, uint64_t until, uint64_t *starts, uint64_t *ends,
		  size_t max)
{
	size_t ns = 0, ne = 0;

	for (uint64_t t = from; t <= until; t += S / 1000) {
		enum round_event ev;

		while ((ev = rounds__poll(r, t, NULL)) != ROUND_NONE) {
			if (ev == ROUND_START && ns < max)
				starts[ns++] = t;
			if (ev == ROUND_END && ne < max)
				ends[ne++] = t;
		}
	}
	return ns;
}

static void continuous_rounds_are_back_to_back(void **state)
{
	uint64_t starts[64], ends[64];
	struct rounds r;

	assert_int_equal(rounds__init(&r, 10 * S, 10 * S, 10, 100 * S, fake_rand), 0);
	assert_int_equal(run(&r, 100 * S, 200 * S, starts, ends, 64), 11);
	for (int i = 0; i < 10; i++) {
		assert_int_equal(starts[i], 100 * S + (uint64_t)i * 10 * S);
		assert_int_equal(ends[i], starts[i + 1]); /* no gap, no jitter */
	}
}

static void jitter_moves_starts_within_bounds(void **state)
{
	static uint64_t starts[2000], ends[2000];
	struct rounds r;
	size_t n;
	int early = 0, late = 0;
	int64_t sum = 0;

	assert_int_equal(rounds__init(&r, 10 * S, 60 * S, 10, 0, fake_rand), 0);
	n = run(&r, 0, 1000 * 60 * S, starts, ends, 2000);
	assert_in_range(n, 999, 1001);
	for (size_t i = 1; i + 1 < n; i++) {
		int64_t off = (int64_t)starts[i] - (int64_t)(i * 60 * S);

		assert_true(off >= -(int64_t)(6 * S) - 1000000 &&
			    off <= (int64_t)(6 * S) + 1000000);
		early += off < -(int64_t)S;
		late += off > (int64_t)S;
		sum += off;
		assert_true(starts[i] >= ends[i - 1]);	       /* never overlaps */
		assert_int_equal(ends[i] - starts[i], 10 * S); /* every round is whole */
	}
	/* uniform in +/- 6 s: both directions, mean near 0 */
	assert_true(early > 300 && late > 300);
	assert_true(llabs(sum / (int64_t)n) < (int64_t)S / 2);
}

static void no_jitter_is_exact(void **state)
{
	uint64_t starts[16], ends[16];
	struct rounds r;

	assert_int_equal(rounds__init(&r, 2 * S, 5 * S, 0, 0, fake_rand), 0);
	assert_int_equal(run(&r, 0, 24 * S, starts, ends, 16), 5);
	for (int i = 0; i < 5; i++) {
		assert_int_equal(starts[i], (uint64_t)i * 5 * S);
		assert_int_equal(ends[i], starts[i] + 2 * S);
	}
}

static void missed_rounds_are_skipped_not_replayed(void **state)
{
	struct rounds r;
	uint64_t wait;

	assert_int_equal(rounds__init(&r, 1 * S, 10 * S, 0, 0, zero_rand), 0);
	assert_int_equal(rounds__poll(&r, 0, &wait), ROUND_START);
	assert_int_equal(wait, 1 * S);
	assert_int_equal(rounds__poll(&r, 1 * S, &wait), ROUND_END);
	assert_int_equal(wait, 9 * S);
	/* asleep for 100 s: one round now, the next on the regular grid */
	assert_int_equal(rounds__poll(&r, 105 * S, &wait), ROUND_START);
	assert_int_equal(rounds__poll(&r, 105 * S, &wait), ROUND_NONE);
	assert_int_equal(wait, 1 * S);
	assert_int_equal(rounds__poll(&r, 106 * S, &wait), ROUND_END);
	assert_true(r.skipped >= 9);
	assert_int_equal(rounds__poll(&r, 106 * S, &wait), ROUND_NONE);
	assert_int_equal(106 * S + wait, 110 * S);
}

static void bad_values_are_rejected(void **state)
{
	struct rounds r;

	assert_int_equal(rounds__init(&r, 11 * S, 10 * S, 10, 0, fake_rand), -EINVAL);
	assert_int_equal(rounds__init(&r, 0, 10 * S, 10, 0, fake_rand), -EINVAL);
	assert_int_equal(rounds__init(&r, S, 10 * S, 51, 0, fake_rand), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(continuous_rounds_are_back_to_back),
	    cmocka_unit_test(jitter_moves_starts_within_bounds),
	    cmocka_unit_test(no_jitter_is_exact),
	    cmocka_unit_test(missed_rounds_are_skipped_not_replayed),
	    cmocka_unit_test(bad_values_are_rejected),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
