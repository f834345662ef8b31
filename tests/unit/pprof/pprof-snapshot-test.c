// SPDX-License-Identifier: MIT
/*
 * Unit tests of pprof/snapshot.c: RFC 4648's base64 test vectors both ways, a blob's round
 * trip through its label text, and the texts refused: bad characters, misplaced padding, a
 * length not a multiple of 4, another version, register count or machine, a stack beyond
 * SNAPSHOT_MAX_STACK, a buffer too small.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "pprof/snapshot.h"

static void test_vectors(void **state)
{
	static const char *const in[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
	static const char *const out[] = {"",	  "Zg==",     "Zm8=",	 "Zm9v",
					  "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
	char text[16];

	(void)state;
	for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
		snapshot__to_text((const uint8_t *)in[i], strlen(in[i]), text);
		assert_string_equal(text, out[i]);
		assert_int_equal(snapshot__text_len(strlen(in[i])), strlen(out[i]));
	}
}

static uint8_t blob[SNAPSHOT_ARM_HDR + SNAPSHOT_MAX_STACK + 8];
static char text[(sizeof(blob) + 2) / 3 * 4 + 1];
static uint8_t buf[sizeof(blob)];

/* A blob of regs r[i] = 0x1000 * i + 1 and a stack of n bytes. */
static size_t make(size_t n)
{
	uint32_t regs[SNAPSHOT_ARM_REGS];

	for (unsigned int i = 0; i < SNAPSHOT_ARM_REGS; i++)
		regs[i] = 0x1000u * i + 1;
	snapshot__arm_header(regs, blob);
	for (size_t i = 0; i < n; i++)
		blob[SNAPSHOT_ARM_HDR + i] = (uint8_t)(i * 7);
	return SNAPSHOT_ARM_HDR + n;
}

static void test_round_trip(void **state)
{
	struct snapshot s;

	(void)state;
	for (size_t n = 0; n < 9; n++) {
		size_t len = make(n);

		snapshot__to_text(blob, len, text);
		assert_int_equal(snapshot__from_text(text, strlen(text), buf, sizeof(buf), &s), 0);
		assert_int_equal(s.machine, SNAPSHOT_EM_ARM);
		assert_int_equal(s.regs[13], 0xd001);
		assert_int_equal(s.regs[15], 0xf001);
		assert_int_equal(s.stack_len, n);
		assert_memory_equal(s.stack, blob + SNAPSHOT_ARM_HDR, n);
	}
	make(SNAPSHOT_MAX_STACK);
	snapshot__to_text(blob, SNAPSHOT_ARM_HDR + SNAPSHOT_MAX_STACK, text);
	assert_int_equal(snapshot__from_text(text, strlen(text), buf, sizeof(buf), &s), 0);
	assert_int_equal(s.stack_len, SNAPSHOT_MAX_STACK);
	assert_int_equal(snapshot__from_text(text, strlen(text), buf, 100, &s), -ENOSPC);
}

static int parse(const char *t)
{
	struct snapshot s;

	return snapshot__from_text(t, strlen(t), buf, sizeof(buf), &s);
}

static void test_refused(void **state)
{
	struct snapshot s;
	size_t len;

	(void)state;
	len = make(16);
	snapshot__to_text(blob, len, text);
	text[10] = '!';
	assert_int_equal(parse(text), -EINVAL);
	snapshot__to_text(blob, len, text);
	text[strlen(text) - 1] = 0; /* not a multiple of 4 */
	assert_int_equal(parse(text), -EINVAL);
	assert_int_equal(parse("Zg=a"), -EINVAL);
	assert_int_equal(parse("=Zg="), -EINVAL);
	assert_int_equal(parse("Zg==Zg=="), -EINVAL); /* padding before the end */
	assert_int_equal(parse("Zm9v"), -EINVAL);     /* too short for a header */
	for (int field = 0; field < 3; field++) {     /* version, register count, machine */
		make(16);
		blob[field == 2 ? 2 : field] ^= 0x40;
		snapshot__to_text(blob, len, text);
		assert_int_equal(parse(text), -EINVAL);
	}
	len = make(SNAPSHOT_MAX_STACK + 4);
	snapshot__to_text(blob, len, text);
	assert_int_equal(snapshot__from_text(text, strlen(text), buf, sizeof(buf), &s), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_vectors),
	    cmocka_unit_test(test_round_trip),
	    cmocka_unit_test(test_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
