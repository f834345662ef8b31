/* SPDX-License-Identifier: MIT */
/*
 * bpf/v8.h — Node.js (V8) JavaScript frames in the BPF sampler's samples without perf maps,
 * the agent's side (CONFIG_BPF_V8; the program's side is bpf/v8.bpf.h, their contract
 * bpf/v8proc.h).
 *
 * A process is looked at once per listing of its maps (agent/core/procmaps.h): a code mapping
 * named node, nodejs or libnode.so* whose .dynsym has V8's postmortem symbols (v8dbg_*, values
 * read from the file's data: NodeSource's node 20 has 531 in its executable, Debian's node 18
 * 495 in libnode.so.108) and v8::internal::Version is V8. A file that lacks one of the
 * symbols the walk needs, a 32-bit one, or a V8 older than 10 is counted (unknown_version)
 * and its processes are profiled natively. The JSFunction instance types are a range in V8
 * 10 and 11 (JS_FUNCTION_TYPE, then the constructors' subtypes, which have no v8dbg_type_
 * symbol of their own): from JS_FUNCTION_TYPE to the next type that has one, minus one.
 * A V8 process is listed in the program's v8_procs map (CONFIG_BPF_V8_PROCS; full: counted,
 * profiled natively). Files are read once (a small cache by path, inode and mtime). A process
 * that writes a perf map (--perf-basic-prof, agent/core/perfmap.h) is left to it (counted:
 * perf_map): the operator asked for it, and it names code these frames do not (stubs,
 * regular expressions); a stale
 * /tmp/perf-PID.map of an earlier process with the same pid leaves a new one unlisted too.
 *
 * bpfv8__sample() puts a sample's JavaScript frames in place of the native frames with the
 * same pc (the frame-pointer walk of the program and the native walk, by frame pointers or
 * by tables through JIT code, agree there), as tagged words (agent/core/v8name.h) the profile
 * writer names; a JavaScript frame whose pc no native frame has (the native walk ended early:
 * a stack copy walked by .eh_frame stops in V8's code) goes in after the last one placed
 * (counted: inserted). A sample none of whose JavaScript frames match stays native. Names are read at once (v8name__warm), while the objects are where the sample
 * saw them (V8's collector moves objects), and forgotten when the pid's maps are listed anew
 * (exec).
 */
#ifndef EDGEPROF_BPF_V8_H
#define EDGEPROF_BPF_V8_H

#include <stdbool.h>
#include <stdint.h>

#include "agent/core/procmaps.h"
#include "agent/core/sample.h"

struct v8_proc; /* bpf/v8proc.h */

struct bpfv8_stats {
	uint64_t procs;		  /* listed in the kernel now */
	uint64_t looked_at;	  /* listings of maps looked at */
	uint64_t files_read;	  /* node/libnode files whose symbols were read */
	uint64_t unknown_version; /* V8 files without what the walk needs */
	uint64_t procs_full;	  /* V8 processes the full map had no room for */
	uint64_t perf_map;	  /* V8 processes left to their perf map (listings) */
	uint64_t exited;	  /* entries removed for processes gone */
	uint64_t spliced;	  /* samples with JavaScript frames put in */
	uint64_t frames;	  /* JavaScript frames put in */
	uint64_t inserted;	  /* JavaScript frames whose pc no native frame had */
	uint64_t cut;		  /* samples cut by the JavaScript frames (the sample's depth) */
	/* the program's counters (bpf/v8proc.h) */
	uint64_t bpf_samples, bpf_frames, none, bpf_truncated, read_errors;
};

struct bpfv8;

#ifdef CONFIG_BPF_V8
/* procs_fd, counts_fd: the program's v8_procs and v8_counts maps. NULL: no memory. */
struct bpfv8 *bpfv8__new(int procs_fd, int counts_fd, unsigned int max_procs, int ncpus);
/*
 * The sample s of a process whose maps are pm (NULL: not known yet) with its JavaScript
 * frames in place: in *out with its frames in buf (room for max), or s itself when there is
 * nothing to put in. Looks at the process's maps when they are new.
 */
const struct agent_sample *bpfv8__sample(struct bpfv8 *v, const struct procmaps *pm,
					 const struct agent_sample *s, uint64_t *buf,
					 unsigned int max, struct agent_sample *out);
/* Removes exited processes from the map (every 5 s at most; now: CLOCK_MONOTONIC ns). */
void bpfv8__sweep(struct bpfv8 *v, uint64_t now);
void bpfv8__stats(const struct bpfv8 *v, struct bpfv8_stats *st);
void bpfv8__free(struct bpfv8 *v); /* NULL-safe */
/*
 * What the agent lists a process of the ELF file at path with (its tests, and the probe): 0
 * with *proc and V8's *major and *minor; -ENOENT: not V8 (or not all the symbols the walk
 * needs, or too old a V8); -errno: unreadable, not ELF64.
 */
int bpfv8__file_entry(const char *path, struct v8_proc *proc, int *major, int *minor);
#else
static inline const struct agent_sample *bpfv8__sample(struct bpfv8 *v, const struct procmaps *pm,
						       const struct agent_sample *s, uint64_t *buf,
						       unsigned int max, struct agent_sample *out)
{
	return s;
}
static inline void bpfv8__sweep(struct bpfv8 *v, uint64_t now)
{
}
static inline void bpfv8__stats(const struct bpfv8 *v, struct bpfv8_stats *st)
{
	*st = (struct bpfv8_stats){0};
}
static inline void bpfv8__free(struct bpfv8 *v)
{
}
#endif /* CONFIG_BPF_V8 */

#endif /* EDGEPROF_BPF_V8_H */
