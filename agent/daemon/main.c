// SPDX-License-Identifier: MIT
/*
 * edgeprof-agent — the device daemon: finds the rings of processes running libedgeprof.so in
 * the registry directory (and, where built and permitted, runs the BPF system-wide sampler),
 * aggregates their samples per round into a bounded stack table per service, and at each
 * round's end writes one pprof per service into the output directory.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <getopt.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/core/aggregate.h"
#include "agent/daemon/features.h"
#ifdef CONFIG_PROFILE_HEAP
#include "agent/core/heapfile.h"
#endif
#include "agent/core/output.h"
#include "agent/core/procmaps.h"
#include "agent/daemon/pull.h"
#include "agent/core/ring.h"
#include "agent/core/rounds.h"
#include "agent/daemon/scrape.h"
#include "agent/core/symbolize.h"
#include "port/clock.h"
#include "port/file.h"
#include "port/log.h"
#include "port/rand.h"
#ifdef CONFIG_UPLOAD_MTLS
#include "agent/transport/transport.h"
#endif
#ifdef CONFIG_SAMPLER_BPF
#include "agent/core/ksyms.h"
#include "bpf/leaf.h"
#include "bpf/cpus.h"
#include "bpf/mmapev.h"
#include "bpf/sampler.h"
#endif

#define MAX_RINGS 256
/*
 * The unwind tables of the programs sampled (a compiler's are megabytes) leave the RSS this
 * often: what a second of samples touched comes back as minor faults (~0.2 us a page).
 */
#define LEAF_TRIM_NS NSEC_PER_SEC
#define MAX_SERVICES 16
#define DRAIN_MS 50 /* SIGPROF rings are drained this often */

struct config {
	unsigned long hz, round_s, period_s, jitter_pct, seconds, stack_entries, max_procs;
	unsigned long bpf_ringbuf_kb;
	const char *registry, *output_dir, *sampler, *bpf_service, *pull_listen;
	bool once, symbolize, kernel_stacks, upload;
	const char *scrape[SCRAPE_MAX_TARGETS], *scrape_types;
	size_t n_scrape;
	bool no_cpu, offcpu; /* --profiles: the BPF sampler's kinds (default cpu) */
	bool offcpu_min_set;
	unsigned long offcpu_min_us; /* --offcpu-min-us, else CONFIG_BPF_OFFCPU_MIN_US */
#ifdef CONFIG_UPLOAD_MTLS
	struct transport_opts tr;
#endif
};

/* Profiles of time other than CPU, each its own aggregate per service (made on first use). */
enum { KIND_WALL, KIND_OFFCPU, N_KINDS };
static const char *const kind_name[N_KINDS] = {"wall", "offcpu"};

struct service {
	char name[64];
	struct aggregate *agg;		   /* cpu */
	struct aggregate *kinds[N_KINDS]; /* wall (sigprof producers), offcpu (BPF) */
};

struct agent {
	struct config cfg;
	struct ring *rings[MAX_RINGS];
	char ring_paths[MAX_RINGS][300];
	unsigned int n_rings;
	struct service services[MAX_SERVICES];
	unsigned int n_services;
	uint64_t dropped_services, dropped_rings;
	struct proctab *procs;
	struct symbolizer *sym;
	struct ksyms *ksyms; /* kernel names, lazily read (BPF with kernel stacks) */
	void *bpf;	 /* struct bpf_sampler * */
	void *leaf;	 /* struct leaf *: the callers BPF stacks lost (NULL: not restored) */
	void *mmapev;	 /* struct mmapev *: new programs' maps from mmap records (or NULL) */
	bool bpf_ordered; /* BPF samples arrive in time order (ring buffer, not perf buffers) */
	uint64_t leaf_trimmed_ns; /* when the unwind tables' pages last left the RSS */
	uint64_t mmap_rescanned_ns; /* when the mmap records' CPUs were last checked */
	void *transport; /* struct transport * */
	uint64_t seq;
	uint64_t round_real_ns;
	bool in_round;
	struct pull_server *pull;	/* pull mode (agent/daemon/pull.h), or NULL */
	struct aggregate *pull_agg;	/* a pulled CPU profile being sampled, or NULL */
	uint64_t pull_start, pull_end, pull_real_ns;
	struct scraper *scrape;		/* --scrape targets (agent/daemon/scrape.h), or NULL */
	bool duty_skip;		/* this round is not in the fleet's schedule for us: no samples */
	bool duty_next_known;	/* a round ended and the next, back to back, is decided: */
	bool duty_next_skip;	/* it is skipped (the samplers stop before the round is written) */
	uint64_t duty_skipped;
};

static volatile sig_atomic_t stop;

static void on_stop(int sig)
{
	stop = 1;
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
    {"no-kernel-stacks", 0, "BPF: user stacks only"},
    {"stack-entries", 1, "unique stacks per service and round (default: a round's samples)"},
    {"max-procs", 1, "processes whose mappings are cached"},
    {"no-symbolize", 0, "do not name functions on the device (build-ids and addresses only)"},
#ifdef CONFIG_UPLOAD_MTLS
    {"upload", 1, "push each profile to this collector URL over mutual TLS"},
    {"tls-ca", 1, "the collector's CA certificate (pinned)"},
    {"tls-cert", 1, "this device's certificate (its CN is the device)"},
    {"tls-key", 1, "this device's private key"},
    {"spool", 1, "offline spool file for profiles that could not be uploaded"},
    {"spool-size", 1, "spool size (bytes, or K/M/G)"},
#endif
#ifdef CONFIG_AGENT_SCRAPE
    {"scrape", 1, "NAME=URL: pull that service's /debug/pprof/ each round (repeatable)"},
    {"scrape-types", 1, "what --scrape pulls: cpu,heap,goroutine,mutex,block (default all)"},
#endif
#ifdef CONFIG_PULL_SERVER
    {"pull-listen", 1, "serve /debug/pprof/ to operators over mutual TLS at HOST:PORT"},
#endif
    {"config", 1, "read options from a file: one 'name = value' (or 'name') per line"},
    {"version", 0, "print version and compiled-in features"},
    {"help", 0, "this text"},
};

static void usage(FILE *out)
{
	fprintf(out, "usage: edgeprof-agent [options]\n");
	for (size_t i = 0; i < sizeof(opt_descs) / sizeof(opt_descs[0]); i++)
		fprintf(out, "  --%s%s%*s%s\n", opt_descs[i].name, opt_descs[i].has_arg ? " N" : "",
			(int)(20 - strlen(opt_descs[i].name) - (opt_descs[i].has_arg ? 2 : 0)), "",
			opt_descs[i].help);
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
#ifdef CONFIG_UPLOAD_MTLS
	int rc = transport_opts__set(&c->tr, name, v);

	if (rc == 0 && !strcmp(name, "upload"))
		c->upload = true;
	if (rc != -ENOENT) {
		if (rc)
			fprintf(stderr, "edgeprof-agent: --%s: bad value '%s'\n", name, v ? v : "");
		return rc;
	}
#endif
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
	struct option lopts[sizeof(opt_descs) / sizeof(opt_descs[0]) + 1];
	int idx, ch, rc;

	for (size_t i = 0; i < sizeof(opt_descs) / sizeof(opt_descs[0]); i++)
		lopts[i] = (struct option){opt_descs[i].name, opt_descs[i].has_arg, NULL, 0};
	lopts[sizeof(opt_descs) / sizeof(opt_descs[0])] = (struct option){0};
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

/* ---- services and rings ------------------------------------------------------------------- */

static struct service *service_get(struct agent *a, const char *name)
{
	struct agg_opts o = {.max_entries = a->cfg.stack_entries};

	for (unsigned int i = 0; i < a->n_services; i++)
		if (!strcmp(a->services[i].name, name))
			return &a->services[i];
	if (a->n_services == MAX_SERVICES) {
		a->dropped_services++;
		return NULL;
	}
	struct service *s = &a->services[a->n_services];

	s->agg = aggregate__new(&o);
	if (!s->agg)
		return NULL;
	snprintf(s->name, sizeof(s->name), "%s", name[0] ? name : "unknown");
	a->n_services++;
	return s;
}

static struct aggregate *service_kind(struct agent *a, struct service *s, int kind)
{
	struct agg_opts o = {.max_entries = a->cfg.stack_entries};

	if (!s->kinds[kind])
		s->kinds[kind] = aggregate__new(&o);
	return s->kinds[kind];
}

static void adopt_ring_maps(struct agent *a, struct ring *r)
{
	static char text[RING_MAPS_BYTES];
	struct procmaps *pm;

	if (ring__get_maps(r, text, sizeof(text)) &&
	    !procmaps__parse_text(text, ring__shared(r)->pid, 256, &pm))
		proctab__adopt(a->procs, pm);
}

/* Opens rings that appeared in the registry directory. */
static void scan_registry(struct agent *a)
{
	DIR *d = opendir(a->cfg.registry);
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d))) {
		char path[300];
		size_t len = strlen(e->d_name);
		bool known = false;
		struct ring *r;

		if (len < 6 || strcmp(e->d_name + len - 5, ".ring"))
			continue;
		snprintf(path, sizeof(path), "%s/%s", a->cfg.registry, e->d_name);
		for (unsigned int i = 0; i < a->n_rings && !known; i++)
			known = !strcmp(a->ring_paths[i], path);
		if (known)
			continue;
		if (a->n_rings == MAX_RINGS) {
			a->dropped_rings++;
			continue;
		}
		if (ring__open(path, &r)) {
			pr_warn("%s is not a ring; ignored", path);
			continue;
		}
		snprintf(a->ring_paths[a->n_rings], sizeof(a->ring_paths[0]), "%s", path);
		a->rings[a->n_rings++] = r;
		/* the mappings: read now while the process lives, or the copy it left in the ring
		 */
		if (proctab__touch(a->procs, ring__shared(r)->pid))
			adopt_ring_maps(a, r);
		pr_info("ring %s (pid %u, service %s)", path, ring__shared(r)->pid,
			ring__shared(r)->service);
	}
	closedir(d);
}

struct drain_ctx {
	struct agent *a;
	struct ring *r;
	struct service *svc;
};

static void pull_add(struct agent *a, const struct agent_sample *s, const char *service);

static int drain_rec(void *ctx, const struct ring_rec *rec)
{
	struct drain_ctx *dc = ctx;
	struct agent_sample s;

	ring__rec_to_sample(dc->r, rec, &s);
	s.pid = ring__shared(dc->r)->pid; /* the ring's owner, not what the record claims */
	if (!dc->svc)
		return 0;
	/* a producer recording wall time (agent/lib/wall.h): its CPU samples count there too */
	if ((rec->flags & SAMPLE_F_WALL) && service_kind(dc->a, dc->svc, KIND_WALL))
		aggregate__add(dc->svc->kinds[KIND_WALL], &s);
	if (!(rec->flags & SAMPLE_F_NOCPU)) {
		aggregate__add(dc->svc->agg, &s);
		pull_add(dc->a, &s, dc->svc->name);
	}
	return 0;
}

static void heap_forget(struct agent *a, unsigned int ring);

/* Drains every ring; rings of processes that exited are closed and removed once empty. */
static void drain_rings(struct agent *a, bool final)
{
	for (unsigned int i = 0; i < a->n_rings;) {
		struct ring *r = a->rings[i];
		struct ring_shared *sh = ring__shared(r);
		char svc[sizeof(sh->service)];
		bool dead = !ring__producer_alive(r);
		struct drain_ctx dc = {a, r, NULL};

		memcpy(svc, sh->service, sizeof(svc));
		svc[sizeof(svc) - 1] = 0;
		dc.svc = service_get(a, svc);
		if (dead) { /* nobody will finish a half-written record now */
			ring__set_stall_timeout(r, 0);
			adopt_ring_maps(a, r);
		}
		while (ring__drain(r, 1024, port_clock_mono_ns(), drain_rec, &dc) > 0)
			;
		if (dead && ring__is_empty(r)) {
			heap_forget(a, i);
			unlink(a->ring_paths[i]);
			ring__free(r);
			a->n_rings--;
			a->rings[i] = a->rings[a->n_rings];
			memcpy(a->ring_paths[i], a->ring_paths[a->n_rings],
			       sizeof(a->ring_paths[0]));
			continue;
		}
		i++;
	}
	(void) final;
}

static void bpf_pause(struct agent *a, bool paused);

/* SIGPROF producers stop taking samples (their rings' flag). */
static void rings_paused(struct agent *a, bool paused)
{
	for (unsigned int i = 0; i < a->n_rings; i++)
		__atomic_store_n(&ring__shared(a->rings[i])->paused, paused, __ATOMIC_RELAXED);
}

/* Every sampler stops (or starts again): the SIGPROF producers and the BPF sampler's events. */
static void set_paused(struct agent *a, bool paused)
{
	rings_paused(a, paused);
	bpf_pause(a, paused);
}

/* ---- BPF ---------------------------------------------------------------------------------- */

/* Without BPF: a sleep a signal does not cut short, so never longer than DRAIN_MS (exit). */
static void idle_sleep(int timeout_ms)
{
	port_sleep_ns((uint64_t)(timeout_ms < DRAIN_MS ? timeout_ms : DRAIN_MS) * NSEC_PER_MSEC);
}

#ifdef CONFIG_SAMPLER_BPF
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

static int bpf_sink(void *ctx, const struct agent_sample *s)
{
	struct agent *a = ctx;
	struct service *svc = service_get(a, a->cfg.bpf_service);
	uint64_t frames[2 * CONFIG_MAX_STACK_DEPTH + 1];
	struct agent_sample fixed, l;
	bool known;

	if (!svc)
		return -ENOSPC;
	/* the exec and mmaps of everything up to this sample, before its maps are looked up */
	mmapev__advance(a->mmapev, s->time_ns, a->bpf_ordered);
	if (s->tid == s->pid) /* an exec no mmap record told of: maps read before it are stale */
		proctab__main_comm(a->procs, s->pid, s->comm);
	known = s->n_user && !proctab__touch(a->procs, s->pid);
	if (a->leaf && leaf__fix(a->leaf, a->procs, s, CONFIG_MAX_STACK_DEPTH, frames, &fixed))
		s = &fixed;
	if (known)
		s = with_exe(a, s, &l);
	for (unsigned int i = 0; a->ksyms && i < s->n_kernel; i++)
		ksyms__want(a->ksyms, s->frames[i]);
	if (s->flags & SAMPLE_F_OFFCPU)
		return service_kind(a, svc, KIND_OFFCPU) ? aggregate__add(svc->kinds[KIND_OFFCPU], s)
							 : -ENOSPC;
	pull_add(a, s, svc->name);
	return aggregate__add(svc->agg, s);
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

static void bpf_start(struct agent *a)
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

static void bpf_poll(struct agent *a, int timeout_ms)
{
	uint64_t now;

	if (!a->bpf) {
		idle_sleep(timeout_ms);
		return;
	}
	bpf_sampler__poll(a->bpf, timeout_ms);
	now = port_clock_mono_ns();
	/* every sample up to now was delivered: the records up to now can be taken */
	if (bpf_sampler__caught_up(a->bpf))
		mmapev__advance(a->mmapev, now, true);
	if (now - a->leaf_trimmed_ns >= LEAF_TRIM_NS) {
		leaf__trim(a->leaf);
		a->leaf_trimmed_ns = now;
	}
	if (now - a->mmap_rescanned_ns >= CPUS_RESCAN_NS) { /* CPU hotplug, as the sampler's */
		mmapev__rescan(a->mmapev);
		a->mmap_rescanned_ns = now;
	}
}

static void bpf_stop(struct agent *a)
{
	bpf_sampler__free(a->bpf);
	proctab__set_loader(a->procs, NULL, NULL);
	mmapev__free(a->mmapev);
	ksyms__free(a->ksyms);
	leaf__free(a->leaf);
}

/*
 * Outside a sampled round (or a pulled profile) nobody wants BPF samples: the sampler's perf
 * events are disabled, so a skipped round costs the device nothing (bpf/sampler.h).
 */
static void bpf_pause(struct agent *a, bool paused)
{
	bpf_sampler__pause(a->bpf, paused);
}

/* The round is written: the unwind tables' pages it touched leave the agent's RSS. */
static void bpf_round_done(struct agent *a)
{
	leaf__trim(a->leaf);
	a->leaf_trimmed_ns = port_clock_mono_ns();
}

/* One pass over kallsyms names the kernel call sites first seen this round. */
static void bpf_name_kernel_frames(struct agent *a)
{
	int err = ksyms__update(a->ksyms);

	if (err)
		pr_warn("reading /proc/kallsyms: %s: kernel frames unnamed", strerror(-err));
}

/* What became of each sample's leaf frame (bpf/leaf.h), appended to the BPF comment. */
static void bpf_leaf_comment(struct agent *a, char *buf, size_t len)
{
	struct leaf_stats ls;

	if (!a->leaf)
		return;
	leaf__stats(a->leaf, &ls);
	snprintf(buf, len,
		 " leaf_fixed=%llu leaf_linked=%llu leaf_no_context=%llu leaf_no_table=%llu "
		 "leaf_no_rule=%llu leaf_deep=%llu leaf_implausible=%llu leaf_tables=%llu "
		 "leaf_tables_evicted=%llu leaf_rule_misses=%llu stack_copies=%llu "
		 "stack_copies_whole=%llu stack_copies_cut=%llu stack_copies_left=%llu",
		 (unsigned long long)ls.fixed, (unsigned long long)ls.linked,
		 (unsigned long long)ls.no_context, (unsigned long long)ls.no_table,
		 (unsigned long long)ls.no_rule, (unsigned long long)ls.deep,
		 (unsigned long long)ls.implausible, (unsigned long long)ls.tables_mapped,
		 (unsigned long long)ls.tables_evicted, (unsigned long long)ls.rule_misses,
		 (unsigned long long)ls.copies, (unsigned long long)ls.copies_whole,
		 (unsigned long long)ls.copies_cut, (unsigned long long)ls.copies_left);
}

/* Where new processes' maps came from (bpf/mmapev.h), appended to the BPF comment. */
static void bpf_mmap_comment(struct agent *a, char *buf, size_t len)
{
	struct mmapev_stats ms;
	struct proctab_stats ps;

	mmapev__stats(a->mmapev, &ms);
	proctab__stats(a->procs, &ps);
	snprintf(buf, len,
		 " mmap_cpus=%u mmap_build_ids=%d mmap_execs=%llu mmap_forks=%llu "
		 "maps_from_records=%llu mmap_evicted=%llu mmap_overflow=%llu mmap_lost=%llu "
		 "procs_forgotten=%llu mmap_cpu_offline=%llu",
		 ms.cpus, ms.build_ids, (unsigned long long)ms.execs, (unsigned long long)ms.forks,
		 (unsigned long long)ps.loaded, (unsigned long long)ms.evicted,
		 (unsigned long long)ms.overflow, (unsigned long long)ms.lost,
		 (unsigned long long)ps.forgotten, (unsigned long long)ms.cpu_offline);
}

/* The walk by unwind tables (bpf/cfitab.h), appended to the BPF comment. */
static void bpf_cfi_comment(const struct cfitab_stats *c, char *buf, size_t len)
{
	snprintf(buf, len,
		 " cfi_walks=%llu cfi_whole=%llu cfi_no_mapping=%llu cfi_no_rule=%llu "
		 "cfi_read=%llu cfi_bad=%llu cfi_depth=%llu cfi_procs=%llu cfi_listed=%llu "
		 "cfi_unfit=%llu cfi_no_room=%llu cfi_fp_built=%llu cfi_procs_evicted=%llu cfi_files=%llu "
		 "cfi_files_unfit=%llu "
		 "cfi_files_evicted=%llu cfi_no_table=%llu cfi_rows=%llu cfi_pages=%llu "
		 "cfi_rows_unfit=%llu cfi_load_ms=%llu cfi_cached=%llu cfi_cache_changed=%llu "
		 "cfi_partial=%llu",
		 (unsigned long long)(c->walks[CFI_END_OUTERMOST] + c->walks[CFI_END_NO_MAPPING] +
				      c->walks[CFI_END_NO_RULE] + c->walks[CFI_END_READ] +
				      c->walks[CFI_END_BAD] + c->walks[CFI_END_DEPTH]),
		 (unsigned long long)c->walks[CFI_END_OUTERMOST],
		 (unsigned long long)c->walks[CFI_END_NO_MAPPING],
		 (unsigned long long)c->walks[CFI_END_NO_RULE],
		 (unsigned long long)c->walks[CFI_END_READ], (unsigned long long)c->walks[CFI_END_BAD],
		 (unsigned long long)c->walks[CFI_END_DEPTH], (unsigned long long)c->procs,
		 (unsigned long long)c->loads, (unsigned long long)c->unfit,
		 (unsigned long long)c->no_room,
		 (unsigned long long)c->fp_built, (unsigned long long)c->procs_evicted, (unsigned long long)c->files,
		 (unsigned long long)c->files_unfit, (unsigned long long)c->files_evicted,
		 (unsigned long long)c->no_table, (unsigned long long)c->rows,
		 (unsigned long long)c->pages, (unsigned long long)c->rows_unfit, (unsigned long long)(c->load_ns / 1000000),
		 (unsigned long long)c->cached, (unsigned long long)c->cache_changed,
		 (unsigned long long)c->partial);
}

static void bpf_comment(struct agent *a, char *buf, size_t len)
{
	struct bpf_sampler_stats st;
	struct ksyms_stats ks;

	if (!a->bpf) {
		buf[0] = 0;
		return;
	}
	bpf_sampler__stats(a->bpf, &st);
	ksyms__stats(a->ksyms, &ks);
	snprintf(buf, len,
		 "edgeprof bpf: samples=%llu dropped_ringbuf=%llu dropped_sink=%llu "
		 "truncated=%llu cpus=%u cpu_offline=%u ksyms_named=%llu ksyms_unnamed=%llu "
		 "ksyms_dropped=%llu ksyms_resets=%llu ksyms_passes=%llu ksyms_lookups=%llu "
		 "label_reads=%llu cgroup_reads=%llu pauses=%llu paused_ms=%llu "
		 "events_enabled_ms=%llu",
		 (unsigned long long)st.samples, (unsigned long long)st.dropped_ringbuf,
		 (unsigned long long)st.dropped_sink, (unsigned long long)st.truncated, st.cpus,
		 st.cpu_offline, (unsigned long long)ks.named, (unsigned long long)ks.unnamed,
		 (unsigned long long)ks.dropped, (unsigned long long)ks.resets,
		 (unsigned long long)ks.passes, (unsigned long long)ks.lookups,
		 (unsigned long long)st.label_reads, (unsigned long long)st.cgroup_reads,
		 (unsigned long long)st.pauses, (unsigned long long)(st.paused_ns / NSEC_PER_MSEC),
		 (unsigned long long)(st.events_enabled_ns / NSEC_PER_MSEC));
	bpf_leaf_comment(a, buf + strlen(buf), len - strlen(buf));
	bpf_mmap_comment(a, buf + strlen(buf), len - strlen(buf));
	bpf_cfi_comment(&st.cfi, buf + strlen(buf), len - strlen(buf));
}

#ifdef CONFIG_BPF_OFFCPU
/* What the off-CPU profile misses (since the agent started): the threshold's, the ring's. */
static void bpf_offcpu_comment(struct agent *a, char *buf, size_t len)
{
	struct bpf_sampler_stats st;

	buf[0] = 0;
	if (!a->bpf || !a->cfg.offcpu)
		return;
	bpf_sampler__stats(a->bpf, &st);
	snprintf(buf, len,
		 "edgeprof offcpu: min_us=%lu records=%llu dropped_ringbuf=%llu "
		 "dropped_ringbuf_ns=%llu below_threshold_ns=%llu untracked_blocks=%llu "
		 "(since the agent started)",
		 a->cfg.offcpu_min_set ? a->cfg.offcpu_min_us : CONFIG_BPF_OFFCPU_MIN_US,
		 (unsigned long long)st.offcpu_sent,
		 (unsigned long long)st.offcpu_dropped, (unsigned long long)st.offcpu_dropped_ns,
		 (unsigned long long)st.offcpu_below_ns, (unsigned long long)st.offcpu_untracked);
}
#else
static void bpf_offcpu_comment(struct agent *a, char *buf, size_t len)
{
	buf[0] = 0;
}
#endif /* CONFIG_BPF_OFFCPU */
#else
static void bpf_start(struct agent *a)
{
	if (!strcmp(a->cfg.sampler, "bpf"))
		pr_warn("built without the BPF sampler: SIGPROF rings only");
}

static void bpf_poll(struct agent *a, int timeout_ms)
{
	idle_sleep(timeout_ms);
}

static void bpf_stop(struct agent *a)
{
}

static void bpf_name_kernel_frames(struct agent *a)
{
}

static void bpf_round_done(struct agent *a)
{
}

static void bpf_pause(struct agent *a, bool paused)
{
}

static void bpf_comment(struct agent *a, char *buf, size_t len)
{
	buf[0] = 0;
}

static void bpf_offcpu_comment(struct agent *a, char *buf, size_t len)
{
	buf[0] = 0;
}
#endif /* CONFIG_SAMPLER_BPF */

/* ---- upload ------------------------------------------------------------------------------ */

#ifdef CONFIG_UPLOAD_MTLS
static int transport_start(struct agent *a)
{
	char err[256] = "";

	if (!a->cfg.upload)
		return 0;
	a->transport = transport__new(&a->cfg.tr, err, sizeof(err));
	if (!a->transport) {
		fprintf(stderr, "edgeprof-agent: upload: %s\n", err);
		return -EINVAL;
	}
	return 0;
}

/* Hands one service's round to the transport (uploaded now, or spooled for later). */
/* One encoded profile of service (type cpu or heap) to the transport; err: encoding's. */
static void submit_buf(struct agent *a, const char *service, const char *type,
		       const struct output_opts *o, struct pprof_buf *bp, int err)
{
	struct pprof_buf buf = *bp;
	struct transport_item item = {.service = service, .type = type};
	char key[200];

	if (!err) {
		/* device, round start, sequence: a re-sent profile is recognized by the collector
		 */
		snprintf(key, sizeof(key), "%s-%llu-%llu", transport__device(a->transport),
			 (unsigned long long)(o->time_ns / NSEC_PER_SEC),
			 (unsigned long long)a->seq++);
		item.key = key;
		item.data = buf.data;
		item.len = buf.len;
		transport_item__stamp(&item);
		err = transport__submit(a->transport, &item);
	}
	if (err == -EAGAIN && !a->cfg.tr.spool_path)
		pr_warn("%s profile of %s lost: the collector did not take it and there is no "
			"spool (--spool FILE keeps profiles until it is back)", type, service);
	else if (err)
		pr_warn("%s profile of %s not uploaded nor spooled: %s", type, service,
			strerror(-err));
	else
		pr_info("%s profile of %s handed to the transport (%zu bytes)", type, service,
			buf.len);
	free(buf.data);
}

static void submit(struct agent *a, const char *service, const struct aggregate *agg,
		   const struct output_opts *o)
{
	struct pprof_buf buf = {0};
	int err = output__pprof(agg, o, pprof_buf_write, &buf);

	submit_buf(a, service, o->type ? o->type : "cpu", o, &buf, err);
}

static void transport_poll(struct agent *a)
{
	if (a->transport && port_clock_mono_ns() >= transport__next_poll_ns(a->transport))
		transport__poll(a->transport, port_clock_mono_ns());
}

static void transport_stop(struct agent *a)
{
	transport__free(a->transport);
}

/* A round starting now samples: the collector's duty-cycling schedule (agent/transport/transport.h). */
static bool round_samples(struct agent *a)
{
	return !a->transport || a->cfg.once ||
	       transport__sample_round(a->transport, port_clock_real_ns() / NSEC_PER_SEC);
}
#else
static int transport_start(struct agent *a)
{
	return 0;
}
static inline void submit_buf(struct agent *a, const char *service, const char *type,
			      const struct output_opts *o, struct pprof_buf *bp, int err)
{
	free(bp->data);
}
static void submit(struct agent *a, const char *service, const struct aggregate *agg,
		   const struct output_opts *o)
{
}
static void transport_poll(struct agent *a)
{
}
static void transport_stop(struct agent *a)
{
}
static bool round_samples(struct agent *a)
{
	return true;
}
#endif /* CONFIG_UPLOAD_MTLS */

/*
 * One encoded profile of service (heap, or scraped) to where profiles go: the output directory
 * (<service>-<type>-<time>-<n>.pb.gz, written atomically) and the transport. err: the encoder's.
 * Frees bp's data. (Unused in a build with neither heap profiles nor scraping.)
 */
static void __attribute__((unused)) ship(struct agent *a, const char *service, const char *type,
		 const struct output_opts *o, struct pprof_buf *bp, int err)
{
	char path[512];
	int werr;

	if (!err && a->cfg.output_dir) {
		werr = output__path(o, a->cfg.output_dir, type, path, sizeof(path));
		if (!werr)
			werr = port_file_write_atomic(path, bp->data, bp->len, 0640);
		if (werr)
			pr_err("cannot write the %s profile of %s: %s", type, service,
			       strerror(-werr));
		else
			pr_info("wrote %s (%zu bytes)", path, bp->len);
	} else if (err) {
		pr_err("cannot encode the %s profile of %s: %s", type, service, strerror(-err));
	}
	if (a->transport)
		submit_buf(a, service, type, o, bp, err);
	else
		free(bp->data);
	bp->data = NULL;
}

/* ---- heap profiles of the sigprof producers (agent/core/heapfile.h) ---------------------------- */

#ifdef CONFIG_PROFILE_HEAP
/* <registry>/<pid>.heap of a ring's producer */
static void heap_path(const struct agent *a, unsigned int ring, char *path, size_t len)
{
	snprintf(path, len, "%s/%u.heap", a->cfg.registry, ring__shared(a->rings[ring])->pid);
}

/*
 * The heap profile of service's producers now (service NULL: every producer's): a snapshot of
 * their tables (alloc_* since each started, inuse_* now), one sample per stack and process,
 * encoded into buf. -ENOENT when none of them records the heap.
 */
static int heap_encode(struct agent *a, const char *service, struct output_opts o,
		       struct pprof_buf *buf)
{
	const size_t max = CONFIG_HEAP_STACKS * 4; /* bounded: what exceeds it is counted */
	struct output_stack *st = calloc(max, sizeof(*st));
	int64_t *vals = calloc(max * 4, sizeof(*vals));
	void *maps[MAX_RINGS];
	size_t lens[MAX_RINGS], n = 0, files = 0, over = 0;
	char path[512], c[4][256], c_over[128];
	const char *comments[5];
	struct heapfile_view v = {0};
	struct output_kind k;
	int err = -ENOENT;

	for (unsigned int i = 0; st && vals && i < a->n_rings; i++) {
		struct heapfile_view vi;
		size_t got;

		if (service &&
		    strncmp(ring__shared(a->rings[i])->service, service, sizeof(a->services[0].name)))
			continue;
		heap_path(a, i, path, sizeof(path));
		err = heapfile__map(path, &maps[files], &lens[files], &vi);
		if (err) {
			if (err != -ENOENT) /* ENOENT: the producer records no heap */
				pr_warn("%s: not a heap table: %s", path, strerror(-err));
			continue;
		}
		got = heapfile__collect(&vi, st + n, vals + 4 * n, max - n);
		over += vi.h->n_stacks > got ? vi.h->n_stacks - got : 0;
		n += got;
		if (files < 4)
			heapfile__comment(&vi, c[files], sizeof(c[files]));
		v = vi;
		files++;
	}
	if (!st || !vals)
		err = -ENOMEM;
	else if (!files)
		err = -ENOENT;
	else {
		snprintf(c_over, sizeof(c_over),
			 "edgeprof heap (agent): processes=%zu stacks=%zu "
			 "stacks_over_bound_or_zero=%zu",
			 files, n, over);
		comments[0] = c_over;
		for (size_t i = 0; i < files && i < 4; i++)
			comments[1 + i] = c[i];
		o.comments = comments;
		o.n_comments = 1 + (files < 4 ? files : 4);
		heapfile__kind(&v, &k);
		err = output__stacks_pprof(&k, &o, st, n, pprof_buf_write, buf);
	}
	for (size_t i = 0; i < files; i++)
		heapfile__unmap(maps[i], lens[i]);
	free(st);
	free(vals);
	return err;
}

/* The service's heap profile, written and submitted like the CPU profile. */
static void heap_round(struct agent *a, const struct service *s, struct output_opts o)
{
	struct pprof_buf buf = {0};
	int err = heap_encode(a, s->name, o, &buf);

	if (err == -ENOENT)
		return;
	ship(a, s->name, "heap", &o, &buf, err);
}

/* A producer that is gone leaves no heap table (killed before its destructor ran). */
static void heap_forget(struct agent *a, unsigned int ring)
{
	char path[512];

	heap_path(a, ring, path, sizeof(path));
	unlink(path);
}
#else
static inline int heap_encode(struct agent *a, const char *service, struct output_opts o,
			      struct pprof_buf *buf)
{
	return -ENOENT;
}
static void heap_round(struct agent *a, const struct service *s, struct output_opts o)
{
}
static void heap_forget(struct agent *a, unsigned int ring)
{
}
#endif /* CONFIG_PROFILE_HEAP */

/* ---- pull mode (agent/daemon/pull.h) ------------------------------------------------------------ */

/* Rings sample while a round or a pulled profile runs, and are paused in between. */
/*
 * The samplers run in a round the fleet's duty cycle gives us (round_samples()), and while a
 * pulled profile is being sampled.
 */
static void pause_between(struct agent *a)
{
	bool skip = a->duty_next_known ? a->duty_next_skip : a->duty_skip;

	set_paused(a, !(a->in_round && !skip) && !a->pull_agg);
}

/*
 * Whether, a round having ended, the next starts at once: continuous rounds (period = round),
 * unless the last one began late and the next waits for its nominal start (samplers running
 * in that gap would take samples that ROUND_START throws away).
 */
static bool next_now(const struct rounds *rs, uint64_t now)
{
	return rs->period_ns == rs->round_ns && rs->next_start <= now;
}

/*
 * A round ends: the samplers run on only if the next round starts at once and is in our window
 * of the fleet's duty cycle, decided now, before this round is written (reading kallsyms and
 * encoding take a few hundred ms; what the samplers took meanwhile would go to a round that
 * is skipped, or be thrown away at the next round's start). The next ROUND_START takes the
 * decision.
 */
static void round_ended(struct agent *a, const struct rounds *rs, uint64_t now)
{
	a->in_round = next_now(rs, now);
	if (a->in_round && !a->cfg.once) {
		a->duty_next_skip = !round_samples(a);
		a->duty_next_known = true;
	}
	pause_between(a);
}

#ifdef CONFIG_PULL_SERVER
static int pull_start(struct agent *a)
{
	struct pull_opts o = {.listen = a->cfg.pull_listen};
	char err[512] = "";

	if (!a->cfg.pull_listen)
		return 0;
	o.ca_file = a->cfg.tr.upload.ca_file;
	o.cert_file = a->cfg.tr.upload.cert_file;
	o.key_file = a->cfg.tr.upload.key_file;
	a->pull = pull__new(&o, err, sizeof(err));
	if (!a->pull) {
		fprintf(stderr, "edgeprof-agent: --pull-listen %s: %s\n", a->cfg.pull_listen, err);
		return -EINVAL;
	}
	pr_info("pull mode: https://%s/debug/pprof/ (port %d, operator certificates only)",
		a->cfg.pull_listen, pull__port(a->pull));
	return 0;
}

/* A sample of the pulled profile: every service's, told apart by a service label. */
static void pull_add(struct agent *a, const struct agent_sample *s, const char *service)
{
	struct agent_sample l;

	if (!a->pull_agg)
		return;
	if (s->n_labels < SAMPLE_MAX_LABELS) {
		l = *s;
		l.labels[l.n_labels++] = (struct sample_label){"service", service};
		s = &l;
	}
	aggregate__add(a->pull_agg, s);
}

static struct output_opts pull_output_opts(struct agent *a, const char *const *comments,
					   size_t n_comments)
{
	struct output_opts o = {.service = "pull",
				.hz = (uint32_t)a->cfg.hz,
				.time_ns = a->pull_real_ns,
				.duration_ns = port_clock_mono_ns() - a->pull_start,
				.procs = a->procs,
				.sym = a->sym,
				.ksyms = a->ksyms,
				.comments = comments,
				.n_comments = n_comments};

	/* without BPF every sample comes from a ring: their rate is the profile's period */
	if (!a->bpf && a->n_rings)
		o.hz = ring__shared(a->rings[0])->hz;
	return o;
}

/* The pulled CPU profile's window is over: encode it and hand it to the server thread. */
static void pull_finish(struct agent *a)
{
	struct pprof_buf buf = {0};
	struct agg_stats as;
	char c0[256];
	const char *comments[] = {c0};
	struct output_opts o;
	int err;

	drain_rings(a, true);
	bpf_name_kernel_frames(a);
	aggregate__stats(a->pull_agg, &as);
	snprintf(c0, sizeof(c0),
		 "edgeprof pull: samples=%llu stacks=%zu dropped_table=%llu dropped_frames=%llu "
		 "dropped_labels=%llu truncated=%llu",
		 (unsigned long long)as.samples, as.entries, (unsigned long long)as.dropped_table,
		 (unsigned long long)as.dropped_frames, (unsigned long long)as.dropped_labels,
		 (unsigned long long)as.truncated);
	o = pull_output_opts(a, comments, 1);
	err = output__pprof(a->pull_agg, &o, pprof_buf_write, &buf);
	if (err) {
		char msg[128];

		snprintf(msg, sizeof(msg), "cannot encode the profile: %s\n", strerror(-err));
		pull__answer(a->pull, 500, msg, strlen(msg));
	} else {
		pull__answer(a->pull, 200, buf.data, buf.len);
	}
	pr_info("pull: CPU profile of %llu samples sent", (unsigned long long)as.samples);
	free(buf.data);
	aggregate__free(a->pull_agg);
	a->pull_agg = NULL;
	pause_between(a);
}

static void pull_heap(struct agent *a)
{
	struct pprof_buf buf = {0};
	struct output_opts o;
	int err = -ENOENT;
	char msg[200];

	a->pull_real_ns = port_clock_real_ns();
	a->pull_start = port_clock_mono_ns();
	o = pull_output_opts(a, NULL, 0);
	o.duration_ns = 0;
	if (IS_ENABLED(CONFIG_PROFILE_HEAP))
		err = heap_encode(a, NULL, o, &buf);
	if (!err) {
		pull__answer(a->pull, 200, buf.data, buf.len);
	} else {
		snprintf(msg, sizeof(msg), "%s\n",
			 err == -ENOENT ? "no heap profile here: no program records its heap "
					  "(run it with EDGEPROF_PROFILES=cpu,heap)"
					: strerror(-err));
		pull__answer(a->pull, err == -ENOENT ? 404 : 500, msg, strlen(msg));
	}
	free(buf.data);
}

/* Main loop: starts or finishes what the pull server asked for. */
static void pull_poll(struct agent *a, uint64_t now)
{
	struct agg_opts ao = {.max_entries = a->cfg.stack_entries};
	unsigned seconds = 0;

	if (a->pull_agg) {
		if (now >= a->pull_end)
			pull_finish(a);
		return;
	}
	switch (pull__pending(a->pull, &seconds)) {
	case PULL_CPU:
		drain_rings(a, false); /* what was sampled before belongs to the rounds */
		a->pull_agg = aggregate__new(&ao);
		if (!a->pull_agg) {
			pull__answer(a->pull, 503, "no memory for the profile\n", 26);
			return;
		}
		a->pull_start = now;
		a->pull_end = now + seconds * NSEC_PER_SEC;
		a->pull_real_ns = port_clock_real_ns();
		pause_between(a);
		break;
	case PULL_HEAP:
		pull_heap(a);
		break;
	default:
		break;
	}
}

/* The pull server's counters since start, for the round profiles' comments. */
static void pull_comment(struct agent *a, char *buf, size_t len)
{
	struct pull_stats st;

	if (!a->pull)
		return;
	pull__stats(a->pull, &st);
	snprintf(buf, len,
		 " pull: conns=%llu refused_tls=%llu refused_role=%llu requests=%llu profiles=%llu "
		 "errors=%llu",
		 (unsigned long long)st.conns, (unsigned long long)st.refused_tls,
		 (unsigned long long)st.refused_role, (unsigned long long)st.requests,
		 (unsigned long long)st.profiles, (unsigned long long)st.errors);
}

static void pull_stop(struct agent *a)
{
	char c[256] = "";

	pull_comment(a, c, sizeof(c));
	if (c[0])
		pr_info("%s", c + 1);
	pull__free(a->pull);
	aggregate__free(a->pull_agg);
}
#else
static int pull_start(struct agent *a)
{
	return 0;
}
static void pull_add(struct agent *a, const struct agent_sample *s, const char *service)
{
}
static void pull_poll(struct agent *a, uint64_t now)
{
}
static void pull_comment(struct agent *a, char *buf, size_t len)
{
}
static void pull_stop(struct agent *a)
{
}
#endif /* CONFIG_PULL_SERVER */

/* ---- scraped pprof endpoints (agent/daemon/scrape.h) -------------------------------------------- */

#ifdef CONFIG_AGENT_SCRAPE
static int scrape_start(struct agent *a)
{
	struct scrape_opts o = {.specs = a->cfg.scrape,
				.n_specs = a->cfg.n_scrape,
				.types = a->cfg.scrape_types,
				.ca_file = a->cfg.tr.upload.ca_file,
				.cert_file = a->cfg.tr.upload.cert_file,
				.key_file = a->cfg.tr.upload.key_file};
	char err[512] = "";

	if (!a->cfg.n_scrape)
		return 0;
	a->scrape = scrape__new(&o, err, sizeof(err));
	if (!a->scrape) {
		fprintf(stderr, "edgeprof-agent: %s\n", err);
		return -EINVAL;
	}
	return 0;
}

/* What the scrape thread finished goes where the agent's own profiles go. */
static void scrape_ship(struct agent *a)
{
	struct scrape_result r;

	while (!scrape__take(a->scrape, &r)) {
		struct output_opts o = {.service = r.service, .time_ns = r.time_ns};
		struct pprof_buf buf = {.data = r.data, .len = r.len};

		ship(a, r.service, r.type, &o, &buf, 0);
	}
}

/* --once: the round's fetches (a CPU profile lasts the round) finish before the agent exits. */
static void scrape_finish(struct agent *a)
{
	while (!stop && !scrape__idle(a->scrape)) {
		scrape_ship(a);
		port_sleep_ns(DRAIN_MS * NSEC_PER_MSEC);
	}
	scrape_ship(a);
}

/* The scrapes' counters since start (failures by kind), for the round profiles' comments. */
static void scrape_comment(struct agent *a, char *buf, size_t len)
{
	struct scrape_stats st;

	if (!a->scrape)
		return;
	scrape__stats(a->scrape, &st);
	snprintf(buf, len,
		 " scrape: fetches=%llu ok=%llu failed_connect=%llu failed_tls=%llu failed_io=%llu "
		 "failed_status=%llu failed_too_big=%llu bad_profile=%llu baselines=%llu "
		 "queue_dropped=%llu delta_resets=%llu delta_over_bound=%llu cpu_ms=%llu",
		 (unsigned long long)st.fetches, (unsigned long long)st.ok,
		 (unsigned long long)st.failed_connect, (unsigned long long)st.failed_tls,
		 (unsigned long long)st.failed_io, (unsigned long long)st.failed_status,
		 (unsigned long long)st.failed_too_big, (unsigned long long)st.bad_profile,
		 (unsigned long long)st.baselines, (unsigned long long)st.queue_dropped,
		 (unsigned long long)st.delta_resets, (unsigned long long)st.delta_over_bound,
		 (unsigned long long)(st.cpu_ns / 1000000));
}

/* At exit: what the scrapes did. */
static void scrape_stop(struct agent *a)
{
	char c[512] = "";

	scrape_comment(a, c, sizeof(c));
	if (c[0])
		pr_info("%s", c + 1);
	scrape__free(a->scrape);
}
#else
static int scrape_start(struct agent *a)
{
	return 0;
}
static void scrape_ship(struct agent *a)
{
}
static void scrape_finish(struct agent *a)
{
}
static void scrape_comment(struct agent *a, char *buf, size_t len)
{
}
static void scrape_stop(struct agent *a)
{
}
#endif /* CONFIG_AGENT_SCRAPE */

/* ---- rounds ------------------------------------------------------------------------------- */

/* The service's wall and off-CPU profiles of the round, where it has samples of them. */
static void write_kinds(struct agent *a, struct service *s, struct output_opts o,
			const char *sampler_comment)
{
	char c0[256], c1[256];
	const char *comments[] = {c0, sampler_comment, c1};

	o.comments = comments;
	o.n_comments = sampler_comment[0] ? 2 : 1;
	bpf_offcpu_comment(a, c1, sizeof(c1));
	for (int k = 0; k < N_KINDS; k++) {
		struct agg_stats as;
		char path[512];
		int err;

		if (!s->kinds[k])
			continue;
		aggregate__stats(s->kinds[k], &as);
		if (!as.samples && !as.dropped_table)
			continue;
		snprintf(c0, sizeof(c0),
			 "edgeprof agent (%s): samples=%llu stacks=%zu dropped_table=%llu "
			 "dropped_frames=%llu truncated=%llu",
			 kind_name[k], (unsigned long long)as.samples, as.entries,
			 (unsigned long long)as.dropped_table,
			 (unsigned long long)as.dropped_frames, (unsigned long long)as.truncated);
		o.type = kind_name[k];
		if (k == KIND_OFFCPU && c1[0]) /* its drops first, where edgeprof top shows them */
			comments[0] = c1, comments[2] = c0, o.n_comments = 3;
		if (a->cfg.output_dir) {
			err = output__write_dir(s->kinds[k], &o, a->cfg.output_dir, path,
						sizeof(path));
			if (err)
				pr_err("cannot write %s: %s", path, strerror(-err));
			else
				pr_info("wrote %s (%llu samples)", path,
					(unsigned long long)as.samples);
		}
		if (a->transport)
			submit(a, s->name, s->kinds[k], &o);
		aggregate__reset(s->kinds[k]);
	}
}

static void write_round(struct agent *a, uint64_t duration_ns)
{
	char c0[256], c1[256], c2[384], c3[1536], c4[768] = "edgeprof";
	const char *comments[5] = {c0, c1, c2};
	size_t n_comments = 3;
	struct proctab_stats ps;
	struct procmaps_stats ms;

	proctab__stats(a->procs, &ps);
	procmaps__stats(&ms);
	bpf_name_kernel_frames(a);
	bpf_comment(a, c3, sizeof(c3));
	if (c3[0])
		comments[n_comments++] = c3;
	/* the pull server's and the scrapes' counters: "edgeprof pull: ... scrape: ..." */
	pull_comment(a, c4 + strlen(c4), sizeof(c4) - strlen(c4));
	scrape_comment(a, c4 + strlen(c4), sizeof(c4) - strlen(c4));
	if (strcmp(c4, "edgeprof"))
		comments[n_comments++] = c4;
	for (unsigned int i = 0; i < a->n_services; i++) {
		struct service *s = &a->services[i];
		struct output_opts o = {.service = s->name,
					.hz = (uint32_t)a->cfg.hz,
					.time_ns = a->round_real_ns,
					.duration_ns = duration_ns,
					.procs = a->procs,
					.sym = a->sym,
					.ksyms = a->ksyms,
					.comments = comments,
					.n_comments = n_comments};
		struct agg_stats as;
		uint64_t full = 0, torn = 0, skipped = 0, blocking = 0, aside = 0;
		char path[512];
		int err;

		heap_round(a, s, o);
		write_kinds(a, s, o, c3);
		aggregate__stats(s->agg, &as);
		if (!as.samples && !as.dropped_table) {
			continue;
		}
		for (unsigned int k = 0; k < a->n_rings; k++) {
			struct ring_stats rs;

			if (strncmp(ring__shared(a->rings[k])->service, s->name, sizeof(s->name)))
				continue;
			ring__stats(a->rings[k], &rs);
			full += rs.dropped_full;
			torn += rs.torn;
			/* what the producers' samples miss (agent/lib/sigctl.h), since they started */
			skipped += ring__shared(a->rings[k])->miss_skipped;
			blocking += ring__shared(a->rings[k])->miss_threads_blocking;
			aside += ring__shared(a->rings[k])->miss_stepped_aside;
			/* the ring's own rate, for the period of this service's profile */
			o.hz = ring__shared(a->rings[k])->hz;
		}
		snprintf(c0, sizeof(c0),
			 "edgeprof misses (sigprof producers, since their start): "
			 "threads_blocking_signal=%llu stepped_aside=%llu skipped=%llu",
			 (unsigned long long)blocking, (unsigned long long)aside,
			 (unsigned long long)skipped);
		snprintf(c1, sizeof(c1),
			 "edgeprof agent: samples=%llu stacks=%zu dropped_table=%llu "
			 "dropped_frames=%llu dropped_labels=%llu truncated=%llu",
			 (unsigned long long)as.samples, as.entries,
			 (unsigned long long)as.dropped_table,
			 (unsigned long long)as.dropped_frames,
			 (unsigned long long)as.dropped_labels, (unsigned long long)as.truncated);
		snprintf(c2, sizeof(c2),
			 "edgeprof rings: dropped_full=%llu torn=%llu "
			 "dropped_rings=%llu dropped_services=%llu unknown_addresses=%llu "
			 "evicted_procs=%llu maps_reads=%llu file_stats=%llu elf_opens=%llu",
			 (unsigned long long)full, (unsigned long long)torn,
			 (unsigned long long)a->dropped_rings,
			 (unsigned long long)a->dropped_services,
			 (unsigned long long)ps.unknown_addr, (unsigned long long)ps.evicted,
			 (unsigned long long)ms.maps_reads, (unsigned long long)ms.file_stats,
			 (unsigned long long)ms.build_id_reads);
		if (a->cfg.output_dir) {
			err = output__write_dir(s->agg, &o, a->cfg.output_dir, path, sizeof(path));
			if (err)
				pr_err("cannot write %s: %s", path, strerror(-err));
			else
				pr_info("wrote %s (%llu samples)", path,
					(unsigned long long)as.samples);
		}
		if (a->transport)
			submit(a, s->name, s->agg, &o);
		aggregate__reset(s->agg);
	}
	bpf_round_done(a);
	proctab__new_round(a->procs);
}

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

static int run(struct agent *a)
{
	struct rounds rs;
	uint64_t round_ns = (a->cfg.once ? a->cfg.seconds : a->cfg.round_s) * NSEC_PER_SEC;
	uint64_t period_ns = a->cfg.once ? round_ns : a->cfg.period_s * NSEC_PER_SEC;
	uint64_t last_scan = 0, started = 0;
	int rc =
	    rounds__init(&rs, round_ns, period_ns, a->cfg.once ? 0 : (unsigned)a->cfg.jitter_pct,
			 port_clock_mono_ns(), port_rand_below);

	if (rc)
		return rc;
	bpf_start(a);
	while (!stop) {
		uint64_t now = port_clock_mono_ns(), wait;
		enum round_event ev;

		if (now - last_scan >= NSEC_PER_SEC) {
			scan_registry(a);
			a->in_round = rs.in_round;
			pause_between(a);
			last_scan = now;
		}
		while ((ev = rounds__poll(&rs, now, &wait)) != ROUND_NONE) {
			if (ev == ROUND_START) {
				drain_rings(a, false);
				for (unsigned int i = 0; i < a->n_services; i++) {
					aggregate__reset(a->services[i].agg);
					for (int k = 0; k < N_KINDS; k++)
						if (a->services[i].kinds[k])
							aggregate__reset(a->services[i].kinds[k]);
				}
				a->round_real_ns = port_clock_real_ns();
				started = now;
				a->in_round = true;
				a->duty_skip = a->duty_next_known ? a->duty_next_skip
								  : !round_samples(a);
				a->duty_next_known = false;
				if (a->duty_skip)
					pr_info("round %" PRIu64 " skipped: not in this device's window of "
						"the fleet's duty cycle", ++a->duty_skipped);
				pause_between(a);
				scrape__round(a->scrape, (unsigned)(round_ns / NSEC_PER_SEC),
					      (unsigned)(period_ns / NSEC_PER_SEC));
			} else {
				drain_rings(a, true);
				round_ended(a, &rs, now);
				if (!a->duty_skip)
					write_round(a, now - started);
				if (a->cfg.once) {
					scrape_finish(a);
					goto out;
				}
			}
		}
		if (rs.in_round || a->pull_agg)
			drain_rings(a, false);
		pull_poll(a, now);
		scrape_ship(a);
		transport_poll(a);
		bpf_poll(a, poll_timeout_ms(a, wait, now - last_scan));
	}
	if (rs.in_round && !a->duty_skip) { /* stopped mid-round: keep what was sampled */
		drain_rings(a, true);
		write_round(a, port_clock_mono_ns() - started);
	}
out:
	rings_paused(a, false); /* the producers run on without us; the BPF sampler is freed */
	pull_stop(a);
	scrape_stop(a);
	bpf_stop(a);
	transport_stop(a);
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
#ifdef CONFIG_BPF_RINGBUF_KB
	a.cfg.bpf_ringbuf_kb = CONFIG_BPF_RINGBUF_KB;
#endif
#ifdef CONFIG_UPLOAD_MTLS
	transport_opts__init(&a.cfg.tr);
#endif
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
	if (transport_start(&a) || pull_start(&a) || scrape_start(&a))
		return 2;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	rc = run(&a);
	for (unsigned int i = 0; i < a.n_services; i++) {
		aggregate__free(a.services[i].agg);
		for (int k = 0; k < N_KINDS; k++)
			aggregate__free(a.services[i].kinds[k]);
	}
	for (unsigned int i = 0; i < a.n_rings; i++)
		ring__free(a.rings[i]);
	symbolizer__free(a.sym);
	proctab__free(a.procs);
	return rc ? 1 : 0;
}
