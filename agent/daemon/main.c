// SPDX-License-Identifier: MIT
/*
 * edgeprof-agent — the device daemon: finds the rings of processes running libedgeprof.so in
 * the registry directory (and, where built and permitted, runs the BPF system-wide sampler),
 * aggregates their samples per round into a bounded stack table per service, and at each
 * round's end writes one pprof per service into the output directory.
 *
 * This file is the options, the set-up, the main loop and the teardown. Each feature's glue is
 * a file of its own beside it, with empty stubs in its header when the feature is off: bpf.c,
 * sigprof-rings.c, heap.c, pull-loop.c, scrape-loop.c, upload.c; duty.c pauses the samplers
 * between rounds, round.c writes a round's profiles, stats.c prints their counters.
 */
#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "agent/core/procmaps.h"
#include "agent/core/rounds.h"
#include "agent/core/symbolize.h"
#include "agent/daemon/agent.h"
#include "agent/daemon/bpf.h"
#include "agent/daemon/duty.h"
#include "agent/daemon/features.h"
#include "agent/daemon/pull-loop.h"
#include "agent/daemon/round.h"
#include "agent/daemon/scrape-loop.h"
#include "agent/daemon/services.h"
#include "agent/daemon/sigprof-rings.h"
#include "agent/daemon/upload.h"
#include "port/clock.h"
#include "port/file.h"
#include "port/log.h"
#include "port/rand.h"

volatile sig_atomic_t agent_stop;

static void on_stop(int sig)
{
	agent_stop = 1;
}

/* ---- options ------------------------------------------------------------------------------ */

struct opt_desc {
	const char *name;
	int has_arg;
	const char *help;
};

static const struct opt_desc opt_descs[] = {
    {"hz", 1, "samples per CPU-second (BPF sampler; SIGPROF producers set their own)"},
    {"registry", 1, "directory where instrumented processes put their rings"},
    {"output-dir", 1, "write <service>-cpu-<time>.pb.gz files here"},
    {"round-seconds", 1, "length of a round"},
    {"period-seconds", 1, "a round starts every this many seconds (= round: continuous)"},
    {"jitter-percent", 1, "random +/- shift of each round start, percent of the period"},
    {"once", 0, "one round now, then exit (with --seconds)"},
    {"seconds", 1, "length of the --once round"},
    {"sampler", 1, "auto | bpf | sigprof (auto: BPF when it can run, plus rings)"},
    {"profiles", 1, "cpu,offcpu: what the BPF sampler records (default cpu; offcpu: the time "
		    "threads spend blocked, by stack)"},
    {"offcpu-min-us", 1, "shortest blocked time the off-CPU profile records (default "
			 "CONFIG_BPF_OFFCPU_MIN_US)"},
    {"bpf-service", 1, "service name of the BPF sampler's system-wide profile"},
    {"bpf-ringbuf-kb", 1, "BPF ring buffer size"},
    {"bpf-cgroup", 1, "BPF: only the tasks of this cgroup v2 directory (a service, a container)"},
    {"no-kernel-stacks", 0, "BPF: user stacks only"},
    {"stack-entries", 1, "unique stacks per service and round (default: a round's samples)"},
    {"max-procs", 1, "processes whose mappings are cached"},
    {"no-symbolize", 0, "name only JIT code (perf maps) on the device: build-ids, addresses"},
    /* the features' own, where they are built in (their headers: none when off) */
    AGENT_UPLOAD_OPTS
    AGENT_SCRAPE_OPTS
    AGENT_PULL_OPTS
    {"config", 1, "read options from a file: one 'name = value' (or 'name') per line"},
    {"version", 0, "print version and compiled-in features"},
    {"help", 0, "this text"},
};
#define N_OPTS (sizeof(opt_descs) / sizeof(opt_descs[0]))

static void usage(FILE *out)
{
	fprintf(out, "usage: edgeprof-agent [options]\n");
	for (const struct opt_desc *d = opt_descs; d < opt_descs + N_OPTS; d++)
		fprintf(out, "  --%s%s%*s%s\n", d->name, d->has_arg ? " N" : "",
			(int)(20 - strlen(d->name) - (d->has_arg ? 2 : 0)), "", d->help);
	fprintf(out,
		"Defaults come from the build's Kconfig (edgeprof-agent --version shows them).\n"
		"Examples:\n"
		"  edgeprof-agent --once --seconds 10 --output-dir /tmp/prof   one round, one pprof\n"
		"      per service (the whole machine with BPF as root; else LD_PRELOADed programs)\n");
	if (IS_ENABLED(CONFIG_UPLOAD_MTLS))
		fprintf(out,
			"  edgeprof-agent --upload https://collector:8443 --tls-ca pki/ca.crt \\\n"
			"      --tls-cert pki/gw-1.crt --tls-key pki/gw-1.key --spool /var/lib/edgeprof/spool\n"
			"      (certificates: edgeprof certs init pki && edgeprof certs device pki gw-1)\n");
	fprintf(out, "More: agent/README.md.\n");
}

static int parse_ulong(const char *name, const char *v, unsigned long lo, unsigned long hi,
		       unsigned long *out)
{
	char *end;
	unsigned long x;

	errno = 0;
	x = strtoul(v ? v : "", &end, 10);
	if (!v || !*v || *end || errno || x < lo || x > hi || v[0] == '-') {
		fprintf(stderr, "edgeprof-agent: --%s: '%s' is not a number in %lu..%lu\n", name,
			v ? v : "", lo, hi);
		return -EINVAL;
	}
	*out = x;
	return 0;
}

static int read_config_file(struct config *c, const char *path);

/* Only a directory of the cgroup v2 file system (statfs): a typo fails at start. */
static int parse_cgroup(struct config *c, const char *v)
{
	struct statfs fs;

	if (!v || !*v || statfs(v, &fs) || fs.f_type != CGROUP2_SUPER_MAGIC) {
		fprintf(stderr, "edgeprof-agent: --bpf-cgroup %s: not a cgroup v2 directory\n",
			v ? v : "");
		return -EINVAL;
	}
	c->bpf_cgroup = v;
	return 0;
}

/* --profiles cpu,offcpu: the BPF sampler's kinds of time (at least one). */
static int parse_profiles(struct config *c, const char *v)
{
	char buf[64], *save, *t;
	bool cpu = false, off = false;

	snprintf(buf, sizeof(buf), "%s", v ? v : "");
	for (t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (!strcmp(t, "cpu")) {
			cpu = true;
		} else if (!strcmp(t, "offcpu")) {
			off = true;
		} else {
			fprintf(stderr, "edgeprof-agent: --profiles: '%s' is not cpu or offcpu\n", t);
			return -EINVAL;
		}
	}
	if (!cpu && !off) {
		fprintf(stderr, "edgeprof-agent: --profiles: none of cpu, offcpu given\n");
		return -EINVAL;
	}
	c->no_cpu = !cpu;
	c->offcpu = off;
	return 0;
}

/* Applies one option by name: 0, 1 (exit 0: --help/--version), or -EINVAL. */
static int apply_opt(struct config *c, const char *name, const char *v)
{
	if (!strcmp(name, "hz"))
		return parse_ulong(name, v, 1, 10000, &c->hz);
	if (!strcmp(name, "round-seconds"))
		return parse_ulong(name, v, 1, 3600, &c->round_s);
	if (!strcmp(name, "period-seconds"))
		return parse_ulong(name, v, 1, 86400, &c->period_s);
	if (!strcmp(name, "jitter-percent"))
		return parse_ulong(name, v, 0, 50, &c->jitter_pct);
	if (!strcmp(name, "seconds"))
		return parse_ulong(name, v, 1, 86400, &c->seconds);
	if (!strcmp(name, "stack-entries"))
		return parse_ulong(name, v, 64, 1048576, &c->stack_entries);
	if (!strcmp(name, "max-procs"))
		return parse_ulong(name, v, 1, 65536, &c->max_procs);
	if (!strcmp(name, "bpf-ringbuf-kb"))
		return parse_ulong(name, v, 4, 1048576, &c->bpf_ringbuf_kb);
	if (!strcmp(name, "registry"))
		return (c->registry = v) && *v ? 0 : -EINVAL;
	if (!strcmp(name, "output-dir"))
		return (c->output_dir = v) && *v ? 0 : -EINVAL;
	if (!strcmp(name, "scrape") && IS_ENABLED(CONFIG_AGENT_SCRAPE)) {
		if (!v || c->n_scrape == SCRAPE_MAX_TARGETS) {
			fprintf(stderr, "edgeprof-agent: --scrape: at most %d targets\n",
				SCRAPE_MAX_TARGETS);
			return -EINVAL;
		}
		c->scrape[c->n_scrape++] = v;
		return 0;
	}
	if (!strcmp(name, "scrape-types") && IS_ENABLED(CONFIG_AGENT_SCRAPE))
		return (c->scrape_types = v) && *v ? 0 : -EINVAL;
	if (!strcmp(name, "pull-listen") && IS_ENABLED(CONFIG_PULL_SERVER))
		return (c->pull_listen = v) && *v ? 0 : -EINVAL;
	if (!strcmp(name, "bpf-service"))
		return (c->bpf_service = v) && *v ? 0 : -EINVAL;
	if (!strcmp(name, "bpf-cgroup") && IS_ENABLED(CONFIG_SAMPLER_BPF))
		return parse_cgroup(c, v);
	if (!strcmp(name, "sampler")) {
		if (v && (!strcmp(v, "auto") || !strcmp(v, "bpf") || !strcmp(v, "sigprof"))) {
			c->sampler = v;
			return 0;
		}
		fprintf(stderr, "edgeprof-agent: --sampler: '%s' is not auto, bpf or sigprof\n",
			v ? v : "");
		return -EINVAL;
	}
	if (!strcmp(name, "profiles"))
		return parse_profiles(c, v);
	if (!strcmp(name, "offcpu-min-us"))
		return c->offcpu_min_set = true,
		       parse_ulong(name, v, 0, 10000000, &c->offcpu_min_us);
	if (!strcmp(name, "once"))
		return c->once = true, 0;
	if (!strcmp(name, "no-symbolize"))
		return c->symbolize = false, 0;
	if (!strcmp(name, "no-kernel-stacks"))
		return c->kernel_stacks = false, 0;
	if (!strcmp(name, "config"))
		return read_config_file(c, v);
	int rc = agent_upload__opt(c, name, v); /* --upload, --tls-*, --spool... */

	if (rc != -ENOENT)
		return rc;
	if (!strcmp(name, "version")) {
		features_print(stdout, "edgeprof-agent");
		return 1;
	}
	if (!strcmp(name, "help")) {
		usage(stdout);
		return 1;
	}
	fprintf(stderr, "edgeprof-agent: unknown option '%s'\n", name);
	return -EINVAL;
}

static int read_config_file(struct config *c, const char *path)
{
	char line[512];
	int lineno = 0, err = 0;
	FILE *f = path ? fopen(path, "re") : NULL;

	if (!f) {
		fprintf(stderr, "edgeprof-agent: --config %s: %s\n", path ? path : "",
			strerror(errno));
		return -EINVAL;
	}
	while (!err && fgets(line, sizeof(line), f)) {
		char *p = line, *eq, *name, *val = NULL;

		lineno++;
		p[strcspn(p, "#\n")] = 0;
		while (*p == ' ' || *p == '\t')
			p++;
		if (!*p)
			continue;
		name = p;
		eq = strchr(p, '=');
		if (eq) {
			*eq = 0;
			val = eq + 1;
			while (*val == ' ' || *val == '\t')
				val++;
			for (char *e = val + strlen(val);
			     e > val && (e[-1] == ' ' || e[-1] == '\t');)
				*--e = 0;
			val = strdup(val); /* kept for the life of the process */
		}
		for (char *e = name + strlen(name); e > name && (e[-1] == ' ' || e[-1] == '\t');)
			*--e = 0;
		if (!strcmp(name, "config") || !strcmp(name, "help") || !strcmp(name, "version"))
			err = -EINVAL;
		else
			err = apply_opt(c, name, val);
		if (err)
			fprintf(stderr, "edgeprof-agent: %s:%d: bad line\n", path, lineno);
	}
	fclose(f);
	return err ? -EINVAL : 0;
}

static int parse_args(struct config *c, int argc, char **argv)
{
	struct option lopts[N_OPTS + 1];
	int idx, ch, rc;

	for (size_t i = 0; i < N_OPTS; i++)
		lopts[i] = (struct option){opt_descs[i].name, opt_descs[i].has_arg, NULL, 0};
	lopts[N_OPTS] = (struct option){0};
	while ((ch = getopt_long(argc, argv, "Vh", lopts, &idx)) != -1) {
		if (ch == 'V')
			rc = apply_opt(c, "version", NULL);
		else if (ch == 'h')
			rc = apply_opt(c, "help", NULL);
		else if (ch == 0)
			rc = apply_opt(c, lopts[idx].name, optarg);
		else
			rc = -EINVAL;
		if (rc)
			return rc;
	}
	if (optind < argc) {
		fprintf(stderr, "edgeprof-agent: unexpected argument '%s'\n", argv[optind]);
		return -EINVAL;
	}
	if (c->round_s > c->period_s) {
		fprintf(stderr,
			"edgeprof-agent: --round-seconds %lu is longer than --period-seconds "
			"%lu\n",
			c->round_s, c->period_s);
		return -EINVAL;
	}
	if (!c->stack_entries) /* not given: room for every sample a round can take */
		c->stack_entries = aggregate__entries_for(
		    c->hz, (unsigned long)sysconf(_SC_NPROCESSORS_ONLN),
		    c->once ? c->seconds : c->round_s);
	return 0;
}

/* ---- the main loop ---------------------------------------------------------------------- */

/*
 * How long to sleep: until the round event, but at most DRAIN_MS while SIGPROF rings need
 * draining, else until the next registry scan (the BPF ring wakes us itself when half full or
 * a new process shows up): 1 wake-up a second instead of 20 when only BPF samples.
 */
static int poll_timeout_ms(const struct agent *a, uint64_t wait_ns, uint64_t since_scan_ns)
{
	uint64_t cap = a->n_rings ? DRAIN_MS * NSEC_PER_MSEC
				  : NSEC_PER_SEC - (since_scan_ns < NSEC_PER_SEC ? since_scan_ns
										 : NSEC_PER_SEC);

	if (wait_ns > cap)
		wait_ns = cap;
	return (int)(wait_ns / NSEC_PER_MSEC) + 1;
}

/* At exit: the producers run on without us; every feature's threads and samplers stop. */
static void stop_all(struct agent *a)
{
	agent_rings__pause(a, false);
	agent_pull__stop(a);
	agent_scrape__stop(a);
	agent_bpf__stop(a);
	agent_upload__stop(a);
}

static int run(struct agent *a)
{
	struct rounds rs;
	uint64_t round_ns = (a->cfg.once ? a->cfg.seconds : a->cfg.round_s) * NSEC_PER_SEC;
	uint64_t period_ns = a->cfg.once ? round_ns : a->cfg.period_s * NSEC_PER_SEC;
	uint64_t last_scan = 0, started = 0;
	int rc;

	/*
	 * The sampler first, the rounds' clock after it: loading the BPF programs takes the
	 * verifier seconds on a slow core (2-20 s under emulation), and a --once round that
	 * counted it sampled 1.7 s of the 4 asked for.
	 */
	agent_bpf__start(a);
	rc = rounds__init(&rs, round_ns, period_ns, a->cfg.once ? 0 : (unsigned)a->cfg.jitter_pct,
			  port_clock_mono_ns(), port_rand_below);
	if (rc) {
		stop_all(a);
		return rc;
	}
	while (!agent_stop) {
		uint64_t now = port_clock_mono_ns(), wait;
		enum round_event ev;

		if (now - last_scan >= NSEC_PER_SEC) {
			agent_rings__scan(a);
			a->in_round = rs.in_round;
			agent_duty__pause(a);
			last_scan = now;
		}
		while ((ev = rounds__poll(&rs, now, &wait)) != ROUND_NONE) {
			if (ev == ROUND_START) {
				agent_rings__drain(a, false);
				agent__services_reset(a);
				agent__names_round_done(a); /* a skipped round's: thrown away */
				a->round_real_ns = port_clock_real_ns();
				started = now;
				agent_duty__round_start(a, rs.start);
				scrape__round(a->scrape, (unsigned)(round_ns / NSEC_PER_SEC),
					      (unsigned)(period_ns / NSEC_PER_SEC));
			} else {
				agent_rings__drain(a, true);
				agent_duty__round_ended(a, &rs, now);
				if (!a->duty_skip && !agent__write_round(a, now - started) &&
				    a->cfg.once)
					pr_warn("no samples in %lu s: nothing ran on the sampled CPUs "
						"(or in the --registry's programs); no profile "
						"written", a->cfg.seconds);
				if (a->cfg.once) {
					agent_scrape__finish(a);
					goto out;
				}
			}
		}
		if (rs.in_round || a->pull_agg)
			agent_rings__drain(a, false);
		agent_pull__poll(a, now);
		agent_scrape__ship(a);
		agent_upload__poll(a);
		agent_bpf__poll(a, poll_timeout_ms(a, wait, now - last_scan));
	}
	if (!started) /* a signal while the BPF programs loaded: the user hears why nothing came */
		pr_info("stopped before the first round began: no profile written");
	if (rs.in_round && !a->duty_skip) { /* stopped mid-round: keep what was sampled */
		agent_rings__drain(a, true);
		agent__write_round(a, port_clock_mono_ns() - started);
	}
out:
	stop_all(a);
	return 0;
}

/* mkdir -p of a directory named by flag, which we then need to read or write (how: R_OK/W_OK). */
static int make_dir(const char *flag, const char *path, mode_t mode, int how)
{
	int err = port_mkdir_p(path, mode);

	if (!err && access(path, how))
		err = -errno;
	if (err)
		fprintf(stderr, "edgeprof-agent: %s %s: cannot create or %s it: %s\n", flag, path,
			how == W_OK ? "write" : "read", strerror(-err));
	return err;
}

int main(int argc, char **argv)
{
	static struct agent a;
	struct sigaction sa = {.sa_handler = on_stop};
	int rc;

	a.cfg = (struct config){
	    .hz = CONFIG_SAMPLE_HZ,
	    .round_s = CONFIG_ROUND_SECONDS,
	    .period_s = CONFIG_PERIOD_SECONDS,
	    .jitter_pct = CONFIG_JITTER_PERCENT,
	    .seconds = CONFIG_ROUND_SECONDS,
	    .stack_entries = 0, /* from the rate and the round (parse_args) */
	    .max_procs = CONFIG_PROC_CACHE_ENTRIES,
	    .registry = "/dev/shm/edgeprof",
	    .sampler = "auto",
	    .bpf_service = "system",
	    .symbolize = true,
	    .kernel_stacks = true,
	};
	agent_upload__defaults(&a.cfg);
	port_log_open("edgeprof-agent", false);
	/*
	 * The pull and scrape threads allocate too: glibc would give each its own arena (heap
	 * pages of their own that stay in the RSS). The agent allocates little and rarely from
	 * them: one arena for all. (musl's malloc has no per-thread arenas, nor mallopt.)
	 */
#ifdef M_ARENA_MAX
	mallopt(M_ARENA_MAX, 1);
#endif
	rc = parse_args(&a.cfg, argc, argv);
	if (rc < 0)
		fprintf(stderr, "Try 'edgeprof-agent --help'.\n");
	if (rc)
		return rc > 0 ? 0 : 2;
	if (!a.cfg.output_dir && !a.cfg.upload)
		a.cfg.output_dir = "."; /* nowhere else to put the profiles */
	/* the directories named on the command line are made like mkdir -p (the registry
	 * stays world-writable and sticky: instrumented programs of any user put rings there) */
	if (a.cfg.output_dir && make_dir("--output-dir", a.cfg.output_dir, 0750, W_OK))
		return 2;
	/* without a registry the SIGPROF rings are not seen, but the BPF sampler still works */
	make_dir("--registry", a.cfg.registry, 01777, R_OK);
	a.procs = proctab__new((unsigned int)a.cfg.max_procs, 256);
	if (a.cfg.symbolize)
		a.sym = symbolizer__new(0);
	if (agent_upload__start(&a) || agent_pull__start(&a) || agent_scrape__start(&a))
		return 2;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	rc = run(&a);
	agent__services_free(&a);
	agent_rings__free(&a);
	symbolizer__free(a.sym);
	proctab__free(a.procs);
	return rc ? 1 : 0;
}
