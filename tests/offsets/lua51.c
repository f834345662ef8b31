// SPDX-License-Identifier: MIT
/*
 * tests/offsets/lua51.c — prints the Lua 5.1 offsets agent/lib/lua51frames.c and
 * agent/core/lua51name.c keep per ABI, as the target's compiler lays them out. Not part of the
 * build: run it when a layout is added or checked.
 *
 *   apt-get source --download-only lua5.1 && tar xzf lua5.1_*.orig.tar.gz
 *   gcc -DLUA_USE_LINUX -I lua-5.1.5/src -o lua51-lp64 tests/offsets/lua51.c && ./lua51-lp64
 *   arm-linux-gnueabihf-gcc -DLUA_USE_LINUX -I lua-5.1.5/src -o lua51-ilp32 tests/offsets/lua51.c
 *   qemu-arm -L /usr/arm-linux-gnueabihf ./lua51-ilp32
 */
#include <stddef.h>
#include <stdio.h>
#include "lstate.h"
#include "lobject.h"
#include "lfunc.h"
#define P(s, f) printf("%-28s %zu\n", #s "." #f, offsetof(s, f))
#define S(s) printf("%-28s %zu\n", "sizeof " #s, sizeof(s))
int main(void)
{
	P(lua_State, tt); P(lua_State, l_G); P(lua_State, ci); P(lua_State, savedpc);
	P(lua_State, stack); P(lua_State, base_ci); P(lua_State, errorJmp); S(lua_State);
	P(global_State, mainthread);
	P(CallInfo, func); P(CallInfo, savedpc); S(CallInfo);
	P(TValue, tt); S(TValue);
	P(Closure, c.tt); P(Closure, c.isC); P(Closure, l.p); S(LClosure);
	P(Proto, tt); P(Proto, code); P(Proto, lineinfo); P(Proto, source); P(Proto, sizecode);
	P(Proto, sizelineinfo); P(Proto, linedefined); S(Proto);
	P(TString, tsv.tt); P(TString, tsv.len); S(TString);
	return 0;
}
