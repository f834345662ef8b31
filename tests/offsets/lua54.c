// SPDX-License-Identifier: MIT
/*
 * tests/offsets/lua54.c — prints the Lua 5.4 offsets agent/lib/luaframes.c and
 * agent/core/luaname.c keep in their per-ABI tables, as the target's compiler lays them out.
 * Not part of the build: run it when a table is added or checked.
 *
 *   apt-get source --download-only lua5.4 && tar xzf lua5.4_*.orig.tar.gz
 *   gcc -DLUA_USE_LINUX -I lua-5.4.4/src -o lua54-lp64 tests/offsets/lua54.c && ./lua54-lp64
 *   arm-linux-gnueabihf-gcc -DLUA_USE_LINUX -I lua-5.4.4/src -o lua54-ilp32 tests/offsets/lua54.c
 *   qemu-arm -L /usr/arm-linux-gnueabihf ./lua54-ilp32
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
	P(lua_State, tt); P(lua_State, l_G); P(lua_State, ci); P(lua_State, errorJmp); P(lua_State, base_ci);
	P(global_State, mainthread);
	P(CallInfo, func); P(CallInfo, previous); P(CallInfo, u.l.savedpc); P(CallInfo, callstatus); S(CallInfo);
	P(LClosure, tt); P(LClosure, p); S(LClosure);
	P(Proto, tt); P(Proto, sizecode); P(Proto, sizelineinfo); P(Proto, sizeabslineinfo); P(Proto, linedefined);
	P(Proto, code); P(Proto, lineinfo); P(Proto, abslineinfo); P(Proto, source); S(Proto);
	P(TString, tt); P(TString, shrlen); P(TString, u.lnglen); P(TString, contents);
	S(StackValue); P(TValue, tt_); S(AbsLineInfo);
	return 0;
}
