/* SPDX-License-Identifier: MIT */
/*
 * bpf/python.bpf.h — CPython frames in the CPU samples (CONFIG_BPF_PYTHON), included by
 * profile.bpf.c after its helpers; py_append() is called on a sample's record just before it
 * is sent (after either walk of the native stack).
 *
 * A process the agent recognised as CPython has an entry in py_procs (bpf/pyproc.h): where
 * _PyRuntime is and the offsets of its version. The sampled thread's PyThreadState is the
 * GIL's holder when its native_thread_id is the task's tid (a CPU-bound thread holds the GIL),
 * else one of the interpreter's threads (threads.head, next: PY_THREADS at most). Its
 * cframe->current_frame starts the chain of _PyInterpreterFrame (previous), newest first; each
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

/* One frame's bytes (the BPF stack is the walkers' already). */
struct py_buf {
	__u8 b[PY_FRAME_READ];
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

	if (!read_user(&ts, sizeof(ts), p->runtime + p->rt_tstate_current, legacy) && ts &&
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

/* The field at off of a frame's bytes (off checked by the caller). */
static __always_inline __u64 py_word(const struct py_buf *b, __u32 off)
{
	__u64 v;

	__builtin_memcpy(&v, &b->b[off & 127], sizeof(v));
	return v;
}

/* A process not listed: its first sample wakes the reader if its comm says python. */
static __always_inline void py_wake(struct profile_event *e)
{
	__u8 one = 1;

	if (e->comm[0] != 'p' || e->comm[1] != 'y' || e->comm[2] != 't' || e->comm[3] != 'h' ||
	    e->comm[4] != 'o' || e->comm[5] != 'n' || bpf_map_lookup_elem(&py_woken, &e->tgid))
		return;
	bpf_map_update_elem(&py_woken, &e->tgid, &one, BPF_ANY);
	e->flags |= PROFILE_F_PY_WAKE;
}

/*
 * The thread's Python frames after the native ones in s's record of size bytes (the native
 * frames end there); the record's new size.
 */
static __always_inline __u32 py_append(struct scratch *s, __u32 size, int legacy)
{
	struct profile_event *e = &s->e;
	const struct py_proc *p;
	struct py_buf *b;
	__u32 zero = 0, at, n = 0, o_code, o_prev, o_instr, o_entry;
	__u64 ts, cframe = 0, frame = 0;

	if (!python_enabled || !size)
		return size;
	p = bpf_map_lookup_elem(&py_procs, &e->tgid);
	if (!p) {
		py_wake(e);
		return size;
	}
	b = bpf_map_lookup_elem(&py_bufs, &zero);
	at = (__u32)e->n_kernel + e->n_user;
	o_code = p->f_code;
	o_prev = p->f_previous;
	o_instr = p->f_prev_instr;
	o_entry = p->f_is_entry;
	if (!b || at > 2 * PROFILE_MAX_DEPTH || size != PROFILE_EVENT_HDR + at * 8 ||
	    o_code > PY_FRAME_READ - 8 || o_prev > PY_FRAME_READ - 8 ||
	    o_instr > PY_FRAME_READ - 8 || o_entry > PY_FRAME_READ - 1)
		return size;
	ts = py_thread(p, e->tid, legacy);
	if (!ts) {
		py_count(PY_C_NO_THREAD, 1);
		return size;
	}
	if (read_user(&cframe, sizeof(cframe), ts + p->ts_cframe, legacy) || !cframe ||
	    read_user(&frame, sizeof(frame), cframe + p->cf_current, legacy)) {
		py_count(PY_C_READ, 1);
		return size;
	}
	if (!frame) {
		py_count(PY_C_IDLE, 1);
		return size;
	}
	for (int i = 0; i < PROFILE_PY_FRAMES && frame; i++) {
		__u64 code, instr, prev, idx;

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
		e->frames[at + i] = (code & PY_REC_CODE_MASK) | (b->b[o_entry & 127] ? PY_REC_ENTRY : 0) |
				    idx << 48;
		n++;
		frame = prev == frame ? 0 : prev;
	}
	if (frame && n == PROFILE_PY_FRAMES)
		py_count(PY_C_TRUNCATED, 1);
	if (!n)
		return size;
	py_count(PY_C_SAMPLES, 1);
	py_count(PY_C_FRAMES, n);
	e->n_py = n;
	e->flags |= PROFILE_F_PYTHON;
	return size + n * 8;
}

#else
static __always_inline __u32 py_append(struct scratch *s, __u32 size, int legacy)
{
	return size;
}
#endif /* CONFIG_BPF_PYTHON */

#endif /* EDGEPROF_BPF_PYTHON_BPF_H */
