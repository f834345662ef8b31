// SPDX-License-Identifier: MIT
/*
 * store/store.c — the store's front: opens the backend that store_opts names and hands every
 * operation to its table (store/store-int.h). The only caller of a backend's functions.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include "port/clock.h"
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

int store__sum_by_device(struct store *s, const struct store_query *q,
			 const struct store_sums_fns *fn, void *ctx, size_t *n_profiles,
			 size_t *skipped, char *err, size_t errlen)
{
	*n_profiles = *skipped = 0;
	if (!s->ops->sum_by_device)
		return -EOPNOTSUPP;
	return s->ops->sum_by_device(s, q, fn, ctx, n_profiles, skipped, err, errlen);
}

int store__read_profile(struct store *s, uint64_t seq, const struct pprof_budget *b,
			struct pprof_profile **p, char *err, size_t errlen)
{
	return s->ops->read_profile(s, seq, b, p, err, errlen);
}

int store__merge_seqs(struct store *s, const uint64_t *seqs, size_t n, const struct pprof_budget *b,
		      struct pprof_profile **out, char *err, size_t errlen)
{
	return s->ops->merge_seqs(s, seqs, n, b, out, err, errlen);
}

void store__stats(struct store *s, struct store_stats *st)
{
	s->ops->stats(s, st);
}

bool store__health(struct store *s, char *buf, size_t len)
{
	struct store_stats st;

	buf[0] = '\0';
	store__stats(s, &st);
	if (st.backend != STORE_CLICKHOUSE)
		return true;
	if (st.ch.reachable) {
		snprintf(buf, len, "clickhouse: reachable%s", st.ch.spool ? ", spool on" : "");
		return true;
	}
	if (!st.ch.spool) {
		snprintf(buf, len, "clickhouse: unreachable (%s); uploads wait for it or are refused",
			 st.ch.last_error);
		return false;
	}
	snprintf(buf, len, "clickhouse: unreachable%s (%s); acknowledging into the spool "
		 "(%" PRIu64 " of %" PRIu64 " bytes waiting), sent once it answers",
		 st.ch.schema_pending ? " since the start" : "", st.ch.last_error,
		 st.ch.spool_pending, st.ch.spool_capacity);
	return true;
}

struct metrics_rules *store__rules(const struct store *s)
{
	return s->rules;
}

/* ---- the store's counters as named metrics (store__metrics() of store/store.h) ------------- */

/*
 * So that GET /metrics prints what a backend holds without knowing the backend's types. The
 * names, help texts and order are those /metrics has always had.
 */
typedef void (*metric_fn)(void *ctx, const struct store_metric *m);

static void emit(metric_fn cb, void *ctx, const char *name, const char *type, const char *help,
		 uint64_t value)
{
	struct store_metric m = { .name = name, .type = type, .help = help, .value = value };

	cb(ctx, &m);
}

/* The ring file backend's own gauges and counters. */
static void metrics_ring(const struct store_stats *st, metric_fn cb, void *ctx)
{
	uint64_t now = port_clock_real_ns(), age = 0;

	if (st->ring.oldest_time_ns && st->ring.oldest_time_ns < now)
		age = (now - st->ring.oldest_time_ns) / NSEC_PER_SEC;
	emit(cb, ctx, "ring_capacity_bytes", "gauge", "Data area of the ring file.",
	     st->ring.capacity);
	emit(cb, ctx, "ring_used_bytes", "gauge", "Bytes of the ring holding live records.",
	     st->ring.used);
	emit(cb, ctx, "ring_records", "gauge", "Live records in the ring.", st->ring.records);
	emit(cb, ctx, "ring_oldest_record_age_seconds", "gauge",
	     "Age of the oldest live record (the retention the ring gives now).", age);
	emit(cb, ctx, "ring_overwritten_total", "counter",
	     "Records evicted by wraparound since start.", st->ring.overwritten);
	emit(cb, ctx, "ring_corrupt_records_total", "counter",
	     "Torn or corrupt records skipped (never served).", st->ring.corrupt);
	emit(cb, ctx, "ring_syncs_total", "counter", "fdatasync calls.", st->ring.syncs);
	emit(cb, ctx, "index_entries", "gauge", "Profiles in the in-memory index.",
	     st->index.entries);
	emit(cb, ctx, "index_memory_bytes", "gauge", "Heap held by the index.",
	     st->index.mem_bytes);
	emit(cb, ctx, "index_dropped_total", "counter",
	     "Index entries dropped because the index was full.", st->index.dropped);
}

/* The ClickHouse backend's spool (--ch-spool). */
static void metrics_ch_spool(const struct store_ch_stats *ch, metric_fn cb, void *ctx)
{
	emit(cb, ctx, "clickhouse_spool_pending_bytes", "gauge",
	     "Acknowledged uploads in the spool not yet in ClickHouse.", ch->spool_pending);
	emit(cb, ctx, "clickhouse_spool_capacity_bytes", "gauge", "Size of the spool's ring.",
	     ch->spool_capacity);
	emit(cb, ctx, "clickhouse_spool_spilled_total", "counter",
	     "Uploads queued only in the spool (memory queue full), read back later.",
	     ch->spool_spilled);
	emit(cb, ctx, "clickhouse_spool_replayed_total", "counter",
	     "Uploads read back from the spool and sent.", ch->spool_replayed);
	emit(cb, ctx, "clickhouse_spool_refused_total", "counter",
	     "Uploads refused (503) because the spool was full.", ch->spool_refused);
	emit(cb, ctx, "clickhouse_spool_lost_total", "counter",
	     "Spool records unreadable at replay (damaged disk).", ch->spool_lost);
}

/* The ClickHouse backend's. */
static void metrics_ch(const struct store_ch_stats *ch, metric_fn cb, void *ctx)
{
	emit(cb, ctx, "clickhouse_batches_total", "counter", "Batches ClickHouse accepted.",
	     ch->batches);
	emit(cb, ctx, "clickhouse_insert_errors_total", "counter",
	     "INSERTs ClickHouse refused or that failed (retried).", ch->insert_errors);
	emit(cb, ctx, "clickhouse_refused_full_total", "counter",
	     "Uploads refused (503) because the queue was full.", ch->refused_full);
	emit(cb, ctx, "clickhouse_ack_timeouts_total", "counter",
	     "Uploads answered 503 because their batch was not in ClickHouse in time.",
	     ch->ack_timeouts);
	emit(cb, ctx, "clickhouse_queued_bytes", "gauge", "Rows waiting for ClickHouse.",
	     ch->queued_bytes);
	emit(cb, ctx, "clickhouse_queue_capacity_bytes", "gauge", "Bound of the queue.",
	     ch->queue_capacity);
	emit(cb, ctx, "clickhouse_sample_rows_total", "counter", "Sample rows queued.",
	     ch->sample_rows);
	emit(cb, ctx, "clickhouse_stack_rows_total", "counter", "New stacks queued.",
	     ch->stack_rows);
	emit(cb, ctx, "clickhouse_intern_resets_total", "counter",
	     "Sets of ids sent that were full and cleared.", ch->intern_resets);
	emit(cb, ctx, "clickhouse_partitions_dropped_total", "counter",
	     "Day partitions dropped by --retention-days.", ch->partitions_dropped);
	emit(cb, ctx, "clickhouse_rollup_dirty_hours_total", "counter",
	     "Hours marked in rollup_dirty (an INSERT into samples or samples_1h failed): "
	     "merges read them raw.",
	     ch->rollup_dirty_hours);
	emit(cb, ctx, "clickhouse_rollup_failures_total", "counter",
	     "Batches whose samples_1h rows were not built or their INSERT failed: hours marked.",
	     ch->rollup_failures);
	emit(cb, ctx, "clickhouse_daily_rollup_sides_total", "counter",
	     "Regression comparison sides summed from the per-device daily rollup (samples_1d).",
	     ch->daily_sides);
	emit(cb, ctx, "clickhouse_backfill_days_total", "counter",
	     "Days --ch-backfill-days served from samples_1d (filled, or found whole there).",
	     ch->backfill_days);
	emit(cb, ctx, "clickhouse_backfill_failures_total", "counter",
	     "Backfill attempts of a day that failed or whose totals differed (tried again).",
	     ch->backfill_failures);
	emit(cb, ctx, "clickhouse_backfill_milliseconds_total", "counter",
	     "Time the backfill's attempts took.", ch->backfill_ms);
	emit(cb, ctx, "clickhouse_waits_total", "counter",
	     "Uploads that found the queue full while ClickHouse took batches, and waited.",
	     ch->waits);
	emit(cb, ctx, "clickhouse_wait_timeouts_total", "counter",
	     "Waits that ended without room (timed out, or ClickHouse failed): spilled or 503.",
	     ch->wait_timeouts);
	emit(cb, ctx, "clickhouse_wait_milliseconds_total", "counter",
	     "Time uploads spent waiting for room.", ch->wait_ns / 1000000);
	emit(cb, ctx, "clickhouse_waiting", "gauge", "Uploads waiting for room now.",
	     ch->waiting);
	if (ch->spool)
		metrics_ch_spool(ch, cb, ctx);
}

static void metrics_rollups(const struct store_stats *st, metric_fn cb, void *ctx)
{
	/* seconds, Prometheus' base unit (promtool check metrics refuses milliseconds) */
	struct store_metric cpu = { .name = "rollup_build_cpu_seconds_total", .type = "counter",
				    .help = "CPU time spent building rollups.",
				    .value = st->rollup_build_ns, .ns_as_s = true };

	emit(cb, ctx, "rollups_built_total", "counter",
	     "Rollup records built (one series bucket merged into one record).",
	     st->rollups_built);
	emit(cb, ctx, "rollups_dropped_total", "counter",
	     "Rollups not built (merge or append failed, bucket too large): left raw.",
	     st->rollups_dropped);
	cb(ctx, &cpu);
	emit(cb, ctx, "rollups_read_total", "counter", "Rollups read by merges.",
	     st->rollups_read);
	emit(cb, ctx, "rollups_stale_total", "counter",
	     "Rollups not used because their raws changed (late or evicted): merged raw.",
	     st->rollups_stale);
}

void store__metrics(struct store *s, enum store_metrics_part part, metric_fn cb, void *ctx)
{
	struct store_stats st;

	store__stats(s, &st);
	if (part == STORE_METRICS_BACKEND) {
		if (st.backend == STORE_RING)
			metrics_ring(&st, cb, ctx);
		else
			metrics_ch(&st.ch, cb, ctx);
		return;
	}
	emit(cb, ctx, "merge_skipped_total", "counter", "Profiles merges left out: unreadable, or "
	     "sample or period types that cannot merge with the rest.", st.merge_skipped);
	if (IS_ENABLED(CONFIG_COLLECTOR_ROLLUP))
		metrics_rollups(&st, cb, ctx);
}
