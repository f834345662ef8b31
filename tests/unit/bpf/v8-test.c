// SPDX-License-Identifier: MIT
/*
 * bpf/v8.c's reading of V8's postmortem symbols from real node files: Debian 12's
 * libnode.so.108 (V8 10.2; /usr/lib/x86_64-linux-gnu in CI, build/node18-root here) and
 * NodeSource's node 20 (V8 11.3, the executable), each checked against the values nm(1) and
 * the file's data gave for it (the instance types differ between the two: read, not assumed);
 * a file of another V8 version is checked for consistency only. Files that are not V8 (this
 * test itself, a truncated copy of a V8 file) are refused without harm. No file: skipped.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include <linux/types.h>

#include "bpf/v8.h"
#include "bpf/v8proc.h"

/* Measured (nm -D + the file's .data) on the two builds this test knows. */
struct known {
	int major, minor;
	unsigned int jsfunction_first, jsfunction_last, sfi;
};

static const struct known known[] = {
    {10, 2, 2065, 2096, 257}, /* Debian 12's libnode.so.108, 18.20.4 */
    {11, 3, 2066, 2096, 262}, /* NodeSource's node 20.20.2 */
};

static const char *const candidates[] = {
    "/usr/lib/x86_64-linux-gnu/libnode.so.108",
    "/usr/bin/node",
    "build/node18-root/usr/lib/x86_64-linux-gnu/libnode.so.108",
};

static int checked;

static void check_file(const char *path)
{
	struct v8_proc p;
	int major = 0, minor = 0, err = bpfv8__file_entry(path, &p, &major, &minor);

	if (err == -ENOENT || err == -ENOEXEC) /* a node without V8's symbols in this file */
		return;
	assert_int_equal(err, 0);
	printf("# %s: V8 %d.%d, JSFunction types %u-%u, SFI %u\n", path, major, minor,
	       p.type_jsfunction_first, p.type_jsfunction_last, p.type_sfi);
	/* the frame slots (v8dbg_off_fp_*: -8, -16, -40) as words of the window from fp - 48 */
	assert_int_equal(p.slot_context, 5);
	assert_int_equal(p.slot_function, 4);
	assert_int_equal(p.slot_bytecode_offset, 1);
	assert_int_equal(p.off_map, 0);
	assert_int_equal(p.off_instance_type, 12);
	assert_int_equal(p.off_shared, 24);
	assert_true(p.type_jsfunction_first < p.type_jsfunction_last);
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (known[i].major == major && known[i].minor == minor) {
			assert_int_equal(p.type_jsfunction_first, known[i].jsfunction_first);
			assert_int_equal(p.type_jsfunction_last, known[i].jsfunction_last);
			assert_int_equal(p.type_sfi, known[i].sfi);
		}
	checked++;
}

static void test_real_files(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(candidates) / sizeof(candidates[0]); i++)
		if (access(candidates[i], R_OK) == 0)
			check_file(candidates[i]);
	if (!checked)
		skip(); /* no node with V8's symbols here (nodejs not installed) */
}

/* A copy of the first V8 file cut at len bytes: refused (its sections are past the end). */
static void test_truncated(void **state)
{
	char tmp[] = "/tmp/v8-test-XXXXXX", buf[65536];
	struct v8_proc p;
	int major, minor, in = -1, out;
	ssize_t n;
	size_t done = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(candidates) / sizeof(candidates[0]) && in < 0; i++)
		if (bpfv8__file_entry(candidates[i], &p, &major, &minor) == 0)
			in = open(candidates[i], O_RDONLY);
	if (in < 0)
		skip();
	out = mkstemp(tmp);
	assert_true(out >= 0);
	while (done < (1u << 20) && (n = read(in, buf, sizeof(buf))) > 0) {
		assert_int_equal(write(out, buf, (size_t)n), n);
		done += (size_t)n;
	}
	close(in);
	close(out);
	assert_int_not_equal(bpfv8__file_entry(tmp, &p, &major, &minor), 0);
	unlink(tmp);
}

static void test_not_v8(void **state)
{
	struct v8_proc p;
	int major, minor;

	(void)state;
	assert_int_equal(bpfv8__file_entry("/proc/self/exe", &p, &major, &minor), -ENOENT);
	assert_int_equal(bpfv8__file_entry("/nonexistent-v8-file", &p, &major, &minor), -ENOENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_real_files),
	    cmocka_unit_test(test_truncated),
	    cmocka_unit_test(test_not_v8),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
