/* SPDX-License-Identifier: MIT */
/*
 * agent/core/luaexec.h — what both Lua 5.4 walkers need to know of a Lua VM before they walk it
 * (CONFIG_LUAFRAMES): the lua_State, CallInfo and LClosure layouts, where the hidden
 * luaV_execute is, and whether a word is a lua_State. libedgeprof.so's handler
 * (agent/lib/luaframes.c) reads its own process; the BPF sampler's agent (bpf/lua.c) reads
 * another one with process_vm_readv. Pure: memory comes through the caller's reader.
 */
#ifndef EDGEPROF_AGENT_LUAEXEC_H
#define EDGEPROF_AGENT_LUAEXEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The lua_State and global_State fields the discovery reads (per version and ABI). */
struct luaframes_layout {
	unsigned int tt;	 /* lua_State: CommonHeader's type byte */
	unsigned int g;		 /* l_G (a candidate's header is read up to it) */
	unsigned int errorjmp;	 /* errorJmp: a local of luaD_rawrunprotected while it runs */
	unsigned int mainthread; /* global_State.mainthread */
	unsigned char thread;	 /* a thread's type tag: LUA_VTHREAD (5.4), LUA_TTHREAD (5.1) */
	unsigned char align_mask, align_rem; /* a state's address & mask: its offset in its block */
};

/*
 * Lua 5.4.0-5.4.8's lua_State, CallInfo and LClosure (lstate.h, lobject.h), one table per ABI:
 * offsetof() of Debian's 5.4.4 sources compiled by tests/offsets/lua54.c, LP64 with gcc
 * (x86_64; the same on aarch64), ILP32 with arm-linux-gnueabihf-gcc and run under qemu-arm.
 */
struct lua54_layout {
	struct luaframes_layout state; /* tt, l_G, errorJmp, global_State.mainthread */
	uint16_t ci, base_ci;	       /* lua_State: ci; base_ci (embedded: the chain's end) */
	uint16_t head;		       /* bytes of a state's header read per sample */
	uint16_t ci_func, ci_previous, ci_savedpc, ci_callstatus, ci_size; /* CallInfo */
	uint16_t cl_tt, cl_p, cl_size; /* LClosure */
};

extern const struct lua54_layout lua54_lp64, lua54_ilp32;

#define LUA54_VTHREAD 8
#define LUA54_NUM_OPCODES 83 /* lopcodes.h, 5.4.0-5.4.8: disptab's length */

/* Reads len bytes at addr of the walked process into buf: true when all were read. */
typedef bool (*luaexec_read_fn)(void *ctx, uintptr_t addr, void *buf, size_t len);

/*
 * The function of the .eh_frame_hdr table hdr (len bytes, at address at in the walked
 * process) that holds pc: [*lo, *hi) up to the next FDE's start. Only GNU ld's encodings (a
 * 4-byte eh_frame pointer, udata4 count, datarel sdata4 table).
 */
bool luaexec__function_bounds(const uint8_t *hdr, size_t len, uintptr_t at, uintptr_t pc,
			      uintptr_t *lo, uintptr_t *hi);

/* The function [*lo, *hi) whose code holds [min, max] (a table's targets). */
typedef bool (*luaexec_bounds_fn)(void *ctx, uintptr_t min, uintptr_t max, uintptr_t *lo,
				  uintptr_t *hi);

/*
 * luaV_execute among the words w[0..n) of a module's data (as relocated in the process): the
 * function that holds the targets of its computed-goto table (ljumptab.h's disptab:
 * LUA54_NUM_OPCODES code pointers in a row into one function of [x_lo, x_hi), the words
 * around it not). 1: found, in [*lo, *hi); 0: none; -1: two such tables (not sure which).
 */
int luaexec__find(const uintptr_t *w, size_t n, uintptr_t x_lo, uintptr_t x_hi,
		  luaexec_bounds_fn bounds, void *ctx, uintptr_t *lo, uintptr_t *hi);

/*
 * Is w a lua_State of layout l (a main state, or a coroutine of a main state's universe)? Up
 * to three reads. *main: its universe's main state (checked as one).
 */
bool luaexec__is_state(const struct luaframes_layout *l, uintptr_t w, luaexec_read_fn read,
		       void *ctx, uintptr_t *main);

#endif /* EDGEPROF_AGENT_LUAEXEC_H */
