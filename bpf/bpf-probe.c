// SPDX-License-Identifier: MIT
/*
 * bpf/bpf-probe.c — test and benchmark driver of the BPF sampler (not installed): samples the
 * system for N seconds and prints one line per sample,
 *     <pid> <tid> <comm>;u:0x<addr>;...;k:<kernel symbol>;... 1
 * (root first: user frames outermost first, then kernel frames, leaf last), then one stats line
 * on stderr. User addresses stay raw; tests name them with nm(1) from the workload's binary.
 * The first sample of each process also prints "#first <pid> <alive> <key>=<value>...": whether
 * its /proc/<pid>/maps could still be read when the sample reached user space, and its labels.
 * With --python, CPython processes are listed as the agent lists them (bpf/python.h) and their
 * samples carry Python frames (tagged code objects, agent/core/pyname.h) in place of the eval
 * loop's: what the cost benchmark measures (tests/bench/bpf-py-bench.sh); node processes too
 * (bpf/v8.h: JavaScript frames, tests/bench/bpf-v8-bench.sh). --v8 is the same option.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <linux/types.h>
#include <bpf/bpf.h>

#include "agent/core/ksyms.h"
#include "agent/core/procmaps.h"
#include "bpf/sampler.h"
#include "port/clock.h"
#include "port/log.h"

#define PROBE_MAX_PIDS 64
#define PROBE_SEEN_SLOTS 8192 /* open addressing; full: no more "#first" lines */

struct probe {
	struct ksyms *ks;
	bool quiet;
	uint64_t start_ns, first_ns;
	uint64_t sink_max, seen;
	uint32_t count_pid;
	uint64_t pid_samples;
	uint64_t kernel_frames_named, kernel_frames;
	uint32_t first[PROBE_SEEN_SLOTS];
	unsigned n_seen;
	struct proctab *procs; /* --python: the maps the CPython processes are found in */
	struct bpf_sampler *s;
	uint64_t py_samples;   /* samples with Python frames spliced in */
	uint64_t js_samples;   /* samples with JavaScript frames put in */
	uint64_t py_buf[2 * PROFILE_MAX_DEPTH];
	struct agent_sample py_out;
	uint64_t lua_samples;  /* samples with Lua frames spliced in */
	uint64_t lua_buf[2 * PROFILE_MAX_DEPTH];
	struct agent_sample lua_out;
	uint64_t js_buf[2 * PROFILE_MAX_DEPTH];
	struct agent_sample js_out;
};

/* True the first time pid shows up. */
static bool probe_first(struct probe *p, uint32_t pid)
{
	unsigned i = (pid * 2654435761u) % PROBE_SEEN_SLOTS;

	if (p->n_seen >= PROBE_SEEN_SLOTS / 2)
		return false;
	for (;; i = (i + 1) % PROBE_SEEN_SLOTS) {
		if (p->first[i] == pid + 1)
			return false;
		if (!p->first[i]) {
			p->first[i] = pid + 1;
			p->n_seen++;
			return true;
		}
	}
}

static int probe_sink(void *ctx, const struct agent_sample *s)
{
	struct probe *p = ctx;

	if (p->procs && s->n_user && !proctab__touch(p->procs, s->pid)) {
		const struct agent_sample *py = s;

		s = bpfpy__sample(bpf_sampler__python(p->s), proctab__maps(p->procs, s->pid), py,
				  p->py_buf, 2 * PROFILE_MAX_DEPTH, &p->py_out);
		p->py_samples += s != py;
		py = s;
		s = bpflua__sample(bpf_sampler__lua(p->s), proctab__maps(p->procs, s->pid), py,
				   p->lua_buf, 2 * PROFILE_MAX_DEPTH, &p->lua_out);
		p->lua_samples += s != py;
		py = s;
		s = bpfv8__sample(bpf_sampler__v8(p->s), proctab__maps(p->procs, s->pid), py,
				  p->js_buf, 2 * PROFILE_MAX_DEPTH, &p->js_out);
		p->js_samples += s != py;
	}

	if (!p->first_ns)
		p->first_ns = s->time_ns;
	if (p->sink_max && p->seen >= p->sink_max)
		return -ENOSPC;
	p->seen++;
	p->pid_samples += s->pid == p->count_pid;
	if (p->quiet)
		return 0;
	if (probe_first(p, s->pid)) {
		char maps[40];

		snprintf(maps, sizeof(maps), "/proc/%u/maps", s->pid);
		printf("#first %u %d comm=%s", s->pid, access(maps, R_OK) == 0,
		       s->comm ? s->comm : "");
		for (int i = 0; i < s->n_labels; i++)
			printf(" %s=%s", s->labels[i].key, s->labels[i].value);
		printf("\n");
	}
	printf("%u %u %s", s->pid, s->tid, s->comm ? s->comm : "?");
	for (int i = s->n_kernel + s->n_user - 1; i >= s->n_kernel; i--)
		printf(";u:0x%llx", (unsigned long long)s->frames[i]);
	for (int i = s->n_kernel - 1; i >= 0; i--) {
		const char *name = ksyms__resolve(p->ks, s->frames[i], NULL);

		p->kernel_frames++;
		p->kernel_frames_named += name != NULL;
		if (name)
			printf(";k:%s", name);
		else
			printf(";k:0x%llx", (unsigned long long)s->frames[i]);
	}
	if (s->flags & SAMPLE_F_UNWOUND)
		printf(";x:cfi"); /* walked by unwind tables (readers skip it) */
	printf(" 1\n");
	return 0;
}

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	stop = 1;
}

static long maxrss_kb(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_maxrss;
}

/*
 * The sampling program's run time and runs, walks by tables and Python frames included (tail
 * calls run in its invocation): kernel.bpf_stats_enabled must be on (benches), or
 * EDGEPROF_PROBE_STATS=1, which holds the kernel's statistics on for this run through
 * BPF_ENABLE_STATS whatever another bench writes to that sysctl meanwhile.
 */
static void prog_stats(const struct bpf_sampler *s)
{
	struct bpf_prog_info info = {0};
	__u32 len = sizeof(info);

	if (!bpf_obj_get_info_by_fd(bpf_sampler__prog_fd(s), &info, &len))
		fprintf(stderr, "prog: run_time_ns=%llu run_cnt=%llu\n",
			(unsigned long long)info.run_time_ns, (unsigned long long)info.run_cnt);
}

static void usage(void)
{
	fprintf(stderr, "usage: bpf-probe [--seconds N] [--hz N] [--ring-kb N] [--depth N]\n"
		"    [--pid P]... [--comm PREFIX] [--cgroup DIR] [--no-kernel] [--idle]\n"
		"    [--poll-ms MS (epoll timeout)] [--sleep-ms MS (between polls)]\n"
		"    [--sink-max N] [--quiet] [--count-pid P (its samples in the stats line)]\n"
		"    [--no-leaf (the user registers and stack words for leaf frames not read)]\n"
		"    [--no-cfi (user stacks by frame pointers only, no unwind tables)]\n"
		"    [--python (CPython processes' frames, as the agent: bpf/python.h)]\n"
		"    [--v8 (the same: node processes' JavaScript frames too, bpf/v8.h)]\n");
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "seconds", 1, 0, 's' }, { "hz", 1, 0, 'f' }, { "ring-kb", 1, 0, 'r' },
		{ "depth", 1, 0, 'd' }, { "pid", 1, 0, 'p' }, { "comm", 1, 0, 'c' },
		{ "cgroup", 1, 0, 'g' }, { "no-kernel", 0, 0, 'K' }, { "idle", 0, 0, 'i' },
		{ "poll-ms", 1, 0, 'P' }, { "sleep-ms", 1, 0, 'S' }, { "sink-max", 1, 0, 'm' },
		{ "quiet", 0, 0, 'q' }, { "count-pid", 1, 0, 'C' }, { "no-leaf", 0, 0, 'L' },
		{ "no-cfi", 0, 0, 'F' }, { "python", 0, 0, 'Y' }, { "v8", 0, 0, 'Y' },
		{ 0 }
	};
	struct bpf_sampler_opts o = { .kernel_stacks = true };
	struct probe p = { 0 };
	struct bpf_sampler *s;
	struct bpf_sampler_stats st;
	uint32_t pids[PROBE_MAX_PIDS];
	double seconds = 5;
	int poll_ms = 100, sleep_ms = 0, c, ret;
	uint64_t end, t0, open_ns;
	long rss_start = maxrss_kb(), rss_open, rss_ksyms;
	char err[256];

	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 's': seconds = atof(optarg); break;
		case 'f': o.hz = atoi(optarg); break;
		case 'r': o.ringbuf_kb = atoi(optarg); break;
		case 'd': o.max_depth = atoi(optarg); break;
		case 'p':
			if (o.n_pids == PROBE_MAX_PIDS)
				return 2;
			pids[o.n_pids++] = strtoul(optarg, NULL, 10);
			break;
		case 'c': o.comm_prefix = optarg; break;
		case 'g':
			ret = bpf_sampler__cgroup_id(optarg, &o.cgroup_id);
			if (ret) {
				fprintf(stderr, "bpf-probe: %s: %s\n", optarg, strerror(-ret));
				return 2;
			}
			break;
		case 'K': o.kernel_stacks = false; break;
		case 'L': o.no_leaf_context = true; break;
		case 'F': o.no_cfi = true; break;
		case 'i': o.include_idle = true; break;
		case 'P': poll_ms = atoi(optarg); break;
		case 'S': sleep_ms = atoi(optarg); break;
		case 'm': p.sink_max = strtoull(optarg, NULL, 10); break;
		case 'q': p.quiet = true; break;
		case 'C': p.count_pid = strtoul(optarg, NULL, 10); break;
		case 'Y':
			p.procs = proctab__new(256, 256);
			if (!p.procs)
				return 2;
			break;
		default: usage(); return 2;
		}
	}
	o.pids = pids;
	port_log_open("bpf-probe", false);
	/* SIGINT/SIGTERM end the run early, still with the stats line. */
	sigaction(SIGINT, &(struct sigaction){ .sa_handler = on_signal }, NULL);
	sigaction(SIGTERM, &(struct sigaction){ .sa_handler = on_signal }, NULL);
	if (getenv("EDGEPROF_PROBE_STATS") && bpf_enable_stats(BPF_STATS_RUN_TIME) < 0)
		fprintf(stderr, "bpf-probe: BPF_ENABLE_STATS: %s\n", strerror(errno));
	t0 = port_clock_mono_ns();
	p.start_ns = t0;
	ret = bpf_sampler__open(&o, probe_sink, &p, &s, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "bpf-probe: BPF sampler unavailable: %s\n", err);
		return 3;
	}
	p.s = s;
	open_ns = port_clock_mono_ns() - t0;
	rss_open = maxrss_kb();
	p.ks = ksyms__load();
	rss_ksyms = maxrss_kb();
	end = port_clock_mono_ns() + (uint64_t)(seconds * 1e9);
	while (!stop && port_clock_mono_ns() < end) {
		uint64_t left_ms = (end - port_clock_mono_ns()) / NSEC_PER_MSEC;

		if (sleep_ms)
			port_sleep_ns(sleep_ms * NSEC_PER_MSEC); /* a slow reader: the ring fills */
		ret = bpf_sampler__poll(s, left_ms < (uint64_t)poll_ms ? (int)left_ms + 1
								       : poll_ms);
		if (ret < 0) {
			fprintf(stderr, "bpf-probe: poll: %s\n", strerror(-ret));
			break;
		}
	}
	/* Drain what is left (bounded batches). */
	while (bpf_sampler__poll(s, 0) > 0)
		;
	bpf_sampler__stats(s, &st);
	prog_stats(s);
	fflush(stdout);
	fprintf(stderr, "samples=%llu dropped_ringbuf=%llu dropped_sink=%llu truncated=%llu "
		"cpus=%u open_ms=%.1f first_sample_ms=%.1f kernel_frames=%llu named=%llu "
		"ksyms=%u hidden=%d maxrss_kb=start:%ld,open:%ld,ksyms:%ld,end:%ld "
		"pid_samples=%llu\n",
		(unsigned long long)st.samples, (unsigned long long)st.dropped_ringbuf,
		(unsigned long long)st.dropped_sink, (unsigned long long)st.truncated, st.cpus,
		open_ns / 1e6, p.first_ns ? (p.first_ns - t0) / 1e6 : -1.0,
		(unsigned long long)p.kernel_frames, (unsigned long long)p.kernel_frames_named,
		ksyms__count(p.ks), ksyms__hidden(p.ks), rss_start, rss_open, rss_ksyms,
		maxrss_kb(), (unsigned long long)p.pid_samples);
	fprintf(stderr, "cfi: listed=%llu unfit=%llu no_room=%llu fp_built=%llu procs_evicted=%llu "
		"files=%llu "
		"files_unfit=%llu "
		"files_evicted=%llu no_table=%llu rows=%llu pages=%llu rows_unfit=%llu load_ms=%.1f "
		"walks: "
		"outermost=%llu no_mapping=%llu no_rule=%llu read=%llu bad=%llu depth=%llu "
		"cached=%llu cache_changed=%llu\n",
		(unsigned long long)st.cfi.loads, (unsigned long long)st.cfi.unfit,
		(unsigned long long)st.cfi.no_room,
		(unsigned long long)st.cfi.fp_built, (unsigned long long)st.cfi.procs_evicted, (unsigned long long)st.cfi.files,
		(unsigned long long)st.cfi.files_unfit, (unsigned long long)st.cfi.files_evicted,
		(unsigned long long)st.cfi.no_table, (unsigned long long)st.cfi.rows,
		(unsigned long long)st.cfi.pages, (unsigned long long)st.cfi.rows_unfit,
		st.cfi.load_ns / 1e6,
		(unsigned long long)st.cfi.walks[CFI_END_OUTERMOST],
		(unsigned long long)st.cfi.walks[CFI_END_NO_MAPPING],
		(unsigned long long)st.cfi.walks[CFI_END_NO_RULE],
		(unsigned long long)st.cfi.walks[CFI_END_READ],
		(unsigned long long)st.cfi.walks[CFI_END_BAD],
		(unsigned long long)st.cfi.walks[CFI_END_DEPTH], (unsigned long long)st.cfi.cached,
		(unsigned long long)st.cfi.cache_changed);
	if (p.procs) {
		struct bpfpy_stats py;
		struct bpflua_stats lua;
		struct bpfv8_stats js;

		bpfpy__stats(bpf_sampler__python(s), &py);
		fprintf(stderr, "python: spliced=%llu listed=%llu looked_at=%llu unknown_version=%llu "
			"program_samples=%llu no_thread=%llu read_errors=%llu\n",
			(unsigned long long)p.py_samples, (unsigned long long)py.procs,
			(unsigned long long)py.looked_at, (unsigned long long)py.unknown_version,
			(unsigned long long)py.bpf_samples, (unsigned long long)py.no_thread,
			(unsigned long long)py.read_errors);
		bpflua__stats(bpf_sampler__lua(s), &lua);
		fprintf(stderr, "lua: spliced=%llu listed=%llu states=%llu mismatch=%llu "
			"program_samples=%llu no_state=%llu torn=%llu read_errors=%llu\n",
			(unsigned long long)p.lua_samples, (unsigned long long)lua.procs,
			(unsigned long long)lua.states, (unsigned long long)lua.mismatch,
			(unsigned long long)lua.bpf_samples, (unsigned long long)lua.no_state,
			(unsigned long long)lua.torn, (unsigned long long)lua.read_errors);
		bpfv8__stats(bpf_sampler__v8(s), &js);
		fprintf(stderr, "v8: spliced=%llu listed=%llu looked_at=%llu unknown_version=%llu "
			"program_samples=%llu program_frames=%llu none=%llu truncated=%llu "
			"read_errors=%llu\n",
			(unsigned long long)p.js_samples, (unsigned long long)js.procs,
			(unsigned long long)js.looked_at, (unsigned long long)js.unknown_version,
			(unsigned long long)js.bpf_samples, (unsigned long long)js.bpf_frames,
			(unsigned long long)js.none, (unsigned long long)js.bpf_truncated,
			(unsigned long long)js.read_errors);
	}
	bpf_sampler__free(s);
	proctab__free(p.procs);
	ksyms__free(p.ks);
	return 0;
}
