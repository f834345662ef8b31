// SPDX-License-Identifier: MIT
/*
 * Unit tests of agent/core/luaname.c: Lua 5.4 frames named from a Proto laid out as lobject.h
 * lays it (LP64), in this process's memory, read back through process_vm_readv as the profile
 * writer reads a profiled process. The current line follows luaG_getfuncline (the last
 * absolute line at or before the pc, then byte deltas); what is not a Proto, a pc beyond the
 * code, an unreadable address give an error and no name.
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

#define NCODE 300

struct fake {
	unsigned char proto[128] __attribute__((aligned(8)));
	unsigned char str[24 + 64] __attribute__((aligned(8)));
	signed char lineinfo[NCODE];
	int32_t abslineinfo[2][2]; /* {pc, line} */
};

/* A function defined at line 10 whose instruction i is on line 10 + i / 2 (deltas 0, 1, 0, 1,
 * ...), with an absolute entry at pc 128 (line 74) as the compiler puts one every 128. */
static struct fake *fake_proto(const char *source, int32_t linedefined)
{
	const struct luaproto_layout *l = luaproto__54();
	struct fake *f = calloc(1, sizeof(*f));
	size_t len = strlen(source);

	assert_non_null(f);
	f->proto[l->tt] = 10; /* LUA_VPROTO */
	put32(f->proto, l->sizecode, NCODE);
	put32(f->proto, l->sizelineinfo, NCODE);
	put32(f->proto, l->sizeabslineinfo, 1);
	put32(f->proto, l->linedefined, linedefined);
	put_ptr(f->proto, l->code, f->lineinfo); /* any address: only the lengths are read */
	put_ptr(f->proto, l->lineinfo, f->lineinfo);
	put_ptr(f->proto, l->abslineinfo, f->abslineinfo);
	put_ptr(f->proto, l->source, f->str);
	for (int i = 0; i < NCODE; i++)
		f->lineinfo[i] = (signed char)(i & 1);
	f->lineinfo[0] = 0;
	f->lineinfo[128] = (signed char)-0x80; /* ABSLINEINFO */
	f->abslineinfo[0][0] = 128;
	f->abslineinfo[0][1] = linedefined + 64;
	f->str[l->str_tt] = 4; /* LUA_VSHRSTR */
	f->str[l->str_shrlen] = (unsigned char)len;
	memcpy(f->str + l->str_contents, source, len);
	return f;
}

static int resolve(struct fake *f, unsigned int pc, struct framename *n)
{
	return luaname__resolve((uint32_t)getpid(), luaframe__tag((uintptr_t)f->proto, pc), n);
}

static void names_function_with_file_and_line(void **state)
{
	struct fake *f = fake_proto("@/srv/app/handlers.lua", 10);
	struct framename n;

	(void)state;
	need_self_read();
	assert_true(luaframe__is(luaframe__tag((uintptr_t)f->proto, 3)));
	assert_int_equal(resolve(f, 0, &n), 0);
	assert_string_equal(n.name, "function </srv/app/handlers.lua:10>");
	assert_string_equal(n.file, "/srv/app/handlers.lua");
	assert_int_equal(n.start_line, 10);
	assert_int_equal(n.line, 10);
	assert_int_equal(resolve(f, 5, &n), 0); /* deltas at 1, 3, 5 */
	assert_int_equal(n.line, 13);
	assert_int_equal(resolve(f, 127, &n), 0);
	assert_int_equal(n.line, 10 + 64);
	/* past the absolute entry: its line, then the deltas after it */
	assert_int_equal(resolve(f, 128, &n), 0);
	assert_int_equal(n.line, 74);
	assert_int_equal(resolve(f, 131, &n), 0); /* deltas at 129, 131 */
	assert_int_equal(n.line, 76);
	free(f);
}

static void names_chunks_as_lua_shows_them(void **state)
{
	struct fake *f = fake_proto("=stdin", 0), *g = fake_proto("return 1 + 2\nx", 0);
	struct framename n;

	(void)state;
	need_self_read();
	assert_int_equal(resolve(f, 1, &n), 0);
	assert_string_equal(n.name, "main chunk <stdin>");
	assert_int_equal(resolve(g, 1, &n), 0);
	assert_string_equal(n.file, "[string \"return 1 + 2...\"]");
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
	f->proto[luaproto__54()->tt] = 6;			 /* a closure, not a Proto */
	assert_int_equal(resolve(f, 2, &n), -EINVAL);
	assert_int_equal(luaname__resolve((uint32_t)getpid(), luaframe__tag(8, 1), &n), -EFAULT);
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
