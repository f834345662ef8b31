// SPDX-License-Identifier: MIT
/*
 * Unit tests of agent/core/pydebug.c on the real tables: the bytes at the start of _PyRuntime in
 * Debian trixie's python3.13 (3.13.5-2+deb13u5), x86_64's read from /proc/PID/mem at the
 * symbol's address, armhf's from the ELF file (the build's ABI's is parsed). The offsets kept
 * are the ones Include/internal/pycore_*.h give; a wrong cookie, another minor, a free-threaded
 * build, an offset outside its structure, a code-object layout other than the writer's and the
 * other ABI's table are refused.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "agent/core/pydebug.h"

/* _PyRuntime's first 584 bytes: the cookie, then 72 u64 (version, free_threaded, offsets) */
static const uint64_t words313_lp64[] = {0x30d05f0, 0, 283376, 608, 632, 194976, 7272, 7264, 7344, 7400, 7656, 7640, 7648, 16, 7752, 0, 7768, 7760, 304, 0, 8, 16, 72, 152, 160, 232, 32, 80, 8, 0, 56, 72, 70, 208, 112, 120, 128, 136, 68, 52, 96, 104, 200, 16, 8, 416, 24, 88, 168, 32, 24, 16, 40, 24, 16, 48, 32, 40, 24, 16, 32, 16, 24, 40, 16, 32, 64, 32, 16, 40, 240, 200};
/* the same in trixie's armhf python3.13 (3.13.5-2+deb13u5), read from the ELF file's
 * initialised _PyRuntime: ILP32's sizes and offsets */
static const uint64_t words313_ilp32[] = {0x30d05f0, 0, 149544, 604, 620, 99816, 3648, 3644, 3704, 3732, 3880, 3872, 3876, 8, 3960, 0, 3968, 3964, 184, 0, 4, 8, 52, 92, 96, 144, 16, 44, 4, 0, 28, 40, 38, 128, 80, 84, 88, 92, 44, 28, 72, 76, 124, 8, 4, 208, 12, 44, 84, 16, 12, 8, 20, 12, 8, 32, 24, 28, 16, 8, 16, 8, 12, 20, 8, 16, 32, 16, 8, 20, 140, 120};

/* the build's own ABI's table (the name writer's row is the build's: agent/core/pyname.c) */
#define words313 (sizeof(void *) == 8 ? words313_lp64 : words313_ilp32)

/* word indexes in words313 (pydebug.c's groups) */
enum { VERSION = 0, FREE_THREADED = 1, TS_SIZE = 18, TS_THREAD_ID = 23, FR_SIZE = 27,
       CO_FIRSTLINENO = 38 };

static void table(unsigned char *buf, const uint64_t *words)
{
	memcpy(buf, "xdebugpy", 8);
	memcpy(buf + 8, words, sizeof(words313_lp64));
}

static int parse_with(unsigned int word, uint64_t value)
{
	unsigned char buf[PYDEBUG_BYTES];
	uint64_t w[sizeof(words313_lp64) / sizeof(words313_lp64[0])];
	struct pydebug_offsets o;

	memcpy(w, words313, sizeof(w));
	w[word] = value;
	table(buf, w);
	return pydebug__parse(buf, sizeof(buf), &o);
}

static void test_real(void **state)
{
	unsigned char buf[PYDEBUG_BYTES];
	struct pydebug_offsets o;
	const bool lp64 = sizeof(void *) == 8;

	(void)state;
	assert_int_equal(sizeof(words313_lp64), PYDEBUG_BYTES - 8);
	assert_int_equal(sizeof(words313_ilp32), PYDEBUG_BYTES - 8);
	table(buf, words313);
	assert_int_equal(pydebug__parse(buf, sizeof(buf), &o), 0);
	assert_int_equal(o.minor, 13);
	/* pycore_runtime.h / pycore_interp.h / cpython/pystate.h / pycore_frame.h of 3.13.5, as
	 * gcc lays them out for x86_64 and for armhf (tests/offsets/py313.c) */
	assert_int_equal(o.rt_interpreters_head, lp64 ? 632 : 620);
	assert_int_equal(o.interp_threads_head, lp64 ? 7344 : 3704);
	assert_int_equal(o.tstate_next, lp64 ? 8 : 4);
	assert_int_equal(o.tstate_current_frame, lp64 ? 72 : 52);
	assert_int_equal(o.tstate_thread_id, lp64 ? 152 : 92);
	assert_int_equal(o.tstate_native_thread_id, lp64 ? 160 : 96);
	assert_int_equal(o.tstate_datastack_chunk, lp64 ? 232 : 144);
	assert_int_equal(o.f_size, lp64 ? 80 : 44);
	assert_int_equal(o.f_executable, 0);
	assert_int_equal(o.f_previous, lp64 ? 8 : 4);
	assert_int_equal(o.f_instr_ptr, lp64 ? 56 : 28);
	assert_int_equal(o.f_owner, lp64 ? 70 : 38);
	assert_int_equal(o.code_adaptive, lp64 ? 200 : 124);
	assert_int_equal(o.code_qualname, lp64 ? 128 : 88);
	assert_int_equal(o.str_ascii_data, lp64 ? 40 : 20);
}

/* The other ABI's table is not this build's: its code-object offsets are not the writer's. */
static void test_other_abi(void **state)
{
	unsigned char buf[PYDEBUG_BYTES];
	struct pydebug_offsets o = {0};

	(void)state;
	table(buf, sizeof(void *) == 8 ? words313_ilp32 : words313_lp64);
	assert_int_not_equal(pydebug__parse(buf, sizeof(buf), &o), 0);
	assert_int_equal(o.minor, 0);
}

static void test_refused(void **state)
{
	unsigned char buf[PYDEBUG_BYTES];
	struct pydebug_offsets o = {0};

	(void)state;
	table(buf, words313);
	assert_int_equal(pydebug__parse(buf, sizeof(buf) - 1, &o), -ENOENT);
	buf[0] = 'X';
	assert_int_equal(pydebug__parse(buf, sizeof(buf), &o), -ENOENT);
	assert_int_equal(o.minor, 0); /* nothing written */
	assert_int_equal(parse_with(VERSION, 0x30c04f0), -EPROTO);  /* 3.12 */
	assert_int_equal(parse_with(VERSION, 0x30e00f0), -EPROTO);  /* 3.14: another table */
	assert_int_equal(parse_with(FREE_THREADED, 1), -EPROTO);    /* 3.13t: other layouts */
	assert_int_equal(parse_with(TS_THREAD_ID, 300), -EINVAL);   /* past sizeof(PyThreadState) */
	assert_int_equal(parse_with(TS_SIZE, 100), -EINVAL);
	assert_int_equal(parse_with(FR_SIZE, 4096), -EINVAL);	    /* more than a walker reads */
	assert_int_equal(parse_with(CO_FIRSTLINENO, 64), -EINVAL);  /* not the writer's layout */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_real),
	    cmocka_unit_test(test_other_abi),
	    cmocka_unit_test(test_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
