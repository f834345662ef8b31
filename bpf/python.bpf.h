/* SPDX-License-Identifier: MIT */
/*
 * bpf/python.bpf.h — CPython frames in the CPU samples (CONFIG_BPF_PYTHON), included by
 * profile.bpf.c after its helpers; py_append() is called on a sample's record just before it
 * is sent (after either walk of the native stack).
 *
 * A process the agent recognised as CPython has an entry in py_procs (bpf/pyproc.h): where
 * _PyRuntime is and the offsets of its version. The sampled thread's PyThreadState is the
 * GIL's holder when its native_thread_id is the task's tid (a CPU-bound thread holds the GIL),
 * else one of the interpreter's threads (threads.head, next: PY_THREADS at most; 3.13: these
 * alone). Its cframe->current_frame (3.13: its current_frame) starts the chain of
 * _PyInterpreterFrame (previous), newest first; each
 * frame goes into the record as its code object, the instruction's index and the entry mark
 * (PY_REC_*), CONFIG_BPF_PYTHON_FRAMES at most (counted when cut). No BTF: the offsets are
 * the agent's. Names, files and lines are the agent's work (agent/core/pyname.h), from the
 * code objects, as is the splice among the native frames (bpf/python.h).
 */
#ifndef EDGEPROF_BPF_PYTHON_BPF_H
#define EDGEPROF_BPF_PYTHON_BPF_H

#ifdef CONFIG_BPF_PYTHON
#include "bpf/pyproc.h"

/* 1: look the sampled process up in py_procs (sampler.c, with CONFIG_BPF_PYTHON) */
const volatile __u8 python_enabled;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64); /* CONFIG_BPF_PYTHON_PROCS, set before load */
	__type(key, __u32);
	__type(value, struct py_proc);
} py_procs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PY_C_N);
	__type(key, __u32);
	__type(value, __u64);
} py_counts SEC(".maps");

/*
 * Processes named python* not listed (yet) whose first sample woke the reader, so that it
 * looks at them at once: a short-lived one is listed within its first samples, not after
 * the reader's next timeout (a second). An LRU: the oldest are forgotten (woken again).
 */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u8);
} py_woken SEC(".maps");

/*
 * One frame's bytes (the BPF stack is the walkers' already): PY_FRAME_READ read, room for 128
 * so that a mask bounds an index for the verifier.
 */
struct py_buf {
	union {
		__u64 w[16];
		__u8 b[128];
	};
	__u32 n; /* frames put in so far */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct py_buf);
} py_bufs SEC(".maps");

static __always_inline void py_count(__u32 k, __u64 n)
{
	__u64 *c = bpf_map_lookup_elem(&py_counts, &k);

	if (c)
		*c += n;
}

/* The PyThreadState of tid in the process of p, or 0. */
static __always_inline __u64 py_thread(const struct py_proc *p, __u32 tid, int legacy)
{
	__u64 ts = 0, interp = 0;
	__u32 id = 0;

	/* 3.13 keeps no GIL holder in _PyRuntime (rt_tstate_current 0): the list alone */
	if (p->rt_tstate_current &&
	    !read_user(&ts, sizeof(ts), p->runtime + p->rt_tstate_current, legacy) && ts &&
	    !read_user(&id, sizeof(id), ts + p->ts_native_tid, legacy) && id == tid)
		return ts;
	/* another thread holds the GIL (this one runs C code, or waits for it) */
	if (read_user(&interp, sizeof(interp), p->runtime + p->rt_interp_head, legacy) || !interp ||
	    read_user(&ts, sizeof(ts), interp + p->is_threads_head, legacy))
		return 0;
	for (int i = 0; i < PY_THREADS && ts; i++) {
		if (read_user(&id, sizeof(id), ts + p->ts_native_tid, legacy))
			return 0;
		if (id == tid)
			return ts;
		if (read_user(&ts, sizeof(ts), ts + p->ts_next, legacy))
			return 0;
	}
	return 0;
}

/*
 * The pointer field at byte off of a frame (8-aligned, checked by the caller): one load, where
 * a copy from a variable offset is eight (the loop below is verified once per frame).
 */
static __always_inline __u64 py_word(const struct py_buf *b, __u32 off)
{
	return b->w[(off >> 3) & 15];
}

/*
 * A process not listed: its first sample wakes the reader if its comm says python, through
 * the wake-up the walk by tables already rate-limits (wake_rate(): pending, sent with this or
 * the next record). Not through the send's arguments: a wake-up that is not a constant there
 * made clang lay the sending code out again for it. Without CONFIG_BPF_CFI the reader finds
 * the process at its next poll (a second at most).
 */
static __always_inline void py_wake(struct profile_event *e, int legacy)
{
	struct new_proc_wake *w;
	__u32 zero = 0;
	__u8 one = 1;

	if (legacy || !cfi_enabled || e->comm[0] != 'p' || e->comm[1] != 'y' || e->comm[2] != 't' ||
	    e->comm[3] != 'h' || e->comm[4] != 'o' || e->comm[5] != 'n' ||
	    bpf_map_lookup_elem(&py_woken, &e->tgid))
		return;
	bpf_map_update_elem(&py_woken, &e->tgid, &one, BPF_ANY);
	w = bpf_map_lookup_elem(&wake, &zero);
	if (w)
		w->pending = 1;
}

/*
 * The thread's Python frames after the native ones in s's record of size bytes (the native
 * frames end there); the record's new size. Past the first checks, the size is computed from
 * the record's counts, not from size: the walkers return it from many places, each a state
 * the verifier would take through the loops below (220 000 instructions in cfi_walk).
 */
static __always_inline __u32 py_append(struct scratch *s, __u32 size, int legacy)
{
	struct profile_event *e = &s->e;
	const struct py_proc *p;
	struct py_buf *b;
	__u32 zero = 0, at, n = 0, o_code, o_prev, o_instr, o_entry, shim_marks;
	__u64 ts, cframe = 0, frame = 0;

	if (!python_enabled)
		return size;
	at = *(volatile __u16 *)&e->n_kernel + *(volatile __u16 *)&e->n_user;
	if (at > 2 * PROFILE_MAX_DEPTH)
		return size;
	p = bpf_map_lookup_elem(&py_procs, &e->tgid);
	if (!p) {
		py_wake(e, legacy); /* (perf buffers: no wake map, a wake-up per record anyway) */
		return PROFILE_EVENT_HDR + at * 8;
	}
	b = bpf_map_lookup_elem(&py_bufs, &zero);
	o_code = p->f_code;
	o_prev = p->f_previous;
	o_instr = p->f_prev_instr;
	o_entry = p->f_is_entry;
	shim_marks = p->entry_is_shim;
	if (!b || ((o_code | o_prev | o_instr) & 7) ||
	    o_code > PY_FRAME_READ - 8 || o_prev > PY_FRAME_READ - 8 ||
	    o_instr > PY_FRAME_READ - 8 || o_entry > PY_FRAME_READ - 1)
		return PROFILE_EVENT_HDR + at * 8;
	ts = py_thread(p, e->tid, legacy);
	if (!ts) {
		py_count(PY_C_NO_THREAD, 1);
		return PROFILE_EVENT_HDR + at * 8;
	}
	if (read_user(&cframe, sizeof(cframe), ts + p->ts_cframe, legacy)) {
		py_count(PY_C_READ, 1);
		return PROFILE_EVENT_HDR + at * 8;
	}
	frame = cframe; /* 3.13: the thread state's current_frame itself */
	if (!p->ts_holds_frame &&
	    (!cframe || read_user(&frame, sizeof(frame), cframe + p->cf_current, legacy))) {
		py_count(PY_C_READ, 1);
		return PROFILE_EVENT_HDR + at * 8;
	}
	if (!frame) {
		py_count(PY_C_IDLE, 1);
		return PROFILE_EVENT_HDR + at * 8;
	}
	/*
	 * The count goes through memory (a volatile load after the loop): the verifier then
	 * checks what follows once, not once per chain length (the sending code after it was
	 * verified 32 times: 240 000 instructions more).
	 */
	b->n = 0;
	for (int i = 0; i < PROFILE_PY_FRAMES && frame; i++) {
		__u64 code, instr, prev, idx;
		__u8 mark;

		if (at + i >= 2 * PROFILE_MAX_DEPTH) { /* the native frames left no more room */
			py_count(PY_C_TRUNCATED, 1);
			break;
		}
		if (read_user(b->b, PY_FRAME_READ, frame, legacy)) {
			py_count(PY_C_READ, 1);
			break;
		}
		code = py_word(b, o_code);
		instr = py_word(b, o_instr);
		prev = py_word(b, o_prev);
		/* code units from the bytecode's start, plus one (a new frame's is at -1) */
		idx = (instr - (code + p->code_adaptive)) / 2 + 1;
		if (instr < code + p->code_adaptive - 2 || idx > 0xffff)
			idx = 0;
		mark = b->b[o_entry & 127];
		if (shim_marks) /* 3.13: the owner byte; the shim ends the activation before it */
			e->frames[at + i] = mark == 3 ? PY_REC_ENTRY : (code & PY_REC_CODE_MASK) | idx << 48;
		else
			e->frames[at + i] = (code & PY_REC_CODE_MASK) | (mark ? PY_REC_ENTRY : 0) |
					    idx << 48;
		b->n = i + 1;
		frame = prev == frame ? 0 : prev;
		if (frame && i == PROFILE_PY_FRAMES - 1)
			py_count(PY_C_TRUNCATED, 1);
	}
	n = *(volatile __u32 *)&b->n;
	if (!n || n > PROFILE_PY_FRAMES)
		return PROFILE_EVENT_HDR + at * 8;
	py_count(PY_C_SAMPLES, 1);
	py_count(PY_C_FRAMES, n);
	e->flags |= PROFILE_F_PYTHON | n << PROFILE_PY_SHIFT;
	return PROFILE_EVENT_HDR + (at + n) * 8;
}

#else
static __always_inline __u32 py_append(struct scratch *s, __u32 size, int legacy)
{
	return size;
}
#endif /* CONFIG_BPF_PYTHON */

#endif /* EDGEPROF_BPF_PYTHON_BPF_H */
