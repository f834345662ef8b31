/* SPDX-License-Identifier: MIT */
/*
 * bpf/lua.h — Lua 5.4 frames in the BPF sampler's samples, the agent's side (CONFIG_BPF_LUA;
 * the program's side is bpf/lua.bpf.h, their contract bpf/luaproc.h).
 *
 * A process is looked at once per listing of its maps (agent/core/procmaps.h): a code mapping
 * named lua* or liblua* whose .dynsym has lua_ident saying "$LuaVersion: Lua 5.4." is Lua 5.4
 * (LP64 only; another version, 5.1 and LuaJIT included, is counted: unknown_version, and
 * profiled natively). Its hidden luaV_execute is found as libedgeprof.so finds it
 * (agent/core/luaexec.h: the function its computed-goto table points into), in the module's
 * relocated data and .eh_frame_hdr read from the process (process_vm_readv), once per file
 * (by path, inode and mtime; kept as link-time addresses).
 *
 * PUC Lua keeps no current state anywhere: the process's lua_States are found as the
 * in-process walker finds them, among the words of the sampled thread's stack from its stack
 * pointer up (CONFIG_BPF_LUA_SCAN_BYTES, one read; 64 candidates validated: type tag, l_G, the
 * universe's mainthread), at its first sample and again, at most every 100 ms, while its
 * samples in luaV_execute carry no Lua frames or a chain that does not fit them (a coroutine
 * not seen yet; a state closed). A coroutine runs on its own lua_State: found when it runs
 * (lua_resume spills it on the resumer's stack), it is walked before its resumer (its errorJmp
 * lies deeper). CONFIG_BPF_LUA_STATES a process (full: the oldest replaced, counted).
 *
 * bpflua__sample() splices the record's runs of Lua frames (each ends at its CIST_FRESH frame)
 * in place of luaV_execute's activations (agent/core/pyname.h's pyframes__splice_into), as
 * the tagged words libedgeprof.so's handler makes (agent/core/luaname.h), named while the
 * Protos live (luaname__warm). Runs and activations that do not match keep the sample native
 * (counted: mismatch).
 */
#ifndef EDGEPROF_BPF_LUA_H
#define EDGEPROF_BPF_LUA_H

#include <stdbool.h>
#include <stdint.h>

#include "agent/core/procmaps.h"
#include "agent/core/sample.h"

struct bpflua_stats {
	uint64_t procs;		  /* listed in the kernel now */
	uint64_t looked_at;	  /* listings of maps looked at */
	uint64_t files_read;	  /* interpreter files read */
	uint64_t unknown_version; /* Lua processes of another version (5.1, LuaJIT, ILP32) */
	uint64_t no_execute;	  /* Lua 5.4 files whose luaV_execute was not found */
	uint64_t procs_full;	  /* Lua processes the full map had no room for */
	uint64_t exited;	  /* entries removed for processes gone */
	uint64_t scans, states, states_full; /* stack scans; states found; one replaced */
	uint64_t spliced;	  /* samples with Lua frames in place of luaV_execute */
	uint64_t frames;	  /* Lua frames put in */
	uint64_t mismatch;	  /* runs and activations differ: the sample kept native */
	uint64_t cut;		  /* samples cut by the Lua frames (the sample's depth) */
	/* the program's counters (bpf/luaproc.h) */
	uint64_t bpf_samples, bpf_frames, no_state, bpf_truncated, read_errors, torn;
};

struct bpflua;

#ifdef CONFIG_BPF_LUA
/* procs_fd, counts_fd: the program's lua_procs and lua_counts maps. NULL: no memory. */
struct bpflua *bpflua__new(int procs_fd, int counts_fd, unsigned int max_procs, int ncpus);
/*
 * The sample s of a process whose maps are pm (NULL: not known yet), with its Lua frames
 * spliced in: in *out with its frames in buf (room for max), or s itself when there is
 * nothing to splice. Looks at the process's maps when they are new; scans for its states.
 */
const struct agent_sample *bpflua__sample(struct bpflua *p, const struct procmaps *pm,
					  const struct agent_sample *s, uint64_t *buf,
					  unsigned int max, struct agent_sample *out);
/* Removes exited processes from the map (every 5 s at most; now: CLOCK_MONOTONIC ns). */
void bpflua__sweep(struct bpflua *p, uint64_t now);
void bpflua__stats(const struct bpflua *p, struct bpflua_stats *st);
void bpflua__free(struct bpflua *p); /* NULL-safe */
#else
static inline const struct agent_sample *bpflua__sample(struct bpflua *p,
							const struct procmaps *pm,
							const struct agent_sample *s,
							uint64_t *buf, unsigned int max,
							struct agent_sample *out)
{
	return s;
}
static inline void bpflua__sweep(struct bpflua *p, uint64_t now)
{
}
static inline void bpflua__stats(const struct bpflua *p, struct bpflua_stats *st)
{
	*st = (struct bpflua_stats){0};
}
static inline void bpflua__free(struct bpflua *p)
{
}
#endif /* CONFIG_BPF_LUA */

#endif /* EDGEPROF_BPF_LUA_H */
