// SPDX-License-Identifier: MIT
/* agent/daemon/services.c — the services' aggregates, and where a finished profile goes (services.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/core/aggregate.h"
#include "agent/core/framename.h"
#include "agent/core/output.h"
#include "agent/daemon/services.h"
#include "agent/daemon/upload.h"
#include "port/file.h"
#include "port/log.h"

/* "edgeprof agent: ..." and "edgeprof pull: ...": a CPU profile's aggregate. */
const struct stat_field agg_stat_fields[] = {
	STAT(struct agg_stats, samples, "samples"),
	STAT(struct agg_stats, entries, "stacks"),
	STAT(struct agg_stats, dropped_table, "dropped_table"),
	STAT(struct agg_stats, dropped_frames, "dropped_frames"),
	STAT(struct agg_stats, dropped_labels, "dropped_labels"),
	STAT(struct agg_stats, truncated, "truncated"),
};
const size_t n_agg_stat_fields = STATS_N(agg_stat_fields);

struct service *agent__service(struct agent *a, const char *name)
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

struct aggregate *agent__service_kind(struct agent *a, struct service *s, int kind)
{
	struct agg_opts o = {.max_entries = a->cfg.stack_entries};

	if (!s->kinds[kind])
		s->kinds[kind] = aggregate__new(&o);
	return s->kinds[kind];
}

void agent__services_reset(struct agent *a)
{
	for (unsigned int i = 0; i < a->n_services; i++) {
		aggregate__reset(a->services[i].agg);
		for (int k = 0; k < N_KINDS; k++)
			if (a->services[i].kinds[k])
				aggregate__reset(a->services[i].kinds[k]);
	}
}

void agent__names_round_done(struct agent *a)
{
	uint32_t ended = framename__round_end();

	framename__release(a->pull_agg ? a->pull_round - 1 : ended); /* pull_round <= ended */
}

void agent__services_free(struct agent *a)
{
	for (unsigned int i = 0; i < a->n_services; i++) {
		aggregate__free(a->services[i].agg);
		for (int k = 0; k < N_KINDS; k++)
			aggregate__free(a->services[i].kinds[k]);
	}
}

void agent__pull_add(struct agent *a, const struct agent_sample *s, const char *service)
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

void agent__ship(struct agent *a, const char *service, const char *type,
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
		agent_upload__submit_buf(a, service, type, o, bp, err);
	else
		free(bp->data);
	bp->data = NULL;
}
