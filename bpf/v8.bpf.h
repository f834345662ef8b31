/* SPDX-License-Identifier: MIT */
/*
 * bpf/v8.bpf.h — Node.js (V8) JavaScript frames in the CPU samples (CONFIG_BPF_V8), included
 * by profile.bpf.c after its helpers; v8_append() runs on a sample's record just before it is
 * sent, after py_append() (a process is one or the other).
 *
 * A process the agent recognised as V8 has an entry in v8_procs (bpf/v8proc.h). V8 keeps a
 * frame pointer in all the code it generates (JIT code, the builtins, the interpreter's
 * trampoline), so the sampled thread's JavaScript frames are on the frame-pointer chain from
 * the sampled registers. Each frame's window (bpf/v8proc.h) tells a JavaScript frame (a Context
 * in its context slot, a JSFunction in its function slot: a tagged pointer whose Map's
 * instance type is in the JSFunction range, whose shared slot holds a tagged pointer to a
 * SharedFunctionInfo) from a stub's (a Smi frame-type marker) or a native one; a JavaScript
 * frame goes into the record as its pc and its SharedFunctionInfo (and bytecode offset when
 * interpreted), CONFIG_BPF_V8_FRAMES at most (counted when cut). The chain ends where a
 * caller's frame pointer is not above its callee's, or at a read that fails: the C++ frames
 * of Debian's node keep no frame pointer, so the walk sees the JavaScript frames from the
 * sampled one down to the first entry from C++ (a script's own frames; the ones of node's
 * start-up under it stay native). Names are the agent's work (agent/core/v8name.h), as is
 * the splice among the native frames (bpf/v8.h).
 */
#ifndef EDGEPROF_BPF_V8_BPF_H
#define EDGEPROF_BPF_V8_BPF_H

#ifdef CONFIG_BPF_V8
#include "bpf/v8proc.h"

/* 1: look the sampled process up in v8_procs (sampler.c, with CONFIG_BPF_V8) */
const volatile __u8 v8_enabled;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64); /* CONFIG_BPF_V8_PROCS, set before load */
	__type(key, __u32);
	__type(value, struct v8_proc);
} v8_procs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, V8_C_N);
	__type(key, __u32);
	__type(value, __u64);
} v8_counts SEC(".maps");

/*
 * Maps seen lately on this CPU and their instance types, V8_MAP_CACHE by the map's address:
 * a JSFunction's Map is shared by all functions of its kind and every SharedFunctionInfo has
 * the same one, so most frames' two type reads are not made (the walk's per-frame reads go
 * from six to four). Keyed by process too (each has its own heap). A Map whose address V8's
 * compaction gave to a Map of another type since would pass a wrong type here: both checks
 * (JSFunction, then its SharedFunctionInfo) would have to pass for a wrong frame to be kept.
 */
#define V8_MAP_CACHE 8
struct v8_buf {
	__u64 w[V8_WIN_WORDS];
	struct cfi_state regs;
	__u64 map[V8_MAP_CACHE];
	__u32 map_tgid[V8_MAP_CACHE];
	__u16 map_type[V8_MAP_CACHE];
	__u32 n; /* words put in so far */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct v8_buf);
} v8_bufs SEC(".maps");

static __always_inline void v8_count(__u32 k, __u64 n)
{
	__u64 *c = bpf_map_lookup_elem(&v8_counts, &k);

	if (c)
		*c += n;
}

/* The instance type of the object a tagged pointer points at in process tgid, or 0. */
static __always_inline __u16 v8_type_of(const struct v8_proc *p, struct v8_buf *b, __u32 tgid,
					__u64 tagged, int legacy)
{
	__u64 map = 0;
	__u16 type = 0;
	__u32 k;

	if ((tagged & 3) != 1 || read_user(&map, sizeof(map), tagged - 1 + p->off_map, legacy) ||
	    (map & 3) != 1)
		return 0;
	k = (map >> 3) & (V8_MAP_CACHE - 1);
	if (b->map[k] == map && b->map_tgid[k] == tgid)
		return b->map_type[k];
	if (read_user(&type, sizeof(type), map - 1 + p->off_instance_type, legacy))
		return 0;
	b->map[k] = map;
	b->map_tgid[k] = tgid;
	b->map_type[k] = type;
	return type;
}

/*
 * The SharedFunctionInfo (tagged) of the JavaScript frame whose window is b->w, or 0: a stub's
 * frame, a native one, or anything that does not check out.
 */
static __always_inline __u64 v8_frame_sfi(const struct v8_proc *p, struct v8_buf *b,
					  __u32 tgid, int legacy)
{
	__u64 context = b->w[p->slot_context & (V8_WIN_WORDS - 1)];
	__u64 fn = b->w[p->slot_function & (V8_WIN_WORDS - 1)], sfi = 0;
	__u16 type;

	if ((context & 1) != 1) /* a Smi: the frame-type marker of a stub or entry frame */
		return 0;
	type = v8_type_of(p, b, tgid, fn, legacy);
	if (type < p->type_jsfunction_first || type > p->type_jsfunction_last)
		return 0;
	if (read_user(&sfi, sizeof(sfi), fn - 1 + p->off_shared, legacy) ||
	    v8_type_of(p, b, tgid, sfi, legacy) != p->type_sfi)
		return 0;
	return sfi;
}

/*
 * The thread's JavaScript frames after the native ones in s's record of size bytes; the
 * record's new size. As py_append(), the size is computed from the record's counts past the
 * first checks, and the count goes through memory (a volatile load after the loop), so the
 * verifier checks what follows once, not once per chain length.
 */
static __always_inline __u32 v8_append(struct bpf_perf_event_data *ctx, struct scratch *s,
				       __u32 size, int legacy)
{
	struct profile_event *e = &s->e;
	const struct v8_proc *p;
	struct v8_buf *b;
	__u32 zero = 0, at, n;
	__u64 fp, pc;

	if (!v8_enabled || (e->flags & (PROFILE_F_PYTHON | PROFILE_F_LUA)))
		return size;
	at = *(volatile __u16 *)&e->n_kernel + *(volatile __u16 *)&e->n_user;
	if (at > 2 * PROFILE_MAX_DEPTH)
		return size;
	p = bpf_map_lookup_elem(&v8_procs, &e->tgid);
	if (!p)
		return size;
	b = bpf_map_lookup_elem(&v8_bufs, &zero);
	if (!b || !cfi_regs(ctx, &b->regs, legacy)) {
		v8_count(V8_C_NONE, 1);
		return PROFILE_EVENT_HDR + at * 8;
	}
	fp = b->regs.fp;
	pc = b->regs.pc;
	b->n = 0;
	for (int i = 0; i < PROFILE_V8_FRAMES; i++) {
		__u64 idx = (__u64)at + *(volatile __u32 *)&b->n; /* where this frame goes */
		__u64 sfi, bco, off1, next;

		if ((fp & 7) || read_user(b->w, sizeof(b->w), fp - V8_WIN_BELOW, legacy)) {
			if (i == 0)
				v8_count(V8_C_READ, 1);
			break;
		}
		sfi = v8_frame_sfi(p, b, e->tgid, legacy);
		if (sfi) {
			if (idx > 2 * PROFILE_MAX_DEPTH - 2) { /* the native frames left no room */
				v8_count(V8_C_TRUNCATED, 1);
				break;
			}
			/* interpreted: the bytecode offset, a Smi (its value in the high half) */
			bco = b->w[p->slot_bytecode_offset & (V8_WIN_WORDS - 1)];
			off1 = (bco & 1) ? 0 : (bco >> 32) + 1;
			if (off1 > 0xffff)
				off1 = 0;
			e->frames[idx] = pc;
			e->frames[idx + 1] = ((sfi - 1) & V8_REC_SFI_MASK) |
					     (off1 ? V8_REC_INTERPRETED : 0) | off1 << 48;
			b->n = idx + 2 - at;
		}
		next = b->w[V8_WIN_FP];
		pc = b->w[V8_WIN_RA];
		if (next <= fp || next - fp > V8_MAX_FRAME_BYTES)
			break;
		fp = next;
		if (i == PROFILE_V8_FRAMES - 1)
			v8_count(V8_C_TRUNCATED, 1);
	}
	n = *(volatile __u32 *)&b->n;
	if (!n || n > 2 * PROFILE_V8_FRAMES) {
		v8_count(V8_C_NONE, 1);
		return PROFILE_EVENT_HDR + at * 8;
	}
	v8_count(V8_C_SAMPLES, 1);
	v8_count(V8_C_FRAMES, n / 2);
	e->flags |= PROFILE_F_V8 | n << PROFILE_PY_SHIFT;
	return PROFILE_EVENT_HDR + (at + n) * 8;
}

#else
static __always_inline __u32 v8_append(struct bpf_perf_event_data *ctx, struct scratch *s,
				       __u32 size, int legacy)
{
	return size;
}
#endif /* CONFIG_BPF_V8 */

#endif /* EDGEPROF_BPF_V8_BPF_H */
