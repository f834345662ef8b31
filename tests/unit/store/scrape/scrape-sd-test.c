// SPDX-License-Identifier: MIT
/* store/scrape/scrape-sd.c: Prometheus file_sd JSON into targets; bad files refused with a place. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "store/scrape/scrape-sd.h"

static struct sd_target t[8];

static int parse(const char *s, char *err)
{
	return sd_parse(s, strlen(s), t, 8, err, 200);
}

static void test_groups(void **state)
{
	char err[200] = "";
	int n = parse("[{\"targets\": [\"10.0.0.7:6060\", \"gw-1.lan:6060\"],\n"
		      "  \"labels\": {\"service_name\": \"checkout\", \"region\": \"eu\","
		      " \"__meta_x\": \"dropped\"}},\n"
		      " {\"labels\": {\"__scheme__\": \"https\", \"service_name\": \"gw\"},"
		      " \"targets\": [\"[::1]:8443\"]}, {\"targets\": []}]",
		      err);

	assert_int_equal(n, 3);
	assert_string_equal(t[0].addr, "10.0.0.7:6060");
	assert_string_equal(t[1].addr, "gw-1.lan:6060");
	assert_string_equal(t[1].service, "checkout");
	assert_int_equal(t[1].n_labels, 1);
	assert_string_equal(t[1].labels[0].key, "region");
	assert_false(t[0].https);
	assert_true(t[2].https);
	assert_string_equal(t[2].service, "gw");
	assert_int_equal(parse(" [ ] ", err), 0);
}

static void test_refused(void **state)
{
	static const char *const bad[] = {
		"", "{}", "[{\"targets\": [\"noport\"]}]", "[{\"targets\": [1]}]",
		"[{\"labels\": {}}]", "[{\"targets\": [\"a:1\"], \"extra\": []}]",
		"[{\"targets\": [\"a:1\"], \"labels\": {\"__scheme__\": \"ftp\"}}]",
		"[{\"targets\": [\"a:1\"], \"labels\": {\"bad key\": \"v\"}}]",
		"[{\"targets\": [\"a:1\"]}] trailing", "[{\"targets\": [\"a:1\"]",
		"[{\"targets\": [\"a:1\", \"b:2\", \"c:3\", \"d:4\", \"e:5\", \"f:6\", \"g:7\", "
		"\"h:8\", \"i:9\"]}]",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char err[200] = "";

		assert_int_equal(parse(bad[i], err), -22);
		assert_non_null(strstr(err, "offset "));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_groups),
		cmocka_unit_test(test_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
