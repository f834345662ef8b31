// SPDX-License-Identifier: MIT
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "port/file.h"

static int make_dir(void **state)
{
	char *dir = strdup("/tmp/edgeprof-file-test.XXXXXX");

	assert_non_null(mkdtemp(dir));
	*state = dir;
	return 0;
}

static int remove_dir(void **state)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", (char *)*state);
	assert_int_equal(system(cmd), 0);
	free(*state);
	return 0;
}

static void atomic_write_replaces_whole_file(void **state)
{
	char path[256];
	void *data;
	size_t len;

	snprintf(path, sizeof(path), "%s/f", (char *)*state);
	assert_int_equal(port_file_write_atomic(path, "first version", 13, 0644), 0);
	assert_int_equal(port_file_write_atomic(path, "second", 6, 0644), 0);
	assert_int_equal(port_file_read_all(path, 1024, &data, &len), 0);
	assert_int_equal(len, 6);
	assert_memory_equal(data, "second", 6);
	free(data);
}

static void read_all_bounds_size(void **state)
{
	char path[256], big[10000];
	void *data;
	size_t len;

	memset(big, 'x', sizeof(big));
	snprintf(path, sizeof(path), "%s/big", (char *)*state);
	assert_int_equal(port_file_write_atomic(path, big, sizeof(big), 0600), 0);
	assert_int_equal(port_file_read_all(path, 9999, &data, &len), -EFBIG);
	assert_null(data);
	assert_int_equal(port_file_read_all(path, 10000, &data, &len), 0);
	assert_int_equal(len, 10000);
	free(data);
}

static void read_all_reads_proc_files(void **state)
{
	void *data;
	size_t len;

	/* /proc reports st_size 0: the reader must read to EOF. */
	assert_int_equal(port_file_read_all("/proc/self/maps", 1 << 20, &data, &len), 0);
	assert_true(len > 0);
	assert_non_null(strstr(data, "["));
	free(data);
}

static void missing_file_is_enoent(void **state)
{
	void *data;
	size_t len;

	assert_int_equal(port_file_read_all("/nonexistent/x", 10, &data, &len), -ENOENT);
	assert_int_equal(port_file_write_atomic("/nonexistent/x", "a", 1, 0644), -ENOENT);
}

static mode_t mode_of(const char *path)
{
	struct stat st;

	assert_int_equal(stat(path, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	return st.st_mode & 07777;
}

static void mkdir_p_creates_every_level(void **state)
{
	char path[512], file[512];

	umask(022);
	snprintf(path, sizeof(path), "%s/does/not//exist/", (char *)*state);
	assert_int_equal(port_mkdir_p(path, 0750), 0);
	assert_int_equal(mode_of(path), 0750);
	snprintf(path, sizeof(path), "%s/does", (char *)*state);
	assert_int_equal(mode_of(path), 0750);
	/* again: everything exists, nothing changes */
	assert_int_equal(port_mkdir_p(path, 0700), 0);
	assert_int_equal(mode_of(path), 0750);
	/* the parent of a file: a/b/f.pb.gz makes a/b, not f.pb.gz */
	snprintf(file, sizeof(file), "%s/p/q/cpu.pb.gz", (char *)*state);
	assert_int_equal(port_mkdir_parent(file, 0750), 0);
	assert_int_equal(port_file_write_atomic(file, "x", 1, 0644), 0);
	assert_int_equal(port_mkdir_parent("cpu.pb.gz", 0750), 0);
	assert_int_equal(port_mkdir_parent("/cpu.pb.gz", 0750), 0);
}

static void mkdir_p_reports_what_blocks_it(void **state)
{
	char path[512];

	/* a regular file in the way */
	snprintf(path, sizeof(path), "%s/f", (char *)*state);
	assert_int_equal(port_file_write_atomic(path, "x", 1, 0644), 0);
	snprintf(path, sizeof(path), "%s/f/sub", (char *)*state);
	assert_int_equal(port_mkdir_p(path, 0750), -ENOTDIR);
	assert_int_equal(port_mkdir_parent(path, 0750), -ENOTDIR);
	/* /proc takes no directories: the first failing mkdir's errno comes back */
	assert_true(port_mkdir_p("/proc/edgeprof-nope/x", 0750) < 0);
	assert_int_equal(port_mkdir_p("", 0750), -ENOENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(atomic_write_replaces_whole_file, make_dir, remove_dir),
		cmocka_unit_test_setup_teardown(read_all_bounds_size, make_dir, remove_dir),
		cmocka_unit_test(read_all_reads_proc_files),
		cmocka_unit_test(missing_file_is_enoent),
		cmocka_unit_test_setup_teardown(mkdir_p_creates_every_level, make_dir, remove_dir),
		cmocka_unit_test_setup_teardown(mkdir_p_reports_what_blocks_it, make_dir, remove_dir),
	};
	return cmocka_run_group_tests_name("port/file", tests, NULL, NULL);
}
