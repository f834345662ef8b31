// SPDX-License-Identifier: MIT
/*
 * store/ring/store-ring.c — the store's default backend: ring file + index under one lock, queries
 * and merges (with rollups), behind store/store-int.h's table of operations.
 *
 * Writers hold the lock only to check the idempotency key, reserve the record's place in the
 * ring and index it; the CRC, the pwrite and the fdatasync that makes the record durable
 * happen outside it, so concurrent uploads write in parallel and share one sync (group commit)
 * instead of queueing behind each other's.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "port/log.h"
#include "store/ring/index.h"
#include "store/ring/rollup.h"

#ifdef CONFIG_COLLECTOR_RING_MB
#define STORE_DEFAULT_RING_BYTES ((uint64_t)CONFIG_COLLECTOR_RING_MB << 20)
#else
#define STORE_DEFAULT_RING_BYTES (64ull << 20)
#endif
#ifdef CONFIG_COLLECTOR_INDEX_ENTRIES
#define STORE_DEFAULT_INDEX_ENTRIES CONFIG_COLLECTOR_INDEX_ENTRIES
#else
#define STORE_DEFAULT_INDEX_ENTRIES 65536
#endif

struct ring_store {
	struct store base;
	pthread_mutex_t lock;
	struct ringfile *rf;
	struct index *ix;
	size_t max_merge;
	uint64_t puts, duplicates, put_errors, merges, merge_skipped;
	uint64_t rollups_read, rollups_stale;
	struct rollup *ru;	/* the compactor (NULL: no rollups) */
	unsigned rollup_s;	/* its bucket seconds (0: plan raw records only) */
};

static const struct store_ops ring_ops;
static const struct rollup_ring ring_for_rollups;

static struct ring_store *ring_of(struct store *base)
{
	return (struct ring_store *)base;
}

static int ring__index_cb(void *ctx, uint64_t seq, const struct record_meta *meta, size_t len)
{
	struct ring_store *s = ctx;
	int err = index__add(s->ix, seq, meta, len, NULL);

	/* a second copy of a key (only possible if the index once dropped the first) is skipped */
	return err == -EEXIST ? 0 : err;
}

static void ring__free(struct store *base)
{
	struct ring_store *s = ring_of(base);

	rollup__stop(s->ru);
	ringfile__free(s->rf);
	index__free(s->ix);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

struct store *store_ring__open(const struct store_opts *opts, char *err, size_t errlen)
{
	struct ring_store *s = calloc(1, sizeof(*s));
	struct ringfile_opts ro = { .size = opts->size, .fsync_ms = opts->fsync_ms,
				    .create = true, .quiet = opts->quiet,
				    .on_record = ring__index_cb, .ctx = s };
	struct ringfile_stats st;
	int e;

	if (!s) {
		snprintf(err, errlen, "store: out of memory");
		errno = ENOMEM;
		return NULL;
	}
	s->base.ops = &ring_ops;
	pthread_mutex_init(&s->lock, NULL);
	s->max_merge = opts->max_merge ? opts->max_merge : STORE_DEFAULT_MAX_MERGE;
	if (!ro.size && access(opts->path, F_OK))
		ro.size = STORE_DEFAULT_RING_BYTES;
	s->ix = index__new(opts->index_entries ? opts->index_entries
					       : STORE_DEFAULT_INDEX_ENTRIES);
	if (!s->ix) {
		errno = ENOMEM;
		snprintf(err, errlen, "store: out of memory");
		goto err_free;
	}
	/* the index is rebuilt by the ring's own scan (on_record) */
	s->rf = ringfile__open(opts->path, &ro, err, errlen);
	if (!s->rf)
		goto err_free;
	ringfile__stats(s->rf, &st);
	if (!opts->quiet)
		pr_info("store: %s: %" PRIu64 " profiles (%" PRIu64 " of %" PRIu64
			" bytes used), %" PRIu64 " corrupt or torn records skipped",
			opts->path, st.records, st.used, st.capacity, st.corrupt);
	if (opts->rollup.bucket_s && IS_ENABLED(CONFIG_COLLECTOR_ROLLUP)) {
		struct rollup_ring ring = ring_for_rollups;

		ring.ctx = s;
		s->ru = rollup__start(&ring, &opts->rollup);
		if (!s->ru) {
			snprintf(err, errlen, "store: starting the rollup thread: %s",
				 strerror(errno));
			goto err_free;
		}
		s->rollup_s = rollup__bucket_s(s->ru);
	}
	return &s->base;

err_free:
	e = errno;
	ring__free(&s->base);
	errno = e;
	return NULL;
}

static int ring_store__put(struct ring_store *s, const struct record_meta *meta,
			   const void *payload, size_t len, uint64_t *seq_out, bool *duplicate)
{
	struct ringfile_append ap;
	uint64_t seq = 0;
	int err;

	*duplicate = false;
	pthread_mutex_lock(&s->lock);
	if (index__find_key(s->ix, meta->key, &seq) == 0) {
		*duplicate = true;
		s->duplicates++;
		pthread_mutex_unlock(&s->lock);
		*seq_out = seq;
		/* the first copy may still be being written or waiting for its group commit */
		return ringfile__wait_durable(s->rf, seq);
	}
	/* seq order = index order = key check order; the bytes are written after unlocking */
	err = ringfile__append_begin(s->rf, meta, payload, len, &ap);
	if (err) {
		s->put_errors++;
		pthread_mutex_unlock(&s->lock);
		return err;
	}
	index__evict_before(s->ix, ringfile__first_seq(s->rf));
	if (index__add(s->ix, ap.seq, meta, len, NULL) == -ENOMEM)
		pr_warn("store: out of memory indexing profile %" PRIu64, ap.seq);
	s->puts++; /* stored; at worst not indexed (counted nowhere else: say so above) */
	pthread_mutex_unlock(&s->lock);
	err = ringfile__append_finish(s->rf, &ap);
	if (err) {
		pthread_mutex_lock(&s->lock);
		s->puts--;
		s->put_errors++;
		pthread_mutex_unlock(&s->lock);
		return err;
	}
	*seq_out = ap.seq;
	return ringfile__wait_durable(s->rf, ap.seq);
}

/* The ring stores the payload as sent: it needs no decoded profile. */
static int ring__put(struct store *base, const struct record_meta *meta, const void *payload,
		     size_t len, const struct pprof_profile *decoded, uint64_t *seq_out,
		     bool *duplicate)
{
	(void)decoded;
	return ring_store__put(ring_of(base), meta, payload, len, seq_out, duplicate);
}

static int ring_store__get(struct ring_store *s, uint64_t seq, struct record_meta *meta,
			   void **payload, size_t *len)
{
	return ringfile__read(s->rf, seq, meta, payload, len);
}

static int ring__get(struct store *base, uint64_t seq, struct record_meta *meta,
		     void **payload, size_t *len)
{
	return ring_store__get(ring_of(base), seq, meta, payload, len);
}

/* ---- selection ------------------------------------------------------------------------------ */

struct select_ctx {
	const struct store_query *q;
	store_entry_fn cb;
	void *ctx;
	size_t n, limit;
};

static bool query__match(const struct store_query *q, const struct store_entry *v)
{
	if (q->type && *q->type && strcmp(q->type, v->type))
		return false;
	if ((v->flags & STORE_F_ROLLUP) && !q->with_rollups)
		return false;
	/* the planner reads one only when the selector took every series of its group */
	if ((v->flags & STORE_F_ROLLUP) && (v->flags & STORE_F_ROLLUP_GROUP))
		return true;
	return selector__match(q->sel, v->service, v->device, v->labels, v->n_labels);
}

static int select__cb(void *ctx, const struct store_entry *v)
{
	struct select_ctx *sc = ctx;
	int ret;

	if (!query__match(sc->q, v))
		return 0;
	ret = sc->cb(sc->ctx, v);
	if (ret)
		return ret;
	return ++sc->n == sc->limit ? 1 : 0;
}

static int ring__select_locked(struct ring_store *s, const struct store_query *q, size_t limit,
				bool newest_first, store_entry_fn cb, void *ctx)
{
	struct select_ctx sc = { .q = q, .cb = cb, .ctx = ctx, .limit = limit };
	uint64_t to = q->to_ns ? q->to_ns : UINT64_MAX;
	int ret = index__foreach(s->ix, q->from_ns, to, newest_first, select__cb, &sc);

	if (ret < 0)
		return ret;
	return sc.n > INT32_MAX ? INT32_MAX : (int)sc.n;
}

static int ring_store__list(struct ring_store *s, const struct store_query *q,
			    store_entry_fn cb, void *ctx)
{
	int ret;

	pthread_mutex_lock(&s->lock);
	ret = ring__select_locked(s, q, q->limit, q->newest_first, cb, ctx);
	pthread_mutex_unlock(&s->lock);
	return ret;
}

static int ring__list(struct store *base, const struct store_query *q, store_entry_fn cb,
		      void *ctx)
{
	return ring_store__list(ring_of(base), q, cb, ctx);
}

static int ring__services(struct store *base, int (*cb)(void *ctx, const char *service),
			  void *ctx)
{
	struct ring_store *s = ring_of(base);
	int ret;

	pthread_mutex_lock(&s->lock);
	ret = index__foreach_service(s->ix, cb, ctx);
	pthread_mutex_unlock(&s->lock);
	return ret;
}

/* ---- merge ---------------------------------------------------------------------------------- */

struct entry_list {
	struct plan_entry *v;
	size_t n, cap;
};

static int entry_list__cb(void *ctx, const struct store_entry *v)
{
	struct entry_list *l = ctx;

	if (l->n < l->cap)
		l->v[l->n] = plan_entry_of(v->seq, v->time_ns, v->flags, v->value, v->service,
					   v->type, v->device, v->labels);
	l->n++;
	return 0;
}

static int ring_store__read_profile(struct ring_store *s, uint64_t seq,
				    const struct pprof_budget *b, struct pprof_profile **p,
				    char *err, size_t errlen)
{
	struct record_meta meta;
	void *payload;
	size_t len;
	char perr[192];
	int e;

	*p = NULL;
	e = ringfile__read(s->rf, seq, &meta, &payload, &len);
	if (e) {
		snprintf(err, errlen, "profile %" PRIu64 " is no longer stored", seq);
		return e;
	}
	e = pprof_read_budget(payload, len, b, p, perr, sizeof(perr));
	free(payload);
	if (e == -EFBIG && b) { /* the budget's (the reader's own limits held at upload) */
		snprintf(err, errlen, "profile %" PRIu64 ": %s", seq, perr);
		return e;
	}
	if (e == -EAGAIN || e == -ETIMEDOUT) {
		snprintf(err, errlen, "%s", perr);
		return e;
	}
	if (e) {
		snprintf(err, errlen, "profile %" PRIu64 " does not decode: %s", seq, perr);
		return e == -ENOMEM ? e : -EIO;
	}
	return 0;
}

static int ring__read_profile(struct store *base, uint64_t seq, const struct pprof_budget *b,
			      struct pprof_profile **p, char *err, size_t errlen)
{
	return ring_store__read_profile(ring_of(base), seq, b, p, err, errlen);
}

struct merge_ctx {
	struct ring_store *s;
	const struct merge_plan *plan;
	const struct pprof_budget *budget; /* the query's (NULL = none) */
	size_t base;			/* items before base were merged or skipped */
	uint64_t rollups_read, rollups_stale; /* atomically added (worker threads) */
};

/* pprof_load_fn: reads one planned record (on a worker thread). */
static int merge__load(void *ctx, size_t i, const struct pprof_budget *b,
		       struct pprof_profile **p, char *err, size_t errlen)
{
	struct merge_ctx *mc = ctx;
	const struct merge_item *it = &mc->plan->items[mc->base + i];
	struct rollup_ring ring = ring_for_rollups;
	bool used = false;
	int e;

	if (!it->n)
		return ring_store__read_profile(mc->s, it->seq, b, p, err, errlen);
	ring.ctx = mc->s;
	e = rollup__load(&ring, mc->plan, it, b, p, &used, err, errlen);
	__atomic_add_fetch(used ? &mc->rollups_read : &mc->rollups_stale, 1, __ATOMIC_RELAXED);
	return e;
}

/* One merge of the plan's items from start on, skipping what cannot merge (skip_bad). */
struct merge_pass {
	struct pprof_merger *m;
	size_t merged, bad, odd;	/* items: merged, left out (odd: types that cannot merge) */
	size_t first_odd_at;		/* the first odd item's index */
	char first_odd[200];
};

static int merge__pass(struct merge_ctx *mc, size_t start, bool skip_bad, struct merge_pass *ps,
		       char *err, size_t errlen)
{
	const struct merge_plan *pl = mc->plan;
	size_t failed;
	int e = 0;

	memset(ps, 0, sizeof(*ps));
	ps->m = pprof_merger__new();
	if (!ps->m)
		return -ENOMEM;
	pprof_merger__set_budget(ps->m, mc->budget);
	ps->bad = ps->odd = start; /* before start: the kind another pass took */
	ps->first_odd_at = pl->n_items;
	mc->base = start;
	/* a bad record stops add_all at it: count it and go on after it */
	while (mc->base < pl->n_items) {
		e = pprof_merger__add_all(ps->m, pl->n_items - mc->base, 0, merge__load, mc, &failed,
					  err, errlen);
		if (!e) {
			ps->merged += pl->n_items - mc->base;
			break;
		}
		/*
		 * Evicted meanwhile or unreadable, or sample/period types that cannot merge with
		 * the rest (one device's odd profile must not blank its service's view): skipped
		 * when selecting, and said in a comment; fatal by id.
		 */
		if (!skip_bad || (e != -ENOENT && e != -EIO && e != -EINVAL))
			break;
		if (e == -EINVAL && ps->first_odd_at == pl->n_items) {
			ps->first_odd_at = mc->base + failed;
			snprintf(ps->first_odd, sizeof(ps->first_odd), "%s", err);
		}
		ps->odd += e == -EINVAL;
		ps->merged += failed;
		ps->bad++;
		mc->base += failed + 1;
		e = 0;
	}
	return e;
}

static int merge__run(struct ring_store *s, const struct merge_plan *pl, bool skip_bad,
		      const struct pprof_budget *b, struct pprof_profile **out, size_t *n_merged,
		      size_t *skipped, char *err, size_t errlen)
{
	struct merge_ctx mc = { .s = s, .plan = pl, .budget = b };
	struct merge_pass p1, p2, *ps = &p1;
	int e = merge__pass(&mc, 0, skip_bad, &p1, err, errlen);

	/*
	 * The first item sets the kind; when most items were of another kind (an odd profile
	 * dated first, say), merge again from the first of those and keep the larger merge.
	 */
	if (!e && p1.odd > p1.merged) {
		if (!merge__pass(&mc, p1.first_odd_at, true, &p2, err, errlen) &&
		    p2.merged > p1.merged)
			ps = &p2;
		pprof_merger__free(ps == &p2 ? p1.m : p2.m);
	}
	if (!e && ps->odd && ps->merged) {
		char note[320];

		snprintf(note, sizeof(note), "edgeprof: %zu profile%s skipped: sample or period "
			 "types that cannot merge with the rest (first: %s)", ps->odd,
			 ps->odd > 1 ? "s" : "", ps->first_odd[0] ? ps->first_odd : p1.first_odd);
		e = pprof_merger__add_comment(ps->m, note);
	}
	if (!e && !ps->merged) {
		snprintf(err, errlen, "no profiles match");
		e = -ENOENT;
	}
	if (!e)
		e = pprof_merger__finish(ps->m, out, err, errlen);
	pprof_merger__free(ps->m);
	pthread_mutex_lock(&s->lock);
	s->merges++;
	s->merge_skipped += ps->bad;
	s->rollups_read += mc.rollups_read;
	s->rollups_stale += mc.rollups_stale;
	pthread_mutex_unlock(&s->lock);
	if (n_merged) /* raw profiles stand behind the items: report those */
		*n_merged = ps->merged == pl->n_items ? pl->n_profiles : ps->merged;
	if (skipped)
		*skipped = ps->bad;
	return e;
}

/* The entries a merge query selects (rollups too), at most cap: 0, or -errno. */
static int merge__select(struct ring_store *s, const struct store_query *q, size_t cap,
			 struct entry_list *l)
{
	struct store_query sq = *q;
	int e;

	/* an explicit limit merges the newest `limit` profiles, raw ones */
	sq.with_rollups = !q->raw_only && !(q->limit && q->limit <= s->max_merge) && s->rollup_s;
	l->cap = cap;
	l->v = malloc(cap * sizeof(*l->v));
	if (!l->v)
		return -ENOMEM;
	pthread_mutex_lock(&s->lock);
	e = ring__select_locked(s, &sq, q->limit && q->limit <= s->max_merge ? cap : 0,
				 q->limit && q->limit <= s->max_merge, entry_list__cb, l);
	pthread_mutex_unlock(&s->lock);
	return e < 0 ? e : 0;
}

static int ring__merge(struct store *base, const struct store_query *q,
		       struct pprof_profile **out, size_t *n_merged, size_t *skipped, char *err,
		       size_t errlen)
{
	struct ring_store *s = ring_of(base);
	bool limited = q->limit && q->limit <= s->max_merge;
	/* rollups stand for many raws: select up to 64 x the limit, plan, then check the limit */
	size_t cap = limited ? q->limit : s->rollup_s && !q->raw_only ? 64 * s->max_merge
								      : s->max_merge;
	struct merge_plan pl = { 0 };
	struct entry_list l = { 0 };
	int e;

	*out = NULL;
	e = merge__select(s, q, cap, &l);
	if (!e && l.n > cap) {
		snprintf(err, errlen, "query matches %zu profiles, more than the limit of %zu: "
			 "narrow the time range or the selector", l.n, s->max_merge);
		e = -E2BIG;
	}
	if (!e)
		e = rollup__plan(l.v, l.n, q->from_ns, q->to_ns ? q->to_ns : UINT64_MAX,
				 !limited && !q->raw_only ? s->rollup_s : 0, &pl);
	if (!e && pl.n_items > s->max_merge) {
		snprintf(err, errlen, "query matches %zu profiles, more than the limit of %zu: "
			 "narrow the time range or the selector", pl.n_items, s->max_merge);
		e = -E2BIG;
	} else if (!e && !pl.n_items) {
		snprintf(err, errlen, "no profiles match");
		e = -ENOENT;
	} else if (!e) {
		e = merge__run(s, &pl, true, q->budget, out, n_merged, skipped, err, errlen);
	}
	merge_plan__free(&pl);
	free(l.v);
	return e;
}

static int ring__merge_seqs(struct store *base, const uint64_t *seqs, size_t n,
			    const struct pprof_budget *b, struct pprof_profile **out, char *err,
			    size_t errlen)
{
	struct ring_store *s = ring_of(base);
	struct merge_plan pl = { .n_items = n, .n_profiles = n };
	int e;

	*out = NULL;
	if (n > s->max_merge) {
		snprintf(err, errlen, "%zu profiles asked, more than the limit of %zu", n,
			 s->max_merge);
		return -E2BIG;
	}
	pl.items = calloc(n ? n : 1, sizeof(*pl.items));
	if (!pl.items)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		pl.items[i].seq = seqs[i];
	e = merge__run(s, &pl, false, b, out, NULL, NULL, err, errlen);
	merge_plan__free(&pl);
	return e;
}

static void ring__stats(struct store *base, struct store_stats *st)
{
	struct ring_store *s = ring_of(base);

	st->backend = STORE_RING;
	ringfile__stats(s->rf, &st->ring);
	pthread_mutex_lock(&s->lock);
	index__stats(s->ix, &st->index);
	st->puts = s->puts;
	st->duplicates = s->duplicates;
	st->put_errors = s->put_errors;
	st->merges = s->merges;
	st->merge_skipped = s->merge_skipped;
	st->rollups_read = s->rollups_read;
	st->rollups_stale = s->rollups_stale;
	st->rollups_built = st->rollups_dropped = st->rollup_build_ns = 0;
	pthread_mutex_unlock(&s->lock);
	rollup__stats(s->ru, st);
}

/* The compactor's view of the ring (store/ring/rollup.h): its records, below the front. */
static int rollup_put(void *ctx, const struct record_meta *meta, const void *payload, size_t len,
		      uint64_t *seq_out, bool *duplicate)
{
	return ring_store__put(ctx, meta, payload, len, seq_out, duplicate);
}

static int rollup_get(void *ctx, uint64_t seq, struct record_meta *meta, void **payload,
		      size_t *len)
{
	return ring_store__get(ctx, seq, meta, payload, len);
}

static int rollup_list(void *ctx, const struct store_query *q, store_entry_fn cb, void *cb_ctx)
{
	return ring_store__list(ctx, q, cb, cb_ctx);
}

static int rollup_read_profile(void *ctx, uint64_t seq, const struct pprof_budget *b,
			       struct pprof_profile **p, char *err, size_t errlen)
{
	return ring_store__read_profile(ctx, seq, b, p, err, errlen);
}

static const struct rollup_ring ring_for_rollups = {
	.put = rollup_put,
	.get = rollup_get,
	.list = rollup_list,
	.read_profile = rollup_read_profile,
};

static const struct store_ops ring_ops = {
	.name = "ring",
	.put = ring__put,
	.get = ring__get,
	.list = ring__list,
	.services = ring__services,
	.merge = ring__merge,
	.read_profile = ring__read_profile,
	.merge_seqs = ring__merge_seqs,
	.stats = ring__stats,
	.free = ring__free,
};
