// SPDX-License-Identifier: MIT
/* agent/lib/pyframes.c — see pyframes.h. */
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "agent/core/pyname.h"
#include "agent/lib/pyframes.h"
#include "agent/lib/selfread.h"

/* Where the thread state and the frame chain are (3.11 LP64: Include/internal/pycore_frame.h,
 * pycore_runtime.h; checked with ctypes on Debian 12's python3.11). */
struct pyframe_layout {
	unsigned int minor;
	uint16_t tss_init, tss_key;		/* _PyRuntime.gilstate.autoTSSkey (Py_tss_t) */
	uint16_t tstate_cframe, cframe_current; /* tstate->cframe->current_frame */
	uint16_t f_code, f_previous, f_prev_instr, f_is_entry, f_size; /* _PyInterpreterFrame */
	uint16_t code_adaptive; /* PyCodeObject.co_code_adaptive: the bytecode */
};

static const struct pyframe_layout frame_layouts[] = {
    {.minor = 11, .tss_init = 592, .tss_key = 596, .tstate_cframe = 56, .cframe_current = 8,
     .f_code = 32, .f_previous = 48, .f_prev_instr = 56, .f_is_entry = 68, .f_size = 72,
     .code_adaptive = 184},
};

static struct {
	const struct pyframe_layout *l;
	const char *runtime;
	uintptr_t eval_lo, eval_hi;
	struct pyframes_stats st;
} py;

#define EP_TLS __thread __attribute__((tls_model("initial-exec")))
static EP_TLS uint64_t spliced[CONFIG_MAX_STACK_DEPTH];

static const struct pyframe_layout *frame_layout(unsigned int minor)
{
	if (sizeof(void *) != 8 || !pycode__layout(minor))
		return NULL;
	for (size_t i = 0; i < sizeof(frame_layouts) / sizeof(frame_layouts[0]); i++)
		if (frame_layouts[i].minor == minor)
			return &frame_layouts[i];
	return NULL;
}

void pyframes__init(void)
{
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
	if ((*version >> 24) != 3 || !frame_layout(py.st.minor)) {
		py.st.unknown_version++;
		return;
	}
	py.runtime = dlsym(RTLD_DEFAULT, "_PyRuntime");
	if (!py.runtime || !dladdr1(eval, &info, (void **)&sym, RTLD_DL_SYMENT) || !sym ||
	    !sym->st_size) {
		py.st.unknown_version++;
		return;
	}
	py.eval_lo = (uintptr_t)eval;
	py.eval_hi = py.eval_lo + sym->st_size;
	py.l = frame_layout(py.st.minor);
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

/* The newest interpreter frame of this thread, or 0. */
static uintptr_t current_frame(void)
{
	const struct pyframe_layout *l = py.l;
	int init;
	unsigned int key;
	uintptr_t tstate, cframe = 0, frame = 0;

	/* _PyRuntime is the program's own data: always mapped, read directly */
	memcpy(&init, py.runtime + l->tss_init, sizeof(init));
	memcpy(&key, py.runtime + l->tss_key, sizeof(key));
	tstate = init ? (uintptr_t)pthread_getspecific((pthread_key_t)key) : 0;
	if (!tstate || !peek(tstate + l->tstate_cframe, &cframe, sizeof(cframe)) ||
	    !peek(cframe + l->cframe_current, &frame, sizeof(frame)))
		return 0;
	return frame;
}

/*
 * The code unit a frame executes plus one (pyname.h), from prev_instr: 0 before its first
 * (prev_instr is then the unit before the bytecode), PYFRAME_UNIT_FAR past the word's field
 * or anywhere else (a torn frame: its line is then the first).
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
	unsigned char f[80];
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
		out[n++] = pyframe__tag(code, frame_unit1(code, instr));
		*frame = prev == *frame ? 0 : prev; /* a cycle ends the chain */
		if (f[l->f_is_entry])
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
