/* SPDX-License-Identifier: MIT */
/*
 * agent/core/pyname.h — CPython frames in a sample, and their names (CONFIG_PYFRAMES).
 *
 * Both samplers put a Python frame into a sample's user frames as a tagged word: 0xA5 in bits
 * 63..56 (never a user address: x86_64 and arm64 user space is below 2^48), the code unit the
 * frame executes plus one in bits 55..45 (0: not started, the first line; PYFRAME_UNIT_FAR:
 * past the field, the first line, counted), its code object (PyCodeObject *) / 8 in bits
 * 44..0 (/ 4 in a 32-bit build: a 32-bit interpreter's deep-frozen code objects, static in its
 * data, are only 4-aligned). The profile writer names it from the process's memory (process_vm_readv: the process
 * itself, or the agent's target as root), after checking the object is a code object (its
 * type's tp_name is "code") of a version it knows (the type's tp_basicsize, which is where
 * the bytecode starts, tells 3.11 from 3.12 and 3.13) and its strings compact ASCII; else the
 * frame stays unnamed (counted): co_qualname ("Class.method"), co_filename, co_firstlineno,
 * and the unit's line from co_linetable (agent/core/pyline.h; a table it cannot read gives
 * the first line, counted).
 * Names are cached by (pid, code object) in CONFIG_PYNAME_CACHE slots, lines by (pid, word) in
 * CONFIG_PYNAME_LINES entries (agent/core/framename.h), so a name read while the process ran
 * (pyname__warm) outlives the object (the interpreter frees the script's code at exit, before a standalone
 * profile is written). A code object freed and its address reused by another code object of
 * the same process keeps the first one's name for the words already seen; a word not seen
 * before reads it anew, and the old words are then read again (functions live as long as
 * their module: rare in services; lambdas and exec'd code are the exception).
 */
#ifndef EDGEPROF_AGENT_PYNAME_H
#define EDGEPROF_AGENT_PYNAME_H

#include <stdbool.h>
#include <stdint.h>

#include "agent/core/framename.h"

#define PYFRAME_TAG 0xA5ull
#define PYFRAME_UNIT_BITS 11
#define PYFRAME_UNIT_FAR ((1u << PYFRAME_UNIT_BITS) - 1)
#define PYFRAME_CODE_MASK ((1ull << 45) - 1)
#define PYFRAME_CODE_SHIFT (sizeof(void *) == 8 ? 3 : 2)

/* unit1: the code unit executed plus one, 0 when the frame has not started one. */
static inline uint64_t pyframe__tag(uintptr_t code, unsigned int unit1)
{
	if (unit1 > PYFRAME_UNIT_FAR)
		unit1 = PYFRAME_UNIT_FAR;
	return PYFRAME_TAG << 56 | (uint64_t)unit1 << 45 | ((uint64_t)code >> PYFRAME_CODE_SHIFT & PYFRAME_CODE_MASK);
}

static inline uintptr_t pyframe__code(uint64_t v)
{
	return (uintptr_t)((v & PYFRAME_CODE_MASK) << PYFRAME_CODE_SHIFT);
}

static inline unsigned int pyframe__unit1(uint64_t v)
{
	return (unsigned int)(v >> 45) & PYFRAME_UNIT_FAR;
}

static inline bool pyframe__is(uint64_t v)
{
	return v >> 56 == PYFRAME_TAG;
}

/*
 * lines: frames given their line; line_far: the unit past the word's field, line_none: the
 * unit has no location, line_cut: the table longer than CONFIG_PYLINE_TABLE_BYTES before the
 * unit's entry, line_bad: a malformed table (each of these shows the first line).
 */
struct pyname_stats {
	struct framename_counters names; /* the cache's */
	uint64_t resolved, unreadable, not_code, bad_string, unknown_version;
	uint64_t lines, line_far, line_none, line_cut, line_bad;
};

/* Code-object layout of one interpreter version and ABI (ptr: pointer size): what the writer
 * reads. */
struct pycode_layout {
	unsigned int minor, ptr;
	uint16_t firstlineno, filename, name, qualname; /* in PyCodeObject */
	uint16_t linetable, code_adaptive;		/* co_linetable; the bytecode */
	uint16_t str_length, str_state, str_ascii_data; /* in PyASCIIObject */
	uint16_t bytes_size, bytes_data;		/* in PyBytesObject */
};

const struct pycode_layout *pycode__layout(unsigned int minor);

/*
 * The splice both samplers share (agent/core/pysplice.c): a C activation of the eval loop is
 * replaced by the Python frames it runs. next() gives one activation's frames, newest first,
 * down to its entry frame, into out (room at most; *cut when that was too little): their
 * count, 0 when it knows none (the native frame stays).
 */
typedef unsigned int (*pyframes_next_fn)(void *ctx, uint64_t *out, unsigned int room,
					  bool *cut);

struct pysplice {
	uint64_t eval_lo, eval_hi; /* _PyEval_EvalFrameDefault's code, [lo, hi) */
	unsigned int budget;	   /* Python frames at most */
	pyframes_next_fn next;
	void *ctx;
};

/*
 * User frames[0..n) (leaf first; past the leaf, return addresses) into out, max at most,
 * each eval activation replaced by next()'s frames. Returns the count; *pushed: Python frames
 * put in; *activations: eval frames met; *truncated set when frames had no room.
 */
unsigned int pyframes__splice_into(const struct pysplice *sp, const uint64_t *frames,
				   unsigned int n, uint64_t *out, unsigned int max,
				   unsigned int *pushed, unsigned int *activations, bool *truncated);

#ifdef CONFIG_PYFRAMES
/* Forgets the names read for pid (it exec'd, or exited: its code objects are others now). */
void pyname__forget(uint32_t pid);
/* Names the tagged frame v of pid: 0, or -errno (the frame stays unnamed). */
int pyname__resolve(uint32_t pid, uint64_t v, struct framename *out);
/* Names the tagged frames among frames[0..n) now, while their code objects live (a drain
 * thread's pass; the profile is written later, after the interpreter may have freed them). */
void pyname__warm(uint32_t pid, const uint64_t *frames, unsigned int n);
void pyname__stats(struct pyname_stats *st);
#else
static inline void pyname__forget(uint32_t pid)
{
}
static inline void pyname__warm(uint32_t pid, const uint64_t *frames, unsigned int n)
{
}
static inline int pyname__resolve(uint32_t pid, uint64_t v, struct framename *out)
{
	return -95; /* -EOPNOTSUPP */
}
static inline void pyname__stats(struct pyname_stats *st)
{
	*st = (struct pyname_stats){0};
}
#endif

#endif /* EDGEPROF_AGENT_PYNAME_H */
