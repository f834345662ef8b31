/* SPDX-License-Identifier: MIT */
/*
 * bpf/lua.bpf.h — Lua 5.4 frames in the CPU samples (CONFIG_BPF_LUA), included by
 * profile.bpf.c after python.bpf.h; lua_append() is called on a sample's record just before it
 * is sent, after py_append() (a record carries one interpreter's frames).
 *
 * A process the agent recognised as Lua 5.4 has an entry in lua_procs (bpf/luaproc.h): the
 * lua_States it found on its threads' stacks and the layout's offsets. The states running on
 * the sampled thread are those whose errorJmp (a local of the protected call that runs them)
 * lies on its stack above the user stack pointer; innermost first (a coroutine before its
 * resumer), each state's CallInfo chain from L->ci down to base_ci goes into the record, a
 * Lua function's CallInfo as its Proto, its instruction index and its CIST_FRESH mark (LUA_REC_*:
 * the agent splices the runs in place of luaV_execute's activations); C functions' CallInfos
 * are skipped. At most CONFIG_BPF_LUA_FRAMES frames (a longer chain, or a torn one, sends
 * none: counted). The chain is the sample's own: read at the sample, not later. Kernels
 * with the ring buffer (5.8+) only: the perf buffer programs send native frames.
 */
#ifndef EDGEPROF_BPF_LUA_BPF_H
#define EDGEPROF_BPF_LUA_BPF_H

#ifdef CONFIG_BPF_LUA
#include "bpf/luaproc.h"

/* CallInfos walked per sample (Lua and C ones, every state's): the frames' bound and room for
 * the C functions between them */
#define LUA_STEPS (PROFILE_LUA_FRAMES + 16)
#define LUA_STATE_MASK (PROFILE_LUA_STATES - 1)

/* 1: look the sampled process up in lua_procs (sampler.c, with CONFIG_BPF_LUA) */
const volatile __u8 lua_enabled;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64); /* CONFIG_BPF_LUA_PROCS, set before load */
	__type(key, __u32);
	__type(value, struct lua_proc);
} lua_procs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LUA_C_N);
	__type(key, __u32);
	__type(value, __u64);
} lua_counts SEC(".maps");

/* Processes named lua* not listed (yet) whose first sample woke the reader (py_woken's). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u8);
} lua_woken SEC(".maps");

/*
 * A sample's walk. Everything the loop carries from one CallInfo to the next lives here, not
 * in registers: the verifier then finds the same state at every loop head, whichever branch
 * (a C or a Lua function, a state's end) the last one took, and checks each step once.
 */
struct lua_buf {
	union {
		__u64 w[16];
		__u8 b[128];
	}; /* a state's head (LUA_STATE_READ) or a CallInfo (LUA_CI_READ) */
	__u64 tv[2];			/* a TValue */
	__u64 l[PROFILE_LUA_STATES];	/* the running states, innermost first */
	__u64 ci[PROFILE_LUA_STATES];	/* their L->ci */
	__u64 jmp[PROFILE_LUA_STATES];	/* their errorJmp (~0: not running) */
	__u64 cur, base;		/* the CallInfo walked, the state's base_ci */
	__u32 k, n;			/* the state walked; frames put in */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct lua_buf);
} lua_bufs SEC(".maps");

static __always_inline void lua_count(__u32 k, __u64 n)
{
	__u64 *c = bpf_map_lookup_elem(&lua_counts, &k);

	if (c)
		*c += n;
}

static __always_inline __u64 lua_word(const struct lua_buf *b, __u32 off)
{
	return b->w[(off >> 3) & 15];
}

/* A process not listed: its first sample wakes the reader if its comm says lua (py_wake). */
static __always_inline void lua_wake(struct profile_event *e, int legacy)
{
	struct new_proc_wake *w;
	__u32 zero = 0;
	__u8 one = 1;

	if (legacy || !cfi_enabled || e->comm[0] != 'l' || e->comm[1] != 'u' ||
	    e->comm[2] != 'a' || bpf_map_lookup_elem(&lua_woken, &e->tgid))
		return;
	bpf_map_update_elem(&lua_woken, &e->tgid, &one, BPF_ANY);
	w = bpf_map_lookup_elem(&wake, &zero);
	if (w)
		w->pending = 1;
}

/* The states of p running on this thread (errorJmp in [sp, sp + span)) in b, innermost
 * first; how many. */
static __always_inline __u32 lua_running(const struct lua_proc *p, struct lua_buf *b, __u64 sp,
					 int legacy)
{
	__u32 n = 0;

	for (int i = 0; i < PROFILE_LUA_STATES; i++) {
		__u64 l = p->states[i], jmp, ci;

		b->jmp[i] = ~0ull;
		if (!l)
			continue;
		if (read_user(b->b, LUA_STATE_READ, l, legacy)) {
			lua_count(LUA_C_READ, 1);
			continue;
		}
		jmp = lua_word(b, p->l_errorjmp);
		ci = lua_word(b, p->l_ci);
		if (!jmp || !ci || (sp && (jmp < sp || jmp - sp >= p->stack_span)))
			continue;
		b->l[i] = l;
		b->ci[i] = ci;
		b->jmp[i] = jmp;
		n++;
	}
	/* innermost (lowest errorJmp) first: a sorting network of constant indices */
#pragma unroll
	for (int i = 0; i < PROFILE_LUA_STATES; i++) {
#pragma unroll
		for (int j = 0; j + 1 < PROFILE_LUA_STATES - i; j++) {
			if (b->jmp[j] > b->jmp[j + 1]) {
				__u64 t;

				t = b->jmp[j]; b->jmp[j] = b->jmp[j + 1]; b->jmp[j + 1] = t;
				t = b->l[j]; b->l[j] = b->l[j + 1]; b->l[j + 1] = t;
				t = b->ci[j]; b->ci[j] = b->ci[j + 1]; b->ci[j + 1] = t;
			}
		}
	}
	return n;
}

/* One Lua function's CallInfo (in b) into the record at idx: false when torn. */
static __always_inline int lua_frame(struct profile_event *e, const struct lua_proc *p,
				     struct lua_buf *b, __u32 idx, __u16 status, int legacy)
{
	__u64 func = lua_word(b, p->ci_func), savedpc = lua_word(b, p->ci_savedpc);
	__u64 proto = 0, code = 0, pc = LUA_REC_PC_NONE;

	if (read_user(b->tv, sizeof(b->tv), func, legacy)) {
		lua_count(LUA_C_READ, 1);
		return 0;
	}
	if ((__u8)b->tv[1] != p->tt_lclosure) /* the tag: the byte after the 8-byte value */
		return 0;
	if (read_user(&proto, sizeof(proto), b->tv[0] + p->cl_p, legacy) ||
	    read_user(&code, sizeof(code), proto + p->p_code, legacy)) {
		lua_count(LUA_C_READ, 1);
		return 0;
	}
	/* pcRel: savedpc is the next instruction (a fresh frame's is the first) */
	if (savedpc >= code && savedpc - code < 4 * LUA_REC_PC_NONE)
		pc = savedpc > code ? (savedpc - code) / 4 - 1 : 0;
	if (idx < 2 * PROFILE_MAX_DEPTH)
		e->frames[idx] = (proto & LUA_REC_PROTO_MASK) | pc << 48 |
				 (status & LUA_CIST_FRESH ? LUA_REC_FRESH : 0);
	return 1;
}

/*
 * The thread's Lua frames after the native ones in s's record of size bytes (the native
 * frames end there); the record's new size. A record that carries Python frames, or a copy
 * of the stack (PROFILE_F_STACK: its words follow the frames), is left as it is.
 */
static __always_inline __u32 lua_append(struct scratch *s, __u32 size, int legacy)
{
	struct profile_event *e = &s->e;
	const struct lua_proc *p;
	struct lua_buf *b;
	__u32 zero = 0, at, n, k, o_ci;
	__u64 total;
	int torn = 0, cut = 0;

	/* legacy (5.2-5.7, the perf buffer programs): native only, ~19 KB less program in the
	 * agent (the walk is inlined in each program that sends) */
	if (legacy || !lua_enabled || (e->flags & (PROFILE_F_PYTHON | PROFILE_F_STACK)))
		return size;
	p = bpf_map_lookup_elem(&lua_procs, &e->tgid);
	if (!p) {
		lua_wake(e, legacy);
		return size;
	}
	b = bpf_map_lookup_elem(&lua_bufs, &zero);
	at = *(volatile __u16 *)&e->n_kernel + *(volatile __u16 *)&e->n_user;
	o_ci = p->ci_callstatus;
	if (!b || at > 2 * PROFILE_MAX_DEPTH || o_ci > LUA_CI_READ - 2 ||
	    p->ci_func > LUA_CI_READ - 8 || p->ci_previous > LUA_CI_READ - 8 ||
	    p->ci_savedpc > LUA_CI_READ - 8 || p->l_ci > LUA_STATE_READ - 8 ||
	    p->l_errorjmp > LUA_STATE_READ - 8)
		return size;
	/* past here the size is the record's counts' (py_append's reason) */
	if (!lua_running(p, b, e->user_sp, legacy)) {
		lua_count(LUA_C_NO_STATE, 1);
		return PROFILE_EVENT_HDR + at * 8;
	}
	b->k = 0;
	b->n = 0;
	b->cur = b->ci[0];
	b->base = b->l[0] + p->l_base_ci;
	for (int i = 0; i < LUA_STEPS; i++) {
		__u64 ci = *(volatile __u64 *)&b->cur, prev;
		__u16 status;

		n = *(volatile __u32 *)&b->n;
		if (ci == b->base) { /* this state's chain ended: its resumer's, if it runs */
			k = *(volatile __u32 *)&b->k + 1;
			if (k >= PROFILE_LUA_STATES || b->jmp[k & LUA_STATE_MASK] == ~0ull)
				break;
			b->k = k;
			b->cur = b->ci[k & LUA_STATE_MASK];
			b->base = b->l[k & LUA_STATE_MASK] + p->l_base_ci;
			continue;
		}
		if (i == LUA_STEPS - 1 || n >= PROFILE_LUA_FRAMES || at + n >= 2 * PROFILE_MAX_DEPTH) {
			cut = 1;
			break;
		}
		if (!ci || read_user(b->b, LUA_CI_READ, ci, legacy)) {
			torn = 1;
			break;
		}
		status = *(__u16 *)&b->b[o_ci & 62];
		prev = lua_word(b, p->ci_previous);
		if (!(status & LUA_CIST_C)) {
			if (!lua_frame(e, p, b, at + n, status, legacy)) {
				torn = 1;
				break;
			}
			b->n = n + 1;
		}
		if (prev == ci) {
			torn = 1;
			break;
		}
		b->cur = prev;
	}
	n = *(volatile __u32 *)&b->n;
	if (torn || cut || !n || n > PROFILE_LUA_FRAMES) {
		lua_count(cut ? LUA_C_TRUNCATED : LUA_C_TORN, torn || cut);
		return PROFILE_EVENT_HDR + at * 8;
	}
	/* the record's frames, in 64 bits: a 32-bit check left the register's upper half
	 * unknown to the verifier at the send */
	total = (__u64)at + n;
	if (total > 2 * PROFILE_MAX_DEPTH)
		return PROFILE_EVENT_HDR + at * 8;
	lua_count(LUA_C_SAMPLES, 1);
	lua_count(LUA_C_FRAMES, n);
	e->flags |= PROFILE_F_LUA | n << PROFILE_PY_SHIFT;
	return PROFILE_EVENT_HDR + total * 8;
}

#else
static __always_inline __u32 lua_append(struct scratch *s, __u32 size, int legacy)
{
	return size;
}
#endif /* CONFIG_BPF_LUA */

#endif /* EDGEPROF_BPF_LUA_BPF_H */
