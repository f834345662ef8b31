// SPDX-License-Identifier: MIT
/* agent/lib/pyframes.c — see pyframes.h. */
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "agent/core/pydebug.h"
#include "agent/core/pyname.h"
#include "agent/lib/pyframes.h"
#include "agent/lib/selfread.h"
#include "agent/lib/unwind.h"

/*
 * Where the thread state and the frame chain are, per version and ABI (ptr: the pointer size;
 * the library reads its own process, so the build's picks). 3.11: Include/internal/
 * pycore_frame.h, pycore_runtime.h, cpython/pystate.h; offsetof() compiled by
 * tests/offsets/py311.c against Debian 12's python3.11-dev headers, LP64 with gcc (x86_64, the
 * same as read with ctypes on aarch64), ILP32 with arm-linux-gnueabihf-gcc against the armhf
 * libpython3.11-dev's pyconfig.h, run under qemu-arm.
 */
struct pyframe_layout {
	unsigned int minor, ptr;
	uint16_t tss_init, tss_key;		/* _PyRuntime.gilstate.autoTSSkey (Py_tss_t) */
	uint16_t tstate_cframe, cframe_current; /* tstate->cframe->current_frame */
	uint16_t f_code, f_previous, f_prev_instr, f_is_entry, f_size; /* _PyInterpreterFrame */
	uint16_t code_adaptive; /* PyCodeObject.co_code_adaptive: the bytecode */
	uint16_t tstate_chunk, tstate_limit; /* tstate->datastack_chunk, datastack_limit */
	uint16_t tstate_thread_id;	     /* tstate->thread_id: pthread_self() of its thread */
	/* 3.13+ (debug_layout()): the thread state found in the interpreters' lists,
	 * tstate_cframe is tstate->current_frame itself, an activation ends at its entry shim */
	bool debug;
	uint16_t f_owner, rt_interp_head, interp_next, interp_threads, tstate_next;
};

#define FRAME_OWNED_BY_CSTACK 3 /* 3.12+: the eval loop's entry shim (pycore_frame.h) */
/* Thread states looked at per sample (3.13+: the lists are walked); more: natively, counted
 * as a mismatch. */
#define THREADS_WALKED 256

static const struct pyframe_layout frame_layouts[] = {
    {.minor = 11, .ptr = 8, .tss_init = 592, .tss_key = 596, .tstate_cframe = 56,
     .cframe_current = 8,
     .f_code = 32, .f_previous = 48, .f_prev_instr = 56, .f_is_entry = 68, .f_size = 72,
     .code_adaptive = 184,
     /* read with ctypes from PyThreadState_Get(): the chunk is page-aligned, its limit
      * 16 KiB above it, datastack_top between them */
     .tstate_chunk = 296, .tstate_limit = 312, .tstate_thread_id = 152},
    /* armhf: glibc's pthread_mutex_t is 24 bytes, so autoTSSkey is at 372 (checked by its
     * thread_id, and searched for when not: thread_state()) */
    {.minor = 11, .ptr = 4, .tss_init = 372, .tss_key = 376, .tstate_cframe = 40,
     .cframe_current = 4, .f_code = 16, .f_previous = 24, .f_prev_instr = 28, .f_is_entry = 36,
     .f_size = 40, .code_adaptive = 116, .tstate_chunk = 172, .tstate_limit = 180,
     .tstate_thread_id = 88},
};

/* 3.13+: filled at start from the interpreter's own _Py_DebugOffsets */
static struct pyframe_layout from_debug;

static struct {
	const struct pyframe_layout *l;
	const char *runtime;
	uintptr_t eval_lo, eval_hi;
	uintptr_t data_lo, data_hi; /* the load segment holding _PyRuntime (3.11: the main
				     * thread's state too): the module's, mapped while it runs */
	unsigned int tss;	    /* autoTSSkey's offset in _PyRuntime (found: tss_found) */
	bool tss_found;
	struct pyframes_stats st;
} py;

#define EP_TLS __thread __attribute__((tls_model("initial-exec")))
static EP_TLS uint64_t spliced[CONFIG_MAX_STACK_DEPTH];

static const struct pyframe_layout *frame_layout(unsigned int minor)
{
	if (!pycode__layout(minor))
		return NULL;
	for (size_t i = 0; i < sizeof(frame_layouts) / sizeof(frame_layouts[0]); i++)
		if (frame_layouts[i].minor == minor && frame_layouts[i].ptr == sizeof(void *))
			return &frame_layouts[i];
	return NULL;
}

/*
 * 3.13's layout from its _Py_DebugOffsets at the start of _PyRuntime (agent/core/pydebug.h),
 * NULL when refused (py.st.debug_offsets: why). datastack_limit follows datastack_chunk and
 * datastack_top (cpython/pystate.h); the chunks found there are checked (vouch_chunks).
 */
static const struct pyframe_layout *debug_layout(void)
{
	struct pydebug_offsets d;

	py.st.debug_offsets = pydebug__parse(py.runtime, PYDEBUG_BYTES, &d);
	if (py.st.debug_offsets)
		return NULL;
	from_debug = (struct pyframe_layout){
	    .minor = d.minor, .debug = true, .tstate_cframe = d.tstate_current_frame,
	    .f_code = d.f_executable, .f_previous = d.f_previous, .f_prev_instr = d.f_instr_ptr,
	    .f_owner = d.f_owner, .f_size = d.f_size, .code_adaptive = d.code_adaptive,
	    .tstate_chunk = d.tstate_datastack_chunk,
	    .tstate_limit = d.tstate_datastack_chunk + 2 * sizeof(void *),
	    .tstate_thread_id = d.tstate_thread_id, .rt_interp_head = d.rt_interpreters_head,
	    .interp_next = d.interp_next, .interp_threads = d.interp_threads_head,
	    .tstate_next = d.tstate_next};
	py.st.debug_offsets = 1;
	return &from_debug;
}

/* The layout of the interpreter whose _PyRuntime is py.runtime: 3.13+ its own, else the table. */
static const struct pyframe_layout *runtime_layout(unsigned int minor)
{
	if (minor < 13)
		return frame_layout(minor);
	return from_debug.debug ? &from_debug : debug_layout();
}

struct segment_find {
	uintptr_t addr, lo, hi;
};

static int find_segment(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct segment_find *f = arg;

	(void)size;
	for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *p = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + p->p_vaddr;

		if (p->p_type == PT_LOAD && f->addr >= lo && f->addr < lo + p->p_memsz) {
			f->lo = lo;
			f->hi = lo + p->p_memsz;
			return 1;
		}
	}
	return 0;
}

void pyframes__init(void)
{
	struct segment_find seg = {0};
	const unsigned long *version = dlsym(RTLD_DEFAULT, "Py_Version");
	void *eval = dlsym(RTLD_DEFAULT, "_PyEval_EvalFrameDefault");
	const char *off = getenv("EDGEPROF_PYTHON");
	const ElfW(Sym) *sym = NULL;
	Dl_info info;

	py.l = NULL;
	py.st.on = false;
	if (!version || !eval) /* not a Python process, or one before 3.11 (no Py_Version) */
		return;
	py.st.minor = (unsigned int)(*version >> 16 & 0xff);
	if (off && !strcmp(off, "0")) /* the native walk alone (the cost's baseline) */
		return;
	py.runtime = dlsym(RTLD_DEFAULT, "_PyRuntime");
	if ((*version >> 24) != 3 || !py.runtime || !runtime_layout(py.st.minor) ||
	    !dladdr1(eval, &info, (void **)&sym, RTLD_DL_SYMENT) || !sym || !sym->st_size) {
		py.st.unknown_version++;
		return;
	}
	seg.addr = (uintptr_t)py.runtime;
	dl_iterate_phdr(find_segment, &seg);
	py.data_lo = seg.lo;
	py.data_hi = seg.hi;
	/* armv7: a Thumb function's address has bit 0 set, its code starts below it */
	py.eval_lo = (uintptr_t)eval & ~(uintptr_t)IS_ENABLED(CONFIG_ARCH_ARM);
	py.eval_hi = py.eval_lo + sym->st_size;
	/* armv7: the eval loop (~48 KiB) is beyond the code readings' budget: the native walk
	 * reads its frame from its prologue */
	unwind__arm_body(py.eval_lo, py.eval_hi);
	py.l = runtime_layout(py.st.minor);
	py.tss = py.l->tss_init;
	py.st.on = true;
}

/* Frames are read through a window (agent/lib/selfread.h): 3.11 pushes a thread's frames one
 * after another on its data stack, so the callers of a frame are below it, ~100-200 bytes each:
 * one read covers a chain of ~20. */
static EP_TLS struct selfread_window window;

static bool peek(uintptr_t addr, void *buf, size_t len)
{
	return selfread__peek(addr, buf, len, &py.st.read_errors);
}

static bool fetch(uintptr_t addr, void *out, size_t len)
{
	return selfread__fetch(&window, addr, out, len, &py.st.read_errors);
}

/*
 * The thread's data stack chunks, where its frames are (mmap'd: process_vm_readv's cost on
 * every sample): tstate->datastack_chunk and the chunks it links (previous, at offset 0; size
 * at 8). A chunk is mapped before it is linked and unlinked before it is unmapped, both by
 * this thread alone, which is interrupted: so the linked chunks stay mapped while the handler
 * runs, and are read directly (selfread__vouch). At most 4, of at most 64 MiB each.
 */
#define CHUNKS 4
#define CHUNK_MAX (64u << 20)
static void vouch_chunks(uintptr_t tstate)
{
	uintptr_t chunk, limit, head[2];

	if (!peek(tstate + py.l->tstate_chunk, &chunk, sizeof(chunk)) ||
	    !peek(tstate + py.l->tstate_limit, &limit, sizeof(limit)) || limit <= chunk ||
	    limit - chunk > CHUNK_MAX || !selfread__vouch(chunk, limit))
		return;
	for (int i = 1; i < CHUNKS; i++) {
		memcpy(head, (const void *)chunk, sizeof(head)); /* vouched just now */
		chunk = head[0];
		if (!chunk || !selfread__vouch(chunk, chunk + sizeof(head)) ||
		    !peek(chunk + sizeof(head[0]), &head[1], sizeof(head[1])) ||
		    head[1] < sizeof(head) || head[1] > CHUNK_MAX ||
		    !selfread__vouch(chunk, chunk + head[1]))
			return;
	}
}

/* This thread's state by the Py_tss_t at off in _PyRuntime ({int initialized; key}), if its
 * thread_id is this thread's; 0 otherwise. */
static uintptr_t tstate_at(unsigned int off)
{
	int init;
	unsigned int key;
	uintptr_t tstate;
	unsigned long id;

	/* _PyRuntime is the program's own data: always mapped, read directly */
	memcpy(&init, py.runtime + off, sizeof(init));
	memcpy(&key, py.runtime + off + sizeof(init), sizeof(key));
	if (init != 1 || key >= 1024)
		return 0;
	tstate = (uintptr_t)pthread_getspecific((pthread_key_t)key);
	if (!tstate || !peek(tstate + py.l->tstate_thread_id, &id, sizeof(id)) ||
	    id != (unsigned long)pthread_self())
		return 0;
	return tstate;
}

/*
 * The thread's PyThreadState. _PyRuntime's layout differs between architectures (its locks are
 * glibc's pthread_mutex_t: 40 bytes on x86_64, 48 on arm64), so the table's autoTSSkey offset
 * is checked (the state's thread_id must be this thread) and, when wrong, found: the Py_tss_t
 * in _PyRuntime's first KiB whose key gives this thread's state. At most 8 searches per process
 * (counted); none found: natively, counted as a mismatch.
 */
static uintptr_t thread_state(void)
{
	uintptr_t tstate = tstate_at(__atomic_load_n(&py.tss, __ATOMIC_RELAXED));

	if (tstate || __atomic_load_n(&py.tss_found, __ATOMIC_RELAXED))
		return tstate;
	if (__atomic_fetch_add(&py.st.tss_searches, 1, __ATOMIC_RELAXED) < 8)
		for (unsigned int off = 0; off + 8 <= 1024; off += 4)
			if ((tstate = tstate_at(off))) {
				__atomic_store_n(&py.tss, off, __ATOMIC_RELAXED);
				__atomic_store_n(&py.tss_found, true, __ATOMIC_RELAXED);
				return tstate;
			}
	__atomic_fetch_add(&py.st.mismatch, 1, __ATOMIC_RELAXED);
	return 0;
}

/*
 * 3.13+: this thread's state, found in the interpreters' lists of thread states (heads and
 * links from _Py_DebugOffsets) by its thread_id; the main interpreter and its first thread
 * are in _PyRuntime. At most THREADS_WALKED; not found: 0, counted as a mismatch.
 */
static uintptr_t thread_state_listed(void)
{
	const struct pyframe_layout *l = py.l;
	unsigned long self = (unsigned long)pthread_self(), id;
	unsigned int walked = 0;
	uintptr_t interp, tstate;

	if (!peek((uintptr_t)py.runtime + l->rt_interp_head, &interp, sizeof(interp)))
		return 0;
	while (interp && walked < THREADS_WALKED) {
		if (!peek(interp + l->interp_threads, &tstate, sizeof(tstate)))
			return 0;
		while (tstate && walked++ < THREADS_WALKED) {
			if (!peek(tstate + l->tstate_thread_id, &id, sizeof(id)))
				return 0;
			if (id == self)
				return tstate;
			if (!peek(tstate + l->tstate_next, &tstate, sizeof(tstate)))
				return 0;
		}
		if (!peek(interp + l->interp_next, &interp, sizeof(interp)))
			return 0;
	}
	__atomic_fetch_add(&py.st.mismatch, 1, __ATOMIC_RELAXED);
	return 0;
}

/* The newest interpreter frame of this thread, or 0. */
static uintptr_t current_frame(void)
{
	const struct pyframe_layout *l = py.l;
	uintptr_t tstate, cframe = 0, frame = 0;

	if (py.data_hi)
		selfread__vouch(py.data_lo, py.data_hi);
	tstate = l->debug ? thread_state_listed() : thread_state();
	if (tstate)
		vouch_chunks(tstate);
	if (!tstate || !peek(tstate + l->tstate_cframe, &cframe, sizeof(cframe)))
		return 0;
	if (l->debug) /* 3.13: no _PyCFrame, the thread state holds the frame */
		return cframe;
	if (!peek(cframe + l->cframe_current, &frame, sizeof(frame)))
		return 0;
	return frame;
}

/*
 * The code unit a frame executes plus one (pyname.h), from prev_instr: 0 before its first
 * (prev_instr is then the unit before the bytecode), PYFRAME_UNIT_FAR past the word's field
 * or anywhere else (a torn frame: its line is then the first). 3.13's instr_ptr points at the
 * unit executing, as 3.11's prev_instr does once started: the same arithmetic (a 3.13 frame
 * not started yet points at its first unit, whose line is the first line too).
 */
static unsigned int frame_unit1(uintptr_t code, uintptr_t prev_instr)
{
	uintptr_t start = code + py.l->code_adaptive - 2;

	if (prev_instr < start || (prev_instr - start) & 1)
		return PYFRAME_UNIT_FAR;
	return (prev_instr - start) / 2 < PYFRAME_UNIT_FAR ? (prev_instr - start) / 2
							 : PYFRAME_UNIT_FAR;
}

/* The Python frames one eval activation runs, from *frame down to its entry frame, into out. */
static unsigned int push_activation(uintptr_t *frame, uint64_t *out, unsigned int room,
				    bool *cut)
{
	const struct pyframe_layout *l = py.l;
	unsigned char f[128]; /* a frame's header: 3.11's 72 bytes, pydebug.c's bound */
	unsigned int n = 0;

	while (*frame) {
		uintptr_t code, prev, instr;

		if (n == room) {
			*cut = true;
			break;
		}
		if (!fetch(*frame, f, l->f_size)) {
			*frame = 0;
			break;
		}
		memcpy(&code, f + l->f_code, sizeof(code));
		memcpy(&prev, f + l->f_previous, sizeof(prev));
		memcpy(&instr, f + l->f_prev_instr, sizeof(instr));
		if (l->debug && f[l->f_owner] == FRAME_OWNED_BY_CSTACK) {
			/* 3.13: the entry shim (f_executable is None) ends the activation */
			*frame = prev == *frame ? 0 : prev;
			break;
		}
		out[n++] = pyframe__tag(code, frame_unit1(code, instr));
		*frame = prev == *frame ? 0 : prev; /* a cycle ends the chain */
		if (!l->debug && f[l->f_is_entry])
			break;
	}
	return n;
}

/* The thread's chain, found at the first eval activation of a sample (pyframes_next_fn). */
struct chain {
	uintptr_t frame;
	bool started;
};

static unsigned int next_activation(void *ctx, uint64_t *out, unsigned int room, bool *cut)
{
	struct chain *c = ctx;

	if (!c->started) {
		c->started = true;
		c->frame = current_frame();
		if (!c->frame)
			__atomic_fetch_add(&py.st.no_state, 1, __ATOMIC_RELAXED);
	}
	return c->frame ? push_activation(&c->frame, out, room, cut) : 0;
}

unsigned int pyframes__splice(uint64_t *frames, unsigned int n, unsigned int max,
			      bool *truncated)
{
	struct chain c = {0, false};
	const struct pysplice sp = {.eval_lo = py.eval_lo, .eval_hi = py.eval_hi,
				    .budget = CONFIG_PYFRAMES_MAX, .next = next_activation,
				    .ctx = &c};
	unsigned int out, pushed, activations;
	bool cut = false;

	if (!py.l)
		return n;
	selfread__reset(&window);
	out = pyframes__splice_into(&sp, frames, n, spliced, max, &pushed, &activations, &cut);
	if (!activations)
		return n;
	if (cut) {
		*truncated = true;
		__atomic_fetch_add(&py.st.truncated, 1, __ATOMIC_RELAXED);
	}
	if (pushed) {
		__atomic_fetch_add(&py.st.samples, 1, __ATOMIC_RELAXED);
		__atomic_fetch_add(&py.st.frames, pushed, __ATOMIC_RELAXED);
	}
	memcpy(frames, spliced, out * sizeof(frames[0]));
	return out;
}

void pyframes__stats(struct pyframes_stats *st)
{
	*st = py.st;
}
