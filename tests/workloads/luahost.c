// SPDX-License-Identifier: MIT
/*
 * A program that embeds Lua 5.1 through Debian's liblua5.1.so.0, as OpenWrt's daemons embed
 * liblua.so.5.1 (for tests/integration/sigprof-lua51.test.sh: the library case beside the
 * lua5.1 interpreter, which links Lua statically). Runs SCRIPT with arg[] set as lua.c sets it.
 * Built by the test (it needs liblua5.1-0-dev): cc luahost.c -I/usr/include/lua5.1 -llua5.1
 * Usage: luahost SCRIPT [ARG...]
 */
#include <stdio.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

int main(int argc, char **argv)
{
	lua_State *L = luaL_newstate();
	int err;

	if (argc < 2 || !L) {
		fprintf(stderr, "usage: luahost SCRIPT [ARG...]\n");
		return 2;
	}
	luaL_openlibs(L);
	lua_createtable(L, argc, 0);
	for (int i = 1; i < argc; i++) { /* arg[0] is the script, as lua.c has it */
		lua_pushstring(L, argv[i]);
		lua_rawseti(L, -2, i - 1);
	}
	lua_setglobal(L, "arg");
	err = luaL_loadfile(L, argv[1]) || lua_pcall(L, 0, 0, 0);
	if (err)
		fprintf(stderr, "luahost: %s\n", lua_tostring(L, -1));
	lua_close(L);
	return err ? 1 : 0;
}
