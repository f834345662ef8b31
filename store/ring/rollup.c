// SPDX-License-Identifier: MIT
/*
 * store/ring/rollup.c — the rollup compactor: a background thread that merges each closed bucket of
 * each series into one rollup record (store/ring/rollup.h), and the loader that reads a rollup back.
 *
 * The thread walks time forward from the oldest indexed profile, a window of buckets per pass,
 * and builds at most max_pending rollups per pass (then it goes on at once, so a long backlog
 * after a restart is worked through without holding the store's lock for long: the lock is held
 * only to list the window's entries; reading, merging and appending happen outside it). It
 * decodes on its own thread only, so it never takes more than one CPU from ingest and queries.
 * It reads, lists and appends through the table the ring backend gives it (struct rollup_ring),
 * never through the store's front: calls point one way, store.c -> store-ring.c -> rollup.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "port/clock.h"
#include "port/log.h"
#include "store/ring/rollup.h"

#ifndef CONFIG_COLLECTOR_ROLLUP_BUCKET_S
#define CONFIG_COLLECTOR_ROLLUP_BUCKET_S 300
#endif
#ifndef CONFIG_COLLECTOR_ROLLUP_MAX_PENDING
#define CONFIG_COLLECTOR_ROLLUP_MAX_PENDING 256
#endif
/* uploads are late by their interval plus retries */
#define ROLLUP_DEFAULT_GRACE_S	60
#define ROLLUP_DEFAULT_POLL_MS	5000
/* entries listed per pass: 16 MiB of plan_entry */
#define ROLLUP_MAX_SCAN		(1u << 18)

struct rollup {
	struct rollup_ring ring;
	struct rollup_opts o;
	uint64_t bucket_ns;
	uint64_t done_until_ns;	/* every bucket before this was looked at */
	pthread_t tid;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	bool stop;
	uint64_t built, dropped, cpu_ns; /* under lock */
};

/* ---- reading a rollup back ------------------------------------------------------------------- */

/* The raws a rollup record covers, from its key: 0, or -EINVAL when it is not a rollup key. */
static int rollup_key_parse(const char *key, uint64_t *count, uint64_t *seq_sum)
{
	unsigned long long b, c, first, sum;

	if (sscanf(key, "rollup/%llu/%llu/%llu/%llu", &b, &c, &first, &sum) != 4)
		return -EINVAL;
	*count = c;
	*seq_sum = sum;
	return 0;
}

/* Merges the raws of a rollup item (its rollup was stale) into one profile. */
static int rollup__merge_raws(const struct rollup_ring *ring, const uint64_t *seqs, size_t n,
			      const struct pprof_budget *b, struct pprof_profile **p, char *err,
			      size_t errlen)
{
	struct pprof_merger *m = pprof_merger__new();
	int e = 0;

	if (!m)
		return -ENOMEM;
	pprof_merger__set_budget(m, b);
	for (size_t i = 0; i < n && !e; i++) {
		struct pprof_profile *one;

		e = ring->read_profile(ring->ctx, seqs[i], b, &one, err, errlen);
		if (e == -ENOENT || e == -EIO) { /* as a raw merge does: skipped */
			e = 0;
			continue;
		}
		if (!e)
			e = pprof_merger__add(m, one, err, errlen);
		pprof_profile__free_budget(one, b);
	}
	if (!e)
		e = pprof_merger__finish(m, p, err, errlen);
	pprof_merger__free(m);
	return e;
}

int rollup__load(const struct rollup_ring *ring, const struct merge_plan *pl,
		 const struct merge_item *it, const struct pprof_budget *b,
		 struct pprof_profile **p, bool *used_rollup, char *err, size_t errlen)
{
	struct record_meta meta;
	uint64_t count, sum;
	void *payload = NULL;
	size_t len;
	char perr[192];

	*p = NULL;
	*used_rollup = false;
	if (!ring->get(ring->ctx, it->seq, &meta, &payload, &len) && (meta.flags & STORE_F_ROLLUP) &&
	    !rollup_key_parse(meta.key, &count, &sum) && count == it->n && sum == it->seq_sum &&
	    !pprof_read_budget(payload, len, b, p, perr, sizeof(perr))) {
		free(payload);
		*used_rollup = true;
		return 0;
	}
	free(payload);
	return rollup__merge_raws(ring, pl->raws + it->first, it->n, b, p, err, errlen);
}

/* ---- building rollups ------------------------------------------------------------------------ */

struct scan {
	struct plan_entry *v;
	size_t n, cap;
	uint64_t min_time;
};

static int scan__cb(void *ctx, const struct store_entry *v)
{
	struct scan *sc = ctx;

	if (v->time_ns < sc->min_time)
		sc->min_time = v->time_ns;
	if (sc->n < sc->cap)
		sc->v[sc->n] = plan_entry_of(v->seq, v->time_ns, v->flags, v->value, v->service,
					     v->type, v->device, v->labels);
	sc->n++;
	return 0;
}

/* Lists every entry (rollups too) with time in [from, to]: 0, or -E2BIG past sc->cap. */
static int rollup__list(struct rollup *r, uint64_t from, uint64_t to, struct scan *sc)
{
	struct store_query q = { .from_ns = from, .to_ns = to, .with_rollups = true };
	int e;

	sc->n = 0;
	sc->min_time = UINT64_MAX;
	e = r->ring.list(r->ring.ctx, &q, scan__cb, sc);
	if (e < 0)
		return e;
	return sc->n > sc->cap ? -E2BIG : 0;
}

/* A rollup being built: the merged profile's encoding and what the key must say. */
struct built {
	struct pprof_buf out;
	uint64_t first, seq_sum;
	int64_t value;
	struct record_meta meta;	/* of the group's first raw */
	void *meta_payload;		/* holds meta's strings */
};

/* Reads one planned item for a build: a raw (its value and, for the first, its metadata). */
static int rollup__load_item(struct rollup *r, const struct merge_plan *pl, size_t i,
			     struct built *b, struct pprof_profile **p, char *err, size_t errlen)
{
	const struct merge_item *it = &pl->items[i];
	struct record_meta meta;
	void *payload;
	size_t len;
	bool used;
	int ret;

	if (it->n)
		return rollup__load(&r->ring, pl, it, r->o.budget, p, &used, err, errlen);
	ret = r->ring.get(r->ring.ctx, it->seq, &meta, &payload, &len);
	if (ret) {
		snprintf(err, errlen, "profile %" PRIu64 " is no longer stored", it->seq);
		return ret;
	}
	ret = pprof_read_budget(payload, len, r->o.budget, p, err, errlen);
	if (!ret && !b->meta_payload) {
		b->meta = meta;
		b->meta_payload = payload;
		return 0;
	}
	free(payload);
	return ret;
}

/* Merges the planned items into b->out: 0, or -errno (err filled). */
static int rollup__merge_plan(struct rollup *r, const struct merge_plan *pl, struct built *b,
			      char *err, size_t errlen)
{
	struct pprof_merger *m = pprof_merger__new();
	struct pprof_profile *p = NULL;
	int ret = 0;

	if (!m)
		return -ENOMEM;
	pprof_merger__set_budget(m, r->o.budget);
	for (size_t i = 0; i < pl->n_items && !ret; i++) {
		ret = rollup__load_item(r, pl, i, b, &p, err, errlen);
		if (!ret)
			ret = pprof_merger__add(m, p, err, errlen);
		pprof_profile__free_budget(p, r->o.budget);
		p = NULL;
	}
	if (!ret)
		ret = pprof_merger__finish(m, &p, err, errlen);
	pprof_merger__free(m);
	if (!ret)
		ret = pprof_write_profile(p, NULL, pprof_buf_write, &b->out);
	pprof_profile__free_budget(p, r->o.budget);
	return ret;
}

/*
 * Builds and stores the rollup of one series over [start, start + len) of level 1 or 2 from
 * its sorted entries e[0..n) (raws, and bucket rollups for a span): every raw must be read (an
 * evicted or corrupt one fails the build, counted: the raws are then merged at query time).
 */
static int rollup__build(struct rollup *r, struct plan_entry *e, size_t n, unsigned level,
			 bool group, uint64_t start, uint64_t len)
{
	struct merge_plan pl;
	struct built b = { 0 };
	char key[112], err[256] = "";
	uint64_t seq;
	bool dup;
	int ret = rollup__plan(e, n, start, start + len - 1, r->o.bucket_s, &pl);

	for (size_t i = 0; i < n; i++) {
		if (e[i].level)
			continue;
		b.first = b.first ? b.first : e[i].seq;
		b.seq_sum += e[i].seq;
	}
	if (!ret)
		ret = rollup__merge_plan(r, &pl, &b, err, sizeof(err));
	if (!ret && !b.meta_payload) /* only rollups were read: a raw names the series */
		ret = r->ring.get(r->ring.ctx, b.first, &b.meta, &b.meta_payload, NULL);
	if (!ret) {
		snprintf(key, sizeof(key), "rollup/%u/%zu/%" PRIu64 "/%" PRIu64 "%s",
			 level == 2 ? r->o.bucket_s * ROLLUP_SPAN_BUCKETS : r->o.bucket_s,
			 pl.n_profiles, b.first, b.seq_sum, group ? "/g" : "");
		b.meta.time_ns = start;
		b.meta.flags = (b.meta.flags & ~RINGFILE_F_USER_MASK) | STORE_F_ROLLUP |
			       (level == 2 ? STORE_F_ROLLUP_SPAN : 0) |
			       (group ? STORE_F_ROLLUP_GROUP : 0);
		b.meta.key = key;
		/* rollups are not listed (timelines sum the raws); the planner counts a group's */
		b.meta.value = group ? (int64_t)pl.n_profiles : 0;
		if (group) { /* of no one device */
			b.meta.device = "";
			b.meta.labels = NULL;
			b.meta.n_labels = 0;
		}
		ret = r->ring.put(r->ring.ctx, &b.meta, b.out.data, b.out.len, &seq, &dup);
	} else {
		pr_debug("rollup: level %u at %" PRIu64 ": %s", level,
			 (uint64_t)(start / 1000000000ull), err[0] ? err : strerror(-ret));
	}
	merge_plan__free(&pl);
	free(b.meta_payload);
	free(b.out.data);
	return ret;
}

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static bool rollup__stopping(struct rollup *r)
{
	bool stop;

	pthread_mutex_lock(&r->lock);
	stop = r->stop;
	pthread_mutex_unlock(&r->lock);
	return stop;
}

/* Whether e[0..n) holds raws of two series or more (a group rollup of one gains nothing). */
static bool several_series(const struct plan_entry *e, size_t n)
{
	const struct plan_entry *first = NULL;

	for (size_t i = 0; i < n; i++) {
		if (e[i].level)
			continue;
		if (first && (e[i].device != first->device || e[i].labels != first->labels))
			return true;
		first = first ? first : &e[i];
	}
	return false;
}

/*
 * Builds (or counts as left) the rollup of one series' (or one group's) bucket or span e[0..n)
 * when it has >= 2 raws and none yet.
 */
static void rollup__group(struct rollup *r, struct plan_entry *e, size_t n, unsigned level,
			  bool group, size_t *tried, size_t *left)
{
	uint64_t len = r->bucket_ns * (level == 2 ? ROLLUP_SPAN_BUCKETS : 1), t0;
	size_t raws = 0;
	int ret;

	for (size_t i = 0; i < n; i++) {
		if (e[i].level == level && e[i].group == group)
			return; /* done */
		raws += !e[i].level;
	}
	if (raws < 2 || (group && !several_series(e, n))) /* one raw gains nothing */
		return;
	if (*tried == r->o.max_pending || rollup__stopping(r)) {
		++*left;
		return;
	}
	++*tried;
	t0 = thread_cpu_ns();
	ret = rollup__build(r, e, n, level, group, (e[0].time_ns / len) * len, len);
	pthread_mutex_lock(&r->lock);
	r->cpu_ns += thread_cpu_ns() - t0;
	if (ret)
		r->dropped++;
	else
		r->built++;
	pthread_mutex_unlock(&r->lock);
}

/*
 * Builds the missing rollups of one level of the listed series (or groups): how many are left
 * for later.
 */
static size_t rollup__build_missing(struct rollup *r, struct scan *sc, unsigned level, bool group)
{
	size_t i = 0, tried = 0, left = 0;

	if (group)
		plan_entries__sort_by_group(sc->v, sc->n, r->o.bucket_s);
	else
		plan_entries__sort(sc->v, sc->n, r->o.bucket_s);
	while (i < sc->n) {
		size_t j = group ? plan_entries__group_run_end(sc->v, sc->n, i, level == 2)
				 : plan_entries__group_end(sc->v, sc->n, i, level == 2);

		rollup__group(r, sc->v + i, j - i, level, group, &tried, &left);
		/* rollup__build() sorted the slice again: the same entries, the same bounds */
		i = j;
	}
	return left;
}

static void rollup__count_dropped(struct rollup *r)
{
	pthread_mutex_lock(&r->lock);
	r->dropped++;
	pthread_mutex_unlock(&r->lock);
}

/*
 * Lists [from, to) again (with the series' rollups just built) and builds the missing group
 * rollups of one level: how many are left for later (E2BIG: counted dropped).
 */
static size_t rollup__build_groups(struct rollup *r, uint64_t from, uint64_t to, struct scan *sc,
				   unsigned level)
{
	int e = rollup__list(r, from, to - 1, sc);

	if (e == -E2BIG)
		rollup__count_dropped(r);
	return e ? 0 : rollup__build_missing(r, sc, level, true);
}

/* Starts from the oldest indexed profile (spools upload old ones): 0, or -ENOENT when empty. */
static int rollup__start_time(struct rollup *r, struct scan *sc)
{
	size_t cap = sc->cap;

	sc->cap = 0; /* only the minimum time is wanted */
	rollup__list(r, 0, UINT64_MAX, sc);
	sc->cap = cap;
	if (sc->min_time == UINT64_MAX)
		return -ENOENT;
	r->done_until_ns = sc->min_time / r->bucket_ns * r->bucket_ns;
	return 0;
}

/* Lists the buckets [from, end) (fewer while they hold too many entries): 0 and *end. */
static int rollup__list_window(struct rollup *r, uint64_t from, uint64_t *end, struct scan *sc)
{
	int e;

	for (;;) {
		e = rollup__list(r, from, *end - 1, sc);
		if (e != -E2BIG || *end - from == r->bucket_ns)
			return e;
		*end = from + (*end - from) / r->bucket_ns / 2 * r->bucket_ns;
	}
}

/*
 * One pass: the bucket rollups of the next closed buckets up to the end of their span, then,
 * when that completed the span, its span rollups. True when there is more to do at once.
 */
static bool rollup__pass(struct rollup *r, struct scan *sc)
{
	uint64_t now = port_clock_real_ns(), grace = (uint64_t)r->o.grace_s * 1000000000ull;
	uint64_t closed = now > grace ? (now - grace) / r->bucket_ns * r->bucket_ns : 0;
	uint64_t span_ns = r->bucket_ns * ROLLUP_SPAN_BUCKETS, end;
	int e;

	if (!r->done_until_ns && rollup__start_time(r, sc))
		return false;
	if (r->done_until_ns >= closed)
		return false;
	end = (r->done_until_ns / span_ns + 1) * span_ns;
	if (end > closed)
		end = closed;
	e = rollup__list_window(r, r->done_until_ns, &end, sc);
	if (e == -E2BIG) /* one bucket holds more than a pass may list: left raw, counted */
		rollup__count_dropped(r);
	else if (e)
		return false;
	else if (rollup__build_missing(r, sc, 1, false) ||
		 rollup__build_groups(r, r->done_until_ns, end, sc, 1))
		return true; /* more rollups in this window: the next pass lists it again */
	if (end % span_ns == 0) {
		e = rollup__list(r, end - span_ns, end - 1, sc);
		if (e == -E2BIG)
			rollup__count_dropped(r);
		else if (!e && (rollup__build_missing(r, sc, 2, false) ||
				rollup__build_groups(r, end - span_ns, end, sc, 2)))
			return true;
	}
	r->done_until_ns = end;
	return end < closed;
}

static void *rollup__thread(void *arg)
{
	struct rollup *r = arg;
	struct scan sc = { .cap = ROLLUP_MAX_SCAN };

	sc.v = malloc(sc.cap * sizeof(*sc.v));
	if (!sc.v) {
		pr_err("rollup: out of memory: no rollups");
		return NULL;
	}
	pthread_mutex_lock(&r->lock);
	while (!r->stop) {
		bool more;

		pthread_mutex_unlock(&r->lock);
		more = rollup__pass(r, &sc);
		pthread_mutex_lock(&r->lock);
		if (!more && !r->stop) {
			struct timespec ts;

			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_sec += r->o.poll_ms / 1000;
			ts.tv_nsec += (long)(r->o.poll_ms % 1000) * 1000000;
			if (ts.tv_nsec >= 1000000000) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000;
			}
			pthread_cond_timedwait(&r->wake, &r->lock, &ts);
		}
	}
	pthread_mutex_unlock(&r->lock);
	free(sc.v);
	return NULL;
}

struct rollup *rollup__start(const struct rollup_ring *ring, const struct rollup_opts *o)
{
	struct rollup *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->ring = *ring;
	r->o = *o;
	if (!r->o.bucket_s)
		r->o.bucket_s = CONFIG_COLLECTOR_ROLLUP_BUCKET_S;
	if (!r->o.grace_s)
		r->o.grace_s = ROLLUP_DEFAULT_GRACE_S;
	if (!r->o.poll_ms)
		r->o.poll_ms = ROLLUP_DEFAULT_POLL_MS;
	if (!r->o.max_pending)
		r->o.max_pending = CONFIG_COLLECTOR_ROLLUP_MAX_PENDING;
	r->bucket_ns = (uint64_t)r->o.bucket_s * 1000000000ull;
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->wake, NULL);
	errno = pthread_create(&r->tid, NULL, rollup__thread, r);
	if (errno) {
		pthread_cond_destroy(&r->wake);
		pthread_mutex_destroy(&r->lock);
		free(r);
		return NULL;
	}
	return r;
}

void rollup__stop(struct rollup *r)
{
	if (!r)
		return;
	pthread_mutex_lock(&r->lock);
	r->stop = true;
	pthread_cond_signal(&r->wake);
	pthread_mutex_unlock(&r->lock);
	pthread_join(r->tid, NULL);
	pthread_cond_destroy(&r->wake);
	pthread_mutex_destroy(&r->lock);
	free(r);
}

void rollup__stats(struct rollup *r, struct store_stats *st)
{
	if (!r)
		return;
	pthread_mutex_lock(&r->lock);
	st->rollups_built = r->built;
	st->rollups_dropped = r->dropped;
	st->rollup_build_ns = r->cpu_ns;
	pthread_mutex_unlock(&r->lock);
}

unsigned rollup__bucket_s(const struct rollup *r)
{
	return r->o.bucket_s;
}
