// SPDX-License-Identifier: MIT
/* ksyms: parsing kallsyms-format files, sorting, aliases, hidden addresses, lookups. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "agent/ksyms.h"

static char *write_tmp(const char *text)
{
	char *path = strdup("/tmp/edgeprof-ksyms-test.XXXXXX");
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	return path;
}

static struct ksyms *load_text(const char *text)
{
	char *path = write_tmp(text);
	struct ksyms *ks = ksyms__load_file(path);

	unlink(path);
	free(path);
	assert_non_null(ks);
	return ks;
}

/* Unsorted input (modules come after the core), data symbols and __pfx_ padding skipped. */
static void resolves_unsorted_text_symbols(void **state)
{
	struct ksyms *ks = load_text(
		"ffffffffc0201000 t mod_func\t[mymod]\n"
		"ffffffff81000000 T _stext\n"
		"ffffffff81000100 t __pfx_alpha\n"
		"ffffffff81000110 T alpha\n"
		"ffffffff81000200 T beta\n"
		"ffffffff81000300 D some_data\n"
		"ffffffff81000400 W gamma\n");
	uint64_t start = 0;

	assert_int_equal(ksyms__count(ks), 5);
	assert_false(ksyms__hidden(ks));
	assert_string_equal(ksyms__resolve(ks, 0xffffffff81000110, &start), "alpha");
	assert_true(start == 0xffffffff81000110);
	assert_string_equal(ksyms__resolve(ks, 0xffffffff810001ff, &start), "alpha");
	assert_string_equal(ksyms__resolve(ks, 0xffffffff81000200, NULL), "beta");
	/* Data symbols are not kept: an address there belongs to the text before it. */
	assert_string_equal(ksyms__resolve(ks, 0xffffffff81000350, NULL), "beta");
	assert_string_equal(ksyms__resolve(ks, 0xffffffff81000401, NULL), "gamma");
	/* Padding before alpha: named after the function before it, never "__pfx_". */
	assert_string_equal(ksyms__resolve(ks, 0xffffffff81000104, NULL), "_stext");
	assert_string_equal(ksyms__resolve(ks, 0xffffffffc0201010, &start), "mod_func");
	assert_true(start == 0xffffffffc0201000);
	ksyms__free(ks);
}

/* Thousands of symbols listed backwards: the in-place sort orders them all. */
static void sorts_many_reversed(void **state)
{
	size_t cap = 4000 * 40, len = 0;
	char *text = malloc(cap);
	struct ksyms *ks;

	assert_non_null(text);
	for (int i = 3999; i >= 0; i--)
		len += snprintf(text + len, cap - len, "%016llx T f%d\n",
				0xffffffff81000000ull + 16ull * i, i);
	ks = load_text(text);
	free(text);
	assert_int_equal(ksyms__count(ks), 4000);
	for (int i = 0; i < 4000; i += 7) {
		char want[16];
		uint64_t start;

		snprintf(want, sizeof(want), "f%d", i);
		assert_string_equal(ksyms__resolve(ks, 0xffffffff81000000ull + 16ull * i + 15,
						   &start), want);
		assert_true(start == 0xffffffff81000000ull + 16ull * i);
	}
	ksyms__free(ks);
}

static void out_of_range_is_null(void **state)
{
	struct ksyms *ks = load_text("ffffffff81000000 T first\nffffffff81001000 T last\n");

	assert_null(ksyms__resolve(ks, 0xffffffff80ffffff, NULL));
	assert_null(ksyms__resolve(ks, 0, NULL));
	assert_null(ksyms__resolve(ks, 0xffffffff81001000 + (4u << 20), NULL));
	assert_string_equal(ksyms__resolve(ks, 0xffffffff81001000 + 64, NULL), "last");
	ksyms__free(ks);
}

/* The same address listed twice (aliases like _stext/_text): the first listed wins. */
static void aliases_keep_first(void **state)
{
	struct ksyms *ks = load_text("ffffffff81000000 T _stext\nffffffff81000000 T _text\n");

	assert_int_equal(ksyms__count(ks), 1);
	assert_string_equal(ksyms__resolve(ks, 0xffffffff81000000, NULL), "_stext");
	ksyms__free(ks);
}

/* kptr_restrict: every address reads 0 — detected, nothing resolves. */
static void zeroed_addresses_are_hidden(void **state)
{
	struct ksyms *ks = load_text("0000000000000000 T _stext\n0000000000000000 T alpha\n"
				     "0000000000000000 t beta\t[mod]\n");

	assert_true(ksyms__hidden(ks));
	assert_int_equal(ksyms__count(ks), 0);
	assert_null(ksyms__resolve(ks, 0xffffffff81000000, NULL));
	ksyms__free(ks);
}

static void garbage_lines_are_skipped(void **state)
{
	struct ksyms *ks = load_text("not a line\n\nffffffff81000000\nffffffff81000010 T ok\n"
				     "zzzz T bad\n");

	assert_int_equal(ksyms__count(ks), 1);
	assert_string_equal(ksyms__resolve(ks, 0xffffffff81000011, NULL), "ok");
	ksyms__free(ks);
}

static void missing_file_fails(void **state)
{
	errno = 0;
	assert_null(ksyms__load_file("/nonexistent/kallsyms"));
	assert_int_equal(errno, ENOENT);
	ksyms__free(NULL);
	assert_null(ksyms__resolve(NULL, 1, NULL));
}

/* This machine's kernel: every listed text symbol resolves to itself. */
static void real_kallsyms_round_trips(void **state)
{
	struct ksyms *ks = ksyms__load();
	FILE *f = fopen("/proc/kallsyms", "re");
	char line[512], name[256], type;
	unsigned long long addr;
	unsigned checked = 0;

	if (!ks || !f || ksyms__hidden(ks)) {
		ksyms__free(ks);
		if (f)
			fclose(f);
		skip(); /* kernel addresses hidden here (kptr_restrict, not root) */
	}
	assert_true(ksyms__count(ks) > 1000);
	while (fgets(line, sizeof(line), f) && checked < 2000) {
		uint64_t start;
		const char *got;

		if (sscanf(line, "%llx %c %255s", &addr, &type, name) != 3 || type != 'T' ||
		    !strncmp(name, "__pfx_", 6))
			continue;
		got = ksyms__resolve(ks, addr, &start);
		assert_non_null(got);
		assert_true(start == addr);
		checked++;
	}
	fclose(f);
	assert_true(checked > 100);
	ksyms__free(ks);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(resolves_unsorted_text_symbols),
		cmocka_unit_test(sorts_many_reversed),
		cmocka_unit_test(out_of_range_is_null),
		cmocka_unit_test(aliases_keep_first),
		cmocka_unit_test(zeroed_addresses_are_hidden),
		cmocka_unit_test(garbage_lines_are_skipped),
		cmocka_unit_test(missing_file_fails),
		cmocka_unit_test(real_kallsyms_round_trips),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
