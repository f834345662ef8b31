// SPDX-License-Identifier: MIT
/*
 * store/store.c — the store's front: opens the backend that store_opts names and hands every
 * operation to its table (store/store-int.h). The only caller of a backend's functions.
 */
#include <errno.h>
#include <stdio.h>

#include "store/store-int.h"

struct store *store__open(const struct store_opts *opts, char *err, size_t errlen)
{
	struct store *s = NULL;

	switch (opts->backend) {
	case STORE_RING:
		s = store_ring__open(opts, err, errlen);
		break;
	case STORE_CLICKHOUSE:
		s = store_ch__open(opts, err, errlen);
		break;
	default:
		snprintf(err, errlen, "store: unknown backend %d", (int)opts->backend);
		errno = EINVAL;
		return NULL;
	}
	if (s)
		s->rules = opts->rules;
	return s;
}

void store__free(struct store *s)
{
	if (s)
		s->ops->free(s);
}

int store__put(struct store *s, const struct record_meta *meta, const void *payload, size_t len,
	       uint64_t *seq_out, bool *duplicate)
{
	return s->ops->put(s, meta, payload, len, NULL, seq_out, duplicate);
}

bool store__merges_samples(const struct store *s)
{
	return s->ops->merges_samples;
}

int store__ingest(struct store *s, const struct record_meta *meta, const void *payload,
		  size_t len, struct pprof_profile *p, uint64_t *seq_out, bool *duplicate)
{
	struct metrics_pending pend = { .any = false };
	int ret;

	if (s->rules && p)
		metrics_rules__eval(s->rules, meta, p, &pend);
	if (!s->ops->uses_decoded) {
		pprof_profile__free(p);
		p = NULL;
	}
	ret = s->ops->put(s, meta, payload, len, p, seq_out, duplicate);
	pprof_profile__free(p);
	if (!ret && !*duplicate && pend.any)
		metrics_rules__commit(s->rules, meta, &pend);
	return ret;
}

int store__get(struct store *s, uint64_t seq, struct record_meta *meta, void **payload,
	       size_t *len)
{
	return s->ops->get(s, seq, meta, payload, len);
}

int store__list(struct store *s, const struct store_query *q, store_entry_fn cb, void *ctx)
{
	return s->ops->list(s, q, cb, ctx);
}

struct timeline {
	uint64_t from_ns, step_ns;
	size_t n, profiles;
	int64_t *values;
};

static int timeline_one(void *ctx, const struct store_entry *e)
{
	struct timeline *t = ctx;
	uint64_t b;

	if (e->time_ns < t->from_ns)
		return 0;
	b = (e->time_ns - t->from_ns) / t->step_ns;
	if (b < t->n) {
		t->values[b] += e->value;
		t->profiles++;
	}
	return 0;
}

int store__timeline(struct store *s, const struct store_query *q, uint64_t from_ns,
		    uint64_t step_ns, size_t n, int64_t *values, size_t *profiles)
{
	struct timeline t = { from_ns, step_ns, n, 0, values };
	int ret;

	if (s->ops->timeline)
		return s->ops->timeline(s, q, from_ns, step_ns, n, values, profiles);
	ret = s->ops->list(s, q, timeline_one, &t);
	*profiles = t.profiles;
	return ret < 0 ? ret : 0;
}

int store__services(struct store *s, int (*cb)(void *ctx, const char *service), void *ctx)
{
	return s->ops->services(s, cb, ctx);
}

int store__merge(struct store *s, const struct store_query *q, struct pprof_profile **out,
		 size_t *n_merged, size_t *skipped, char *err, size_t errlen)
{
	return s->ops->merge(s, q, out, n_merged, skipped, err, errlen);
}

int store__read_profile(struct store *s, uint64_t seq, struct pprof_profile **p, char *err,
			size_t errlen)
{
	return s->ops->read_profile(s, seq, p, err, errlen);
}

int store__merge_seqs(struct store *s, const uint64_t *seqs, size_t n, struct pprof_profile **out,
		      char *err, size_t errlen)
{
	return s->ops->merge_seqs(s, seqs, n, out, err, errlen);
}

void store__stats(struct store *s, struct store_stats *st)
{
	s->ops->stats(s, st);
}

struct metrics_rules *store__rules(const struct store *s)
{
	return s->rules;
}
