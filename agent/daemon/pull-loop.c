// SPDX-License-Identifier: MIT
/* agent/daemon/pull-loop.c — the main loop's side of pull mode (agent/daemon/pull-loop.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/core/aggregate.h"
#include "agent/core/framename.h"
#include "agent/core/ring.h"
#include "agent/daemon/bpf.h"
#include "agent/daemon/duty.h"
#include "agent/daemon/heap.h"
#include "agent/daemon/pull-loop.h"
#include "agent/daemon/pull.h"
#include "agent/daemon/services.h"
#include "agent/daemon/sigprof-rings.h"
#include "agent/daemon/stats.h"
#include "port/clock.h"
#include "port/log.h"

static const struct stat_field pull_stat_fields[] = {
	STAT(struct pull_stats, conns, "conns"),
	STAT(struct pull_stats, refused_tls, "refused_tls"),
	STAT(struct pull_stats, refused_role, "refused_role"),
	STAT(struct pull_stats, refused_busy, "refused_busy"),
	STAT(struct pull_stats, requests, "requests"),
	STAT(struct pull_stats, profiles, "profiles"),
	STAT(struct pull_stats, errors, "errors"),
};

int agent_pull__start(struct agent *a)
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
	char c0[256] = "";
	const char *comments[] = {c0};
	struct output_opts o;
	int err;

	agent_rings__drain(a, true);
	agent_bpf__name_kernel_frames(a);
	aggregate__stats(a->pull_agg, &as);
	stats__append(c0, sizeof(c0), "edgeprof pull:", agg_stat_fields, n_agg_stat_fields, &as);
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
	framename__release(framename__round() - 1); /* the rounds written while it ran */
	agent_duty__pause(a);
}

static void pull_heap(struct agent *a)
{
	struct pprof_buf buf = {0};
	struct output_opts o;
	int err;
	char msg[200];

	a->pull_real_ns = port_clock_real_ns();
	a->pull_start = port_clock_mono_ns();
	o = pull_output_opts(a, NULL, 0);
	o.duration_ns = 0;
	err = agent_heap__encode(a, NULL, o, &buf);
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

void agent_pull__poll(struct agent *a, uint64_t now)
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
		agent_rings__drain(a, false); /* what was sampled before belongs to the rounds */
		a->pull_agg = aggregate__new(&ao);
		a->pull_round = framename__round();
		if (!a->pull_agg) {
			pull__answer(a->pull, 503, "no memory for the profile\n", 26);
			return;
		}
		a->pull_start = now;
		a->pull_end = now + seconds * NSEC_PER_SEC;
		a->pull_real_ns = port_clock_real_ns();
		agent_duty__pause(a);
		break;
	case PULL_HEAP:
		pull_heap(a);
		break;
	default:
		break;
	}
}

void agent_pull__comment(struct agent *a, char *buf, size_t len)
{
	struct pull_stats st;

	if (!a->pull)
		return;
	pull__stats(a->pull, &st);
	stats__append(buf, len, " pull:", pull_stat_fields, STATS_N(pull_stat_fields), &st);
}

void agent_pull__stop(struct agent *a)
{
	char c[256] = "";

	agent_pull__comment(a, c, sizeof(c));
	if (c[0])
		pr_info("%s", c + 1);
	pull__free(a->pull);
	aggregate__free(a->pull_agg);
}
