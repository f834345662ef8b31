// SPDX-License-Identifier: MIT
/* Unit tests for pprof/view/units.c: values and percentages exactly as pprof prints them. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "pprof/view/units.h"

static const char *fmt_auto(const char *unit, int64_t v)
{
	static char buf[64];

	return units__format(buf, sizeof(buf), v, units__auto(unit, v));
}

static void auto_scales_time_bytes_and_counts(void **state)
{
	assert_string_equal(fmt_auto("nanoseconds", 1500000000), "1.50s");
	assert_string_equal(fmt_auto("nanoseconds", 10000000), "10ms");
	assert_string_equal(fmt_auto("nanoseconds", 2500), "2.50us");
	assert_string_equal(fmt_auto("nanoseconds", 7200000000000), "2hrs");
	assert_string_equal(fmt_auto("nanoseconds", 0), "0");
	assert_string_equal(fmt_auto("bytes", 2048), "2kB");
	assert_string_equal(fmt_auto("bytes", 3 * 1048576 + 524288), "3.50MB");
	assert_string_equal(fmt_auto("count", 1234567), "1234567");
	assert_string_equal(fmt_auto("samples", 7), "7");
	assert_string_equal(fmt_auto("microseconds", 1500), "1.50ms");
}

static void pick_uses_smallest_value_and_total(void **state)
{
	char buf[64];
	struct units_scale sc;

	/* 10ms beside 1.13s total: pprof shows 0.01s (one unit for the whole table) */
	sc = units__pick("nanoseconds", 10000000, 1130000000);
	assert_string_equal(sc.label, "s");
	assert_string_equal(units__format(buf, sizeof(buf), 10000000, sc), "0.01s");
	assert_string_equal(units__format(buf, sizeof(buf), 1130000000, sc), "1.13s");
	/* smallest 1ms, total 50ms: within 100x, the smaller unit wins */
	sc = units__pick("nanoseconds", 1000000, 50000000);
	assert_string_equal(sc.label, "ms");
	/* no non-zero value: the total decides */
	sc = units__pick("bytes", 0, 4096);
	assert_string_equal(sc.label, "kB");
	sc = units__pick("count", 3, 1000);
	assert_string_equal(sc.label, "");
}

static void percent_like_pprof(void **state)
{
	char buf[16];

	assert_string_equal(units__percent(buf, sizeof(buf), 100, 100), "  100%");
	assert_string_equal(units__percent(buf, sizeof(buf), 5044, 10000), "50.44%");
	assert_string_equal(units__percent(buf, sizeof(buf), 33, 10000), " 0.33%");
	assert_string_equal(units__percent(buf, sizeof(buf), 0, 10000), "    0%");
	assert_string_equal(units__percent(buf, sizeof(buf), 5, 0), "    0%");
	assert_string_equal(units__percent(buf, sizeof(buf), -25, 100), "25.00%");
}

static void nanos_only_for_time_units(void **state)
{
	int64_t ns = 0;

	assert_int_equal(units__nanos("milliseconds", 3, &ns), 0);
	assert_int_equal(ns, 3000000);
	assert_int_equal(units__nanos("bytes", 3, &ns), -EINVAL);
	assert_int_equal(units__nanos("count", 3, &ns), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(auto_scales_time_bytes_and_counts),
	    cmocka_unit_test(pick_uses_smallest_value_and_total),
	    cmocka_unit_test(percent_like_pprof),
	    cmocka_unit_test(nanos_only_for_time_units),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
