/* SPDX-License-Identifier: MIT */
/*
 * bpf/python.h — CPython frames in the BPF sampler's samples, the agent's side
 * (CONFIG_BPF_PYTHON; the program's side is bpf/python.bpf.h, their contract bpf/pyproc.h).
 *
 * A process is looked at once per listing of its maps (agent/core/procmaps.h: a new listing
 * after an exec or a dlopen): a code mapping named python3.N or libpython3.N.so* whose .dynsym
 * has _PyRuntime, _PyEval_EvalFrameDefault (with its size) and Py_Version (read from the file:
 * the version) is CPython. A version with offsets in the table (3.11, LP64), or 3.13 with its
 * own _Py_DebugOffsets (read from the file's data at _PyRuntime, checked by
 * agent/core/pydebug.h), lists the process in the program's py_procs map
 * (CONFIG_BPF_PYTHON_PROCS; full: counted, profiled natively); another, or a 3.13 whose table
 * is refused, is counted (unknown_version) and profiled natively. Files are read once (a small
 * cache by path, inode and mtime: 20 processes of one python3.11 read it once).
 *
 * bpfpy__sample() splices a sample's Python frames in place of the eval loop's native
 * activations (agent/core/pyname.h's pyframes__splice_into(), which libedgeprof.so's handler
 * uses too: frames between entry frames belong to one activation), as tagged code-object
 * words the profile writer names; names are read at once (pyname__warm) while the code
 * objects live (kept after it exits: the round's profile is written later), and forgotten when
 * the pid's maps are listed anew (exec). A pid reused by another process after its slot was
 * taken by a third one keeps the first one's names for code objects at the same addresses.
 */
#ifndef EDGEPROF_BPF_PYTHON_H
#define EDGEPROF_BPF_PYTHON_H

#include <stdbool.h>
#include <stdint.h>

#include "agent/core/procmaps.h"
#include "agent/core/sample.h"

struct bpfpy_stats {
	uint64_t procs;		  /* listed in the kernel now */
	uint64_t looked_at;	  /* listings of maps looked at */
	uint64_t files_read;	  /* interpreter files whose symbols were read */
	uint64_t unknown_version; /* CPython processes of a version without offsets */
	uint64_t procs_full;	  /* CPython processes the full map had no room for */
	uint64_t exited;	  /* entries removed for processes gone */
	uint64_t spliced;	  /* samples with Python frames in place of the eval loop */
	uint64_t frames;	  /* Python frames put in */
	uint64_t no_eval;	  /* samples with Python frames and no eval frame to replace */
	uint64_t truncated;	  /* samples cut by the Python frames (the sample's depth) */
	/* the program's counters (bpf/pyproc.h) */
	uint64_t bpf_samples, bpf_frames, no_thread, idle, bpf_truncated, read_errors;
};

struct bpfpy;

#ifdef CONFIG_BPF_PYTHON
/* procs_fd, counts_fd: the program's py_procs and py_counts maps. NULL: no memory. */
struct bpfpy *bpfpy__new(int procs_fd, int counts_fd, unsigned int max_procs, int ncpus);
/*
 * The sample s (frames as the sink gets them) of a process whose maps are pm (NULL: not
 * known yet), with its Python frames spliced in: in *out with its frames in buf (room for
 * max), or s itself when there is nothing to splice. Looks at the process's maps when they
 * are new.
 */
const struct agent_sample *bpfpy__sample(struct bpfpy *p, const struct procmaps *pm,
					 const struct agent_sample *s, uint64_t *buf,
					 unsigned int max, struct agent_sample *out);
/* Removes exited processes from the map (every 5 s at most; now: CLOCK_MONOTONIC ns). */
void bpfpy__sweep(struct bpfpy *p, uint64_t now);
void bpfpy__stats(const struct bpfpy *p, struct bpfpy_stats *st);
void bpfpy__free(struct bpfpy *p); /* NULL-safe */
#else
static inline const struct agent_sample *bpfpy__sample(struct bpfpy *p,
						       const struct procmaps *pm,
						       const struct agent_sample *s, uint64_t *buf,
						       unsigned int max, struct agent_sample *out)
{
	return s;
}
static inline void bpfpy__sweep(struct bpfpy *p, uint64_t now)
{
}
static inline void bpfpy__stats(const struct bpfpy *p, struct bpfpy_stats *st)
{
	*st = (struct bpfpy_stats){0};
}
static inline void bpfpy__free(struct bpfpy *p)
{
}
#endif /* CONFIG_BPF_PYTHON */

#endif /* EDGEPROF_BPF_PYTHON_H */
