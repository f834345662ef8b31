// SPDX-License-Identifier: MIT
/*
 * tests/unit/store/symbols/dwarf-line-test.c — the line-table reader on real gcc output (DWARF 5, gcc 12's
 * default, and DWARF 4) and on broken input: every truncation and a few bad headers are
 * refused with a message, never a crash or a wrong answer.
 */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "store/symbols/dwarf-line.h"

/* The fixtures are built next to this test (store/Build-server.mk). */
static void fixture_path(const char *name, char *path, size_t len)
{
	char self[PATH_MAX - 64];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	char *slash;

	assert_true(n > 0);
	self[n] = 0;
	slash = strrchr(self, '/');
	assert_non_null(slash);
	*slash = 0;
	assert_true((size_t)snprintf(path, len, "%s/%s", self, name) < len);
}

/* Runs the fixture; checks each "ADDRESS LINE" it prints against its own line table. */
static void check_fixture(const char *name, bool absolute)
{
	char path[PATH_MAX], err[256] = "", row[128];
	struct dwarf_lines *l = NULL;
	int checked = 0;
	FILE *f;

	fixture_path(name, path, sizeof(path));
	assert_int_equal(dwarf_lines__load(path, 1 << 20, &l, err, sizeof(err)), 0);
	assert_non_null(l);
	assert_true(dwarf_lines__rows(l) > 4);
	assert_true(dwarf_lines__bytes(l) > 0 && dwarf_lines__bytes(l) < 1 << 20);
	f = popen(path, "r");
	assert_non_null(f);
	while (fgets(row, sizeof(row), f)) {
		unsigned long long addr;
		unsigned int want, got = 0;
		const char *file = NULL;

		assert_int_equal(sscanf(row, "%llx %u", &addr, &want), 2);
		assert_true(dwarf_lines__lookup(l, addr, &file, &got));
		assert_int_equal(got, want);
		assert_non_null(strstr(file, "tests/unit/store/symbols/dwarf-line-fixture.c"));
		if (absolute) /* DWARF 5 lists the compilation directory; 4 does not */
			assert_true(file[0] == '/');
		checked++;
	}
	assert_int_equal(pclose(f), 0);
	assert_int_equal(checked, 3);
	/* Below all code, and far past it: unknown, not the nearest row. */
	assert_false(dwarf_lines__lookup(l, 0x1000, &(const char *){ NULL }, &(uint32_t){ 0 }));
	assert_false(dwarf_lines__lookup(l, 0x7fffffffffffULL, &(const char *){ NULL },
					 &(uint32_t){ 0 }));
	dwarf_lines__free(l);
}

static void reads_gcc_dwarf5(void **state)
{
	check_fixture("dwarf-line-fixture-5", true);
}

static void reads_gcc_dwarf4(void **state)
{
	check_fixture("dwarf-line-fixture-4", false);
}

static void honours_the_memory_bound(void **state)
{
	char path[PATH_MAX], err[256] = "";
	struct dwarf_lines *l = NULL;

	fixture_path("dwarf-line-fixture-5", path, sizeof(path));
	assert_int_equal(dwarf_lines__load(path, 256, &l, err, sizeof(err)), -EFBIG);
	assert_null(l);
}

static void no_line_table_is_enoent(void **state)
{
	char path[PATH_MAX], err[256] = "";
	struct dwarf_lines *l = NULL;

	fixture_path("dwarf-line-fixture-stripped", path, sizeof(path));
	assert_int_equal(dwarf_lines__load(path, 1 << 20, &l, err, sizeof(err)), -ENOENT);
	assert_null(l);
}

/*
 * A DWARF 4 unit by hand: directory "/src", file "a.c" in it; rows 0x1000 line 10, 0x1004
 * line 11, sequence end at 0x1010.
 */
static const uint8_t unit4[] = {
	0, 0, 0, 0,		/* unit_length, patched */
	4, 0,			/* version */
	0, 0, 0, 0,		/* header_length, patched */
	1, 1, 1, (uint8_t)-5, 14, 13, /* min_inst, max_ops, default_stmt, line_base, range, base */
	0, 1, 1, 1, 1, 0, 0, 0, 1, 0, 0, 1, /* standard_opcode_lengths */
	'/', 's', 'r', 'c', 0, 0, /* include_directories */
	'a', '.', 'c', 0, 1, 0, 0, 0, /* file_names */
	/* program */
	0, 9, 2, 0x00, 0x10, 0, 0, 0, 0, 0, 0, /* DW_LNE_set_address 0x1000 */
	3, 9,			/* advance_line +9 -> 10 */
	1,			/* copy */
	13 + (11 - 10 - (-5)) + 4 * 14, /* special: addr +4, line +1 */
	2, 12,			/* advance_pc 12 */
	0, 1, 1,		/* DW_LNE_end_sequence */
};

static size_t make_unit(uint8_t *buf)
{
	size_t len = sizeof(unit4), header_end = 10 + 6 + 12 + 6 + 8;

	memcpy(buf, unit4, len);
	buf[0] = (uint8_t)(len - 4);
	buf[6] = (uint8_t)(header_end - 10);
	return len;
}

static void reads_a_hand_made_unit(void **state)
{
	uint8_t buf[sizeof(unit4)];
	struct dwarf_line_sections s = { .line = buf, .line_len = make_unit(buf) };
	struct dwarf_lines *l = NULL;
	const char *file = NULL;
	uint32_t line = 0;
	char err[256] = "";

	assert_int_equal(dwarf_lines__parse(&s, 1 << 20, &l, err, sizeof(err)), 0);
	assert_true(dwarf_lines__lookup(l, 0x1002, &file, &line));
	assert_string_equal(file, "/src/a.c");
	assert_int_equal(line, 10);
	assert_true(dwarf_lines__lookup(l, 0x100f, &file, &line));
	assert_int_equal(line, 11);
	assert_false(dwarf_lines__lookup(l, 0x1010, &file, &line));
	assert_false(dwarf_lines__lookup(l, 0xfff, &file, &line));
	dwarf_lines__free(l);
}

/* A sequence at address 0 (code the linker dropped) gives no file:line to what it overlaps. */
static void discarded_sequence_is_dropped(void **state)
{
	uint8_t buf[sizeof(unit4)];
	struct dwarf_line_sections s = { .line = buf, .line_len = make_unit(buf) };
	struct dwarf_lines *l = NULL;
	const char *file = NULL;
	uint32_t line = 0;
	char err[256] = "";

	buf[10 + 6 + 12 + 6 + 8 + 4] = 0; /* DW_LNE_set_address 0x1000 -> 0 */
	assert_int_equal(dwarf_lines__parse(&s, 1 << 20, &l, err, sizeof(err)), 0);
	assert_false(dwarf_lines__lookup(l, 0x2, &file, &line));
	assert_false(dwarf_lines__lookup(l, 0x100f, &file, &line));
	assert_int_equal(dwarf_lines__rows(l), 0);
	dwarf_lines__free(l);
}

static void every_truncation_is_refused(void **state)
{
	uint8_t full[sizeof(unit4)];
	size_t len = make_unit(full);

	for (size_t cut = 1; cut < len; cut++) {
		uint8_t *buf = malloc(cut); /* exact size: ASan sees any read past it */
		struct dwarf_line_sections s = { .line = buf, .line_len = cut };
		struct dwarf_lines *l = NULL;
		char err[256] = "";

		memcpy(buf, full, cut);
		assert_int_equal(dwarf_lines__parse(&s, 1 << 20, &l, err, sizeof(err)), -EINVAL);
		assert_null(l);
		assert_true(strlen(err) > 10);
		free(buf);
	}
}

static void refuses(uint8_t *buf, size_t len, const char *why)
{
	struct dwarf_line_sections s = { .line = buf, .line_len = len };
	struct dwarf_lines *l = NULL;
	char err[256] = "";

	assert_int_equal(dwarf_lines__parse(&s, 1 << 20, &l, err, sizeof(err)), -EINVAL);
	assert_null(l);
	if (!strstr(err, why))
		fail_msg("error '%s' does not say '%s'", err, why);
}

static void bad_headers_say_what_is_wrong(void **state)
{
	uint8_t buf[sizeof(unit4)];
	size_t len = make_unit(buf);

	buf[4] = 7;
	refuses(buf, len, "version 7");
	make_unit(buf);
	buf[14] = 0;
	refuses(buf, len, "line_range 0");
	make_unit(buf);
	buf[6] = 0xf0;
	refuses(buf, len, "header length");
	make_unit(buf);
	buf[0] = 0xf0;
	refuses(buf, len, "past the section");
	make_unit(buf);
	buf[len - 9] = 4; /* set_file 7 instead of advance_line: no such file */
	buf[len - 8] = 7;
	refuses(buf, len, "file 7");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(reads_gcc_dwarf5),
		cmocka_unit_test(reads_gcc_dwarf4),
		cmocka_unit_test(honours_the_memory_bound),
		cmocka_unit_test(no_line_table_is_enoent),
		cmocka_unit_test(reads_a_hand_made_unit),
		cmocka_unit_test(discarded_sequence_is_dropped),
		cmocka_unit_test(every_truncation_is_refused),
		cmocka_unit_test(bad_headers_say_what_is_wrong),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
