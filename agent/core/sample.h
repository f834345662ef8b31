/* SPDX-License-Identifier: MIT */
/*
 * agent/core/sample.h — the contract between the samplers (SIGPROF ring, BPF ring buffer) and the
 * agent's aggregation: one stack sample, decoded, before symbolization.
 */
#ifndef EDGEPROF_AGENT_SAMPLE_H
#define EDGEPROF_AGENT_SAMPLE_H

#include <stdbool.h>
#include <stdint.h>

#define SAMPLE_MAX_LABELS 8

struct sample_label {
	const char *key;
	const char *value;
};

/*
 * The user registers and top of the user stack at a system-wide sample: the leaf frame's
 * return address is among them when the leaf has not linked its frame (see bpf/leaf.h).
 */
struct sample_user_context {
	uint64_t sp, lr;	/* lr: aarch64's link register, else 0 */
	uint64_t fp;		/* aarch64's frame pointer (x29), else 0: none looked at; with
				 * stack, the frame pointer register on every architecture */
	unsigned int n_words;
	const uint64_t *words;	/* words[i] was at sp + 8 i */
	bool stack;		/* words are a copy of the stack (KiBs): walk it whole */
};

struct agent_sample {
	uint64_t time_ns;      /* CLOCK_MONOTONIC */
	uint32_t pid, tid;
	const char *comm;      /* may be NULL */
	uint16_t n_kernel;     /* frames[0 .. n_kernel) are kernel addresses (leaf first) */
	uint16_t n_user;       /* frames[n_kernel .. n_kernel + n_user) are user addresses */
	uint16_t flags;        /* SAMPLE_F_* */
	uint16_t n_labels;
	struct sample_label labels[SAMPLE_MAX_LABELS];
	const uint64_t *frames;
	uint64_t weight_ns;    /* CPU time this sample stands for (period, or measured) */
	const struct sample_user_context *user; /* BPF samples only; NULL: none */
	const uint64_t *py;    /* BPF: the thread's Python frames, newest first (bpf/pyproc.h's
				* PY_REC_*), for the sink to splice (bpf/python.h); n_py 0: none */
	uint16_t n_py;
	const uint8_t *snapshot; /* SAMPLE_F_SNAPSHOT: agent/lib/snapshot.h's blob, else NULL */
	uint32_t snapshot_len;
};

#define SAMPLE_F_TRUNCATED 0x1 /* the stack was deeper than CONFIG_MAX_STACK_DEPTH */
#define SAMPLE_F_UNWOUND   0x2 /* the user stack was unwound by CFI (BPF): no leaf to repair */
#define SAMPLE_F_WALL      0x4 /* counts in the wall-clock profile (agent/lib/wall.h) */
#define SAMPLE_F_NOCPU     0x8 /* not in the CPU profile: time the thread did not run */
#define SAMPLE_F_OFFCPU    0x10 /* BPF off-CPU: weight_ns is the time the thread was blocked */
#define SAMPLE_F_INFERRED  0x20 /* some frames were found by reading code, not by tables
				 * (armv7 without .ARM.exidx): the pprof label unwind=inferred */
#define SAMPLE_F_LUA       0x80 /* BPF: py, n_py hold Lua 5.4 frames (bpf/luaproc.h's LUA_REC_*),
				 * for the sink to splice (bpf/lua.h) */
#define SAMPLE_F_SNAPSHOT  0x40 /* carries a snapshot of registers and stack (snapshot below;
				 * in the ring: agent/lib/snapshot.h) for the collector to unwind */

/* What a sampler hands each sample to. Returns 0, or -ENOSPC when a bound dropped it. */
typedef int (*sample_sink_fn)(void *ctx, const struct agent_sample *s);

#endif /* EDGEPROF_AGENT_SAMPLE_H */
