/* SPDX-License-Identifier: MIT */
/*
 * bpf/sampler.h — the eBPF system-wide sampler: one CPU-clock perf event per online CPU runs
 * profile.bpf.c, which writes tgid, tid, comm and the kernel and user stacks of every sample
 * into a fixed-size BPF ring buffer; bpf_sampler__poll() drains it into the agent's sink.
 *
 * Needs bpf() with CAP_BPF+CAP_PERFMON or root, bpf_get_stack (Linux 4.18) and BPF global data
 * (5.2); no BTF. Uses the BPF ring buffer (5.8), else per-CPU perf buffers (the ring budget
 * shared out; environment EDGEPROF_BPF_PERFBUF=1 forces them, for tests). Without what it needs
 * bpf_sampler__open() fails with -errno and one line naming it, and the agent runs the SIGPROF
 * sampler only.
 */
#ifndef EDGEPROF_BPF_SAMPLER_H
#define EDGEPROF_BPF_SAMPLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/core/sample.h"
#include "bpf/cfitab.h"
#include "bpf/lua.h"
#include "bpf/python.h"
#include "bpf/v8.h"

struct bpf_sampler_opts {
	unsigned hz;              /* per CPU; 0: CONFIG_SAMPLE_HZ */
	unsigned ringbuf_kb;      /* 0: CONFIG_BPF_RINGBUF_KB; rounded up to a power of two */
	unsigned max_depth;       /* frames per stack; 0 or above the build's bound: the bound */
	bool kernel_stacks;
	bool include_idle;        /* sample the idle task (pid 0) too */
	bool no_leaf_context;     /* do not read the user registers and stack words that
				   * let the agent restore a leaf's caller (bpf/leaf.h) */
	const uint32_t *pids;     /* only these processes (tgids); n_pids 0: all */
	size_t n_pids;
	const char *comm_prefix;  /* only tasks whose comm starts with it; NULL or "": all */
	uint64_t cgroup_id;       /* only tasks of this cgroup v2 (see bpf_sampler__cgroup_id) */
	bool no_exe_label;        /* the sink labels exe itself (the agent: from the maps it reads) */
	bool no_new_proc_wake;    /* a new process's first sample need not wake the reader (its
				   * maps come from mmap records: bpf/mmapev.h) */
	bool no_cfi;              /* walk user stacks by frame pointers only (bpf/cfitab.h) */
	bool offcpu;              /* off-CPU time too (sched_switch, sys_exit; bpf/README.md):
				   * samples with SAMPLE_F_OFFCPU, weight = the time blocked */
	bool no_cpu;              /* no CPU samples (offcpu alone) */
	uint64_t offcpu_min_ns;   /* blocked less than this: counted, not sent; 0: Kconfig's */
};

struct bpf_sampler_stats {
	uint64_t samples;         /* delivered to the sink */
	uint64_t dropped_ringbuf; /* ring buffer full in the kernel (sum of the per-CPU counters) */
	uint64_t dropped_sink;    /* the sink refused them (-ENOSPC: its bound) */
	uint64_t truncated;       /* stacks deeper than max_depth (delivered, cut) */
	unsigned cpus;            /* CPUs with a perf event attached */
	unsigned cpu_offline;     /* times a CPU's event was dropped (offline) */
	uint64_t label_reads;     /* processes whose exe was read (readlink /proc/<pid>/exe) */
	uint64_t cgroup_reads;    /* cgroup ids not cached: /proc/<pid>/cgroup read */
	bool perf_buffer;         /* the fallback for kernels before 5.8 is in use */
	struct cfitab_stats cfi;  /* the walk by unwind tables (zero without CONFIG_BPF_CFI) */
	uint64_t offcpu_sent, offcpu_dropped, offcpu_dropped_ns; /* off-CPU records (ring full) */
	uint64_t offcpu_below_ns; /* blocked time under the threshold (not in the profile) */
	uint64_t offcpu_untracked; /* blocks of threads the full table had no room for */
	uint64_t pauses;          /* bpf_sampler__pause(s, true) that stopped it */
	uint64_t paused_ns;       /* time paused */
	uint64_t events_enabled_ns; /* the CPU events' time enabled (the kernel's count), summed
				     * over the CPUs attached now: what sampling ran */
};

struct bpf_sampler;

/*
 * Opens, loads and attaches. Returns 0, or -errno with a one-line reason in err (the missing
 * kernel feature or capability). sink gets each sample from bpf_sampler__poll(): pid, tid and
 * comm in their fields, labels "exe" (unless opts.no_exe_label) and "cgroup" (cgroup v2 path,
 * not for the root) where known; every pointer in it is valid during the call only.
 */
int bpf_sampler__open(const struct bpf_sampler_opts *o, sample_sink_fn sink, void *ctx,
		      struct bpf_sampler **out, char *err, size_t errlen);
/*
 * Waits up to timeout_ms and delivers a bounded batch: count, or -errno. The kernel wakes the
 * reader when the ring is half full or a new process shows up; otherwise samples wait for the
 * timeout, so use a finite one (the round's latency budget, e.g. 100..1000 ms).
 */
int bpf_sampler__poll(struct bpf_sampler *s, int timeout_ms);
/*
 * Whether the last poll took every sample that was waiting (no batch bound cut it short): then
 * every sample taken before it began has been delivered.
 */
bool bpf_sampler__caught_up(const struct bpf_sampler *s);
/*
 * Stops (paused true) or restarts the sampling, for windows whose samples nobody wants (the
 * agent between rounds, and in rounds the fleet's duty cycle skips): the CPU events are
 * disabled on every CPU (PERF_EVENT_IOC_DISABLE: the BPF program does not run, the sampled
 * tasks pay nothing) and off-CPU's tracepoints are detached (its blocks under way forgotten at
 * restart: their time would span the pause). CPU hotplug is followed again once restarted.
 * Samples already in the ring are still delivered. 0 or the first -errno (logged).
 */
int bpf_sampler__pause(struct bpf_sampler *s, bool paused);
/* An epoll fd that becomes readable when samples wait (to embed in the agent's own loop). */
int bpf_sampler__fd(const struct bpf_sampler *s);
void bpf_sampler__stats(const struct bpf_sampler *s, struct bpf_sampler_stats *st);
/*
 * The kernel's name for one of its addresses (%pS through a BPF syscall program, 5.14+), in
 * the shape of ksyms_namer_fn (ctx: the sampler): 0, -ENOENT (no symbol), -EOPNOTSUPP (older
 * kernel: read kallsyms instead).
 */
int bpf_sampler__name_kernel(void *ctx, uint64_t addr, char *name, size_t len, uint64_t *start);
/* The sampling program's fd (its run time and count with kernel.bpf_stats_enabled: benches). */
int bpf_sampler__prog_fd(const struct bpf_sampler *s);
/* The CPython processes' entries (bpf/python.h), or NULL (CONFIG_BPF_PYTHON off; s NULL). */
struct bpfpy *bpf_sampler__python(const struct bpf_sampler *s);
/* The Lua processes' entries (bpf/lua.h), or NULL (CONFIG_BPF_LUA off; s NULL). */
struct bpflua *bpf_sampler__lua(const struct bpf_sampler *s);
/* The node processes' entries (bpf/v8.h), or NULL (CONFIG_BPF_V8 off; s NULL). */
struct bpfv8 *bpf_sampler__v8(const struct bpf_sampler *s);
/* Where the unwind tables take a new process's maps from (cfitab__set_maps()). */
void bpf_sampler__set_maps(struct bpf_sampler *s, cfitab_maps_fn fn, void *ctx);
void bpf_sampler__free(struct bpf_sampler *s);                   /* NULL-safe */

/* The cgroup v2 id of a cgroup directory (its inode number), for opts.cgroup_id; or -errno. */
int bpf_sampler__cgroup_id(const char *cgroup_path, uint64_t *id);

#endif /* EDGEPROF_BPF_SAMPLER_H */
