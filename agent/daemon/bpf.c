// SPDX-License-Identifier: MIT
/* agent/daemon/bpf.c — the BPF sampler in the daemon (agent/daemon/bpf.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent/core/aggregate.h"
#include "agent/core/ksyms.h"
#include "agent/core/perfmap.h"
#include "agent/core/procmaps.h"
#include "agent/daemon/bpf.h"
#include "agent/daemon/services.h"
#include "agent/daemon/stats.h"
#include "bpf/cpus.h"
#include "bpf/leaf.h"
#include "bpf/lua.h"
#include "bpf/mmapev.h"
#include "bpf/python.h"
#include "bpf/sampler.h"

/*
 * The unwind tables of the programs sampled (a compiler's are megabytes) leave the RSS this
 * often: what a second of samples touched comes back as minor faults (~0.2 us a page).
 */
#define LEAF_TRIM_NS NSEC_PER_SEC
#define INTERP_RECENT_NS (2 * NSEC_PER_SEC) /* an interpreter sample this recent: read often */

#ifdef CONFIG_BPF_OFFCPU
#define OFFCPU_MIN_US CONFIG_BPF_OFFCPU_MIN_US
#else
#define OFFCPU_MIN_US 0 /* no off-CPU profiles: not printed */
#endif

/* What the round's "edgeprof bpf:" line counts, from the sampler and its helpers. */
struct bpf_counters {
	struct bpf_sampler_stats st;
	struct ksyms_stats ks;
	struct leaf_stats leaf;
	struct mmapev_stats mm;
	struct proctab_stats procs;
	struct bpfpy_stats py;
	struct bpflua_stats lua;
	struct bpfv8_stats v8;
	uint64_t cfi_walks; /* by tables, however they ended */
	uint64_t offcpu_min_us;
};

#define BPF_STAT(member, name) STAT(struct bpf_counters, member, name)
#define BPF_STAT_MS(member, name) STAT_MS(struct bpf_counters, member, name)

static const struct stat_field bpf_stat_fields[] = {
	BPF_STAT(st.samples, "samples"),
	BPF_STAT(st.dropped_ringbuf, "dropped_ringbuf"),
	BPF_STAT(st.dropped_sink, "dropped_sink"),
	BPF_STAT(st.truncated, "truncated"),
	BPF_STAT(st.cpus, "cpus"),
	BPF_STAT(st.cpu_offline, "cpu_offline"),
	BPF_STAT(ks.named, "ksyms_named"),
	BPF_STAT(ks.unnamed, "ksyms_unnamed"),
	BPF_STAT(ks.dropped, "ksyms_dropped"),
	BPF_STAT(ks.resets, "ksyms_resets"),
	BPF_STAT(ks.passes, "ksyms_passes"),
	BPF_STAT(ks.lookups, "ksyms_lookups"),
	BPF_STAT(st.label_reads, "label_reads"),
	BPF_STAT(st.cgroup_reads, "cgroup_reads"),
	BPF_STAT(st.pauses, "pauses"),
	BPF_STAT_MS(st.paused_ns, "paused_ms"),
	BPF_STAT_MS(st.events_enabled_ns, "events_enabled_ms"),
};

/* CPython processes' frames (bpf/python.h). */
static const struct stat_field py_stat_fields[] = {
	BPF_STAT(py.procs, "py_procs"),
	BPF_STAT(py.looked_at, "py_looked_at"),
	BPF_STAT(py.files_read, "py_files_read"),
	BPF_STAT(py.unknown_version, "py_unknown_version"),
	BPF_STAT(py.procs_full, "py_procs_full"),
	BPF_STAT(py.exited, "py_exited"),
	BPF_STAT(py.bpf_samples, "py_samples"),
	BPF_STAT(py.spliced, "py_spliced"),
	BPF_STAT(py.frames, "py_frames"),
	BPF_STAT(py.no_eval, "py_no_eval"),
	BPF_STAT(py.no_thread, "py_no_thread"),
	BPF_STAT(py.idle, "py_idle"),
	BPF_STAT(py.bpf_truncated, "py_truncated"),
	BPF_STAT(py.truncated, "py_cut"),
	BPF_STAT(py.read_errors, "py_read_errors"),
};

/* Lua processes' frames (bpf/lua.h). */
static const struct stat_field lua_stat_fields[] = {
	BPF_STAT(lua.procs, "lua_procs"),
	BPF_STAT(lua.looked_at, "lua_looked_at"),
	BPF_STAT(lua.unknown_version, "lua_unknown_version"),
	BPF_STAT(lua.no_execute, "lua_no_execute"),
	BPF_STAT(lua.procs_full, "lua_procs_full"),
	BPF_STAT(lua.exited, "lua_exited"),
	BPF_STAT(lua.scans, "lua_scans"),
	BPF_STAT(lua.states, "lua_states"),
	BPF_STAT(lua.states_full, "lua_states_full"),
	BPF_STAT(lua.bpf_samples, "lua_samples"),
	BPF_STAT(lua.spliced, "lua_spliced"),
	BPF_STAT(lua.frames, "lua_frames"),
	BPF_STAT(lua.mismatch, "lua_mismatch"),
	BPF_STAT(lua.no_state, "lua_no_state"),
	BPF_STAT(lua.bpf_truncated, "lua_truncated"),
	BPF_STAT(lua.torn, "lua_torn"),
	BPF_STAT(lua.cut, "lua_cut"),
	BPF_STAT(lua.read_errors, "lua_read_errors"),
};

/* Node's JavaScript frames (bpf/v8.h). */
static const struct stat_field v8_stat_fields[] = {
	BPF_STAT(v8.procs, "v8_procs"),
	BPF_STAT(v8.looked_at, "v8_looked_at"),
	BPF_STAT(v8.files_read, "v8_files_read"),
	BPF_STAT(v8.unknown_version, "v8_unknown_version"),
	BPF_STAT(v8.procs_full, "v8_procs_full"),
	BPF_STAT(v8.perf_map, "v8_perf_map"),
	BPF_STAT(v8.exited, "v8_exited"),
	BPF_STAT(v8.bpf_samples, "v8_samples"),
	BPF_STAT(v8.none, "v8_none"),
	BPF_STAT(v8.spliced, "v8_spliced"),
	BPF_STAT(v8.frames, "v8_frames"),
	BPF_STAT(v8.inserted, "v8_inserted"),
	BPF_STAT(v8.cut, "v8_cut"),
	BPF_STAT(v8.bpf_truncated, "v8_truncated"),
	BPF_STAT(v8.read_errors, "v8_read_errors"),
};

/* What became of each sample's leaf frame (bpf/leaf.h). */
static const struct stat_field leaf_stat_fields[] = {
	BPF_STAT(leaf.fixed, "leaf_fixed"),
	BPF_STAT(leaf.callers, "leaf_callers"),
	BPF_STAT(leaf.linked, "leaf_linked"),
	BPF_STAT(leaf.no_context, "leaf_no_context"),
	BPF_STAT(leaf.no_table, "leaf_no_table"),
	BPF_STAT(leaf.no_rule, "leaf_no_rule"),
	BPF_STAT(leaf.deep, "leaf_deep"),
	BPF_STAT(leaf.implausible, "leaf_implausible"),
	BPF_STAT(leaf.tables_mapped, "leaf_tables"),
	BPF_STAT(leaf.tables_evicted, "leaf_tables_evicted"),
	BPF_STAT(leaf.rule_misses, "leaf_rule_misses"),
	BPF_STAT(leaf.copies, "stack_copies"),
	BPF_STAT(leaf.copies_whole, "stack_copies_whole"),
	BPF_STAT(leaf.copies_cut, "stack_copies_cut"),
	BPF_STAT(leaf.copies_left, "stack_copies_left"),
};

/* Where new processes' maps came from (bpf/mmapev.h). */
static const struct stat_field mmap_stat_fields[] = {
	BPF_STAT(mm.cpus, "mmap_cpus"),
	BPF_STAT(mm.build_ids, "mmap_build_ids"),
	BPF_STAT(mm.execs, "mmap_execs"),
	BPF_STAT(mm.forks, "mmap_forks"),
	BPF_STAT(procs.loaded, "maps_from_records"),
	BPF_STAT(mm.evicted, "mmap_evicted"),
	BPF_STAT(mm.overflow, "mmap_overflow"),
	BPF_STAT(mm.lost, "mmap_lost"),
	BPF_STAT(procs.forgotten, "procs_forgotten"),
	BPF_STAT(mm.cpu_offline, "mmap_cpu_offline"),
};

/* The walk by unwind tables (bpf/cfitab.h). */
static const struct stat_field cfi_stat_fields[] = {
	BPF_STAT(cfi_walks, "cfi_walks"),
	BPF_STAT(st.cfi.walks[CFI_END_OUTERMOST], "cfi_whole"),
	BPF_STAT(st.cfi.walks[CFI_END_NO_MAPPING], "cfi_no_mapping"),
	BPF_STAT(st.cfi.walks[CFI_END_NO_RULE], "cfi_no_rule"),
	BPF_STAT(st.cfi.walks[CFI_END_READ], "cfi_read"),
	BPF_STAT(st.cfi.walks[CFI_END_BAD], "cfi_bad"),
	BPF_STAT(st.cfi.walks[CFI_END_DEPTH], "cfi_depth"),
	BPF_STAT(st.cfi.procs, "cfi_procs"),
	BPF_STAT(st.cfi.loads, "cfi_listed"),
	BPF_STAT(st.cfi.maps_known, "cfi_listed_from_records"),
	BPF_STAT(st.cfi.unfit, "cfi_unfit"),
	BPF_STAT(st.cfi.no_room, "cfi_no_room"),
	BPF_STAT(st.cfi.fp_built, "cfi_fp_built"),
	BPF_STAT(st.cfi.procs_evicted, "cfi_procs_evicted"),
	BPF_STAT(st.cfi.files, "cfi_files"),
	BPF_STAT(st.cfi.files_unfit, "cfi_files_unfit"),
	BPF_STAT(st.cfi.files_evicted, "cfi_files_evicted"),
	BPF_STAT(st.cfi.no_table, "cfi_no_table"),
	BPF_STAT(st.cfi.rows, "cfi_rows"),
	BPF_STAT(st.cfi.pages, "cfi_pages"),
	BPF_STAT(st.cfi.rows_unfit, "cfi_rows_unfit"),
	BPF_STAT_MS(st.cfi.load_ns, "cfi_load_ms"),
	BPF_STAT(st.cfi.cached, "cfi_cached"),
	BPF_STAT(st.cfi.cache_changed, "cfi_cache_changed"),
	BPF_STAT(st.cfi.partial, "cfi_partial"),
};

/* What the off-CPU profile misses (since the agent started): the threshold's, the ring's. */
static const struct stat_field offcpu_stat_fields[] = {
	BPF_STAT(offcpu_min_us, "min_us"),
	BPF_STAT(st.offcpu_sent, "records"),
	BPF_STAT(st.offcpu_dropped, "dropped_ringbuf"),
	BPF_STAT(st.offcpu_dropped_ns, "dropped_ringbuf_ns"),
	BPF_STAT(st.offcpu_below_ns, "below_threshold_ns"),
	BPF_STAT(st.offcpu_untracked, "untracked_blocks"),
};

/*
 * s with the exe label first, where the sampler used to put it, in l; s itself when the exe is
 * unknown. It comes from the maps the process table reads anyway (their main-program mapping):
 * no readlink per new process.
 */
static const struct agent_sample *with_exe(struct agent *a, const struct agent_sample *s,
					   struct agent_sample *l)
{
	const char *exe = proctab__exe(a->procs, s->pid);

	if (!exe || s->n_labels >= SAMPLE_MAX_LABELS)
		return s;
	*l = *s;
	l->labels[0] = (struct sample_label){"exe", exe};
	memcpy(&l->labels[1], s->labels, s->n_labels * sizeof(s->labels[0]));
	l->n_labels++;
	return l;
}

/* Whether pm maps anonymous code (a JIT's: node, a JVM, LuaJIT). */
static bool has_jit_code(const struct procmaps *pm)
{
	for (unsigned int i = 0; i < pm->n; i++)
		if (!pm->maps[i].path[0])
			return true;
	return false;
}

/*
 * A process is brought up to date while it runs, as its samples come: its maps when the
 * interrupted pc is in none (code mapped since: a JIT's, whose pages the mmap records may not
 * show), and, when a frame is in anonymous code (node, a JVM, LuaJIT), its perf map; each at
 * most every JIT_SYNC_NS. Names are given at the round's end, when a short node may have
 * exited, and its /proc directory with it (agent/core/perfmap.h).
 */
#define JIT_SYNC_NS (200 * 1000 * 1000ull)

static void jit_sync(struct agent *a, const struct agent_sample *s)
{
	const struct procmaps *pm = a->sym ? proctab__maps(a->procs, s->pid) : NULL;
	bool in_jit = false;

	if (!IS_ENABLED(CONFIG_PERFMAP) || !pm || !s->n_user)
		return;
	/* the interrupted pc is real code: in no mapping, it is code mapped since (a JIT's) */
	if (!procmaps__find(pm, s->frames[s->n_kernel]) &&
	    !proctab__refresh(a->procs, s->pid, JIT_SYNC_NS))
		pm = proctab__maps(a->procs, s->pid);
	if (!pm || !has_jit_code(pm))
		return;
	for (unsigned int i = s->n_kernel; i < s->n_kernel + s->n_user && !in_jit; i++) {
		const struct procmap *m = procmaps__find(pm, s->frames[i]);

		in_jit = m && !m->path[0];
	}
	if (in_jit)
		perfmaps__sync(perfmaps__shared(), s->pid);
}

static int bpf_sink(void *ctx, const struct agent_sample *s)
{
	struct agent *a = ctx;
	struct service *svc = agent__service(a, a->cfg.bpf_service);
	uint64_t frames[2 * CONFIG_MAX_STACK_DEPTH + 1], spliced[2 * CONFIG_MAX_STACK_DEPTH];
	uint64_t v8buf[2 * CONFIG_MAX_STACK_DEPTH];
	struct agent_sample fixed, l, py, lua, v8s;
	bool known;

	if (!svc)
		return -ENOSPC;
	/* the exec and mmaps of everything up to this sample, before its maps are looked up */
	mmapev__advance(a->mmapev, s->time_ns, a->bpf_ordered);
	if (s->n_py) /* Python, Lua or V8 frames: named from the process (agent_bpf__poll) */
		a->interp_sample_ns = s->time_ns;
	if (s->tid == s->pid) /* an exec no mmap record told of: maps read before it are stale */
		proctab__main_comm(a->procs, s->pid, s->comm);
	known = s->n_user && !proctab__touch(a->procs, s->pid);
	if (a->leaf && leaf__fix(a->leaf, a->procs, s, CONFIG_MAX_STACK_DEPTH, frames, &fixed))
		s = &fixed;
	if (known)
		jit_sync(a, s);
	if (known) /* Python frames in place of the eval loop's (looks at new processes) */
		s = bpfpy__sample(bpf_sampler__python(a->bpf), proctab__maps(a->procs, s->pid), s,
				  spliced, 2 * CONFIG_MAX_STACK_DEPTH, &py);
	if (known) /* Lua's in place of luaV_execute's (a record carries one interpreter's) */
		s = bpflua__sample(bpf_sampler__lua(a->bpf), proctab__maps(a->procs, s->pid), s,
				   spliced, 2 * CONFIG_MAX_STACK_DEPTH, &lua);
	if (known) /* JavaScript frames in place of V8's native ones (bpf/v8.h) */
		s = bpfv8__sample(bpf_sampler__v8(a->bpf), proctab__maps(a->procs, s->pid), s,
				  v8buf, 2 * CONFIG_MAX_STACK_DEPTH, &v8s);
	if (known)
		s = with_exe(a, s, &l);
	for (unsigned int i = 0; a->ksyms && i < s->n_kernel; i++)
		ksyms__want(a->ksyms, s->frames[i]);
	if (s->flags & SAMPLE_F_OFFCPU)
		return agent__service_kind(a, svc, KIND_OFFCPU)
			       ? aggregate__add(svc->kinds[KIND_OFFCPU], s)
			       : -ENOSPC;
	agent__pull_add(a, s, svc->name);
	return aggregate__add(svc->agg, s);
}

static const struct procmaps *proctab_loaded_maps(void *ctx, uint32_t pid)
{
	return proctab__loaded_maps(ctx, pid);
}

/* New programs' maps from the kernel's mmap records, where it grants them (bpf/mmapev.h). */
static void bpf_mmap_events(struct agent *a)
{
	const char *off = getenv("EDGEPROF_NO_MMAP_EVENTS"); /* 1: /proc only (benchmarks) */
	char err[256] = "";

	if (off && *off == '1')
		return;
	a->mmapev = mmapev__open(a->procs, err, sizeof(err));
	if (a->mmapev)
		proctab__set_loader(a->procs, mmapev__take, a->mmapev);
	else if (err[0])
		pr_info("no mmap records (%s): new processes' maps read from /proc", err);
}

void agent_bpf__start(struct agent *a)
{
	struct bpf_sampler_opts o = {.hz = (unsigned int)a->cfg.hz,
				     .ringbuf_kb = (unsigned int)a->cfg.bpf_ringbuf_kb,
				     .kernel_stacks = a->cfg.kernel_stacks,
				     .no_exe_label = true,
				     .offcpu = a->cfg.offcpu,
				     .no_cpu = a->cfg.no_cpu,
				     /* 0 asks for Kconfig's: 1 ns is as good as none */
				     .offcpu_min_ns = !a->cfg.offcpu_min_set ? 0
				     : a->cfg.offcpu_min_us ? (uint64_t)a->cfg.offcpu_min_us * 1000 : 1};
	struct bpf_sampler_stats st;
	struct bpf_sampler *s;
	char err[256] = "";
	int err_watch;

	if (!strcmp(a->cfg.sampler, "sigprof"))
		return;
	if (a->cfg.bpf_cgroup && bpf_sampler__cgroup_id(a->cfg.bpf_cgroup, &o.cgroup_id)) {
		/* a filter that cannot be applied must not widen to the whole machine */
		pr_warn("--bpf-cgroup %s: no cgroup id: BPF sampler off", a->cfg.bpf_cgroup);
		return;
	}
	bpf_mmap_events(a);
	/* with the mmap records, a new process need not be read from /proc before it exits */
	o.no_new_proc_wake = a->mmapev != NULL;
	if (bpf_sampler__open(&o, bpf_sink, a, &s, err, sizeof(err))) {
		pr_warn("BPF sampler unavailable (%s): SIGPROF rings only", err);
		proctab__set_loader(a->procs, NULL, NULL);
		mmapev__free(a->mmapev);
		a->mmapev = NULL;
		return;
	}
	a->bpf = s;
	if (a->mmapev) /* a new process's maps for its tables: those its samples took */
		bpf_sampler__set_maps(s, proctab_loaded_maps, a->procs);
	err_watch = mmapev__watch(a->mmapev, bpf_sampler__fd(s));
	if (err_watch)
		pr_warn("cannot wait on the mmap records (%s): some may be lost", strerror(-err_watch));
	bpf_sampler__stats(s, &st);
	a->bpf_ordered = !st.perf_buffer;
	a->leaf = leaf__new(CONFIG_BPF_LEAF_TABLES, CONFIG_BPF_LEAF_RULES,
			    CONFIG_BPF_LEAF_INDEX_FDES);
	if (!a->leaf)
		pr_warn("no memory for the leaf frames' unwind tables: leaf callers not restored");
	/* Names are read at the end of a round, only for the kernel addresses it saw. */
	if (o.kernel_stacks) {
		a->ksyms = ksyms__open("/proc/kallsyms", CONFIG_KSYMS_CACHE_ENTRIES);
		if (!a->ksyms)
			pr_warn("cannot read /proc/kallsyms (%s): kernel frames unnamed",
				strerror(errno));
		ksyms__set_namer(a->ksyms, bpf_sampler__name_kernel, s);
	}
}

void agent_bpf__poll(struct agent *a, int timeout_ms)
{
	uint64_t now;

	if (!a->bpf) {
		agent__idle_sleep(timeout_ms);
		return;
	}
	/*
	 * While interpreters are sampled, the ring is read every CONFIG_BPF_INTERP_WAKE_MS: their
	 * frames are named from the process's memory, which a short-lived process takes with it
	 * at exit. Half the ring or a second went by: python3 -m pydoc runs lost 10-45 % of their
	 * samples' names (bpf-interp-short).
	 */
	if (CONFIG_BPF_INTERP_WAKE_MS && timeout_ms > CONFIG_BPF_INTERP_WAKE_MS &&
	    port_clock_mono_ns() - a->interp_sample_ns < INTERP_RECENT_NS)
		timeout_ms = CONFIG_BPF_INTERP_WAKE_MS;
	bpf_sampler__poll(a->bpf, timeout_ms);
	now = port_clock_mono_ns();
	/* every sample up to now was delivered: the records up to now can be taken */
	if (bpf_sampler__caught_up(a->bpf))
		mmapev__advance(a->mmapev, now, true);
	bpfpy__sweep(bpf_sampler__python(a->bpf), now);
	bpflua__sweep(bpf_sampler__lua(a->bpf), now);
	bpfv8__sweep(bpf_sampler__v8(a->bpf), now);
	if (now - a->leaf_trimmed_ns >= LEAF_TRIM_NS) {
		leaf__trim(a->leaf);
		a->leaf_trimmed_ns = now;
	}
	if (now - a->mmap_rescanned_ns >= CPUS_RESCAN_NS) { /* CPU hotplug, as the sampler's */
		mmapev__rescan(a->mmapev);
		a->mmap_rescanned_ns = now;
	}
}

void agent_bpf__stop(struct agent *a)
{
	bpf_sampler__free(a->bpf);
	proctab__set_loader(a->procs, NULL, NULL);
	mmapev__free(a->mmapev);
	ksyms__free(a->ksyms);
	leaf__free(a->leaf);
}

void agent_bpf__pause(struct agent *a, bool paused)
{
	bpf_sampler__pause(a->bpf, paused);
}

void agent_bpf__round_done(struct agent *a)
{
	leaf__trim(a->leaf);
	a->leaf_trimmed_ns = port_clock_mono_ns();
}

void agent_bpf__name_kernel_frames(struct agent *a)
{
	int err = ksyms__update(a->ksyms);

	if (err)
		pr_warn("reading /proc/kallsyms: %s: kernel frames unnamed", strerror(-err));
}

void agent_bpf__comment(struct agent *a, char *buf, size_t len)
{
	struct bpf_counters c = {0};

	buf[0] = 0;
	if (!a->bpf)
		return;
	bpf_sampler__stats(a->bpf, &c.st);
	ksyms__stats(a->ksyms, &c.ks);
	stats__append(buf, len, "edgeprof bpf:", bpf_stat_fields, STATS_N(bpf_stat_fields), &c);
	if (a->leaf) {
		leaf__stats(a->leaf, &c.leaf);
		stats__append(buf, len, "", leaf_stat_fields, STATS_N(leaf_stat_fields), &c);
	}
	mmapev__stats(a->mmapev, &c.mm);
	proctab__stats(a->procs, &c.procs);
	stats__append(buf, len, "", mmap_stat_fields, STATS_N(mmap_stat_fields), &c);
	for (int e = CFI_END_OUTERMOST; e <= CFI_END_DEPTH; e++)
		c.cfi_walks += c.st.cfi.walks[e];
	stats__append(buf, len, "", cfi_stat_fields, STATS_N(cfi_stat_fields), &c);
	if (IS_ENABLED(CONFIG_BPF_PYTHON)) {
		bpfpy__stats(bpf_sampler__python(a->bpf), &c.py);
		stats__append(buf, len, "", py_stat_fields, STATS_N(py_stat_fields), &c);
	}
	if (IS_ENABLED(CONFIG_BPF_LUA)) {
		bpflua__stats(bpf_sampler__lua(a->bpf), &c.lua);
		stats__append(buf, len, "", lua_stat_fields, STATS_N(lua_stat_fields), &c);
	}
	if (IS_ENABLED(CONFIG_BPF_V8)) {
		bpfv8__stats(bpf_sampler__v8(a->bpf), &c.v8);
		stats__append(buf, len, "", v8_stat_fields, STATS_N(v8_stat_fields), &c);
	}
}

void agent_bpf__offcpu_comment(struct agent *a, char *buf, size_t len)
{
	struct bpf_counters c = {0};

	buf[0] = 0;
	if (!IS_ENABLED(CONFIG_BPF_OFFCPU) || !a->bpf || !a->cfg.offcpu)
		return;
	bpf_sampler__stats(a->bpf, &c.st);
	c.offcpu_min_us = a->cfg.offcpu_min_set ? a->cfg.offcpu_min_us : OFFCPU_MIN_US;
	stats__append(buf, len, "edgeprof offcpu:", offcpu_stat_fields,
		      STATS_N(offcpu_stat_fields), &c);
	stats__append(buf, len, " (since the agent started)", NULL, 0, NULL);
}
