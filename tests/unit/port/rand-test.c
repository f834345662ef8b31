// SPDX-License-Identifier: MIT
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "port/rand.h"

static void below_stays_in_range(void **state)
{
	for (int i = 0; i < 10000; i++)
		assert_true(port_rand_below(7) < 7);
	assert_int_equal(port_rand_below(0), 0);
	assert_int_equal(port_rand_below(1), 0);
}

static void below_is_roughly_uniform(void **state)
{
	unsigned hist[10] = { 0 };
	const int n = 100000;

	for (int i = 0; i < n; i++)
		hist[port_rand_below(10)]++;
	/* Each bucket expects 10000; 5 sigma is about 475. */
	for (int i = 0; i < 10; i++)
		assert_in_range(hist[i], 9400, 10600);
}

static void values_differ(void **state)
{
	uint64_t a = port_rand_u64(), b = port_rand_u64();

	assert_true(a != b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(below_stays_in_range),
		cmocka_unit_test(below_is_roughly_uniform),
		cmocka_unit_test(values_differ),
	};
	return cmocka_run_group_tests_name("port/rand", tests, NULL, NULL);
}
