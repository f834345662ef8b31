/* SPDX-License-Identifier: MIT */
/*
 * bpf/pyproc.h — the contract between bpf/python.bpf.h (kernel side) and bpf/python.c (the
 * agent): where one CPython process keeps what the BPF program reads. The agent fills an
 * entry per process from the interpreter's version (a table of offsets, bpf/python.c) and
 * its symbols; the program knows no version, only these numbers. Plain fixed-width types.
 */
#ifndef EDGEPROF_BPF_PYPROC_H
#define EDGEPROF_BPF_PYPROC_H

struct py_proc {
	__u64 runtime;		  /* &_PyRuntime in the process */
	__u16 rt_tstate_current;  /* _PyRuntime.gilstate.tstate_current: the GIL's holder */
	__u16 rt_interp_head;	  /* _PyRuntime.interpreters.head */
	__u16 is_threads_head;	  /* PyInterpreterState.threads.head */
	__u16 ts_next;		  /* PyThreadState.next */
	__u16 ts_native_tid;	  /* PyThreadState.native_thread_id (the kernel's tid) */
	__u16 ts_cframe;	  /* PyThreadState.cframe */
	__u16 cf_current;	  /* _PyCFrame.current_frame */
	__u16 f_code;		  /* _PyInterpreterFrame.f_code */
	__u16 f_previous;	  /* _PyInterpreterFrame.previous */
	__u16 f_prev_instr;	  /* _PyInterpreterFrame.prev_instr */
	__u16 f_is_entry;	  /* _PyInterpreterFrame.is_entry (a byte) */
	__u16 code_adaptive;	  /* PyCodeObject.co_code_adaptive: the bytecode */
	__u8 ts_holds_frame;	  /* 3.13: ts_cframe is current_frame itself (no _PyCFrame) */
	__u8 entry_is_shim;	  /* 3.13: f_is_entry is the owner byte, and an activation ends
				   * at its entry shim (FRAME_OWNED_BY_CSTACK), not shown */
};

/*
 * A frame in the record: the code object (8-aligned) with bit 0 set on an entry frame (the
 * last one a C activation of the eval loop runs), and in bits 63..48 the instruction's index
 * plus one (code units from co_code_adaptive; 0: none, or beyond 65534). 3.13's entry shim is
 * PY_REC_ENTRY alone (no code object): the end of the activation before it.
 */
#define PY_REC_ENTRY 1ull
#define PY_REC_CODE_MASK 0xfffffffffff8ull

/* Bytes of a frame read at once: every field above lies in them (3.11: 69, 3.13: 71). */
#define PY_FRAME_READ 80

/* Threads of a process searched for the sampled one when another holds the GIL. */
#define PY_THREADS 32

/* The counters (py_counts, per CPU). */
#define PY_C_SAMPLES   0 /* samples of a listed process with Python frames */
#define PY_C_FRAMES    1 /* frames recorded */
#define PY_C_NO_THREAD 2 /* the sampled thread's state not found (not a Python thread) */
#define PY_C_IDLE      3 /* a thread state with no frame running */
#define PY_C_TRUNCATED 4 /* chains cut at CONFIG_BPF_PYTHON_FRAMES */
#define PY_C_READ      5 /* a read of the interpreter's memory failed */
#define PY_C_N         6

#endif /* EDGEPROF_BPF_PYPROC_H */
