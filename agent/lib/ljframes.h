/* SPDX-License-Identifier: MIT */
/*
 * agent/lib/ljframes.h — LuaJIT 2.1's own frames in libedgeprof.so's samples (CONFIG_LJFRAMES).
 *
 * agent/lib/luaframes.c finds LuaJIT (it exports luaJIT_setmode, no lua_ident) and hands it over
 * here (ljframes__init, in luaframes.h). At start (outside the handler) a private state made with the exported API
 * (luaL_newstate; nothing of the program's states is touched) proves the layout: jit.version
 * is "LuaJIT 2.1.0-beta3" (the one release whose GC64 headers tests/offsets/luajit.c measured:
 * Debian bookworm's), the state is a thread whose global_State's mainthref is itself, a loaded
 * chunk's GCproto and chunk name sit where the table says, and the bytecode dispatch table
 * (GG_State, GG_G2DISP past the global_State) points into one FDE of the module's
 * .eh_frame_hdr: the interpreter (lj_vm_asm_begin up to lj_vm_ffi_call, one function to the
 * native walker). Anything else: profiled natively, counted (unknown_version). x86_64 only.
 *
 * In the handler. The global_State: the DISPATCH register (r14) less GG_G2DISP when the
 * interrupted pc is in the interpreter, else the one found so (checked: its main thread's glref
 * points back at it). Its cur_L is the running lua_State (set whenever the VM is entered or a
 * coroutine resumed). Where the innermost Lua frame is:
 *  - interpreter (pc in the VM, vmstate INTERP): BASE and PC are registers (rdx, rbx), L->base
 *    is stale; the leaf's current instruction is exact;
 *  - a C function or helper called by the VM (vmstate C, GC, ...): L->base, written back before
 *    the call; the leaf's pc from SAVE_PC in the VM's C frame (L->cframe). The cheap helpers
 *    the VM calls without writing L->base back (lj_tab_len) keep BASE in rbp: tried last, the
 *    leaf without a line;
 *  - a JIT trace (vmstate = the trace's number): G->jit_base, the base of the frame the trace
 *    was entered in. The trace itself holds no frames the walker can read (inlined calls live in
 *    registers and snapshots): the sample shows a "[LuaJIT trace]" frame above the trace's
 *    starting function (no line: its pc is not kept) and the Lua stack below it as it stood
 *    when the trace was entered, which is exact for those frames. Native frames above the trace
 *    (C called from it) are kept; below it the native walk cannot go on (traces have no unwind
 *    tables), so it is walked again from the VM's C frame (L->cframe) with its CFI.
 * From there the frames on the Lua stack (lj_frame.h, FR2: function at base-2, PC or size and
 * type at base-1): a Lua link (the return PC; the caller's slot from the CALL's A operand)
 * gives the caller's current instruction, CONT/PCALL/VARG links a delta; a C or CP link (a
 * lua_call/lua_pcall from C: lj_vm_call/lj_vm_pcall) ends the run of frames of one VM
 * activation. A coroutine's stack ends in a CP link too; its resumer is the main thread (from
 * G->mainthref): nested coroutines give more activations than runs and stay native (mismatch).
 * C functions' frames are skipped (their native frames are in the walk). The VM's one FDE says
 * CFA = rsp + CFRAME_SIZE everywhere, which is wrong inside its helpers (->vm_modi...): a walk
 * that stopped in the VM is redone from L->cframe too. Runs replace the VM's
 * activations as for PUC Lua (agent/lib/luaframes.h), or the sample stays native (counted).
 * Frames are tagged LJFRAME_TAG (agent/core/luaname.h) and named by the profile writer. Every
 * read goes through agent/lib/selfread.h: the global_State, the running and main states and
 * their Lua stacks directly when the VM or a trace runs with DISPATCH (r14) in the GG_State
 * found before (in use, so mapped), else and for everything else (functions, protos, bytecode:
 * per-thread caches, a function re-read when the pc is outside its bytecode) through
 * process_vm_readv. At most CONFIG_LUAFRAMES_MAX frames, 1024 steps per state.
 */
#ifndef EDGEPROF_AGENT_LJFRAMES_H
#define EDGEPROF_AGENT_LJFRAMES_H

#include <stdbool.h>
#include <stdint.h>

#include "agent/lib/luaframes.h"
#include "agent/lib/unwind.h"

/* What the handler's own native walk used: a trace's sample is walked again from the VM. */
struct ljframes_walk {
	uintptr_t stack_lo, stack_hi;
	enum unwind_mode mode;
	struct unwind_cache *cache;
};

#ifdef CONFIG_LJFRAMES
/* Handler: the interpreter's activations in frames[0..n) replaced by Lua frames (uctx: the
 * interrupted context). The new count. */
unsigned int ljframes__splice(uint64_t *frames, unsigned int n, unsigned int max,
			      const void *uctx, const struct ljframes_walk *wk, bool *truncated);
#else
static inline unsigned int ljframes__splice(uint64_t *frames, unsigned int n, unsigned int max,
					    const void *uctx, const struct ljframes_walk *wk,
					    bool *truncated)
{
	return n;
}
#endif

#endif /* EDGEPROF_AGENT_LJFRAMES_H */
