// SPDX-License-Identifier: MIT
/* ksyms: parsing kallsyms-format files, sorting, aliases, hidden addresses, lookups;
 * the lazy path against the resident one. */
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

#include "agent/core/ksyms.h"

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

/* Lazy: ksyms__open on the text, then want + update for each address. */
static struct ksyms *open_text(const char *text, unsigned max_entries, char **path)
{
	struct ksyms *ks;

	*path = write_tmp(text);
	ks = ksyms__open(*path, max_entries);
	assert_non_null(ks);
	return ks;
}

static const char *lazy_name(struct ksyms *ks, uint64_t addr, uint64_t *start)
{
	ksyms__want(ks, addr);
	assert_int_equal(ksyms__update(ks), 0);
	return ksyms__resolve(ks, addr, start);
}

/* The lazy path names what the resident one names: same file, every address of interest. */
static void lazy_matches_resident(void **state)
{
	static const char text[] = "ffffffffc0201000 t mod_func\t[mymod]\n"
				   "ffffffffc0200000 t mod_low\t[mymod]\n"
				   "ffffffff81000000 T _stext\n"
				   "ffffffff81000000 T _text\n"
				   "ffffffff81000100 t __pfx_alpha\n"
				   "ffffffff81000110 T alpha\n"
				   "ffffffff81000200 T beta\n"
				   "ffffffff81000300 D some_data\n"
				   "ffffffff81000400 W gamma\n";
	static const uint64_t addrs[] = {
		0xffffffff80ffffff, 0xffffffff81000000, 0xffffffff81000104, 0xffffffff81000110,
		0xffffffff810001ff, 0xffffffff81000200, 0xffffffff81000350, 0xffffffff81000401,
		0xffffffffc01fffff, 0xffffffffc0200004, 0xffffffffc0201010,
		0xffffffffc0201000 + (2u << 20),
	};
	struct ksyms *res = load_text(text);
	char *path;
	struct ksyms *lazy = open_text(text, 64, &path);
	struct ksyms_stats st;

	for (size_t i = 0; i < sizeof(addrs) / sizeof(addrs[0]); i++)
		ksyms__want(lazy, addrs[i]);
	assert_null(ksyms__resolve(lazy, 0xffffffff81000110, NULL)); /* not read yet */
	assert_int_equal(ksyms__update(lazy), 0);
	for (size_t i = 0; i < sizeof(addrs) / sizeof(addrs[0]); i++) {
		uint64_t s1 = 1, s2 = 2;
		const char *want = ksyms__resolve(res, addrs[i], &s1);
		const char *got = ksyms__resolve(lazy, addrs[i], &s2);

		if (!want) {
			assert_null(got);
			continue;
		}
		assert_non_null(got);
		assert_string_equal(got, want);
		assert_true(s1 == s2);
	}
	assert_string_equal(ksyms__resolve(lazy, 0xffffffff81000000, NULL), "_stext");
	ksyms__stats(lazy, &st);
	assert_int_equal(st.passes, 1);
	assert_int_equal(st.named + st.unnamed, sizeof(addrs) / sizeof(addrs[0]));
	assert_int_equal(st.unnamed, 2); /* below the first symbol, past the tail */
	/* Named addresses are cached: wanting them again reads nothing. */
	ksyms__want(lazy, 0xffffffff81000110);
	assert_int_equal(ksyms__update(lazy), 0);
	ksyms__stats(lazy, &st);
	assert_int_equal(st.passes, 1);
	unlink(path);
	free(path);
	ksyms__free(res);
	ksyms__free(lazy);
}

/* Thousands of symbols listed backwards, every tenth address wanted: all named right. */
static void lazy_many_reversed(void **state)
{
	size_t cap = 4000 * 40, len = 0;
	char *text = malloc(cap), *path;
	struct ksyms *ks;

	assert_non_null(text);
	for (int i = 3999; i >= 0; i--)
		len += snprintf(text + len, cap - len, "%016llx T f%d\n",
				0xffffffff81000000ull + 16ull * i, i);
	ks = open_text(text, 1024, &path);
	free(text);
	for (int i = 0; i < 4000; i += 10)
		ksyms__want(ks, 0xffffffff81000000ull + 16ull * i + 5 + i % 11);
	assert_int_equal(ksyms__update(ks), 0);
	assert_int_equal(ksyms__count(ks), 400);
	for (int i = 0; i < 4000; i += 10) {
		char want[16];
		uint64_t start;

		snprintf(want, sizeof(want), "f%d", i);
		assert_string_equal(ksyms__resolve(ks, 0xffffffff81000000ull + 16ull * i + 5 +
							   i % 11, &start), want);
		assert_true(start == 0xffffffff81000000ull + 16ull * i);
	}
	unlink(path);
	free(path);
	ksyms__free(ks);
}

/* Bounds: wants beyond max_entries are dropped (counted); a full cache starts over (counted). */
static void lazy_bounds_are_counted(void **state)
{
	char *path;
	struct ksyms *ks = open_text("ffffffff81000000 T a\nffffffff81001000 T b\n", 4, &path);
	struct ksyms_stats st;

	for (uint64_t i = 0; i < 6; i++)
		ksyms__want(ks, 0xffffffff81000000ull + i);
	ksyms__stats(ks, &st);
	assert_int_equal(st.dropped, 2);
	assert_int_equal(ksyms__update(ks), 0);
	assert_int_equal(ksyms__count(ks), 4);
	assert_string_equal(ksyms__resolve(ks, 0xffffffff81000003ull, NULL), "a");
	assert_string_equal(lazy_name(ks, 0xffffffff81001001ull, NULL), "b");
	ksyms__stats(ks, &st);
	assert_int_equal(st.resets, 1);
	assert_int_equal(ksyms__count(ks), 1);
	assert_null(ksyms__resolve(ks, 0xffffffff81000003ull, NULL)); /* gone with the reset */
	unlink(path);
	free(path);
	ksyms__free(ks);
}

static void lazy_hidden_and_missing(void **state)
{
	char *path;
	struct ksyms *ks = open_text("0000000000000000 T _stext\n0000000000000000 T alpha\n", 16,
				     &path);
	struct ksyms_stats st;

	assert_true(ksyms__hidden(ks));
	ksyms__want(ks, 0xffffffff81000000);
	assert_int_equal(ksyms__update(ks), 0);
	assert_null(ksyms__resolve(ks, 0xffffffff81000000, NULL));
	ksyms__stats(ks, &st);
	assert_int_equal(st.passes, 0); /* nothing to name: nothing read */
	ksyms__free(ks);
	unlink(path);
	free(path);
	errno = 0;
	assert_null(ksyms__open("/nonexistent/kallsyms", 16));
	assert_int_equal(errno, ENOENT);
	/* A file that vanished after open: the update fails, nothing is named. */
	ks = open_text("ffffffff81000000 T a\n", 16, &path);
	unlink(path);
	free(path);
	ksyms__want(ks, 0xffffffff81000001);
	assert_int_equal(ksyms__update(ks), -ENOENT);
	assert_null(ksyms__resolve(ks, 0xffffffff81000001, NULL));
	ksyms__free(ks);
}

/* This machine's kernel: lazy names equal resident names for addresses inside functions. */
static void real_kallsyms_lazy_matches(void **state)
{
	struct ksyms *res = ksyms__load(), *lazy = ksyms__open("/proc/kallsyms", 4096);
	uint64_t addrs[512];
	unsigned n = 0;
	FILE *f = fopen("/proc/kallsyms", "re");
	char line[512], name[256], type;
	unsigned long long addr;

	if (!res || !lazy || !f || ksyms__hidden(res)) {
		ksyms__free(res);
		ksyms__free(lazy);
		if (f)
			fclose(f);
		skip(); /* kernel addresses hidden here (kptr_restrict, not root) */
	}
	for (unsigned i = 0; fgets(line, sizeof(line), f) && n < 512; i++)
		if (sscanf(line, "%llx %c %255s", &addr, &type, name) == 3 && i % 97 == 0 && addr)
			addrs[n++] = addr + 3;
	fclose(f);
	for (unsigned i = 0; i < n; i++)
		ksyms__want(lazy, addrs[i]);
	assert_int_equal(ksyms__update(lazy), 0);
	for (unsigned i = 0; i < n; i++) {
		const char *want = ksyms__resolve(res, addrs[i], NULL);
		const char *got = ksyms__resolve(lazy, addrs[i], NULL);

		if (want)
			assert_string_equal(got ? got : "(null)", want);
		else
			assert_null(got);
	}
	assert_true(n > 100);
	ksyms__free(res);
	ksyms__free(lazy);
}

/* A namer that knows one function, or cannot answer at all (an old kernel). */
static int fake_namer(void *ctx, uint64_t addr, char *name, size_t len, uint64_t *start)
{
	int *mode = ctx;

	if (*mode)
		return -EOPNOTSUPP;
	if (addr < 0xffffffff81000100ull || addr >= 0xffffffff81000200ull)
		return -ENOENT;
	snprintf(name, len, "from_kernel");
	*start = 0xffffffff81000100ull;
	return 0;
}

/* With a namer, kallsyms is not read; a namer that fails once is dropped for the pass. */
static void lazy_namer_spares_the_pass(void **state)
{
	char *path;
	struct ksyms *ks = open_text("ffffffff81000100 T alpha\nffffffff81000200 T beta\n", 16,
				     &path);
	struct ksyms_stats st;
	int mode = 0;
	uint64_t start;

	ksyms__set_namer(ks, fake_namer, &mode);
	ksyms__want(ks, 0xffffffff81000150ull);
	ksyms__want(ks, 0xffffffff81000250ull);
	assert_int_equal(ksyms__update(ks), 0);
	assert_string_equal(ksyms__resolve(ks, 0xffffffff81000150ull, &start), "from_kernel");
	assert_true(start == 0xffffffff81000100ull);
	assert_null(ksyms__resolve(ks, 0xffffffff81000250ull, NULL)); /* -ENOENT: no name */
	ksyms__stats(ks, &st);
	assert_int_equal(st.passes, 0);
	assert_int_equal(st.lookups, 2);
	assert_int_equal(st.unnamed, 1);
	mode = 1;
	assert_string_equal(lazy_name(ks, 0xffffffff81000210ull, NULL), "beta");
	ksyms__stats(ks, &st);
	assert_int_equal(st.passes, 1);
	assert_string_equal(lazy_name(ks, 0xffffffff81000110ull, NULL), "alpha");
	ksyms__stats(ks, &st);
	assert_int_equal(st.lookups, 3); /* dropped after its failure */
	unlink(path);
	free(path);
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
		cmocka_unit_test(lazy_matches_resident),
		cmocka_unit_test(lazy_many_reversed),
		cmocka_unit_test(lazy_bounds_are_counted),
		cmocka_unit_test(lazy_hidden_and_missing),
		cmocka_unit_test(real_kallsyms_lazy_matches),
		cmocka_unit_test(lazy_namer_spares_the_pass),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
