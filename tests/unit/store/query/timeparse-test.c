// SPDX-License-Identifier: MIT
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "store/query/timeparse.h"

#define S 1000000000LL
static const int64_t now = 1700000000LL * S + 123;

static int64_t ok(const char *s)
{
	char err[160] = "";
	int64_t v = -1;

	if (timeparse(s, now, &v, err, sizeof(err)))
		fail_msg("'%s': %s", s, err);
	return v;
}

static void bad(const char *s, const char *needle)
{
	char err[160] = "";
	int64_t v = -1;

	assert_int_equal(timeparse(s, now, &v, err, sizeof(err)), -EINVAL);
	if (!strstr(err, needle))
		fail_msg("'%s': error '%s' lacks '%s'", s, err, needle);
}

static void profefe_dates(void **state)
{
	assert_int_equal(ok("2006-01-02T15:04:05"), 1136214245LL * S);
	assert_int_equal(ok("2006-01-02T15:04:05Z"), 1136214245LL * S);
	assert_int_equal(ok("2006-01-02T15:04:05.5Z"), 1136214245LL * S + S / 2);
	assert_int_equal(ok("2006-01-02T17:04:05+02:00"), 1136214245LL * S);
	assert_int_equal(ok("2006-01-02"), 1136160000LL * S);
	assert_int_equal(ok("1970-01-01T00:00:00"), 0);
	assert_int_equal(ok("2024-02-29T00:00:00"), 1709164800LL * S);
	assert_int_equal(ok("1969-12-31T23:59:59"), -S);
	bad("2023-02-29T00:00:00", "not a valid date");
	bad("1616-11-11", "not a valid date"); /* outside what int64 ns can hold */
	bad("9999-01-01T00:00:00", "not a valid date");
	bad("2006-13-02T15:04:05", "not a valid date");
	bad("2006-01-02T15:04", "cannot read");
	bad("yesterday", "cannot read");
	bad("", "empty");
}

static void unix_by_digits(void **state)
{
	assert_int_equal(ok("1700000000"), 1700000000LL * S);
	assert_int_equal(ok("0"), 0);
	assert_int_equal(ok("1700000000123"), 1700000000123LL * 1000000);
	assert_int_equal(ok("1700000000123456"), 1700000000123456LL * 1000);
	assert_int_equal(ok("1700000000123456789"), 1700000000123456789LL);
	bad("17000000001234567890", "too many digits");
}

static void relative(void **state)
{
	assert_int_equal(ok("now"), now);
	assert_int_equal(ok("now-1h"), now - 3600 * S);
	assert_int_equal(ok("now-15m"), now - 900 * S);
	assert_int_equal(ok("now-30s"), now - 30 * S);
	assert_int_equal(ok("now-7d"), now - 7 * 86400 * S);
	assert_int_equal(ok("now-500ms"), now - 500000000LL);
	assert_int_equal(ok("now+1w"), now + 7 * 86400 * S);
	assert_int_equal(ok("now-1h30m"), now - 5400 * S);
	bad("now-3x", "unknown unit 'x'");
	bad("now-", "cannot read");
	bad("now-h", "cannot read");
	/* fuzz: terms that each fit but whose sum overflowed int64 */
	bad("now-7000w7000w7000w", "cannot read");
	bad("now-36600d1s", "cannot read");
	assert_int_equal(ok("now-36500d"), now - 36500LL * 86400 * S);
	bad("nowish", "cannot read");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(profefe_dates),
		cmocka_unit_test(unix_by_digits),
		cmocka_unit_test(relative),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
