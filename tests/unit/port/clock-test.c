// SPDX-License-Identifier: MIT
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "port/clock.h"

static void mono_is_monotonic(void **state)
{
	uint64_t a = port_clock_mono_ns(), b = port_clock_mono_ns();

	assert_true(a > 0);
	assert_true(b >= a);
}

static void sleep_sleeps_at_least(void **state)
{
	uint64_t t0 = port_clock_mono_ns();

	port_sleep_ns(2 * NSEC_PER_MSEC);
	assert_true(port_clock_mono_ns() - t0 >= 2 * NSEC_PER_MSEC);
}

static void unset_rtc_is_detected(void **state)
{
	assert_false(port_clock_real_is_set(0));
	assert_false(port_clock_real_is_set(86400ULL * NSEC_PER_SEC * 365)); /* 1971 */
	assert_true(port_clock_real_is_set(1700000000ULL * NSEC_PER_SEC));  /* 2023 */
}

static void cputime_advances_with_work(void **state)
{
	uint64_t t0 = port_clock_cputime_ns();
	volatile uint64_t x = 0;

	while (port_clock_cputime_ns() - t0 < 5 * NSEC_PER_MSEC)
		x++;
	assert_true(x > 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(mono_is_monotonic),
		cmocka_unit_test(sleep_sleeps_at_least),
		cmocka_unit_test(unset_rtc_is_detected),
		cmocka_unit_test(cputime_advances_with_work),
	};
	return cmocka_run_group_tests_name("port/clock", tests, NULL, NULL);
}
