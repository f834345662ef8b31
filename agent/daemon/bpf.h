/* SPDX-License-Identifier: MIT */
/*
 * agent/daemon/bpf.h — the BPF system-wide sampler in the daemon (bpf/sampler.h): started with
 * the agent unless --sampler sigprof, its samples into the services' aggregates (with their
 * leaf callers restored, bpf/leaf.h, and new programs' maps from the kernel's mmap records,
 * bpf/mmapev.h), paused between rounds, its counters in each round's profiles.
 * Without CONFIG_SAMPLER_BPF: empty stubs, and the main loop sleeps where it would poll.
 */
#ifndef EDGEPROF_AGENT_DAEMON_BPF_H
#define EDGEPROF_AGENT_DAEMON_BPF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "agent/daemon/agent.h"
#include "port/clock.h"
#include "port/log.h"

/* Without BPF: a sleep a signal does not cut short, so never longer than DRAIN_MS (exit). */
static inline void agent__idle_sleep(int timeout_ms)
{
	port_sleep_ns((uint64_t)(timeout_ms < DRAIN_MS ? timeout_ms : DRAIN_MS) * NSEC_PER_MSEC);
}

#ifdef CONFIG_SAMPLER_BPF
void agent_bpf__start(struct agent *a);
/* Waits up to timeout_ms for samples (the main loop's sleep) and delivers them. */
void agent_bpf__poll(struct agent *a, int timeout_ms);
void agent_bpf__stop(struct agent *a);
/*
 * Outside a sampled round (or a pulled profile) nobody wants BPF samples: the sampler's perf
 * events are disabled, so a skipped round costs the device nothing (bpf/sampler.h).
 */
void agent_bpf__pause(struct agent *a, bool paused);
/* The round is written: the unwind tables' pages it touched leave the agent's RSS. */
void agent_bpf__round_done(struct agent *a);
/* One pass over kallsyms names the kernel call sites first seen this round. */
void agent_bpf__name_kernel_frames(struct agent *a);
/* "edgeprof bpf: ..." for the round's profiles, or "" without the sampler running. */
void agent_bpf__comment(struct agent *a, char *buf, size_t len);
/* "edgeprof offcpu: ..." for the off-CPU profiles, or "". */
void agent_bpf__offcpu_comment(struct agent *a, char *buf, size_t len);
#else
static inline void agent_bpf__start(struct agent *a)
{
	if (!strcmp(a->cfg.sampler, "bpf"))
		pr_warn("built without the BPF sampler: SIGPROF rings only");
}
static inline void agent_bpf__poll(struct agent *a, int timeout_ms)
{
	agent__idle_sleep(timeout_ms);
}
static inline void agent_bpf__stop(struct agent *a)
{
}
static inline void agent_bpf__pause(struct agent *a, bool paused)
{
}
static inline void agent_bpf__round_done(struct agent *a)
{
}
static inline void agent_bpf__name_kernel_frames(struct agent *a)
{
}
static inline void agent_bpf__comment(struct agent *a, char *buf, size_t len)
{
	buf[0] = 0;
}
static inline void agent_bpf__offcpu_comment(struct agent *a, char *buf, size_t len)
{
	buf[0] = 0;
}
#endif /* CONFIG_SAMPLER_BPF */

#endif /* EDGEPROF_AGENT_DAEMON_BPF_H */
