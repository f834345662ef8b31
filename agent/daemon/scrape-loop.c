// SPDX-License-Identifier: MIT
/* agent/daemon/scrape-loop.c — the main loop's side of scraping (agent/daemon/scrape-loop.h). */
#include <stdio.h>

#include "agent/daemon/scrape-loop.h"
#include "agent/daemon/scrape.h"
#include "agent/daemon/services.h"
#include "agent/daemon/stats.h"
#include "port/clock.h"
#include "port/log.h"

#define SCRAPE_STAT(member, name) STAT(struct scrape_stats, member, name)

static const struct stat_field scrape_stat_fields[] = {
	SCRAPE_STAT(fetches, "fetches"),
	SCRAPE_STAT(ok, "ok"),
	SCRAPE_STAT(failed_connect, "failed_connect"),
	SCRAPE_STAT(failed_tls, "failed_tls"),
	SCRAPE_STAT(failed_io, "failed_io"),
	SCRAPE_STAT(failed_status, "failed_status"),
	SCRAPE_STAT(failed_too_big, "failed_too_big"),
	SCRAPE_STAT(bad_profile, "bad_profile"),
	SCRAPE_STAT(baselines, "baselines"),
	SCRAPE_STAT(queue_dropped, "queue_dropped"),
	SCRAPE_STAT(delta_resets, "delta_resets"),
	SCRAPE_STAT(delta_over_bound, "delta_over_bound"),
	STAT_MS(struct scrape_stats, cpu_ns, "cpu_ms"),
};

int agent_scrape__start(struct agent *a)
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

void agent_scrape__ship(struct agent *a)
{
	struct scrape_result r;

	while (!scrape__take(a->scrape, &r)) {
		struct output_opts o = {.service = r.service, .time_ns = r.time_ns};
		struct pprof_buf buf = {.data = r.data, .len = r.len};

		agent__ship(a, r.service, r.type, &o, &buf, 0);
	}
}

void agent_scrape__finish(struct agent *a)
{
	while (!agent_stop && !scrape__idle(a->scrape)) {
		agent_scrape__ship(a);
		port_sleep_ns(DRAIN_MS * NSEC_PER_MSEC);
	}
	agent_scrape__ship(a);
}

void agent_scrape__comment(struct agent *a, char *buf, size_t len)
{
	struct scrape_stats st;

	if (!a->scrape)
		return;
	scrape__stats(a->scrape, &st);
	stats__append(buf, len, " scrape:", scrape_stat_fields, STATS_N(scrape_stat_fields), &st);
}

void agent_scrape__stop(struct agent *a)
{
	char c[512] = "";

	agent_scrape__comment(a, c, sizeof(c));
	if (c[0])
		pr_info("%s", c + 1);
	scrape__free(a->scrape);
}
