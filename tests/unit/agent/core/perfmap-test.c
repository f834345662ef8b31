// SPDX-License-Identifier: MIT
/*
 * Unit tests of agent/core/perfmap.c on map files written here (perf-<our pid>.map in a
 * temporary directory): V8's names taken apart, the file read again as it grows (a partial last
 * line waits for its newline), later lines win overlaps, a replaced file starts over, a symlink
 * is refused, and the entry bound drops (and counts) what does not fit.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "agent/core/perfmap.h"

static char dir[64], path[128];

static void append(const char *text)
{
	FILE *f = fopen(path, "a");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void wait_recheck(void)
{
	struct timespec ts = {0, 210 * 1000000L}; /* PERFMAP_RECHECK_MS and a little */

	nanosleep(&ts, NULL);
}

static int setup(void **state)
{
	snprintf(dir, sizeof(dir), "/tmp/perfmap-test-XXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/perf-%u.map", dir, (unsigned)getpid());
	return 0;
}

static int teardown(void **state)
{
	char link[160];

	snprintf(link, sizeof(link), "%s/perf-1.map", dir);
	unlink(link);
	unlink(path);
	rmdir(dir);
	return 0;
}

static void v8_names(void **state)
{
	struct perfmap_sym s;
	const char *n;

	n = "JS:*fib /app/fib.js:1:13";
	perfmap__parse_name(n, strlen(n), &s);
	assert_string_equal(s.name, "fib");
	assert_string_equal(s.file, "/app/fib.js");
	assert_int_equal(s.line, 1);
	assert_string_equal(s.raw, n);
	assert_string_equal(s.runtime, "node");
	n = "LazyCompile:~outer /srv/a b/x.js:12"; /* node <= 18: no column; a space in the path */
	perfmap__parse_name(n, strlen(n), &s);
	assert_string_equal(s.name, "outer /srv/a");
	assert_string_equal(s.file, "b/x.js");
	assert_int_equal(s.line, 12);
	n = "JS:~ node:internal/main/run_main_module:1:1"; /* an anonymous function */
	perfmap__parse_name(n, strlen(n), &s);
	assert_string_equal(s.name, "(anonymous)");
	assert_string_equal(s.file, "node:internal/main/run_main_module");
	n = "Builtin:ArgumentsAdaptorTrampoline";
	perfmap__parse_name(n, strlen(n), &s);
	assert_string_equal(s.name, n);
	assert_string_equal(s.file, "");
	assert_string_equal(s.runtime, "jit");
	n = "JS:^get value"; /* no location: all of it is the name */
	perfmap__parse_name(n, strlen(n), &s);
	assert_string_equal(s.name, "get value");
	assert_int_equal(s.line, 0);
}

static void reads_as_it_grows(void **state)
{
	struct perfmaps *p = perfmaps__new(dir, 0, 0);
	struct perfmap_sym s;
	struct perfmap_stats st;
	uint32_t pid = (uint32_t)getpid();

	assert_int_equal(perfmaps__lookup(p, pid, 0x1000, &s), -ENOENT);
	append("1000 40 JS:*fib /app/fib.js:1:13\n2000 10 Builtin:Abort\n30");
	wait_recheck();
	assert_int_equal(perfmaps__lookup(p, pid, 0x103f, &s), 1);
	assert_string_equal(s.name, "fib");
	assert_int_equal(perfmaps__lookup(p, pid, 0x1040, &s), 0); /* end is exclusive */
	assert_int_equal(perfmaps__lookup(p, pid, 0x3000, &s), 0); /* the line is not whole yet */
	append("00 8 JS:~work /app/w.js:4:1\n1010 8 JS:*fib2 /app/fib.js:9:1\nzz 1 x\n");
	assert_int_equal(perfmaps__lookup(p, pid, 0x3004, &s), 0); /* stat'ed 200 ms ago: later */
	wait_recheck();
	assert_int_equal(perfmaps__lookup(p, pid, 0x3004, &s), 1);
	assert_string_equal(s.name, "work");
	/* the later line replaces the older one it overlaps */
	assert_int_equal(perfmaps__lookup(p, pid, 0x1012, &s), 1);
	assert_string_equal(s.name, "fib2");
	assert_int_equal(perfmaps__lookup(p, pid, 0x1002, &s), 0);
	perfmaps__stats(p, &st);
	assert_int_equal(st.entries, 4);
	assert_int_equal(st.superseded, 1);
	assert_int_equal(st.bad_lines, 1);
	assert_int_equal(st.files, 1);
	/* a new file (the pid's process was replaced) starts over */
	unlink(path);
	append("5000 10 JS:*other /b.js:2:1\n");
	wait_recheck();
	assert_int_equal(perfmaps__lookup(p, pid, 0x5000, &s), 1);
	assert_string_equal(s.name, "other");
	assert_int_equal(perfmaps__lookup(p, pid, 0x3004, &s), 0);
	perfmaps__stats(p, &st);
	assert_int_equal(st.files, 2);
	perfmaps__free(p);
}

static void symlink_refused(void **state)
{
	struct perfmaps *p = perfmaps__new(dir, 0, 0);
	struct perfmap_sym s;
	struct perfmap_stats st;
	char link[160];

	append("1000 40 JS:*fib /app/fib.js:1:13\n");
	snprintf(link, sizeof(link), "%s/perf-1.map", dir);
	assert_int_equal(symlink(path, link), 0);
	assert_int_equal(perfmaps__lookup(p, 1, 0x1000, &s), -ENOENT);
	perfmaps__stats(p, &st);
	assert_int_equal(st.refused + st.hits, 0); /* O_NOFOLLOW: not opened at all */
	perfmaps__free(p);
}

static void bounded(void **state)
{
	struct perfmaps *p = perfmaps__new(dir, 0, 64);
	struct perfmap_sym s;
	struct perfmap_stats st;
	char line[64];

	unlink(path);
	for (int i = 0; i < 100; i++) {
		snprintf(line, sizeof(line), "%x 10 JS:*f%d /a.js:%d:1\n", 0x10000 + i * 0x10, i, i);
		append(line);
	}
	assert_int_equal(perfmaps__lookup(p, (uint32_t)getpid(), 0x10000 + 63 * 0x10, &s), 1);
	assert_string_equal(s.name, "f63");
	assert_int_equal(perfmaps__lookup(p, (uint32_t)getpid(), 0x10000 + 64 * 0x10, &s), 0);
	perfmaps__stats(p, &st);
	assert_int_equal(st.entries, 64);
	assert_int_equal(st.dropped, 36);
	assert_true(st.bytes <= (size_t)CONFIG_PERFMAP_KB * 1024);
	perfmaps__free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(v8_names),
	    cmocka_unit_test_setup_teardown(reads_as_it_grows, setup, teardown),
	    cmocka_unit_test_setup_teardown(symlink_refused, setup, teardown),
	    cmocka_unit_test_setup_teardown(bounded, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
