// SPDX-License-Identifier: MIT
/*
 * Unit tests of agent/core/ljname.c through luaname__resolve(): LuaJIT 2.1 frames (their own
 * tag) named from a GCproto and a GCstr laid out as LuaJIT 2.1.0-beta3's lj_obj.h lays them
 * (GC64, tests/offsets/luajit.c), in this process's memory, read back through
 * process_vm_readv as the profile writer reads a profiled process. The line follows
 * lj_debug_line (firstline plus lineinfo[pos - 1], bytes below 256 lines, halfwords below
 * 65536); a PUC Lua Proto under the LuaJIT tag, a position beyond the bytecode, a chunk name
 * that is not a string, an unreadable address give an error and no name; proto 0 is the JIT
 * trace's label.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>
#include <cmocka.h>

#include "agent/core/luaname.h"
#include "tests/lib/lua-fake.h"

/* lj_obj.h of LuaJIT 2.1.0-beta3, GC64 */
#define PT_GCT 9
#define PT_SIZEBC 12
#define PT_CHUNKNAME 64
#define PT_FIRSTLINE 72
#define PT_NUMLINE 76
#define PT_LINEINFO 80
#define STR_GCT 9
#define STR_LEN 20
#define STR_SIZE 24
#define NBC 40

struct fake {
	unsigned char proto[104] __attribute__((aligned(8)));
	unsigned char str[STR_SIZE + 64] __attribute__((aligned(8)));
	uint16_t lineinfo[NBC]; /* halfwords when numline >= 256 */
};

/* A function defined at firstline whose instruction i (i >= 1) is on firstline + (i - 1) / 4,
 * numline lines long (the width of lineinfo's entries). */
static struct fake *fake_proto(const char *chunk, int32_t firstline, int32_t numline)
{
	struct fake *f = calloc(1, sizeof(*f));
	uint32_t len = (uint32_t)strlen(chunk);

	assert_non_null(f);
	f->proto[PT_GCT] = 7; /* ~LJ_TPROTO */
	put32(f->proto, PT_SIZEBC, NBC);
	put32(f->proto, PT_FIRSTLINE, firstline);
	put32(f->proto, PT_NUMLINE, numline);
	put_ptr(f->proto, PT_LINEINFO, f->lineinfo);
	put_ptr(f->proto, PT_CHUNKNAME, f->str);
	for (int i = 0; i < NBC; i++) {
		if (numline < 256)
			((uint8_t *)f->lineinfo)[i] = (uint8_t)(i / 4);
		else
			f->lineinfo[i] = (uint16_t)(i / 4 + 300);
	}
	f->str[STR_GCT] = 4; /* ~LJ_TSTR */
	memcpy(f->str + STR_LEN, &len, sizeof(len));
	memcpy(f->str + STR_SIZE, chunk, len);
	return f;
}

static int resolve(struct fake *f, unsigned int pos, struct framename *n)
{
	return luaname__resolve((uint32_t)getpid(), ljframe__tag((uintptr_t)f->proto, pos), n);
}

static void names_function_with_file_and_line(void **state)
{
	struct fake *f = fake_proto("@/usr/share/lua/5.1/resty/core.lua", 20, 40);
	struct framename n;
	uint64_t v = ljframe__tag((uintptr_t)f->proto, 9);

	(void)state;
	need_self_read();
	assert_true(luaframe__is(v));
	assert_int_equal(v >> 56, LJFRAME_TAG);
	assert_string_equal(luaframe__runtime(v), "[luajit]");
	assert_int_equal(resolve(f, 9, &n), 0);
	assert_string_equal(n.name, "function </usr/share/lua/5.1/resty/core.lua:20>");
	assert_string_equal(n.file, "/usr/share/lua/5.1/resty/core.lua");
	assert_int_equal(n.start_line, 20);
	assert_int_equal(n.line, 22); /* lineinfo[8] = 2 */
	assert_int_equal(resolve(f, 0, &n), 0); /* the header instruction: the first line */
	assert_int_equal(n.line, 20);
	assert_int_equal(resolve(f, NBC, &n), 0); /* past the last one: firstline + numline */
	assert_int_equal(n.line, 60);
	free(f);
}

static void long_functions_keep_halfword_lines(void **state)
{
	struct fake *f = fake_proto("@big.lua", 1, 700);
	struct framename n;

	(void)state;
	need_self_read();
	assert_int_equal(resolve(f, 13, &n), 0);
	assert_int_equal(n.line, 1 + 3 + 300); /* lineinfo[12] as a halfword */
	free(f);
}

static void names_chunks_and_the_trace_label(void **state)
{
	struct fake *f = fake_proto("=stdin", 0, 3);
	struct framename n;

	(void)state;
	need_self_read();
	assert_int_equal(resolve(f, 1, &n), 0);
	assert_string_equal(n.name, "main chunk <stdin>");
	assert_int_equal(luaname__resolve((uint32_t)getpid(), ljframe__tag(0, LUAFRAME_PC_NONE), &n),
			 0);
	assert_string_equal(n.name, "[LuaJIT trace]");
	assert_string_equal(n.file, "");
	assert_int_equal(n.line, 0);
	free(f);
}

static void refuses_what_is_not_a_frame_of_this_proto(void **state)
{
	struct fake *f = fake_proto("@a.lua", 3, 40);
	struct framename n;

	(void)state;
	need_self_read();
	assert_int_equal(resolve(f, NBC + 1, &n), -EINVAL); /* beyond the bytecode */
	f->proto[PT_GCT] = 10; /* a Lua 5.4 Proto's type under the LuaJIT tag */
	assert_int_equal(resolve(f, 2, &n), -EINVAL);
	f->proto[PT_GCT] = 7;
	f->str[STR_GCT] = 11; /* a table, not a string */
	assert_int_equal(resolve(f, 3, &n), -EILSEQ);
	assert_int_equal(luaname__resolve((uint32_t)getpid(), ljframe__tag(8, 1), &n), -EFAULT);
	free(f);
}

static void position_beyond_the_tag_has_no_line(void **state)
{
	struct fake *f = fake_proto("@b.lua", 7, 40);
	struct framename n;

	(void)state;
	need_self_read();
	assert_int_equal(resolve(f, 5000, &n), 0); /* saturated: LUAFRAME_PC_NONE */
	assert_int_equal(n.line, 0);
	assert_int_equal(n.start_line, 7);
	free(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(names_function_with_file_and_line),
	    cmocka_unit_test(long_functions_keep_halfword_lines),
	    cmocka_unit_test(names_chunks_and_the_trace_label),
	    cmocka_unit_test(refuses_what_is_not_a_frame_of_this_proto),
	    cmocka_unit_test(position_beyond_the_tag_has_no_line),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
