// SPDX-License-Identifier: MIT
/*
 * Unit tests of agent/core/pyline.c: the location tables are Debian's python3.11 own
 * (3.11.2, co_linetable of a function and of a module, made by the generator below), and the
 * line of every code unit is CPython's own answer (co_positions(); None: no location). A
 * malformed or cut table gives the first line and its error.
 *
 *   /usr/bin/python3.11 gen.py, where gen.py compiles SRC below and prints, for f and the
 *   module, bytes(co.co_linetable) and [p[0] for p in co.co_positions()] (None as -1).
 *
 * SRC: "\ndef f(a, b):\n    x = 0\n    for i in range(a):\n        if i % 3 == 0:\n"
 *      "            x += (a *\n                  b)\n        else:\n            x -= 1\n"
 *      "    try:\n        y = [j for j in range(b)]\n    except ValueError:\n"
 *      "        y = None\n    return x, y\n" + "\n" * 300 + "\ndef g():\n    return 1\n"
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "agent/core/pyline.h"

/* vec_f: co_firstlineno 2, 93 units */
static const uint8_t vec_f_table[] = {0x80, 0x00, 0xd8, 0x08, 0x09, 0x80, 0x41, 0xdd, 0x0d, 0x12, 0x90, 0x31, 0x89, 0x58, 0x8c, 0x58, 0xf0, 0x00, 0x05, 0x05, 0x13, 0xf0, 0x00, 0x05, 0x05, 0x13, 0x88, 0x01, 0xd8, 0x0b, 0x0c, 0x88, 0x71, 0x89, 0x35, 0x90, 0x41, 0x8a, 0x3a, 0x88, 0x3a, 0xd8, 0x0c, 0x0d, 0x90, 0x21, 0xd8, 0x12, 0x13, 0xf1, 0x03, 0x01, 0x13, 0x14, 0xf1, 0x00, 0x01, 0x0d, 0x15, 0x88, 0x41, 0x88, 0x41, 0xf0, 0x06, 0x00, 0x0d, 0x0e, 0x90, 0x11, 0x89, 0x46, 0x88, 0x41, 0x88, 0x41, 0xf0, 0x02, 0x03, 0x05, 0x11, 0xd8, 0x0c, 0x21, 0xd0, 0x0c, 0x21, 0x9d, 0x05, 0x98, 0x61, 0x99, 0x08, 0x9c, 0x08, 0xd0, 0x0c, 0x21, 0xd1, 0x0c, 0x21, 0xd4, 0x0c, 0x21, 0x88, 0x01, 0x88, 0x01, 0xf8, 0xdd, 0x0b, 0x15, 0xf0, 0x00, 0x01, 0x05, 0x11, 0xf0, 0x00, 0x01, 0x05, 0x11, 0xf0, 0x00, 0x01, 0x05, 0x11, 0xd8, 0x0c, 0x10, 0x88, 0x01, 0x88, 0x01, 0x88, 0x01, 0xf0, 0x03, 0x01, 0x05, 0x11, 0xf8, 0xf8, 0xf8, 0xe0, 0x0b, 0x0c, 0x88, 0x61, 0x88, 0x34, 0x80, 0x4b};
static const int32_t vec_f_lines[] = {2, 3, 3, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5, 5, 6, 6, 7, 6, 6, 6, 6, 6, 6, 9, 9, 9, 9, 9, 9, 10, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, -1, 12, 12, 12, 12, 12, 12, 12, 12, 12, 13, 13, 13, 13, 12, -1, -1, -1, 14, 14, 14, 14};
/* vec_mod: co_firstlineno 1, 9 units */
static const uint8_t vec_mod_table[] = {0xf0, 0x03, 0x01, 0x01, 0x01, 0xf0, 0x04, 0x0c, 0x01, 0x10, 0xf0, 0x00, 0x0c, 0x01, 0x10, 0xf0, 0x00, 0x0c, 0x01, 0x10, 0xf0, 0x74, 0x09, 0x01, 0x01, 0x0d, 0xf0, 0x00, 0x01, 0x01, 0x0d, 0xf0, 0x00, 0x01, 0x01, 0x0d, 0xf0, 0x00, 0x01, 0x01, 0x0d, 0xf0, 0x00, 0x01, 0x01, 0x0d};
static const int32_t vec_mod_lines[] = {0, 2, 2, 2, 316, 316, 316, 316, 316};

/*
 * The same SRC compiled by Debian trixie's python3.13 (3.13.5-2+deb13u5, the same gen.py):
 * 3.13 kept 3.11's location-table format; its bytecode and so its tables differ.
 */
/* vec313_f: co_firstlineno 2, 99 units */
static const uint8_t vec313_f_table[] = {0x80, 0x00, 0xd8, 0x08, 0x09, 0x80, 0x41, 0xdc, 0x0d, 0x12, 0x90, 0x31, 0x8e, 0x58, 0x88, 0x01, 0xd8, 0x0b, 0x0c, 0x88, 0x71, 0x89, 0x35, 0x90, 0x41, 0x8b, 0x3a, 0xd8, 0x0c, 0x0d, 0xd8, 0x12, 0x13, 0xf1, 0x03, 0x01, 0x13, 0x14, 0xf1, 0x00, 0x01, 0x0d, 0x15, 0x8a, 0x41, 0xf0, 0x06, 0x00, 0x0d, 0x0e, 0x90, 0x11, 0x89, 0x46, 0x8a, 0x41, 0xf1, 0x0b, 0x00, 0x0e, 0x16, 0xf0, 0x0c, 0x03, 0x05, 0x11, 0xdc, 0x18, 0x1d, 0x98, 0x61, 0x9c, 0x08, 0xd3, 0x0c, 0x21, 0x9a, 0x08, 0x90, 0x31, 0x8a, 0x51, 0x99, 0x08, 0x88, 0x01, 0xd0, 0x0c, 0x21, 0xf0, 0x06, 0x00, 0x0c, 0x0d, 0x88, 0x34, 0x80, 0x4b, 0xf9, 0xf2, 0x07, 0x00, 0x0d, 0x22, 0xf8, 0xdc, 0x0b, 0x15, 0xf3, 0x00, 0x01, 0x05, 0x11, 0xd8, 0x0c, 0x10, 0x89, 0x01, 0xd8, 0x0b, 0x0c, 0x88, 0x34, 0x80, 0x4b, 0xf0, 0x05, 0x01, 0x05, 0x11, 0xfa};
static const int32_t vec313_f_lines[] = {2, 3, 3, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5, 5, 6, 7, 6, 6, 6, 6, 6, 6, 6, 9, 9, 9, 9, 9, 9, 9, 4, 4, 10, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 14, 14, 14, -1, -1, 11, 11, 11, -1, 12, 12, 12, 12, 12, 12, 12, 12, 12, 13, 13, 13, 14, 14, 14, 12, -1, -1, -1};
/* vec313_mod: co_firstlineno 1, 8 units */
static const uint8_t vec313_mod_table[] = {0xf0, 0x03, 0x01, 0x01, 0x01, 0xf2, 0x04, 0x0c, 0x01, 0x10, 0xf3, 0x74, 0x09, 0x01, 0x01, 0x0d};
static const int32_t vec313_mod_lines[] = {0, 2, 2, 2, 316, 316, 316, 316};

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* Every unit's line is CPython's; past the last unit, -ERANGE and the first line. */
static void check_all(const uint8_t *t, size_t len, int32_t first, const int32_t *want,
		      size_t n)
{
	int32_t line;

	for (uint32_t u = 0; u < n; u++) {
		int err = pyline__decode(t, len, first, u, &line);

		if (want[u] < 0) {
			assert_int_equal(err, -ENOENT);
			assert_int_equal(line, first);
		} else {
			assert_int_equal(err, 0);
			assert_int_equal(line, want[u]);
		}
	}
	assert_int_equal(pyline__decode(t, len, first, (uint32_t)n, &line), -ERANGE);
	assert_int_equal(line, first);
}

static void test_function(void **state)
{
	(void)state;
	check_all(vec_f_table, sizeof(vec_f_table), 2, vec_f_lines, N(vec_f_lines));
}

/* A module: a line 0 (its RESUME), a jump of 314 lines in a two-byte varint. */
static void test_module(void **state)
{
	(void)state;
	check_all(vec_mod_table, sizeof(vec_mod_table), 1, vec_mod_lines, N(vec_mod_lines));
}

/* 3.13's tables: the reader holds (the format is 3.11's). */
static void test_313(void **state)
{
	(void)state;
	check_all(vec313_f_table, sizeof(vec313_f_table), 2, vec313_f_lines, N(vec313_f_lines));
	check_all(vec313_mod_table, sizeof(vec313_mod_table), 1, vec313_mod_lines,
		  N(vec313_mod_lines));
}

/* A copy cut anywhere: the units before the cut keep their lines, the others -ERANGE. */
static void test_cut(void **state)
{
	int32_t line;

	(void)state;
	for (size_t len = 0; len < sizeof(vec_f_table); len++)
		for (uint32_t u = 0; u < N(vec_f_lines); u++) {
			int err = pyline__decode(vec_f_table, len, 2, u, &line);

			assert_true(err == 0 || err == -ENOENT || err == -ERANGE);
			if (err == 0)
				assert_int_equal(line, vec_f_lines[u]);
			else
				assert_int_equal(line, 2);
		}
}

static void test_malformed(void **state)
{
	uint8_t t[sizeof(vec_f_table)];
	/* a varint without end: 7 chunks with bit 6 */
	static const uint8_t endless[] = {0xe8, 0x41, 0x41, 0x41, 0x41, 0x41, 0x41, 0x41, 0x01};
	/* line 2 - 5: below 0 */
	static const uint8_t negative[] = {0xe8, 0x0b, 0x80, 0x00};
	int32_t line;

	(void)state;
	/* an entry starting with a byte whose bit 7 is clear */
	memcpy(t, vec_f_table, sizeof(t));
	t[2] &= 0x7f;
	assert_int_equal(pyline__decode(t, sizeof(t), 2, 5, &line), -EILSEQ);
	assert_int_equal(line, 2);
	/* a start byte where a column byte should be */
	memcpy(t, vec_f_table, sizeof(t));
	t[1] = 0x80;
	assert_int_equal(pyline__decode(t, sizeof(t), 2, 5, &line), -EILSEQ);
	assert_int_equal(pyline__decode(endless, sizeof(endless), 2, 0, &line), -EILSEQ);
	assert_int_equal(pyline__decode(negative, sizeof(negative), 2, 0, &line), -EILSEQ);
	assert_int_equal(line, 2);
	assert_int_equal(pyline__decode(NULL, 0, 7, 0, &line), -ERANGE);
	assert_int_equal(line, 7);
}

/* Every byte string of length 3 over the start/continuation bytes: no read past the end. */
static void test_any_bytes(void **state)
{
	static const uint8_t some[] = {0x00, 0x01, 0x41, 0x7f, 0x80, 0xc7, 0xe8, 0xf0, 0xf8, 0xff};
	uint8_t t[3];
	int32_t line;

	(void)state;
	for (size_t a = 0; a < N(some); a++)
		for (size_t b = 0; b < N(some); b++)
			for (size_t c = 0; c < N(some); c++) {
				int err;

				t[0] = some[a], t[1] = some[b], t[2] = some[c];
				err = pyline__decode(t, 3, 10, 1, &line);
				assert_true(err == 0 || err == -ENOENT || err == -ERANGE ||
					    err == -EILSEQ);
				if (err)
					assert_int_equal(line, 10);
			}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_function), cmocka_unit_test(test_module),
	    cmocka_unit_test(test_cut),	     cmocka_unit_test(test_malformed),
	    cmocka_unit_test(test_any_bytes), cmocka_unit_test(test_313),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
