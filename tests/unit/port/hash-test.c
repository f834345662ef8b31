// SPDX-License-Identifier: MIT
/*
 * port/hash.h's values, pinned: FNV-1a's published test vectors, and the values the project
 * persists or compares across processes (ClickHouse dictionary and group ids, the duty cycle's
 * per-device draw). A change of any of these is a change of stored data: it must fail here.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "port/hash.h"

static void fnv64_matches_published_vectors(void **state)
{
	assert_int_equal(hash_fnv64_str(""), 0xcbf29ce484222325ull);
	assert_int_equal(hash_fnv64_str("a"), 0xaf63dc4c8601ec8cull);
	assert_int_equal(hash_fnv64_str("foobar"), 0x85944171f73967e8ull);
	assert_int_equal(hash_fnv64("foobar", 6), 0x85944171f73967e8ull);
}

static void fnv64_continues_across_pieces(void **state)
{
	uint64_t h = hash_fnv64_add_str(HASH_FNV64_BASIS, "foo");

	assert_int_equal(hash_fnv64_add(h, "bar", 3), hash_fnv64_str("foobar"));
}

static void fnv32_matches_published_vectors(void **state)
{
	assert_int_equal(hash_fnv32_str(""), 0x811c9dc5u);
	assert_int_equal(hash_fnv32_str("a"), 0xe40c292cu);
	assert_int_equal(hash_fnv32_str("foobar"), 0xbf9cf968u);
}

static void mix64_is_splitmix64s_finalizer(void **state)
{
	/* splitmix64 seeded with 0: its first output is mix64(0x9e3779b97f4a7c15) */
	assert_int_equal(hash_mix64(0x9e3779b97f4a7c15ull), 0xe220a8397b1dcdafull);
	assert_int_equal(hash_mix64(0), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(fnv64_matches_published_vectors),
		cmocka_unit_test(fnv64_continues_across_pieces),
		cmocka_unit_test(fnv32_matches_published_vectors),
		cmocka_unit_test(mix64_is_splitmix64s_finalizer),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
