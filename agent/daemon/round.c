// SPDX-License-Identifier: MIT
/* agent/daemon/round.c — a round's profiles written out (round.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/core/aggregate.h"
#include "agent/core/output.h"
#include "agent/core/procmaps.h"
#include "agent/daemon/bpf.h"
#include "agent/daemon/heap.h"
#include "agent/daemon/pull-loop.h"
#include "agent/daemon/round.h"
#include "agent/daemon/scrape-loop.h"
#include "agent/daemon/services.h"
#include "agent/daemon/sigprof-rings.h"
#include "agent/daemon/stats.h"
#include "agent/daemon/upload.h"
#include "port/file.h"
#include "port/log.h"

static const char *const kind_name[N_KINDS] = {"wall", "offcpu"};


/* "edgeprof agent (wall): ...": the other kinds' (their samples carry no labels of their own) */
static const struct stat_field kind_stat_fields[] = {
	STAT(struct agg_stats, samples, "samples"),
	STAT(struct agg_stats, entries, "stacks"),
	STAT(struct agg_stats, dropped_table, "dropped_table"),
	STAT(struct agg_stats, dropped_frames, "dropped_frames"),
	STAT(struct agg_stats, truncated, "truncated"),
};

/* A round's losses, said in words besides the counters in the profile's comment. */
static const struct stat_loss agg_losses[] = {
	{"dropped_table", "samples lost: the stack table was full", "raise --stack-entries"},
	{"dropped_frames", "samples lost: the frame table was full", "raise --stack-entries"},
	{"dropped_labels", "samples lost their labels: the label table was full", NULL},
	{"truncated", "stacks cut at CONFIG_MAX_STACK_DEPTH frames", "raise it in menuconfig"},
};

static const struct stat_field miss_stat_fields[] = {
	STAT(struct rings_round, blocking, "threads_blocking_signal"),
	STAT(struct rings_round, aside, "stepped_aside"),
	STAT(struct rings_round, skipped, "skipped"),
};

/* "edgeprof rings: ...": the rings', the agent's bounds', the process table's */
struct rings_counters {
	struct rings_round rr;
	uint64_t dropped_rings, dropped_services;
	struct proctab_stats ps;
	struct procmaps_stats ms;
};

static const struct stat_field rings_stat_fields[] = {
	STAT(struct rings_counters, rr.dropped_full, "dropped_full"),
	STAT(struct rings_counters, rr.torn, "torn"),
	STAT(struct rings_counters, dropped_rings, "dropped_rings"),
	STAT(struct rings_counters, dropped_services, "dropped_services"),
	STAT(struct rings_counters, ps.unknown_addr, "unknown_addresses"),
	STAT(struct rings_counters, ps.lost, "maps_lost"),
	STAT(struct rings_counters, ps.evicted, "evicted_procs"),
	STAT(struct rings_counters, ms.maps_reads, "maps_reads"),
	STAT(struct rings_counters, ms.file_stats, "file_stats"),
	STAT(struct rings_counters, ms.build_id_reads, "elf_opens"),
};

/* One aggregate of the round to the output directory and the transport; then emptied. */
static void write_agg(struct agent *a, const char *service, struct aggregate *agg,
		      const struct output_opts *o, uint64_t samples)
{
	char path[512], where[96];
	struct agg_stats as;
	int err;

	aggregate__stats(agg, &as);
	snprintf(where, sizeof(where), "%s %s", service, o->type ? o->type : "cpu");
	stats__say_losses(where, agg_stat_fields, n_agg_stat_fields, &as, agg_losses,
			  STATS_N(agg_losses));
	a->round_profiles++;
	if (a->cfg.output_dir) {
		err = output__write_dir(agg, o, a->cfg.output_dir, path, sizeof(path));
		if (err)
			pr_err("cannot write %s: %s", path, strerror(-err));
		else
			pr_info("wrote %s (%llu samples)", path, (unsigned long long)samples);
	}
	if (a->transport)
		agent_upload__submit(a, service, agg, o);
	aggregate__reset(agg);
}

/* The service's wall and off-CPU profiles of the round, where it has samples of them. */
static void write_kinds(struct agent *a, struct service *s, struct output_opts o,
			const char *sampler_comment)
{
	char c0[256], c1[256];
	const char *comments[] = {c0, sampler_comment, c1};

	o.comments = comments;
	o.n_comments = sampler_comment[0] ? 2 : 1;
	agent_bpf__offcpu_comment(a, c1, sizeof(c1));
	for (int k = 0; k < N_KINDS; k++) {
		struct agg_stats as;
		char head[64];

		if (!s->kinds[k])
			continue;
		aggregate__stats(s->kinds[k], &as);
		if (!as.samples && !as.dropped_table)
			continue;
		c0[0] = 0;
		snprintf(head, sizeof(head), "edgeprof agent (%s):", kind_name[k]);
		stats__append(c0, sizeof(c0), head, kind_stat_fields, STATS_N(kind_stat_fields),
			      &as);
		o.type = kind_name[k];
		if (k == KIND_OFFCPU && c1[0]) /* its drops first, where edgeprof top shows them */
			comments[0] = c1, comments[2] = c0, o.n_comments = 3;
		write_agg(a, s->name, s->kinds[k], &o, as.samples);
	}
}

/*
 * The service's CPU profile of the round, its counters in c[0..2] (the comments of o); rc: the
 * agent's and the process table's, as the round ended.
 */
static void write_cpu(struct agent *a, struct service *s, struct output_opts *o,
		      struct rings_counters rc, char (*c)[384])
{
	struct agg_stats as;

	aggregate__stats(s->agg, &as);
	if (!as.samples && !as.dropped_table)
		return;
	agent_rings__round(a, s->name, &rc.rr);
	if (rc.rr.rings)
		o->hz = rc.rr.hz;
	c[0][0] = c[1][0] = c[2][0] = 0;
	stats__append(c[0], 256, "edgeprof misses (sigprof producers, since their start):",
		      miss_stat_fields, STATS_N(miss_stat_fields), &rc.rr);
	stats__append(c[1], 256, "edgeprof agent:", agg_stat_fields, n_agg_stat_fields, &as);
	stats__append(c[2], 384, "edgeprof rings:", rings_stat_fields,
		      STATS_N(rings_stat_fields), &rc);
	write_agg(a, s->name, s->agg, o, as.samples);
}

unsigned agent__write_round(struct agent *a, uint64_t duration_ns)
{
	char c[3][384], c3[2560], c4[768] = "edgeprof"; /* c3: the BPF counters, ~1,900 bytes */
	const char *comments[5] = {c[0], c[1], c[2]};
	size_t n_comments = 3;
	struct rings_counters rc = {.dropped_rings = a->dropped_rings,
				    .dropped_services = a->dropped_services};

	a->round_profiles = 0;
	proctab__stats(a->procs, &rc.ps);
	procmaps__stats(&rc.ms);
	agent_bpf__name_kernel_frames(a);
	agent_bpf__comment(a, c3, sizeof(c3));
	if (c3[0])
		comments[n_comments++] = c3;
	/* the pull server's and the scrapes' counters: "edgeprof pull: ... scrape: ..." */
	agent_pull__comment(a, c4, sizeof(c4));
	agent_scrape__comment(a, c4, sizeof(c4));
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

		agent_heap__round(a, s, o);
		write_kinds(a, s, o, c3);
		write_cpu(a, s, &o, rc, c);
	}
	agent_bpf__round_done(a);
	agent__names_round_done(a);
	proctab__new_round(a->procs);
	return a->round_profiles;
}
