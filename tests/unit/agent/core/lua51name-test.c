// SPDX-License-Identifier: MIT
/*
 * Unit tests of agent/core/lua51name.c through luaname__resolve(): Lua 5.1 frames (their own
 * tag) named from a Proto and a TString laid out as Lua 5.1.5's lobject.h lays them (LP64 or
 * ILP32: the build's), in this process's memory, read back through process_vm_readv as the
 * profile writer reads a profiled process. 5.1 keeps an absolute line per instruction (lineinfo[pc]); a 5.4 Proto
 * under the 5.1 tag, a pc beyond the code, a string that is not one, an unreadable address
 * give an error and no name.
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

/* lobject.h of Lua 5.1.5, LP64 : ILP32 (tests/offsets/lua51.c, against Debian's 5.1.5-9
 * sources): the build's ABI */
#define LP64 (sizeof(void *) == 8)
#define P_TT (LP64 ? 8 : 4)
#define P_CODE (LP64 ? 24 : 12)
#define P_LINEINFO (LP64 ? 40 : 20)
#define P_SOURCE (LP64 ? 64 : 32)
#define P_SIZECODE (LP64 ? 80 : 44)
#define P_SIZELINEINFO (LP64 ? 84 : 48)
#define P_LINEDEFINED (LP64 ? 96 : 60)
#define TS_TT (LP64 ? 8 : 4)
#define TS_LEN (LP64 ? 16 : 12)
#define TS_CONTENTS (LP64 ? 24 : 16)
#define NCODE 40

struct fake {
	unsigned char proto[120] __attribute__((aligned(8)));
	unsigned char str[TS_CONTENTS + 64] __attribute__((aligned(8)));
	int32_t lineinfo[NCODE];
};

/* A function defined at line 20 whose instruction i is on line 21 + i / 4. */
static struct fake *fake_proto(const char *source, int32_t linedefined)
{
	struct fake *f = calloc(1, sizeof(*f));
	size_t len = strlen(source); /* TString.tsv.len */

	assert_non_null(f);
	f->proto[P_TT] = 9; /* LUA_TPROTO */
	put32(f->proto, P_SIZECODE, NCODE);
	put32(f->proto, P_SIZELINEINFO, NCODE);
	put32(f->proto, P_LINEDEFINED, linedefined);
	put_ptr(f->proto, P_CODE, f->lineinfo); /* any address: only the length is read */
	put_ptr(f->proto, P_LINEINFO, f->lineinfo);
	put_ptr(f->proto, P_SOURCE, f->str);
	for (int i = 0; i < NCODE; i++)
		f->lineinfo[i] = linedefined + 1 + i / 4;
	f->str[TS_TT] = 4; /* LUA_TSTRING */
	memcpy(f->str + TS_LEN, &len, sizeof(len));
	memcpy(f->str + TS_CONTENTS, source, len);
	return f;
}

static int resolve(struct fake *f, unsigned int pc, struct framename *n)
{
	return luaname__resolve((uint32_t)getpid(), lua51frame__tag((uintptr_t)f->proto, pc), n);
}

static void names_function_with_file_and_line(void **state)
{
	struct fake *f = fake_proto("@/usr/lib/lua/luci/dispatcher.lua", 20);
	struct framename n;
	uint64_t v = lua51frame__tag((uintptr_t)f->proto, 9);

	(void)state;
	need_self_read();
	assert_true(luaframe__is(v));
	assert_int_equal(v >> 56, LUA51FRAME_TAG);
	assert_int_equal(resolve(f, 0, &n), 0);
	assert_string_equal(n.name, "function </usr/lib/lua/luci/dispatcher.lua:20>");
	assert_string_equal(n.file, "/usr/lib/lua/luci/dispatcher.lua");
	assert_int_equal(n.start_line, 20);
	assert_int_equal(n.line, 21);
	assert_int_equal(resolve(f, 9, &n), 0);
	assert_int_equal(n.line, 23);
	assert_int_equal(resolve(f, NCODE - 1, &n), 0);
	assert_int_equal(n.line, 21 + (NCODE - 1) / 4);
	free(f);
}

static void names_chunks_as_lua_shows_them(void **state)
{
	struct fake *f = fake_proto("=stdin", 0), *g = fake_proto("local x = 1\nreturn x", 0);
	struct framename n;

	(void)state;
	need_self_read();
	assert_int_equal(resolve(f, 1, &n), 0);
	assert_string_equal(n.name, "main chunk <stdin>");
	assert_int_equal(resolve(g, 1, &n), 0);
	assert_string_equal(n.file, "[string \"local x = 1...\"]");
	free(f);
	free(g);
}

static void refuses_what_is_not_a_frame_of_this_proto(void **state)
{
	struct fake *f = fake_proto("@a.lua", 3);
	struct framename n;

	(void)state;
	need_self_read();
	assert_int_equal(resolve(f, NCODE, &n), -EINVAL); /* beyond the code */
	f->proto[P_TT] = 10; /* a 5.4 Proto's type (LUA_VPROTO) under the 5.1 tag */
	assert_int_equal(resolve(f, 2, &n), -EINVAL);
	f->proto[P_TT] = 9;
	f->str[TS_TT] = 5; /* a table, not a string */
	assert_int_equal(resolve(f, 3, &n), -EILSEQ);
	assert_int_equal(luaname__resolve((uint32_t)getpid(), lua51frame__tag(8, 1), &n), -EFAULT);
	free(f);
}

static void pc_beyond_the_tag_has_no_line(void **state)
{
	struct fake *f = fake_proto("@b.lua", 7);
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
	    cmocka_unit_test(names_chunks_as_lua_shows_them),
	    cmocka_unit_test(refuses_what_is_not_a_frame_of_this_proto),
	    cmocka_unit_test(pc_beyond_the_tag_has_no_line),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
