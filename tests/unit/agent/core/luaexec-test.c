// SPDX-License-Identifier: MIT
/*
 * Unit tests of agent/core/luaexec.c, what both Lua walkers use before they walk: the
 * .eh_frame_hdr lookup (at another process's address, bounded by the copy's length), the
 * dispatch table's search (one table found; none; two refused; a GOT-like run of one word
 * refused; a longer run of code pointers refused) and a lua_State's validation (main state,
 * coroutine, a word that is not one), through a reader over memory laid out here.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "agent/core/luaexec.h"

/* An .eh_frame_hdr of 3 FDEs whose functions start at at+0x100, +0x400, +0x900. */
static void eh_hdr(uint8_t *h, int32_t count)
{
	int32_t table[6] = {0x100, 0, 0x400, 0, 0x900, 0};

	memset(h, 0, 12 + sizeof(table));
	h[0] = 1, h[1] = 0x1b, h[2] = 0x03, h[3] = 0x3b;
	memcpy(h + 8, &count, sizeof(count));
	memcpy(h + 12, table, sizeof(table));
}

static void function_bounds(void **state)
{
	uint8_t h[12 + 24];
	uintptr_t lo = 0, hi = 0, at = 0x7f001000; /* (a 32-bit one too) */

	(void)state;
	eh_hdr(h, 3);
	assert_true(luaexec__function_bounds(h, sizeof(h), at, at + 0x500, &lo, &hi));
	assert_int_equal(lo, at + 0x400);
	assert_int_equal(hi, at + 0x900);
	/* the last FDE has no end; before the first, nothing */
	assert_false(luaexec__function_bounds(h, sizeof(h), at, at + 0x950, &lo, &hi));
	assert_false(luaexec__function_bounds(h, sizeof(h), at, at + 0x10, &lo, &hi));
	/* a count past the copy's bytes is refused, not read */
	eh_hdr(h, 1000);
	assert_false(luaexec__function_bounds(h, sizeof(h), at, at + 0x500, &lo, &hi));
	h[3] = 0x1b; /* another table encoding */
	assert_false(luaexec__function_bounds(h, 12, at, at + 0x500, &lo, &hi));
}

/* Functions: [0x1000, 0x3000) the VM, [0x3000, 0x4000) another. */
static bool bounds(void *ctx, uintptr_t min, uintptr_t max, uintptr_t *lo, uintptr_t *hi)
{
	(void)ctx, (void)max;
	*lo = min < 0x3000 ? 0x1000 : 0x3000;
	*hi = min < 0x3000 ? 0x3000 : 0x4000;
	return min >= 0x1000 && min < 0x4000;
}

#define N 200

static void table_at(uintptr_t *w, size_t at)
{
	for (size_t i = 0; i < LUA54_NUM_OPCODES; i++)
		w[at + i] = 0x1000 + 16 * i;
}

static void finds_the_dispatch_table(void **state)
{
	uintptr_t w[N] = {0}, lo = 0, hi = 0;

	(void)state;
	table_at(w, 40);
	assert_int_equal(luaexec__find(w, N, 0x1000, 0x5000, bounds, NULL, &lo, &hi), 1);
	assert_int_equal(lo, 0x1000);
	assert_int_equal(hi, 0x3000);
	/* none: a run of one word (a GOT's unresolved entries) is no table */
	memset(w, 0, sizeof(w));
	for (size_t i = 0; i < LUA54_NUM_OPCODES; i++)
		w[10 + i] = 0x1200;
	assert_int_equal(luaexec__find(w, N, 0x1000, 0x5000, bounds, NULL, &lo, &hi), 0);
	/* a longer run into the same function is not NUM_OPCODES exactly */
	memset(w, 0, sizeof(w));
	table_at(w, 40);
	w[40 + LUA54_NUM_OPCODES] = 0x1008;
	assert_int_equal(luaexec__find(w, N, 0x1000, 0x5000, bounds, NULL, &lo, &hi), 0);
	/* two tables: not sure which is the VM's */
	memset(w, 0, sizeof(w));
	table_at(w, 0);
	table_at(w, 100);
	assert_int_equal(luaexec__find(w, N, 0x1000, 0x5000, bounds, NULL, &lo, &hi), -1);
}

/* Memory laid out as two lua_States of one universe and their global_State (LP64). */
static struct {
	uintptr_t base;
	unsigned char bytes[4096];
} mem;

static bool mem_read(void *ctx, uintptr_t addr, void *buf, size_t len)
{
	(void)ctx;
	if (addr < mem.base || addr - mem.base + len > sizeof(mem.bytes))
		return false;
	memcpy(buf, mem.bytes + (addr - mem.base), len);
	return true;
}

static void put(uintptr_t addr, const void *v, size_t len)
{
	memcpy(mem.bytes + (addr - mem.base), v, len);
}

static void validates_states(void **state)
{
	const struct luaframes_layout *l = &lua54_lp64.state;
	uintptr_t main_l, co, g, seen = 0, other_g;
	unsigned char tag = LUA54_VTHREAD;

	(void)state;
	if (sizeof(void *) != 8)
		skip(); /* the LP64 table: an ILP32 build reads 4-byte words */
	mem.base = 0x10000;
	memset(mem.bytes, 0, sizeof(mem.bytes));
	main_l = mem.base + 0x100, co = mem.base + 0x400, g = mem.base + 0x800;
	other_g = mem.base + 0xc00;
	put(main_l + l->tt, &tag, 1);
	put(main_l + l->g, &g, sizeof(g));
	put(co + l->tt, &tag, 1);
	put(co + l->g, &g, sizeof(g));
	put(g + l->mainthread, &main_l, sizeof(main_l));
	assert_true(luaexec__is_state(l, main_l, mem_read, NULL, &seen));
	assert_int_equal(seen, main_l);
	assert_true(luaexec__is_state(l, co, mem_read, NULL, &seen));
	assert_int_equal(seen, main_l);
	/* a coroutine whose l_G is not its main state's: no state */
	put(co + l->g, &other_g, sizeof(other_g));
	put(other_g + l->mainthread, &main_l, sizeof(main_l));
	assert_false(luaexec__is_state(l, co, mem_read, NULL, &seen));
	/* another type tag; an unreadable word */
	tag = 5;
	put(main_l + l->tt, &tag, 1);
	assert_false(luaexec__is_state(l, main_l, mem_read, NULL, &seen));
	assert_false(luaexec__is_state(l, 0x100, mem_read, NULL, &seen));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(function_bounds),
		cmocka_unit_test(finds_the_dispatch_table),
		cmocka_unit_test(validates_states),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
