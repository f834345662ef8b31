// SPDX-License-Identifier: MIT
/*
 * tests/offsets/luajit.c — prints the LuaJIT 2.1 offsets agent/lib/ljframes.c and
 * agent/core/ljname.c keep, as the target's compiler lays them out (GC64 on x86_64: Debian's
 * build keeps the default, LUAJIT_DISABLE_GC64 unset). Not part of the build: run it when a
 * table is added or checked. Measured on 2.1.0~beta3+git20220320 (Debian bookworm), x86_64:
 * lua_State gct 9 glref 16 base 32 maxstack 48 stack 56 cframe 80; global_State vmstate 184
 * mainthref 192 cur_L 368 jit_base 376; GG_G2DISP 3968; GCfuncL ffid 10 pc 32; GCproto sizebc
 * 12 chunkname 64 firstline 72 numline 76 lineinfo 80, sizeof 104; GCstr len 20, sizeof 24;
 * CFRAME_OFS_PC 24 CFRAME_SIZE 80; BC__MAX 97.
 *
 *   apt-get source luajit
 *   gcc -I luajit-2.1.0~beta3+git20220320+dfsg/src -o luajit-off tests/offsets/luajit.c && ./luajit-off
 */
#include <stddef.h>
#include <stdio.h>
#include "lj_obj.h"
#include "lj_frame.h"
#include "lj_dispatch.h"
#define P(s, f) printf("%-28s %zu\n", #s "." #f, offsetof(s, f))
#define S(s) printf("%-28s %zu\n", "sizeof " #s, sizeof(s))
int main(void)
{
	P(lua_State, gct); P(lua_State, glref); P(lua_State, base); P(lua_State, top);
	P(lua_State, maxstack); P(lua_State, stack); P(lua_State, cframe); S(lua_State);
	P(global_State, vmstate); P(global_State, cur_L); P(global_State, jit_base); P(global_State, mainthref);
	printf("GG_G2DISP %zu\n", (size_t)GG_G2DISP); printf("GG_OFS_g %zu\n", offsetof(GG_State, g));
	P(GCfuncL, gct); P(GCfuncL, ffid); P(GCfuncL, pc); S(GCfuncL);
	P(GCproto, gct); P(GCproto, sizebc); P(GCproto, chunkname); P(GCproto, firstline);
	P(GCproto, numline); P(GCproto, lineinfo); S(GCproto);
	P(GCstr, gct); P(GCstr, len); S(GCstr);
	printf("CFRAME_OFS_PC %d CFRAME_OFS_L %d CFRAME_OFS_PREV %d CFRAME_SIZE %d CFRAME_RAWMASK %lx\n",
	       CFRAME_OFS_PC, CFRAME_OFS_L, CFRAME_OFS_PREV, CFRAME_SIZE, (long)CFRAME_RAWMASK);
	printf("LJ_GC64 %d LJ_FR2 %d BC_FUNCF %d BC__MAX %d\n", LJ_GC64, LJ_FR2, BC_FUNCF, BC__MAX);
	return 0;
}
