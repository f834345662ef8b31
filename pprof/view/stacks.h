/* SPDX-License-Identifier: MIT */
/*
 * pprof/view/stacks.h — a decoded profile's samples as stacks of named frames.
 *
 * stacks__new() resolves every location once into frames (one per line entry, so inlined
 * calls are frames of their own, as pprof shows them) and applies the profile's drop_frames /
 * keep_frames the way pprof does. Then each sample is a root-first array of frame pointers.
 * No I/O: the CLI, the collector's web UI and tests share it.
 *
 * Frame names: the function name; unsymbolized locations are "0xADDR (mapping basename)", or
 * "0xADDR" without a mapping. module is what flame graphs colour by: the Go package or C++
 * namespace when the name has one, else the mapping's basename, else "".
 *
 * runtime says which runtime ran the frame, from its mapping's file name, as the agent names
 * them (agent/core/output.c): "[python…]" a CPython frame, "[lua…]" a Lua frame, "[jit]" or a
 * perf map ("/tmp/perf-PID.map") a JIT's code, "[kernel…]" the kernel, anything else native.
 * A per-location mark, not a sample label: one sample holds frames of several runtimes.
 */
#ifndef EDGEPROF_TOOLS_STACKS_H
#define EDGEPROF_TOOLS_STACKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pprof/pprof.h"

enum stack_runtime {
	STACK_RT_NATIVE,
	STACK_RT_KERNEL,
	STACK_RT_PYTHON,
	STACK_RT_LUA,
	STACK_RT_JIT,
	STACK_RT_N
};

struct stack_frame {
	const char *name;
	const char *module;
	bool inlined;	 /* folded into its caller at this location (pprof's "(inline)") */
	uint8_t runtime; /* enum stack_runtime */
};

/* The runtime of frames in a mapping whose file name is filename ("" none: native). */
enum stack_runtime stacks__runtime_of(const char *filename);
/* "native", "kernel", "python", "lua", "jit". */
const char *stacks__runtime_name(enum stack_runtime rt);

/* Deepest stack handed out; deeper ones lose their root-most frames (counted). */
#define STACKS_MAX_DEPTH 8192

struct stacks;

/*
 * Resolves p's locations (p must outlive the result). Returns NULL with err filled on a bad
 * drop_frames regex, an id that points nowhere, or out of memory.
 */
struct stacks *stacks__new(const struct pprof_profile *p, char *err, size_t errlen);
void stacks__free(struct stacks *s);

/*
 * Fills frames[0..ret) root first (leaf last) for sample i, after drop_frames pruning.
 * max must be >= 1; a deeper stack keeps its max leaf-most frames and counts a truncation.
 */
size_t stacks__sample(struct stacks *s, size_t i, const struct stack_frame **frames, size_t max);

/* Samples cut to STACKS_MAX_DEPTH (or the caller's max) so far. */
size_t stacks__truncated(const struct stacks *s);

/*
 * Samples grouped by identical stacks (the same location ids), value vi summed, zero sums
 * left out. A million samples usually hold a few thousand stacks: every consumer walks those
 * instead. *out (malloc'd, caller frees) holds one representative sample index per stack in
 * first-seen order. Memory: about 24 bytes per distinct stack. 0 or -ENOMEM.
 */
struct stacks_unique {
	size_t sample;
	int64_t value;
};
int stacks__unique(const struct pprof_profile *p, int vi, struct stacks_unique **out, size_t *n);

/*
 * Which value of each sample to use: spec is a sample type name ("cpu"), an index ("1"), or
 * NULL for pprof's default (default_sample_type, else the last type). Returns the index, or
 * -EINVAL with err naming the types there are.
 */
int stacks__sample_index(const struct pprof_profile *p, const char *spec, char *err, size_t errlen);

#endif /* EDGEPROF_TOOLS_STACKS_H */
