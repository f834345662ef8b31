/* SPDX-License-Identifier: MIT */
/*
 * bpf/luaproc.h — the contract between bpf/lua.bpf.h (kernel side) and bpf/lua.c (the agent):
 * where one Lua 5.4 process keeps what the BPF program reads. The agent finds the process's
 * lua_States (PUC Lua keeps no "current state" anywhere: they are found on the sampled threads'
 * stacks) and lists them with the layout's offsets; the program knows no version, only these
 * numbers. Plain fixed-width types.
 */
#ifndef EDGEPROF_BPF_LUAPROC_H
#define EDGEPROF_BPF_LUAPROC_H

/* States an entry holds (CONFIG_BPF_LUA_STATES; a power of two, 8 at most). */
#ifndef PROFILE_LUA_STATES
#define PROFILE_LUA_STATES 4
#endif
#if PROFILE_LUA_STATES & (PROFILE_LUA_STATES - 1) || PROFILE_LUA_STATES > 8
#error "CONFIG_BPF_LUA_STATES: a power of two, 8 at most"
#endif

struct lua_proc {
	__u64 states[PROFILE_LUA_STATES]; /* lua_State addresses (0: a free slot) */
	__u32 stack_span;	/* a running state's errorJmp lies in [sp, sp + this) */
	__u16 l_ci;		/* lua_State.ci (the running CallInfo) */
	__u16 l_errorjmp;	/* lua_State.errorJmp: set while a protected call runs */
	__u16 l_base_ci;	/* lua_State.base_ci (embedded: the chain's end) */
	__u16 ci_func;		/* CallInfo.func: the called value's stack slot */
	__u16 ci_previous;	/* CallInfo.previous */
	__u16 ci_savedpc;	/* CallInfo.u.l.savedpc */
	__u16 ci_callstatus;	/* CallInfo.callstatus (16 bits) */
	__u16 cl_p;		/* LClosure.p */
	__u16 p_code;		/* Proto.code */
	__u8 tt_lclosure;	/* a Lua closure's TValue tag (0x46), its byte after the value */
	__u8 pad[5];
};

/*
 * A frame in the record: the Proto (8-aligned) with bit 0 set on a frame marked CIST_FRESH
 * (the outermost Lua frame of one luaV_execute activation), and in bits 63..48 its instruction
 * index (the call's or the running one: savedpc's, as luaG_getfuncline's pcRel; 0xffff: none).
 * C functions' CallInfos are not recorded (their native frames are in the walk).
 */
#define LUA_REC_FRESH 1ull
#define LUA_REC_PROTO_MASK 0xfffffffffff8ull
#define LUA_REC_PC_NONE 0xffffull

#define LUA_CIST_C (1u << 1)
#define LUA_CIST_FRESH (1u << 2)
#define LUA_STATE_READ 96 /* bytes of a state read: ci and errorJmp lie in them (LP64: 32, 88) */
#define LUA_CI_READ 64	  /* bytes of a CallInfo read (LP64: 64) */

/* The counters (lua_counts, per CPU). */
#define LUA_C_SAMPLES	0 /* samples of a listed process with Lua frames */
#define LUA_C_FRAMES	1 /* frames recorded */
#define LUA_C_NO_STATE	2 /* no listed state runs on the sampled thread */
#define LUA_C_TRUNCATED 3 /* chains cut at CONFIG_BPF_LUA_FRAMES or the record's room */
#define LUA_C_READ	4 /* a read of the interpreter's memory failed */
#define LUA_C_TORN	5 /* a chain that did not end at base_ci (a value not a Lua closure,
			   * a loop): its frames not sent */
#define LUA_C_N		6

#endif /* EDGEPROF_BPF_LUAPROC_H */
