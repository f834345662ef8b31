/* SPDX-License-Identifier: MIT */
/*
 * agent/lib/luaframes.h — Lua 5.4's own frames in libedgeprof.so's samples (CONFIG_LUAFRAMES).
 *
 * At start (outside the handler) the library looks for Lua in the process: the exported
 * lua_ident ("$LuaVersion: Lua 5.4.x ...", in .dynsym of Debian's lua5.4 and of liblua5.4.so)
 * says the version (LuaJIT, which has none: agent/lib/ljframes.h); a Lua without a layout here
 * (5.1 without LUA51FRAMES or on armv7, LuaJIT without LJFRAMES) is counted (unknown_version) and profiled natively. 5.4's layouts: LP64 and ILP32 (armv7).
 * luaV_execute is hidden (no symbol, even dynamic):
 * it is found as the function that holds the targets of its computed-goto table (ljumptab.h's
 * disptab, NUM_OPCODES code pointers in a row in the module's relocated data), bounded by the
 * module's .eh_frame_hdr, or on armv7, where Debian's binaries have no unwind tables, by its
 * code (luaframes__code_bounds; the native walk then reads its frame from its prologue:
 * unwind__arm_body) (the word after it outside that function: arm64's lua5.4 has another
 * table of code pointers right after it); none (a Lua built without LUA_USE_JUMPTABLE):
 * natively.
 *
 * lua_State: Debian's lua5.4 calls luaL_newstate directly, not through the PLT, so it cannot be
 * interposed. The handler finds states on the thread's own stack instead (a state's pointer is
 * spilled by every C function between main and luaV_execute): a word is a main state when its
 * header's type is LUA_VTHREAD and its global_State's mainthread points back at it, a coroutine
 * when its global_State's mainthread has the same global_State. Found states go in a table of
 * CONFIG_LUAFRAMES_STATES (full: counted); a scan reads at most CONFIG_LUAFRAMES_SCAN_BYTES of
 * stack and runs at most once per 64 samples of a thread that needs one. Which states run on
 * this thread, innermost first: those whose errorJmp (the protected call's lua_longjmp, a local
 * of luaD_rawrunprotected) lies on this thread's stack, by address.
 *
 * In the handler: each state's CallInfo chain (L->ci, ->previous, down to base_ci) gives its
 * Lua frames in runs, one per luaV_execute activation (a run ends at the frame marked
 * CIST_FRESH: the one a C call started); C functions' CallInfos are skipped (their native
 * frames are in the walk). The runs replace the luaV_execute activations of the native walk, so
 * native frames above and below stay in order; when the number of runs and of activations
 * differ (a state not found, a torn chain), nothing is replaced and the sample counted
 * (mismatch). Every read goes through agent/lib/selfread.h (plain loads where proven mapped,
 * process_vm_readv elsewhere). At most
 * CONFIG_LUAFRAMES_MAX Lua frames per sample. EDGEPROF_LUA=0 turns it off (the cost's baseline).
 */
#ifndef EDGEPROF_AGENT_LUAFRAMES_H
#define EDGEPROF_AGENT_LUAFRAMES_H

#include <stdbool.h>
#include <stdint.h>

#include "agent/core/luaexec.h"

struct luaframes_stats {
	char version[24];	  /* "5.4.4", "LuaJIT-2.1.0-beta3"; "" none found */
	bool on;		  /* its layout and luaV_execute are known: frames are spliced */
	uint64_t unknown_version; /* a Lua without a layout, or no luaV_execute found */
	uint64_t samples, frames; /* samples with Lua frames spliced in, frames put in */
	uint64_t states, states_full;	/* states found; found but the table was full */
	uint64_t scans, no_state;	/* stack scans; samples in luaV_execute without a state */
	uint64_t mismatch;	  /* runs and activations differ: the sample kept native */
	uint64_t read_errors;	  /* reads that failed (EFAULT: a torn or freed pointer) */
	uint64_t truncated;	  /* chains cut at CONFIG_LUAFRAMES_MAX or the sample's depth */
	uint64_t traces;	  /* LuaJIT: samples in a JIT trace (agent/lib/ljframes.h) */
};

#ifdef CONFIG_LUAFRAMES
/* Finds Lua in the process (not async-signal-safe: at start). */
void luaframes__init(void);
/* Handler: replaces luaV_execute's activations in frames[0..n) (leaf first) with Lua frames, at
 * most max frames in all; stack_hi: the thread's stack end (0: unknown). The new count. */
unsigned int luaframes__splice(uint64_t *frames, unsigned int n, unsigned int max,
			       uintptr_t stack_hi, bool *truncated);
void luaframes__stats(struct luaframes_stats *st);
#else
static inline void luaframes__init(void)
{
}
static inline unsigned int luaframes__splice(uint64_t *frames, unsigned int n, unsigned int max,
					     uintptr_t stack_hi, bool *truncated)
{
	return n;
}
static inline void luaframes__stats(struct luaframes_stats *st)
{
	*st = (struct luaframes_stats){0};
}
#endif

/*
 * What the 5.4 and 5.1 walkers share (here, luaframes.c; lua51frames.c calls it with its own
 * layout): finding lua_States on the thread's stack, which of them run on this thread, and
 * putting the runs of Lua frames in place of luaV_execute's activations. The versions differ
 * there only in a few offsets and the thread's type tag; their CallInfo walks, prefetches and
 * the order of the running states stay in their own files. One walker runs in a process, so
 * the per-thread frame buffers serve both. All but luaframes__function_bounds (at start) are
 * async-signal-safe (the handler).
 */
#ifdef CONFIG_LUAFRAMES
struct selfread_window;

/* At start: the function of the .eh_frame_hdr table at hdr that holds pc, [*lo, *hi) up to the
 * next FDE's start. Only GNU ld's encodings (a 4-byte eh_frame pointer, udata4 count, datarel
 * sdata4 table). */
bool luaframes__function_bounds(const uint8_t *hdr, uintptr_t pc, uintptr_t *lo,
				uintptr_t *hi);

/*
 * At start, in a module without .eh_frame_hdr (Debian's armhf binaries carry no unwind tables):
 * the Thumb-2 function whose code holds [pc_lo, pc_hi] inside [x_lo, x_hi), read from the code
 * (agent/lib/luaarm.c, elf/armframe.h): from the push of lr before pc_lo to the next push of lr
 * after pc_hi. Not on other architectures (false).
 */
#ifdef CONFIG_ARCH_ARM
bool luaframes__code_bounds(uintptr_t x_lo, uintptr_t x_hi, uintptr_t pc_lo, uintptr_t pc_hi,
			    uintptr_t *lo, uintptr_t *hi);
#else
static inline bool luaframes__code_bounds(uintptr_t x_lo, uintptr_t x_hi, uintptr_t pc_lo,
					  uintptr_t pc_hi, uintptr_t *lo, uintptr_t *hi)
{
	return false;
}
#endif /* CONFIG_ARCH_ARM */

/* One Lua VM of the process: its known states, its luaV_execute, where its walker counts. */
struct luaframes_vm {
	const struct luaframes_layout *layout;
	uintptr_t exec_lo, exec_hi; /* luaV_execute */
	uintptr_t states[CONFIG_LUAFRAMES_STATES];
	struct luaframes_stats *st;
};

/* New states among the words of this thread's stack from sp up to hi (0: unknown), read
 * through win (reset before and after; at most 64 candidates read). Counted: scans, states,
 * states_full. */
void luaframes__scan(struct luaframes_vm *vm, struct selfread_window *win, uintptr_t sp,
		     uintptr_t hi);
/* State slot i's header (len bytes) in head, read unless head_ok (prefetched): the state's
 * address when it runs on this thread (its errorJmp, *jmp, on [sp, hi)), else 0. A slot whose
 * header is no thread's any more (a coroutine collected) is emptied. */
uintptr_t luaframes__running(struct luaframes_vm *vm, unsigned int i, unsigned char *head,
			     unsigned int len, bool head_ok, uintptr_t sp, uintptr_t hi,
			     uintptr_t *jmp);
/* A sample's walk: Lua frames (tagged) pushed innermost first, each run ended after its
 * outermost frame. push: at most CONFIG_LUAFRAMES_MAX (*cut beyond); end_run: false when
 * there are too many runs. */
void luaframes__push(uint64_t frame, unsigned int *n, bool *cut);
bool luaframes__end_run(unsigned int n, unsigned int *runs);
/* luaV_execute's activations among frames[0..n) (leaf first). */
unsigned int luaframes__activations(const struct luaframes_vm *vm, const uint64_t *frames,
				    unsigned int n);
/* The pushed runs (runs of them; cut: frames were left out) in place of the a activations of
 * frames[0..n), at most max frames: the new count. Runs and activations that do not match
 * keep the sample native (counted: mismatch; and samples, frames, truncated). */
unsigned int luaframes__replace(struct luaframes_vm *vm, uint64_t *frames, unsigned int n,
				unsigned int max, unsigned int a, unsigned int runs, bool cut,
				bool *truncated);
#endif

/* Lua 5.1 (agent/lib/lua51frames.c): luaframes__init() and __splice() hand a 5.1 over. */
#ifdef CONFIG_LUA51FRAMES
/* Finds luaV_execute of the Lua 5.1 whose lua_ident is ident (at start); st: where the handler
 * counts. false: not profiled as Lua. */
bool lua51frames__init(const void *ident, struct luaframes_stats *st);
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

/* LuaJIT 2.1 (agent/lib/ljframes.h): luaframes__init() hands it over; sigprof.c splices. */
#ifdef CONFIG_LJFRAMES
/* At start: is the process's LuaJIT one with a layout here? st: where the handler counts. */
bool ljframes__init(struct luaframes_stats *st);
#else
static inline bool ljframes__init(struct luaframes_stats *st)
{
	return false;
}
#endif

#endif /* EDGEPROF_AGENT_LUAFRAMES_H */
