// SPDX-License-Identifier: MIT
/* port/text: UTF-8 checks, JSON strings and log lines made from device strings (issue 24). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "port/log.h"
#include "port/text.h"

static void utf8_sequences(void **state)
{
	assert_int_equal(utf8_seq_len((const unsigned char *)"a", 1), 1);
	assert_int_equal(utf8_seq_len((const unsigned char *)"\xc3\xa9", 2), 2);
	assert_int_equal(utf8_seq_len((const unsigned char *)"\xe2\x82\xac", 3), 3);
	assert_int_equal(utf8_seq_len((const unsigned char *)"\xf0\x9f\x94\xa5", 4), 4);
	assert_int_equal(utf8_seq_len((const unsigned char *)"\xff", 1), 0);
	assert_int_equal(utf8_seq_len((const unsigned char *)"\xc3", 1), 0);       /* cut */
	assert_int_equal(utf8_seq_len((const unsigned char *)"\xc0\xaf", 2), 0);   /* overlong */
	assert_int_equal(utf8_seq_len((const unsigned char *)"\xed\xa0\x80", 3), 0); /* surrogate */
	assert_int_equal(utf8_seq_len((const unsigned char *)"\xf4\x90\x80\x80", 4), 0);
}

static void put(void *ctx, const char *p, size_t n)
{
	strncat(ctx, p, n);
}

static void json_is_valid_utf8(void **state)
{
	char out[256] = "";

	/* the label value ff fe c3, a good é, a quote, a newline */
	json_str_write("a\xff\xfe\xc3z \xc3\xa9 \"\n", put, out);
	assert_string_equal(out, "\"a\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbdz \xc3\xa9 \\\"\\u000a\"");
}

static void log_line_is_one_line(void **state)
{
	char out[256], path[] = "/tmp/text-test.XXXXXX", buf[512];
	int fd = mkstemp(path), saved = dup(2);
	FILE *f;
	size_t n;

	log_escape("unit\nedgeprof-collector: warning: refused \\x0a \xff\xc3\xa9", out, sizeof(out));
	assert_string_equal(out, "unit\\x0aedgeprof-collector: warning: refused \\\\x0a \\xff\xc3\xa9");
	log_escape("abcdef", out, 6); /* cut, still terminated */
	assert_true(strlen(out) < 6);
	/* through port_log itself: one event, one line */
	assert_true(fd >= 0);
	dup2(fd, 2);
	port_log(PORT_LOG_ERR, "merge: unit '%s'", "ns\nedgeprof-collector: warning: forged\r");
	fflush(stderr);
	dup2(saved, 2);
	f = fopen(path, "r");
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	unlink(path);
	close(fd);
	assert_non_null(strstr(buf, "ns\\x0aedgeprof-collector: warning: forged\\x0d"));
	assert_ptr_equal(strchr(buf, '\n'), buf + n - 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(utf8_sequences),
		cmocka_unit_test(json_is_valid_utf8),
		cmocka_unit_test(log_line_is_one_line),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
