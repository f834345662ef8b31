// SPDX-License-Identifier: MIT
/*
 * pprof/budget.c — reads under a budget (pprof/pprof.h, struct pprof_budget): the collector's
 * queries decode stored profiles and merge them, and a stored profile may be as large as the
 * upload budget let it in (24 MiB decoded); ten of them merged at once, or eight queries at
 * once, took the collector to gigabytes. The reader says what it will allocate before it
 * allocates (pprof_read_limits.reserve); here that is asked of a budget that many reads and
 * a merger share, from several threads, so it is taken and given back in deltas.
 */
#include <errno.h>
#include <string.h>

#include "port/clock.h"
#include "pprof/internal.h"

int pprof_read_charge__reserve(void *ctx, size_t total, char *err, size_t errlen)
{
	struct pprof_read_charge *c = ctx;
	int e;

	if (!c->b || total <= c->held)
		return 0;
	e = c->b->take(c->b->ctx, total - c->held, err, errlen);
	if (!e)
		c->held = total;
	return e;
}

size_t pprof_profile__mem(const struct pprof_profile *p)
{
	size_t n = sizeof(*p) + sizeof(*p->blocks);

	if (!p)
		return 0;
	n += p->n_sample_type * sizeof(*p->sample_type) + p->n_comments * sizeof(*p->comments);
	n += p->n_samples * sizeof(*p->samples) + p->n_mappings * sizeof(*p->mappings);
	n += p->n_locations * sizeof(*p->locations) + p->n_functions * sizeof(*p->functions);
	for (size_t i = 0; i < p->n_samples; i++)
		n += p->samples[i].n_locations * sizeof(uint64_t) +
		     p->n_sample_type * sizeof(int64_t) +
		     p->samples[i].n_labels * sizeof(struct pprof_label);
	for (size_t i = 0; i < p->n_locations; i++)
		n += p->locations[i].n_lines * sizeof(struct pprof_line);
	for (size_t i = 0; i < p->n_strings; i++)
		n += sizeof(*p->strings) + strlen(p->strings[i]) + 1;
	return n;
}

void pprof_profile__free_budget(struct pprof_profile *p, const struct pprof_budget *b)
{
	size_t held = p && b ? pprof_profile__mem(p) : 0;

	pprof_profile__free(p);
	if (held)
		b->give(b->ctx, held);
}

/* Down (or up) from what the read asked to what its profile holds. */
static int settle(struct pprof_read_charge *c, size_t keep, char *err, size_t errlen)
{
	if (c->held > keep) {
		c->b->give(c->b->ctx, c->held - keep);
		c->held = keep;
		return 0;
	}
	return pprof_read_charge__reserve(c, keep, err, errlen);
}

int pprof_read_budget(const void *data, size_t len, const struct pprof_budget *b,
		      struct pprof_profile **out, char *err, size_t errlen)
{
	struct pprof_read_charge c = { .b = b };
	struct pprof_read_limits lim = { .reserve = pprof_read_charge__reserve, .reserve_ctx = &c };
	int e;

	if (!b)
		return pprof_read(data, len, NULL, out, err, errlen);
	e = pprof_read(data, len, &lim, out, err, errlen);
	if (!e)
		e = settle(&c, pprof_profile__mem(*out), err, errlen);
	if (e && c.held)
		b->give(b->ctx, c.held);
	if (e) {
		pprof_profile__free(*out);
		*out = NULL;
	}
	return e;
}

int pprof_budget__check(const struct pprof_budget *b, char *err, size_t errlen)
{
	uint64_t now;

	if (!b || !b->deadline_ns)
		return 0;
	now = port_clock_mono_ns();
	if (now <= b->deadline_ns)
		return 0;
	pp_err(err, errlen, "stopped: the query's time is up (%llu ms past its bound)",
	       (unsigned long long)((now - b->deadline_ns) / 1000000));
	return -ETIMEDOUT;
}
