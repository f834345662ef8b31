/* SPDX-License-Identifier: MIT */
/*
 * agent/lib/pyframes.h — CPython's own frames in libedgeprof.so's samples (CONFIG_PYFRAMES).
 *
 * At start (outside the handler) the library looks for the interpreter in the process: the
 * exported Py_Version, _PyRuntime and _PyEval_EvalFrameDefault (.dynsym: Debian's stripped
 * python3.11 keeps them). A version without a layout in the table (agent/core/pyname.c; 3.11
 * and 3.13, LP64 and ILP32, today) is counted (unknown_version) and the process is profiled natively. On
 * armv7 the eval loop, larger than the native walk's code readings reach, is registered
 * (unwind__arm_body) so that the walk gets through it without unwind tables. 3.13 brings
 * its own offsets (_Py_DebugOffsets at the start of _PyRuntime, agent/core/pydebug.h): they are
 * read at start and checked; refused (another minor's table, a free-threaded build, offsets out
 * of bounds or not the name writer's) is counted the same way (debug_offsets:
 * refused).
 *
 * In the handler: the thread's PyThreadState is pthread_getspecific() of _PyRuntime's
 * autoTSSkey (glibc reads it from the thread's own block, lock-free; the GIL holder's
 * tstate_current would be another thread's when this one runs C code without the GIL); its
 * cframe->current_frame starts the chain of _PyInterpreterFrame (previous), and each native
 * _PyEval_EvalFrameDefault activation in the walk is replaced by the frames it runs, newest
 * first, down to the one marked is_entry (3.11: one C activation runs many Python frames).
 * 3.13: the thread state is found in the interpreters' lists of thread states by its thread_id
 * (at most 256 looked at; the main thread's is in _PyRuntime, the newest threads' first),
 * tstate->current_frame starts the chain, and an activation's frames end at its entry shim
 * (owner FRAME_OWNED_BY_CSTACK, on the C stack, not shown). Every
 * read of the interpreter's memory goes through agent/lib/selfread.h: plain loads where the
 * memory is proven mapped (the thread's linked data stack chunks, _PyRuntime's segment, the
 * brk heap of a one-thread program), process_vm_readv() on the process itself elsewhere (a
 * torn pointer gives EFAULT, never a fault in the handler). The thread state's thread_id must
 * be this thread's: where the table's autoTSSkey offset is wrong (arm64's _PyRuntime differs),
 * the key is searched for in _PyRuntime (counted: tss_searches; not found: mismatch). At most
 * CONFIG_PYFRAMES_MAX Python frames per sample; the frames are tagged code-object words
 * with the unit prev_instr points at (agent/core/pyname.h) that the profile writer names and
 * gives their line (agent/core/pyline.h): the handler itself reads no line table. EDGEPROF_PYTHON=0 turns it off (the
 * native walk alone: the baseline of the cost benchmark).
 */
#ifndef EDGEPROF_AGENT_PYFRAMES_H
#define EDGEPROF_AGENT_PYFRAMES_H

#include <stdbool.h>
#include <stdint.h>

struct pyframes_stats {
	unsigned int minor;	   /* the interpreter's 3.x; 0: none found */
	bool on;		   /* its layout is known: frames are spliced */
	uint64_t unknown_version;  /* an interpreter without a layout (profiled natively) */
	uint64_t samples, frames;  /* samples with Python frames spliced in, frames put in */
	uint64_t no_state;	   /* samples in the eval loop without a thread state */
	uint64_t mismatch;	   /* the thread state found is not this thread's (layout): native */
	uint64_t tss_searches;	   /* searches of _PyRuntime for the thread-state key */
	uint64_t read_errors;	   /* reads that failed (EFAULT: a torn or freed pointer) */
	uint64_t truncated;	   /* chains cut at CONFIG_PYFRAMES_MAX or the sample's depth */
	int debug_offsets;	   /* 3.13+: 1 read and used, -errno refused (pydebug.h); 0 */
};

#ifdef CONFIG_PYFRAMES
/* Finds the interpreter (not async-signal-safe: at start). */
void pyframes__init(void);
/* Handler: replaces the eval loop's activations in frames[0..n) (leaf first; frames past the
 * leaf are return addresses) with Python frames, at most max in all. The new count. */
unsigned int pyframes__splice(uint64_t *frames, unsigned int n, unsigned int max,
			      bool *truncated);
void pyframes__stats(struct pyframes_stats *st);
#else
static inline void pyframes__init(void)
{
}
static inline unsigned int pyframes__splice(uint64_t *frames, unsigned int n, unsigned int max,
					    bool *truncated)
{
	return n;
}
static inline void pyframes__stats(struct pyframes_stats *st)
{
	*st = (struct pyframes_stats){0};
}
#endif

#endif /* EDGEPROF_AGENT_PYFRAMES_H */
