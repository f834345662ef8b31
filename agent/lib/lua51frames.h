/* SPDX-License-Identifier: MIT */
/*
 * agent/lib/lua51frames.h — Lua 5.1's own frames in libedgeprof.so's samples (CONFIG_LUA51FRAMES),
 * beside Lua 5.4's (agent/lib/luaframes.h, which finds the version and hands a 5.1 over here).
 *
 * luaV_execute: Lua 5.1 dispatches with a switch (no computed-goto table to find it by) and
 * Debian's lua5.1 and liblua5.1.so.0 export no internal symbol. At start (outside the handler)
 * the library runs Lua once to see where the VM is: a private state (luaL_newstate, the exported
 * API only: nothing of the program's states is touched) calls a C function of ours three ways,
 * from a Lua function (A), directly from C through lua_pcall (B), and from a string.gsub
 * callback inside Lua (C); that function walks its own stack with the sampler's unwinder. The
 * one function of the Lua module that is in A and not in B, and twice in C, is luaV_execute
 * (luaD_precall and luaD_call are in all three). Anything else (none, several, a walk that
 * failed): the process is profiled natively and counted (unknown_version).
 *
 * lua_State: found on the thread's stack as for 5.4 (a word whose header's type is LUA_TTHREAD
 * and whose global_State's mainthread is itself, or has the same global_State); the states
 * running on this thread, innermost first, by their errorJmp on this thread's stack.
 *
 * Frames: 5.1's CallInfos are an array, L->base_ci .. L->ci; the running Lua function's pc is
 * L->savedpc (the others' ci->savedpc). 5.1 has no CIST_FRESH: a Lua frame continues its
 * caller's luaV_execute activation exactly when the caller is a Lua frame stopped at OP_CALL or
 * OP_TAILCALL (luaV_execute's own assertion at OP_RETURN); a frame above a C function, the
 * state's base or any other instruction (a metamethod, OP_TFORLOOP's iterator) started a new
 * activation. The runs of frames replace the activations as in luaframes.h, or nothing is
 * replaced and the sample is counted (mismatch). Frames are tagged LUA51FRAME_TAG
 * (agent/core/lua51name.h) and named by the profile writer. Every read goes through
 * process_vm_readv (agent/lib/selfread.h). LP64 layouts only.
 */
#ifndef EDGEPROF_AGENT_LUA51FRAMES_H
#define EDGEPROF_AGENT_LUA51FRAMES_H

#include <stdbool.h>
#include <stdint.h>

#include "agent/lib/luaframes.h"

#ifdef CONFIG_LUA51FRAMES
/* Finds luaV_execute of the Lua 5.1 whose lua_ident is ident (not async-signal-safe: at
 * start); st: where the handler counts. false: not profiled as Lua. */
bool lua51frames__init(const void *ident, struct luaframes_stats *st);
/* Handler: luaframes__splice() for Lua 5.1. */
unsigned int lua51frames__splice(uint64_t *frames, unsigned int n, unsigned int max,
				 uintptr_t stack_hi, bool *truncated);
#else
static inline bool lua51frames__init(const void *ident, struct luaframes_stats *st)
{
	return false;
}
static inline unsigned int lua51frames__splice(uint64_t *frames, unsigned int n,
					       unsigned int max, uintptr_t stack_hi,
					       bool *truncated)
{
	return n;
}
#endif

#endif /* EDGEPROF_AGENT_LUA51FRAMES_H */
