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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(atomic_write_replaces_whole_file, make_dir, remove_dir),
		cmocka_unit_test_setup_teardown(read_all_bounds_size, make_dir, remove_dir),
		cmocka_unit_test(read_all_reads_proc_files),
		cmocka_unit_test(missing_file_is_enoent),
	};
	return cmocka_run_group_tests_name("port/file", tests, NULL, NULL);
}
