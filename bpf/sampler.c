// SPDX-License-Identifier: MIT
/*
 * bpf/sampler.c — loads profile.bpf.c (embedded skeleton), attaches it to one CPU-clock perf
 * event per online CPU and drains its ring buffer into the agent's sample sink.
 *
 * Everything is bounded: the ring (opts.ringbuf_kb), the batch per poll (SAMPLER_BATCH), the
 * per-process exe cache (PROC_CACHE_SLOTS), the cgroup name cache (CGROUP_CACHE_SLOTS). Every
 * loss is counted: ring full (per-CPU counters in the kernel), sink full (dropped_sink).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/types.h>
#include <linux/perf_event.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "bpf/cfitab.h"
#include "bpf/cpus.h"
#include "bpf/profile.h"
#include "bpf/profile.skel.h"
#include "bpf/python.h"
#include "bpf/lua.h"
#include "bpf/sampler.h"
#include "port/clock.h"
#include "port/file.h"
#include "port/log.h"

#define SAMPLER_BATCH      4096 /* samples per bpf_sampler__poll(): bounds the time in it */
#define PROC_CACHE_SLOTS   CONFIG_BPF_LABEL_CACHE_ENTRIES /* processes whose exe is cached */
#define CGROUP_CACHE_SLOTS CONFIG_BPF_CGROUP_CACHE_ENTRIES /* cgroup ids whose path is cached */
#define PROC_SWEEP_NS      (5 * NSEC_PER_SEC)
#define EXE_LEN            160
#define CGROUP_LEN         96
#define BATCH_FULL         (-EAGAIN) /* returned by the ring callback to stop a batch */
#ifdef CONFIG_BPF_CFI
#define CFG_CFI_ROWS  CONFIG_BPF_CFI_ROWS
#define CFG_CFI_PROCS CONFIG_BPF_CFI_PROCS
#define CFG_CFI_FILES CONFIG_BPF_CFI_FILES
#define CFI_BUILT 1
#else
#define CFG_CFI_ROWS  1
#define CFG_CFI_PROCS 1
#define CFG_CFI_FILES 1
#define CFI_BUILT 0
#endif
#define CFI_SWEEP_NS (5 * NSEC_PER_SEC)

/* The exe of one process, looked up once (readlink) and reused. */
struct proc_entry {
	uint32_t pid;   /* 0: free */
	bool valid;
	char exe[EXE_LEN];
};

/*
 * The path of one cgroup v2, by the id each record carries: the processes of a cgroup (a build,
 * a container) share one entry, so /proc/<pid>/cgroup is read once per cgroup, not per process.
 * Ids are not reused (64-bit kernfs ids), so an entry never goes stale.
 */
struct cgroup_entry {
	uint64_t id;
	bool used;
	char path[CGROUP_LEN]; /* "": the root cgroup, or a path too long to label */
};

struct bpf_sampler {
	struct profile_bpf *skel;
	struct ring_buffer *rb;    /* Linux 5.8+ */
	struct perf_buffer *pb;    /* or the fallback */
	struct bpf_program *prog;  /* the one of the two that is loaded */
	sample_sink_fn sink;
	void *ctx;
	int ncpus;                 /* possible CPUs */
	int *pfd;                  /* perf event fd per possible CPU, -1: none */
	uint64_t *enabled_ns;      /* each event's time enabled at the last rescan */
	struct bpf_link **links;
	unsigned hz;
	unsigned ring_bytes;
	bool perfbuf;
	bool namer;                /* name_kernel_addr is loaded (5.14+) */
	uint64_t last_sweep_ns, last_rescan_ns;
	int batch;                 /* samples delivered in the current poll */
	bool cut;                  /* the last poll left samples waiting (a batch bound) */
	struct bpf_sampler_stats st;
	struct profile_event pb_copy; /* aligned copy of a perf buffer record */
	unsigned pb_batch, pb_batch_max; /* records from the current CPU buffer, and the bound */
	bool exe_labels;           /* !opts.no_exe_label */
	char cgroup_mnt[32];       /* where cgroup v2 is mounted, "": not found (no check) */
	struct proc_entry procs[PROC_CACHE_SLOTS];
	struct cgroup_entry cgroups[CGROUP_CACHE_SLOTS];
	struct cfitab *cfi;        /* CONFIG_BPF_CFI and not opts.no_cfi: the unwind tables */
	bool offcpu, no_cpu;
	struct bpf_link *offcpu_links[3]; /* sched_switch, sys_exit, sched_process_exit */
	uint64_t last_cfi_sweep_ns;
	bool paused;               /* bpf_sampler__pause(): CPU events disabled, off-CPU detached */
	struct bpfpy *py;          /* CONFIG_BPF_PYTHON: the CPython processes' entries */
	struct bpflua *lua;        /* CONFIG_BPF_LUA: the Lua processes' entries */
	struct bpfv8 *v8;          /* CONFIG_BPF_V8: the node processes' entries */
	uint64_t paused_since_ns;
};

static void set_err(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static int read_int_file(const char *path, long *v)
{
	char buf[32];
	ssize_t n = port_file_read_small(path, buf, sizeof(buf));

	if (n <= 0)
		return n < 0 ? (int)n : -EIO;
	*v = strtol(buf, NULL, 10);
	return 0;
}

/* libbpf prints through us, and only its warnings: its debug chatter is not ours to show. */
static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	char line[256];
	size_t n;

	if (getenv("EDGEPROF_BPF_VERBOSE")) /* the verifier's log, for whoever changes the program */
		return vfprintf(stderr, fmt, ap);
	if (level == LIBBPF_DEBUG)
		return 0;
	vsnprintf(line, sizeof(line), fmt, ap);
	n = strlen(line);
	if (n && line[n - 1] == '\n')
		line[n - 1] = 0;
	pr_debug("libbpf: %s", line);
	return 0;
}

/*
 * Says which kernel feature or capability is missing before libbpf tries (and fails with a
 * verifier dump): bpf() itself, the privilege, bpf_get_stack (4.18), the ring buffer (5.8).
 */
#ifdef CONFIG_BPF_OFFCPU
/*
 * What off-CPU needs of the kernel: the ring buffer (5.8), tracepoint and raw tracepoint
 * programs (4.17), and the sched_switch tracepoint visible in tracefs (libbpf reads its id
 * there): 0, or -EOPNOTSUPP with what is missing in err.
 */
static int check_offcpu(bool perfbuf, char *err, size_t errlen)
{
	static const char *const ids[] = {"/sys/kernel/tracing/events/sched/sched_switch/id",
					   "/sys/kernel/debug/tracing/events/sched/sched_switch/id"};
	long id;

	if (perfbuf) {
		set_err(err, errlen, "off-CPU needs the BPF ring buffer (Linux 5.8)");
		return -EOPNOTSUPP;
	}
	if (libbpf_probe_bpf_prog_type(BPF_PROG_TYPE_TRACEPOINT, NULL) != 1 ||
	    libbpf_probe_bpf_prog_type(BPF_PROG_TYPE_RAW_TRACEPOINT, NULL) != 1) {
		set_err(err, errlen, "off-CPU: kernel has no tracepoint or raw tracepoint BPF "
			"programs (CONFIG_BPF_EVENTS, Linux 4.17)");
		return -EOPNOTSUPP;
	}
	if (read_int_file(ids[0], &id) && read_int_file(ids[1], &id)) {
		set_err(err, errlen, "off-CPU: the sched_switch tracepoint is not visible: tracefs "
			"is not mounted (mount -t tracefs nodev /sys/kernel/tracing), or the kernel "
			"has no CONFIG_FTRACE tracepoints");
		return -EOPNOTSUPP;
	}
	return 0;
}

static int attach_offcpu(struct bpf_sampler *s, char *err, size_t errlen)
{
	s->offcpu_links[0] = bpf_program__attach_tracepoint(s->skel->progs.offcpu_switch, "sched",
							    "sched_switch");
	if (!s->offcpu_links[0]) {
		set_err(err, errlen, "off-CPU: attaching to sched:sched_switch: %s",
			strerror(errno));
		return -errno;
	}
	s->offcpu_links[1] = bpf_program__attach_raw_tracepoint(s->skel->progs.offcpu_exit,
								"sys_exit");
	if (!s->offcpu_links[1]) {
		set_err(err, errlen, "off-CPU: attaching to the sys_exit raw tracepoint: %s",
			strerror(errno));
		return -errno;
	}
	s->offcpu_links[2] = bpf_program__attach_tracepoint(s->skel->progs.offcpu_task_exit,
							    "sched", "sched_process_exit");
	if (!s->offcpu_links[2]) {
		set_err(err, errlen, "off-CPU: attaching to sched:sched_process_exit: %s",
			strerror(errno));
		return -errno;
	}
	return 0;
}

/* Once, at open (not at each restart after a pause). */
static void offcpu_announce(const struct bpf_sampler *s)
{
	pr_info("bpf sampler: off-CPU time on (sched_switch, sys_exit; at least %llu us)",
		(unsigned long long)s->skel->rodata->offcpu_min_ns / 1000);
}

/*
 * Paused: the tracepoints detached (no program runs at a switch), and the blocks under way
 * forgotten before they are attached again, since their time would span the pause.
 */
static int pause_offcpu(struct bpf_sampler *s, bool paused)
{
	int fd = bpf_map__fd(s->skel->maps.offcpu);
	uint32_t tid;
	char err[160];

	if (!paused) {
		while (!bpf_map_get_next_key(fd, NULL, &tid) && !bpf_map_delete_elem(fd, &tid))
			;
		return attach_offcpu(s, err, sizeof(err));
	}
	for (int i = 0; i < 3; i++) {
		bpf_link__destroy(s->offcpu_links[i]);
		s->offcpu_links[i] = NULL;
	}
	return 0;
}

/* Off-CPU: its programs and maps only when asked for (and on the ring buffer). */
static int configure_offcpu(struct bpf_sampler *s, const struct bpf_sampler_opts *o, char *err,
			    size_t errlen)
{
	struct profile_bpf *skel = s->skel;

	bpf_program__set_autoload(skel->progs.offcpu_switch, s->offcpu);
	bpf_program__set_autoload(skel->progs.offcpu_exit, s->offcpu);
	bpf_program__set_autoload(skel->progs.offcpu_task_exit, s->offcpu);
	bpf_program__set_autoload(skel->progs.offcpu_cfi_walk,
				  s->offcpu && skel->rodata->cfi_enabled);
	bpf_map__set_autocreate(skel->maps.offcpu, s->offcpu);
	bpf_map__set_autocreate(skel->maps.offcpu_counts, s->offcpu);
	bpf_map__set_autocreate(skel->maps.offcpu_scratch, s->offcpu);
	bpf_map__set_autocreate(skel->maps.offcpu_cfi_progs, s->offcpu);
	skel->rodata->offcpu_min_ns =
	    o->offcpu_min_ns ? o->offcpu_min_ns : (uint64_t)CONFIG_BPF_OFFCPU_MIN_US * 1000;
	if (s->offcpu && bpf_map__set_max_entries(skel->maps.offcpu, CONFIG_BPF_OFFCPU_THREADS)) {
		set_err(err, errlen, "cannot size the off-CPU table");
		return -EINVAL;
	}
	return 0;
}

/* The off-CPU walker by tables, in its program array: 0 or -errno. */
static int offcpu_cfi_open(struct bpf_sampler *s)
{
	uint32_t zero = 0;
	int fd = bpf_program__fd(s->skel->progs.offcpu_cfi_walk);

	if (bpf_map_update_elem(bpf_map__fd(s->skel->maps.offcpu_cfi_progs), &zero, &fd, BPF_ANY))
		return -errno;
	return 0;
}

/* The per-CPU off-CPU counters, summed (vals: room for one per possible CPU). */
static void offcpu_stats(const struct bpf_sampler *s, struct bpf_sampler_stats *st, uint64_t *vals)
{
	for (uint32_t k = 0; s->offcpu && k < OFFCPU_C_N; k++) {
		uint64_t sum = 0;

		if (bpf_map_lookup_elem(bpf_map__fd(s->skel->maps.offcpu_counts), &k, vals))
			continue;
		for (int i = 0; i < s->ncpus; i++)
			sum += vals[i];
		if (k == OFFCPU_C_BELOW_NS)
			st->offcpu_below_ns = sum;
		else if (k == OFFCPU_C_SENT)
			st->offcpu_sent = sum;
		else if (k == OFFCPU_C_DROPPED)
			st->offcpu_dropped = sum;
		else if (k == OFFCPU_C_DROPPED_NS)
			st->offcpu_dropped_ns = sum;
		else
			st->offcpu_untracked = sum;
	}
}

#else
static int check_offcpu(bool perfbuf, char *err, size_t errlen)
{
	set_err(err, errlen, "built without off-CPU profiles (CONFIG_BPF_OFFCPU)");
	return -EOPNOTSUPP;
}

static int attach_offcpu(struct bpf_sampler *s, char *err, size_t errlen)
{
	return -EOPNOTSUPP;
}

static int pause_offcpu(struct bpf_sampler *s, bool paused)
{
	return 0;
}

static void offcpu_announce(const struct bpf_sampler *s)
{
}

static int configure_offcpu(struct bpf_sampler *s, const struct bpf_sampler_opts *o, char *err,
			    size_t errlen)
{
	return 0;
}

static int offcpu_cfi_open(struct bpf_sampler *s)
{
	return 0;
}

static void offcpu_stats(const struct bpf_sampler *s, struct bpf_sampler_stats *st, uint64_t *vals)
{
}
#endif /* CONFIG_BPF_OFFCPU */

#ifdef CONFIG_BPF_PYTHON
/* The CPython processes' map at its bound (bpf/python.h). */
static int python_configure(struct bpf_sampler *s)
{
	const char *off = getenv("EDGEPROF_BPF_NO_PYTHON"); /* 1: native frames only (benches) */

	s->skel->rodata->python_enabled = !(off && *off == '1');
	return bpf_map__set_max_entries(s->skel->maps.py_procs, CONFIG_BPF_PYTHON_PROCS);
}

static int python_open(struct bpf_sampler *s)
{
	if (!s->skel->rodata->python_enabled)
		return 0;
	s->py = bpfpy__new(bpf_map__fd(s->skel->maps.py_procs),
			   bpf_map__fd(s->skel->maps.py_counts), CONFIG_BPF_PYTHON_PROCS, s->ncpus);
	return s->py ? 0 : -ENOMEM;
}
#else
static int python_configure(struct bpf_sampler *s)
{
	return 0;
}

static int python_open(struct bpf_sampler *s)
{
	return 0;
}
#endif /* CONFIG_BPF_PYTHON */

#ifdef CONFIG_BPF_LUA
/* The Lua processes' map at its bound (bpf/lua.h); EDGEPROF_BPF_NO_LUA=1: native frames only. */
static int lua_configure(struct bpf_sampler *s)
{
	const char *off = getenv("EDGEPROF_BPF_NO_LUA");

	s->skel->rodata->lua_enabled = !(off && *off == '1');
	return bpf_map__set_max_entries(s->skel->maps.lua_procs, CONFIG_BPF_LUA_PROCS);
}

static int lua_open(struct bpf_sampler *s)
{
	if (!s->skel->rodata->lua_enabled)
		return 0;
	s->lua = bpflua__new(bpf_map__fd(s->skel->maps.lua_procs),
			     bpf_map__fd(s->skel->maps.lua_counts), CONFIG_BPF_LUA_PROCS, s->ncpus);
	return s->lua ? 0 : -ENOMEM;
}
#else
static int lua_configure(struct bpf_sampler *s)
{
	return 0;
}

static int lua_open(struct bpf_sampler *s)
{
	return 0;
}
#endif /* CONFIG_BPF_LUA */

#ifdef CONFIG_BPF_V8
/* The V8 processes' map at its bound (bpf/v8.h). */
static int v8_configure(struct bpf_sampler *s)
{
	const char *off = getenv("EDGEPROF_BPF_NO_V8"); /* 1: native frames only (benches) */

	s->skel->rodata->v8_enabled = !(off && *off == '1');
	return bpf_map__set_max_entries(s->skel->maps.v8_procs, CONFIG_BPF_V8_PROCS);
}

static int v8_open(struct bpf_sampler *s)
{
	if (!s->skel->rodata->v8_enabled)
		return 0;
	s->v8 = bpfv8__new(bpf_map__fd(s->skel->maps.v8_procs), bpf_map__fd(s->skel->maps.v8_counts),
			   CONFIG_BPF_V8_PROCS, s->ncpus);
	return s->v8 ? 0 : -ENOMEM;
}
#else
static int v8_configure(struct bpf_sampler *s)
{
	return 0;
}

static int v8_open(struct bpf_sampler *s)
{
	return 0;
}
#endif /* CONFIG_BPF_V8 */

static int check_kernel(bool *perfbuf, char *err, size_t errlen)
{
	LIBBPF_OPTS(bpf_map_create_opts, ro, .map_flags = BPF_F_RDONLY_PROG);
	const char *force = getenv("EDGEPROF_BPF_PERFBUF");
	long v = -1;
	int fd;

	fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, NULL, 4, 4, 1, NULL);
	if (fd >= 0) {
		close(fd);
	} else if (fd == -ENOSYS) {
		set_err(err, errlen, "no bpf() syscall: kernel without CONFIG_BPF_SYSCALL, "
			"or run under qemu-user");
		return -ENOSYS;
	} else if (fd == -EPERM || fd == -EACCES) {
		read_int_file("/proc/sys/kernel/unprivileged_bpf_disabled", &v);
		set_err(err, errlen, "bpf() not permitted: needs CAP_BPF and CAP_PERFMON, or root "
			"(kernel.unprivileged_bpf_disabled=%ld)", v);
		return -EPERM;
	} else {
		set_err(err, errlen, "bpf(BPF_MAP_CREATE) failed: %s", strerror(-fd));
		return fd;
	}
	if (libbpf_probe_bpf_prog_type(BPF_PROG_TYPE_PERF_EVENT, NULL) != 1) {
		set_err(err, errlen, "kernel has no perf_event BPF programs "
			"(CONFIG_BPF_EVENTS, Linux 4.9)");
		return -EOPNOTSUPP;
	}
	if (libbpf_probe_bpf_helper(BPF_PROG_TYPE_PERF_EVENT, BPF_FUNC_get_stack, NULL) != 1) {
		set_err(err, errlen, "kernel has no bpf_get_stack (Linux 4.18)");
		return -EOPNOTSUPP;
	}
	/* The run-time knobs are read-only global data (.rodata), which needs 5.2. */
	fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, NULL, 4, 32, 1, &ro);
	if (fd < 0) {
		set_err(err, errlen, "kernel has no BPF global data (Linux 5.2)");
		return -EOPNOTSUPP;
	}
	close(fd);
	if (force && *force == '1') {
		*perfbuf = true;
		pr_info("bpf sampler: EDGEPROF_BPF_PERFBUF=1: using perf buffers");
	} else if (libbpf_probe_bpf_map_type(BPF_MAP_TYPE_RINGBUF, NULL) != 1) {
		*perfbuf = true;
		pr_info("bpf sampler: no BPF ring buffer (Linux 5.8): using perf buffers");
	}
	return 0;
}

static unsigned ring_bytes(unsigned kb)
{
	unsigned long page = (unsigned long)sysconf(_SC_PAGESIZE);
	unsigned long want = (unsigned long)kb * 1024, sz = page;

	/* The kernel wants a power-of-two multiple of the page size. */
	while (sz < want && sz < (1UL << 30))
		sz <<= 1;
	return (unsigned)sz;
}

/* Whether array maps can be mapped into user space (BPF_F_MMAPABLE, Linux 5.5). */
static bool can_mmap_arrays(void)
{
	LIBBPF_OPTS(bpf_map_create_opts, mo, .map_flags = BPF_F_MMAPABLE);
	int fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, NULL, 4, 8, 1, &mo);

	if (fd < 0)
		return false;
	close(fd);
	return true;
}

static int configure(struct bpf_sampler *s, const struct bpf_sampler_opts *o, char *err,
		     size_t errlen)
{
	struct profile_bpf *skel = s->skel;
	unsigned depth = o->max_depth, ring;
	size_t plen = o->comm_prefix ? strlen(o->comm_prefix) : 0;
	bool wake, no_cfi;
	const char *env;
	int ret;

	if (!depth || depth > PROFILE_MAX_DEPTH)
		depth = PROFILE_MAX_DEPTH;
	if (plen > PROFILE_COMM_LEN - 1) {
		set_err(err, errlen, "comm prefix longer than %d characters", PROFILE_COMM_LEN - 1);
		return -EINVAL;
	}
	if (o->n_pids > PROFILE_MAX_PIDS) {
		set_err(err, errlen, "more than %d pids to filter", PROFILE_MAX_PIDS);
		return -EINVAL;
	}
	ring = ring_bytes(o->ringbuf_kb ? o->ringbuf_kb : CONFIG_BPF_RINGBUF_KB);
	skel->rodata->user_depth = depth;
	skel->rodata->kernel_depth = o->kernel_stacks ? depth : 0;
	skel->rodata->include_idle = o->include_idle;
	skel->rodata->leaf_context = !o->no_leaf_context;
	skel->rodata->filter_pids = o->n_pids > 0;
	skel->rodata->filter_cgroup = o->cgroup_id;
	skel->rodata->comm_prefix_len = plen;
	memcpy((char *)skel->rodata->comm_prefix, o->comm_prefix ? o->comm_prefix : "", plen);
	skel->rodata->wakeup_bytes = ring / 2;
	skel->rodata->new_proc_wake_ns = (uint64_t)CONFIG_BPF_NEW_PROC_WAKE_MS * NSEC_PER_MSEC;
	skel->rodata->wake_new_procs = !o->no_new_proc_wake;
	/* The kernel-symbol namer only where the kernel has what it needs (else kallsyms). */
	bpf_program__set_autoload(skel->progs.name_kernel_addr, s->namer);
	bpf_map__set_autocreate(skel->maps.bss, s->namer);
	/* libbpf 1.1's skeleton maps every mmapable map after the load, created or not: a .bss
	 * left out (5.10-5.13: no namer) failed the whole load with EBADF. Unmapped, it stays NULL. */
	if (!s->namer)
		bpf_map__set_map_flags(skel->maps.bss,
				       bpf_map__map_flags(skel->maps.bss) & ~BPF_F_MMAPABLE);
	/* Load one of the two programs, and create only the maps it uses. */
	bpf_program__set_autoload(skel->progs.do_sample, !s->perfbuf);
	bpf_map__set_autocreate(skel->maps.events, !s->perfbuf);
	no_cfi = o->no_cfi || ((env = getenv("EDGEPROF_BPF_NO_CFI")) && *env == '1'); /* benches */
	/* new processes wake the reader for their maps, or for their tables (cfi_counts) */
	wake = !s->perfbuf && !o->no_new_proc_wake;
	bpf_map__set_autocreate(skel->maps.seen, wake);
	bpf_map__set_autocreate(skel->maps.wake, wake || (!s->perfbuf && CFI_BUILT && !no_cfi));
	bpf_program__set_autoload(skel->progs.do_sample_pb, s->perfbuf);
	bpf_map__set_autocreate(skel->maps.pb_events, s->perfbuf);
	s->prog = s->perfbuf ? skel->progs.do_sample_pb : skel->progs.do_sample;
	/* the walk by tables: its program beside the sampling one, its maps at their bounds */
	skel->rodata->cfi_enabled = CFI_BUILT && !no_cfi;
	bpf_program__set_autoload(skel->progs.cfi_walk, !s->perfbuf && skel->rodata->cfi_enabled);
	bpf_program__set_autoload(skel->progs.cfi_walk_pb, s->perfbuf && skel->rodata->cfi_enabled);
	bpf_program__set_autoload(skel->progs.cfi_tail, !s->perfbuf && skel->rodata->cfi_enabled);
	bpf_program__set_autoload(skel->progs.cfi_tail_pb, s->perfbuf && skel->rodata->cfi_enabled);
	skel->rodata->cfi_cache_threads =
		skel->rodata->cfi_enabled && !((env = getenv("EDGEPROF_BPF_NO_WALK_CACHE")) && *env == '1')
			? PROFILE_CFI_CACHE_THREADS : 0; /* benches: the walk cache's worth */
	if (skel->rodata->cfi_enabled &&
	    (bpf_map__set_max_entries(skel->maps.cfi_rows, CFG_CFI_ROWS) ||
	     bpf_map__set_max_entries(skel->maps.cfi_procs, CFG_CFI_PROCS) ||
	     bpf_map__set_max_entries(skel->maps.cfi_slots, CFG_CFI_PROCS))) {
		set_err(err, errlen, "cannot size the unwind tables");
		return -EINVAL;
	}
	if (getenv("EDGEPROF_BPF_VERBOSE")) { /* and the verifier's statistics */
		bpf_program__set_log_level(skel->progs.cfi_walk, 4);
		bpf_program__set_log_level(skel->progs.cfi_tail, 4);
		bpf_program__set_log_level(skel->progs.do_sample, 4);
	}
	ret = configure_offcpu(s, o, err, errlen);
	if (ret)
		return ret;
	if (python_configure(s) || lua_configure(s)) {
		set_err(err, errlen, "cannot size the Python processes' map");
		return -EINVAL;
	}
	if (v8_configure(s)) {
		set_err(err, errlen, "cannot size the node processes' map");
		return -EINVAL;
	}
	if (skel->rodata->cfi_enabled && can_mmap_arrays())
		bpf_map__set_map_flags(skel->maps.cfi_rows, BPF_F_MMAPABLE);
	s->ring_bytes = ring;
	ret = bpf_map__set_max_entries(skel->maps.events, ring);
	if (ret) {
		set_err(err, errlen, "cannot size the ring buffer to %u bytes", ring);
		return ret;
	}
	return 0;
}

static int fill_pids(struct bpf_sampler *s, const struct bpf_sampler_opts *o)
{
	int fd = bpf_map__fd(s->skel->maps.pids);
	uint8_t one = 1;

	for (size_t i = 0; i < o->n_pids; i++) {
		if (bpf_map_update_elem(fd, &o->pids[i], &one, BPF_ANY))
			return -errno;
	}
	return 0;
}

static int perf_open_cpu(unsigned hz, int cpu)
{
	struct perf_event_attr attr = {
		.type = PERF_TYPE_SOFTWARE,
		.size = sizeof(attr),
		.config = PERF_COUNT_SW_CPU_CLOCK,
		.freq = 1,
		.sample_freq = hz,
		/* a read() tells whether the event still runs: see cpus__event_alive() */
		.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED,
	};
	long fd = syscall(__NR_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);

	return fd < 0 ? -errno : (int)fd;
}

static void perf_open_error(int ret, unsigned hz, char *err, size_t errlen)
{
	long v = -1;

	if (ret == -EACCES || ret == -EPERM) {
		read_int_file("/proc/sys/kernel/perf_event_paranoid", &v);
		set_err(err, errlen, "perf_event_open not permitted: needs CAP_PERFMON or root "
			"(kernel.perf_event_paranoid=%ld)", v);
	} else if (ret == -EINVAL) {
		read_int_file("/proc/sys/kernel/perf_event_max_sample_rate", &v);
		set_err(err, errlen, "perf_event_open rejected %u Hz "
			"(kernel.perf_event_max_sample_rate=%ld)", hz, v);
	} else if (ret == -ENOSYS || ret == -ENOENT || ret == -EOPNOTSUPP) {
		set_err(err, errlen, "no perf events: kernel without CONFIG_PERF_EVENTS (%s)",
			strerror(-ret));
	} else {
		set_err(err, errlen, "perf_event_open failed: %s", strerror(-ret));
	}
}

/*
 * Attaches to every CPU that has no event yet. A CPU that is offline (ENODEV) is skipped with
 * a log line and picked up by a later rescan when it comes online. Returns CPUs attached now.
 */
static int attach_cpus(struct bpf_sampler *s, char *err, size_t errlen)
{
	int attached = 0, first_err = 0;

	for (int cpu = 0; cpu < s->ncpus; cpu++) {
		int fd;

		if (s->pfd[cpu] >= 0)
			continue;
		fd = perf_open_cpu(s->hz, cpu);
		if (fd == -ENODEV || fd == -ENXIO) {
			pr_debug("bpf sampler: CPU %d is offline, skipped", cpu);
			continue;
		}
		if (fd < 0) {
			if (!first_err) {
				first_err = fd;
				perf_open_error(fd, s->hz, err, errlen);
			}
			continue;
		}
		s->links[cpu] = bpf_program__attach_perf_event(s->prog, fd);
		if (!s->links[cpu]) {
			int e = -errno;

			close(fd);
			if (!first_err) {
				first_err = e;
				set_err(err, errlen, "attaching the BPF program to CPU %d: %s", cpu,
					strerror(-e));
			}
			continue;
		}
		s->pfd[cpu] = fd;
		s->enabled_ns[cpu] = 0;
		s->st.cpus++;
		attached++;
	}
	return attached ? attached : first_err;
}

static bool proc_is_kernel_thread(const struct profile_event *e)
{
	return e->n_user == 0 && (e->flags & PROFILE_F_USTACK_ERR);
}

static void proc_fill(struct bpf_sampler *s, struct proc_entry *p, uint32_t pid)
{
	char path[64];
	ssize_t n;

	p->pid = pid;
	p->valid = true;
	s->st.label_reads++;
	snprintf(path, sizeof(path), "/proc/%u/exe", pid);
	n = readlink(path, p->exe, sizeof(p->exe) - 1);
	p->exe[n > 0 ? n : 0] = 0;
}

/* Direct-mapped by pid: a collision replaces the older process (a bound, not a leak). */
static struct proc_entry *proc_get(struct bpf_sampler *s, uint32_t pid)
{
	struct proc_entry *p = &s->procs[(pid * 2654435761u) % PROC_CACHE_SLOTS];

	if (p->pid != pid || !p->valid)
		proc_fill(s, p, pid);
	return p;
}

/* Drops the entries of processes that exited, so a reused pid never inherits old labels. */
static void proc_sweep(struct bpf_sampler *s)
{
	for (int i = 0; i < PROC_CACHE_SLOTS; i++) {
		struct proc_entry *p = &s->procs[i];

		if (p->pid && kill((pid_t)p->pid, 0) && errno == ESRCH)
			p->pid = 0;
	}
}

enum cgroup_found { CGROUP_GONE, CGROUP_NONE, CGROUP_PATH };

/*
 * The cgroup v2 path of pid ("0::/path" in /proc/<pid>/cgroup) into path. CGROUP_NONE: the file
 * has no usable v2 line (cgroup2 never mounted, as on a busybox system: the file is empty);
 * CGROUP_GONE: not readable (the process exited).
 */
static enum cgroup_found cgroup_read(uint32_t pid, char *path, size_t size)
{
	char file[64], buf[1024], *line;
	ssize_t n;

	snprintf(file, sizeof(file), "/proc/%u/cgroup", pid);
	if (port_file_read_small(file, buf, sizeof(buf)) < 0)
		return CGROUP_GONE;
	line = strncmp(buf, "0::", 3) ? strstr(buf, "\n0::") : buf;
	if (!line)
		return CGROUP_NONE;
	line += *line == '\n' ? 4 : 3;
	n = strcspn(line, "\n");
	if (n < 1 || (size_t)n >= size)
		return CGROUP_NONE;
	memcpy(path, line, n);
	path[n] = 0;
	return CGROUP_PATH;
}

/*
 * Whether path (read after the sample) still names cgroup id: the process may have moved since.
 * One name_to_handle_at, on a cache miss only; without a cgroup v2 mount to look in, trusted.
 */
static bool cgroup_is(const struct bpf_sampler *s, const char *path, uint64_t id)
{
	char full[sizeof(s->cgroup_mnt) + 512];
	uint64_t now;

	if (!s->cgroup_mnt[0])
		return true;
	snprintf(full, sizeof(full), "%s%s", s->cgroup_mnt, path);
	return !bpf_sampler__cgroup_id(full, &now) && now == id;
}

/* cgroup v2 at /sys/fs/cgroup (unified), or at .../unified (hybrid); else none. */
static void cgroup_find_mount(struct bpf_sampler *s)
{
	static const char *const where[] = {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"};
	struct statfs fs;

	for (size_t i = 0; i < sizeof(where) / sizeof(where[0]); i++) {
		if (!statfs(where[i], &fs) && fs.f_type == 0x63677270 /* CGROUP2_SUPER_MAGIC */) {
			snprintf(s->cgroup_mnt, sizeof(s->cgroup_mnt), "%s", where[i]);
			return;
		}
	}
}

/*
 * The cgroup label of a sample, by its cgroup id: read from /proc/<pid>/cgroup only for an id
 * not cached (counted). Direct-mapped: a collision replaces the older cgroup. A path that does
 * not name the id (the process moved), or a process that exited, labels this sample but is not
 * cached. The root, paths too long for a label, and a system without cgroup v2 lines are
 * cached as "" (no label): that last one was read for every sample before.
 */
static const char *cgroup_get(struct bpf_sampler *s, uint64_t id, uint32_t pid)
{
	struct cgroup_entry *c =
		&s->cgroups[(id * 0x9E3779B97F4A7C15ull >> 32) % CGROUP_CACHE_SLOTS];
	char path[512];
	enum cgroup_found found;

	if (c->used && c->id == id)
		return c->path;
	s->st.cgroup_reads++;
	found = cgroup_read(pid, path, sizeof(path));
	c->id = id;
	c->used = found == CGROUP_NONE || (found == CGROUP_PATH && cgroup_is(s, path, id));
	c->path[0] = 0;
	if (found == CGROUP_PATH && strlen(path) > 1 && strlen(path) < sizeof(c->path))
		memcpy(c->path, path, strlen(path) + 1);
	return c->path;
}

/* The stack words a record holds: never more than this build reads (0: registers only). */
static unsigned int min_words(uint32_t n)
{
	unsigned int max = PROFILE_LEAF_WORDS;

	return n < max ? n : max;
}

static int on_event(void *ctx, void *data, size_t size)
{
	struct bpf_sampler *s = ctx;
	const struct profile_event *e = data;
	struct agent_sample as = { 0 };
	struct sample_user_context uc;
	struct proc_entry *p = NULL;
	const char *cgroup = NULL;
	char comm[PROFILE_COMM_LEN + 1];
	unsigned nk, nu, npy;

	/* Records carry only the frames in use: never read past what the kernel sent. */
	if (size < PROFILE_EVENT_HDR)
		return 0;
	nk = e->n_kernel < PROFILE_MAX_DEPTH ? e->n_kernel : PROFILE_MAX_DEPTH;
	nu = e->n_user < PROFILE_MAX_DEPTH ? e->n_user : PROFILE_MAX_DEPTH;
	/* the interpreter's words: Python's or Lua's frames, or V8's (two a frame); one runtime's */
	npy = (e->flags & (PROFILE_F_PYTHON | PROFILE_F_LUA | PROFILE_F_V8)) ?
		e->flags >> PROFILE_PY_SHIFT : 0;
	if (npy > ((e->flags & PROFILE_F_V8)    ? 2 * PROFILE_V8_FRAMES
		   : (e->flags & PROFILE_F_LUA) ? PROFILE_LUA_FRAMES
						: PROFILE_PY_FRAMES) ||
	    npy > 2 * PROFILE_MAX_DEPTH - nk - nu) /* 0: none */
		npy = 0;
	if (PROFILE_EVENT_HDR + (nk + nu + npy) * sizeof(uint64_t) > size)
		return 0;
	memcpy(comm, e->comm, PROFILE_COMM_LEN);
	comm[PROFILE_COMM_LEN] = 0;

	as.time_ns = e->time_ns;
	as.pid = e->tgid;
	as.tid = e->tid;
	as.comm = comm;
	as.n_kernel = nk;
	as.n_user = nu;
	as.flags = (e->flags & PROFILE_F_TRUNCATED) ? SAMPLE_F_TRUNCATED : 0;
	as.frames = (const uint64_t *)e->frames; /* kernel then user, as agent_sample wants */
	as.py = npy ? (const uint64_t *)e->frames + nk + nu : NULL; /* the sink splices them */
	as.n_py = (uint16_t)npy;
	if (npy && (e->flags & PROFILE_F_LUA))
		as.flags |= SAMPLE_F_LUA;
	as.weight_ns = e->period ? e->period : NSEC_PER_SEC / s->hz;
	if (e->flags & PROFILE_F_OFFCPU)
		as.flags |= SAMPLE_F_OFFCPU | SAMPLE_F_NOCPU;
	if (nu && (e->flags & PROFILE_F_STACK)) {
		/* a copy of the stack after the frames: as many words as the record holds */
		size_t at = PROFILE_EVENT_HDR + (nk + nu + npy) * sizeof(uint64_t);
		size_t n = (size - at) / sizeof(uint64_t);

		uc = (struct sample_user_context){
			.sp = e->user_sp, .lr = e->user_lr, .fp = e->user_fp, .stack = true,
			.words = (const uint64_t *)e->frames + nk + nu + npy,
			.n_words = (unsigned int)(n < e->n_leaf_words ? n : e->n_leaf_words)};
		as.user = &uc;
	} else if (nu && (e->flags & PROFILE_F_USER_REGS)) {
		uc = (struct sample_user_context){
			.sp = e->user_sp, .lr = e->user_lr, .fp = e->user_fp,
			.words = (const uint64_t *)e->leaf_words,
			.n_words = min_words(e->n_leaf_words)};
		if ((e->flags & PROFILE_F_STACK_WORDS) && e->n_leaf_words == PROFILE_OFFCPU_WORDS &&
		    PROFILE_EVENT_HDR + (nk + nu + PROFILE_OFFCPU_WORDS) * sizeof(uint64_t) <= size) {
			uc.words = (const uint64_t *)e->frames + nk + nu; /* off-CPU: after them */
			uc.n_words = PROFILE_OFFCPU_WORDS;
		}
		as.user = &uc;
	}
	/* pid, tid and comm travel in their own fields (the agent labels them): no duplicates. */
	if (e->tgid && !proc_is_kernel_thread(e)) {
		if (s->exe_labels)
			p = proc_get(s, e->tgid);
		cgroup = cgroup_get(s, e->cgroup_id, e->tgid);
	}
	if (p && p->exe[0])
		as.labels[as.n_labels++] = (struct sample_label){ "exe", p->exe };
	if (cgroup && cgroup[0])
		as.labels[as.n_labels++] = (struct sample_label){ "cgroup", cgroup };

	if (e->flags & PROFILE_F_CFI) {
		as.flags |= SAMPLE_F_UNWOUND;
		cfitab__count(s->cfi, e->tgid, e->cfi_end, e->flags);
		if (e->cfi_end == CFI_END_NO_MAPPING)
			cfitab__stale(s->cfi, e->tgid, comm);
	} else if (nu && e->tgid) {
		cfitab__want(s->cfi, e->tgid, comm);
	}
	if (as.flags & SAMPLE_F_TRUNCATED)
		s->st.truncated++;
	if (s->sink(s->ctx, &as) < 0)
		s->st.dropped_sink++;
	else
		s->st.samples++;
	if (++s->batch < SAMPLER_BATCH)
		return 0;
	s->cut = true;
	return BATCH_FULL;
}

/* A perf buffer's sample record: the header, the raw size, the BPF program's bytes. */
struct pb_sample {
	struct perf_event_header header;
	__u32 size;
	char data[];
};

/*
 * The raw data is only 4-byte aligned: copy it out to read its 8-byte fields. Returning DONE
 * ends this CPU's buffer for this poll (the record is consumed), which bounds the batch.
 */
static enum bpf_perf_event_ret on_pb_event(void *ctx, int cpu, struct perf_event_header *h)
{
	struct bpf_sampler *s = ctx;
	const struct pb_sample *r = (const struct pb_sample *)h;

	if (h->type == PERF_RECORD_SAMPLE) {
		size_t n = r->size < sizeof(s->pb_copy) ? r->size : sizeof(s->pb_copy);

		memcpy(&s->pb_copy, r->data, n);
		on_event(s, &s->pb_copy, n);
	} else if (h->type == PERF_RECORD_LOST) {
		/* The kernel's count of what it could not write; the drops map counts it too. */
		pr_debug("bpf sampler: perf buffer of CPU %d lost samples", cpu);
	}
	if (++s->pb_batch < s->pb_batch_max)
		return LIBBPF_PERF_EVENT_CONT;
	s->cut = true;
	return LIBBPF_PERF_EVENT_DONE;
}

/*
 * Perf buffers are per CPU: the ring budget is shared out, a power of two pages each. Like the
 * ring buffer, a buffer wakes the reader only once half full (a watermark), not per sample.
 */
static int open_perfbuf(struct bpf_sampler *s, char *err, size_t errlen)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), pages = 1;
	struct perf_event_attr attr = {
		.type = PERF_TYPE_SOFTWARE,
		.size = sizeof(attr),
		.config = PERF_COUNT_SW_BPF_OUTPUT,
		.sample_type = PERF_SAMPLE_RAW,
		.sample_period = 1,
		.watermark = 1,
	};

	while (pages * 2 * page * s->ncpus <= s->ring_bytes)
		pages *= 2;
	attr.wakeup_watermark = pages * page / 2;
	s->pb_batch_max = SAMPLER_BATCH / s->ncpus ? SAMPLER_BATCH / s->ncpus : 1;
	s->pb = perf_buffer__new_raw(bpf_map__fd(s->skel->maps.pb_events), pages, &attr,
				     on_pb_event, s, NULL);
	if (!s->pb) {
		set_err(err, errlen, "opening the perf buffers: %s", strerror(errno));
		return -errno;
	}
	return 0;
}

/* Each CPU's buffer in turn, at most pb_batch_max records from each. */
static int consume_perfbuf(struct bpf_sampler *s)
{
	size_t n = perf_buffer__buffer_cnt(s->pb);

	for (size_t i = 0; i < n; i++) {
		int ret;

		s->pb_batch = 0;
		ret = perf_buffer__consume_buffer(s->pb, i);
		if (ret < 0)
			return ret;
	}
	return 0;
}

static int open_output(struct bpf_sampler *s, char *err, size_t errlen)
{
	int ret;

	if (s->perfbuf)
		return open_perfbuf(s, err, errlen);
	s->rb = ring_buffer__new(bpf_map__fd(s->skel->maps.events), on_event, s, NULL);
	if (!s->rb) {
		ret = -errno;
		set_err(err, errlen, "reading the BPF ring buffer: %s", strerror(-ret));
		return ret;
	}
	return 0;
}

/* Syscall programs and bpf_snprintf's %pS (Linux 5.14): the kernel names its own addresses. */
static bool can_name_kernel(void)
{
	return libbpf_probe_bpf_prog_type(BPF_PROG_TYPE_SYSCALL, NULL) == 1 &&
	       libbpf_probe_bpf_helper(BPF_PROG_TYPE_SYSCALL, BPF_FUNC_snprintf, NULL) == 1;
}

/* Opens, configures and loads the skeleton; *at_load: it was the kernel that refused. */
static int open_and_load(struct bpf_sampler *s, const struct bpf_sampler_opts *o, char *err,
			 size_t errlen, bool *at_load)
{
	int ret;

	*at_load = false;
	profile_bpf__destroy(s->skel);
	s->skel = profile_bpf__open();
	if (!s->skel) {
		ret = -errno;
		set_err(err, errlen, "opening the BPF object: %s", strerror(-ret));
		return ret;
	}
	ret = configure(s, o, err, errlen);
	if (ret)
		return ret;
	ret = profile_bpf__load(s->skel);
	if (ret) {
		*at_load = true;
		set_err(err, errlen, "loading the BPF program: %s (verifier or memlock limit)",
			strerror(-ret));
	}
	return ret;
}

int bpf_sampler__name_kernel(void *ctx, uint64_t addr, char *name, size_t len, uint64_t *start)
{
	struct bpf_sampler *s = ctx;
	LIBBPF_OPTS(bpf_test_run_opts, opts);
	char buf[PROFILE_KNAME_LEN], *plus, *end;
	unsigned long long off;

	if (!s->namer || !s->skel->bss)
		return -EOPNOTSUPP;
	s->skel->bss->kname_addr = addr;
	s->skel->bss->kname[0] = 0;
	if (bpf_prog_test_run_opts(bpf_program__fd(s->skel->progs.name_kernel_addr), &opts))
		return -errno;
	memcpy(buf, s->skel->bss->kname, sizeof(buf));
	buf[sizeof(buf) - 1] = 0;
	/* "func+0x1a/0x40 [mod]"; an address with no symbol prints as a bare number */
	plus = strchr(buf, '+');
	if (!plus || plus == buf)
		return -ENOENT;
	off = strtoull(plus + 1, &end, 16);
	if (end == plus + 1 || *end != '/' || off > addr)
		return -ENOENT;
	*plus = 0;
	snprintf(name, len, "%s", buf);
	*start = addr - off;
	return 0;
}

/* The walker into its program array, and the tables' keeper (CONFIG_BPF_CFI). */
static int cfi_open(struct bpf_sampler *s)
{
	struct bpf_program *walk = s->perfbuf ? s->skel->progs.cfi_walk_pb : s->skel->progs.cfi_walk;
	struct bpf_program *tail = s->perfbuf ? s->skel->progs.cfi_tail_pb : s->skel->progs.cfi_tail;
	uint32_t zero = 0, one = 1;
	int fd;

	if (!s->skel->rodata->cfi_enabled)
		return 0;
	fd = bpf_program__fd(walk);
	if (bpf_map_update_elem(bpf_map__fd(s->skel->maps.cfi_progs), &zero, &fd, BPF_ANY))
		return -errno;
	fd = bpf_program__fd(tail);
	if (bpf_map_update_elem(bpf_map__fd(s->skel->maps.cfi_progs), &one, &fd, BPF_ANY))
		return -errno;
	if (s->offcpu && (fd = offcpu_cfi_open(s)))
		return fd;
	s->cfi = cfitab__new(bpf_map__fd(s->skel->maps.cfi_rows),
			     bpf_map__map_flags(s->skel->maps.cfi_rows) & BPF_F_MMAPABLE,
			     bpf_map__fd(s->skel->maps.cfi_procs),
			     bpf_map__fd(s->skel->maps.cfi_slots),
			     bpf_map__fd(s->skel->maps.cfi_maybe), CFG_CFI_ROWS, CFG_CFI_PROCS,
			     CFG_CFI_FILES);
	return s->cfi ? 0 : -ENOMEM;
}

int bpf_sampler__open(const struct bpf_sampler_opts *o, sample_sink_fn sink, void *ctx,
		      struct bpf_sampler **out, char *err, size_t errlen)
{
	struct bpf_sampler *s;
	bool perfbuf = false, at_load;
	int ret;

	*out = NULL;
	set_err(err, errlen, "%s", "");
	libbpf_set_print(libbpf_print);
	ret = check_kernel(&perfbuf, err, errlen);
	if (ret)
		return ret;
	s = calloc(1, sizeof(*s));
	if (!s) {
		set_err(err, errlen, "out of memory");
		return -ENOMEM;
	}
	s->perfbuf = perfbuf;
	s->offcpu = o->offcpu;
	s->no_cpu = o->offcpu && o->no_cpu;
	if (s->offcpu && (ret = check_offcpu(perfbuf, err, errlen))) {
		free(s);
		return ret;
	}
	s->sink = sink;
	s->ctx = ctx;
	s->hz = o->hz ? o->hz : CONFIG_SAMPLE_HZ;
	s->exe_labels = !o->no_exe_label;
	cgroup_find_mount(s);
	s->ncpus = libbpf_num_possible_cpus();
	if (s->ncpus <= 0) {
		set_err(err, errlen, "cannot count the possible CPUs");
		ret = -EIO;
		goto out_free;
	}
	s->pfd = malloc(sizeof(*s->pfd) * s->ncpus);
	s->links = calloc(s->ncpus, sizeof(*s->links));
	s->enabled_ns = calloc(s->ncpus, sizeof(*s->enabled_ns));
	if (!s->pfd || !s->links || !s->enabled_ns) {
		set_err(err, errlen, "out of memory");
		ret = -ENOMEM;
		goto out_free;
	}
	for (int i = 0; i < s->ncpus; i++)
		s->pfd[i] = -1;

	s->namer = can_name_kernel();
	if (!s->namer && o->kernel_stacks)
		pr_info("bpf sampler: kernel frames named from /proc/kallsyms (the kernel names them "
			"itself from Linux 5.14: syscall programs, bpf_snprintf)");
	ret = open_and_load(s, o, err, errlen, &at_load);
	if (ret && at_load && s->namer) {
		/* the sampler matters, the namer does not: without it, kallsyms is read */
		pr_info("bpf sampler: loading without the kernel-symbol namer (%s)", err);
		s->namer = false;
		ret = open_and_load(s, o, err, errlen, &at_load);
	}
	if (ret)
		goto out_free;
	ret = fill_pids(s, o);
	if (ret) {
		set_err(err, errlen, "filling the pid filter: %s", strerror(-ret));
		goto out_free;
	}
	ret = cfi_open(s);
	if (ret) {
		set_err(err, errlen, "setting up the unwind tables: %s", strerror(-ret));
		goto out_free;
	}
	ret = python_open(s);
	ret = ret ? ret : lua_open(s);
	ret = ret ? ret : v8_open(s);
	if (ret) {
		set_err(err, errlen, "out of memory");
		goto out_free;
	}
	ret = open_output(s, err, errlen);
	if (ret)
		goto out_free;
	if (s->offcpu) {
		ret = attach_offcpu(s, err, errlen);
		if (ret)
			goto out_free;
		offcpu_announce(s);
	}
	ret = s->no_cpu ? 0 : attach_cpus(s, err, errlen);
	if (ret < 0)
		goto out_free;
	if (!s->st.cpus && !s->no_cpu) {
		set_err(err, errlen, "no online CPU to sample (perf_event_open: ENODEV on all)");
		ret = -ENODEV;
		goto out_free;
	}
	if (s->st.cpus < (unsigned)s->ncpus && !s->no_cpu)
		pr_info("bpf sampler: %u of %d possible CPUs online and sampled", s->st.cpus,
			s->ncpus);
	s->last_sweep_ns = s->last_rescan_ns = port_clock_mono_ns();
	set_err(err, errlen, "%s", "");
	*out = s;
	return 0;

out_free:
	bpf_sampler__free(s);
	return ret;
}

/* Drops the events of CPUs that went offline (or came back), so attach_cpus() opens new ones. */
static void detach_dead_cpus(struct bpf_sampler *s)
{
	for (int cpu = 0; cpu < s->ncpus; cpu++) {
		if (s->pfd[cpu] < 0 || cpus__event_alive(s->pfd[cpu], cpu, &s->enabled_ns[cpu]))
			continue;
		bpf_link__destroy(s->links[cpu]);
		s->links[cpu] = NULL;
		close(s->pfd[cpu]);
		s->pfd[cpu] = -1;
		s->st.cpus--;
		s->st.cpu_offline++;
		pr_info("bpf sampler: CPU %d went offline: its samples stop until it is back", cpu);
	}
}

/* Housekeeping between batches: forget exited processes, follow CPU hotplug. */
static void housekeeping(struct bpf_sampler *s)
{
	uint64_t now = port_clock_mono_ns();
	char err[160];

	if (s->exe_labels && now - s->last_sweep_ns >= PROC_SWEEP_NS) {
		proc_sweep(s);
		s->last_sweep_ns = now;
	}
	if (s->cfi && now - s->last_cfi_sweep_ns >= CFI_SWEEP_NS) {
		static const struct cfi_counts none;
		uint32_t zero = 0;

		/* a new process whose tgid shares a bucket with an old one counts from 0 again */
		bpf_map_update_elem(bpf_map__fd(s->skel->maps.cfi_counts), &zero, &none, BPF_ANY);
		cfitab__sweep(s->cfi);
		s->last_cfi_sweep_ns = now;
	}
	/* offcpu alone: no CPU events; paused: a disabled event's time stands still (as if dead) */
	if (!s->no_cpu && !s->paused && now - s->last_rescan_ns >= CPUS_RESCAN_NS) {
		detach_dead_cpus(s);
		if (s->st.cpus < (unsigned)s->ncpus && attach_cpus(s, err, sizeof(err)) > 0)
			pr_info("bpf sampler: now sampling %u CPUs", s->st.cpus);
		s->last_rescan_ns = now;
	}
}

int bpf_sampler__poll(struct bpf_sampler *s, int timeout_ms)
{
	struct epoll_event ev;
	int ret;

	/*
	 * The BPF side wakes us only when the ring is half full: wait for that or the timeout,
	 * then take what is there, at most one batch.
	 */
	ret = epoll_wait(bpf_sampler__fd(s), &ev, 1, timeout_ms);
	if (ret < 0 && errno != EINTR)
		return -errno;
	s->batch = 0;
	s->cut = false;
	ret = s->pb ? consume_perfbuf(s) : ring_buffer__consume(s->rb);
	housekeeping(s);
	if (ret < 0 && ret != BATCH_FULL)
		return ret;
	return s->batch;
}

int bpf_sampler__pause(struct bpf_sampler *s, bool paused)
{
	unsigned long req = paused ? PERF_EVENT_IOC_DISABLE : PERF_EVENT_IOC_ENABLE;
	uint64_t now = port_clock_mono_ns();
	int first = 0;

	if (!s || s->paused == paused)
		return 0;
	for (int cpu = 0; cpu < s->ncpus; cpu++) {
		if (s->pfd[cpu] >= 0 && ioctl(s->pfd[cpu], req, 0) && !first)
			first = -errno;
	}
	if (s->offcpu) {
		int e = pause_offcpu(s, paused);

		if (e && !first)
			first = e;
	}
	s->paused = paused;
	if (paused) {
		s->paused_since_ns = now;
		s->st.pauses++;
	} else {
		s->st.paused_ns += now - s->paused_since_ns;
		s->last_rescan_ns = now; /* the events' time moves again from here */
	}
	if (first)
		pr_warn("bpf sampler: %s: %s", paused ? "pausing" : "resuming", strerror(-first));
	return first;
}

/* The time the CPU events were enabled, the kernel's count, summed over those attached now. */
static uint64_t events_enabled_ns(const struct bpf_sampler *s)
{
	uint64_t sum = 0, v[2]; /* count, time enabled */

	for (int cpu = 0; cpu < s->ncpus; cpu++) {
		if (s->pfd[cpu] >= 0 && read(s->pfd[cpu], v, sizeof(v)) == (ssize_t)sizeof(v))
			sum += v[1];
	}
	return sum;
}

bool bpf_sampler__caught_up(const struct bpf_sampler *s)
{
	return !s->cut;
}

int bpf_sampler__fd(const struct bpf_sampler *s)
{
	return s->pb ? perf_buffer__epoll_fd(s->pb) : ring_buffer__epoll_fd(s->rb);
}

void bpf_sampler__stats(const struct bpf_sampler *s, struct bpf_sampler_stats *st)
{
	uint64_t *vals;
	uint32_t zero = 0;

	*st = s->st;
	if (s->paused)
		st->paused_ns += port_clock_mono_ns() - s->paused_since_ns;
	st->events_enabled_ns = events_enabled_ns(s);
	cfitab__stats(s->cfi, &st->cfi);
	st->dropped_ringbuf = 0;
	st->perf_buffer = s->perfbuf;
	vals = calloc(s->ncpus, sizeof(*vals));
	if (!vals)
		return;
	/* A per-CPU map returns one 8-byte-aligned value per possible CPU. */
	if (!bpf_map_lookup_elem(bpf_map__fd(s->skel->maps.drops), &zero, vals)) {
		for (int i = 0; i < s->ncpus; i++)
			st->dropped_ringbuf += vals[i];
	}
	offcpu_stats(s, st, vals);
	free(vals);
}

int bpf_sampler__prog_fd(const struct bpf_sampler *s)
{
	return bpf_program__fd(s->prog);
}

struct bpfpy *bpf_sampler__python(const struct bpf_sampler *s)
{
	return s ? s->py : NULL;
}

struct bpflua *bpf_sampler__lua(const struct bpf_sampler *s)
{
	return s ? s->lua : NULL;
}

struct bpfv8 *bpf_sampler__v8(const struct bpf_sampler *s)
{
	return s ? s->v8 : NULL;
}

void bpf_sampler__set_maps(struct bpf_sampler *s, cfitab_maps_fn fn, void *ctx)
{
	cfitab__set_maps(s->cfi, fn, ctx);
}

void bpf_sampler__free(struct bpf_sampler *s)
{
	if (!s)
		return;
	ring_buffer__free(s->rb);
	perf_buffer__free(s->pb);
	for (int i = 0; i < 3; i++)
		bpf_link__destroy(s->offcpu_links[i]);
	for (int i = 0; s->links && i < s->ncpus; i++)
		bpf_link__destroy(s->links[i]);
	for (int i = 0; s->pfd && i < s->ncpus; i++) {
		if (s->pfd[i] >= 0)
			close(s->pfd[i]);
	}
	cfitab__free(s->cfi);
	bpfpy__free(s->py);
	bpflua__free(s->lua);
	bpfv8__free(s->v8);
	profile_bpf__destroy(s->skel);
	free(s->links);
	free(s->pfd);
	free(s->enabled_ns);
	free(s);
}

int bpf_sampler__cgroup_id(const char *cgroup_path, uint64_t *id)
{
	_Alignas(8) char buf[sizeof(struct file_handle) + sizeof(uint64_t)];
	struct file_handle *fh = (struct file_handle *)buf;
	struct stat st;
	int mount_id;

	/* The kernel's cgroup id is the kernfs file handle; the inode number where that fails. */
	fh->handle_bytes = sizeof(uint64_t);
	if (!name_to_handle_at(AT_FDCWD, cgroup_path, fh, &mount_id, 0) &&
	    fh->handle_bytes == sizeof(uint64_t)) {
		memcpy(id, fh->f_handle, sizeof(*id));
		return 0;
	}
	if (stat(cgroup_path, &st))
		return -errno;
	*id = st.st_ino;
	return 0;
}
