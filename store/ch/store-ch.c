// SPDX-License-Identifier: MIT
/*
 * store/ch/store-ch.c — the ClickHouse backend (store/store.h): its options, state, threads and
 * operations. Profiles are decoded at ingest; stacks, locations, functions and mappings stored
 * once under 64-bit content hashes, samples as a row per profile; fleet queries aggregated by
 * ClickHouse (GROUP BY stack) and the pprof built from the aggregate. Its files, from the
 * lowest: ch-client.c (HTTP, RowBinary), ch-rows.c (a profile's rows), ch-native.c (a batch's
 * samples block), ch-rollup.c (its rollup rows), ch-schema.c (the tables), ch-query.c (reads),
 * ch-spool.c (--ch-spool), ch-ingest.c (put), ch-retain.c (--retention-days), ch-writer.c (the
 * writer thread), ch-daily.c and ch-backfill.c (the daily rollup, --ch-backfill-days); what
 * they share: ch-store.h. See store/README.md.
 * Dictionary rows are sent once per collector (a bounded set of ids sent; when full it is
 * cleared and rows are sent again, which ReplacingMergeTree and any() absorb).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "port/log.h"
#include "store/ch/ch-daily.h"

static const struct store_ops ch_ops;

static void ch__stats(struct store *base, struct store_stats *st)
{
	struct ch_store *c = ch_of(base);

	memset(st, 0, sizeof(*st));
	st->backend = STORE_CLICKHOUSE;
	pthread_mutex_lock(&c->lock);
	st->puts = c->puts;
	st->duplicates = c->duplicates;
	st->put_errors = c->put_errors;
	st->merges = c->merges;
	st->merge_skipped = c->merge_skipped;
	st->rollups_read = c->rollup_merges;
	st->ch.batches = c->batches;
	st->ch.insert_errors = c->insert_errors;
	st->ch.refused_full = c->refused_full;
	st->ch.ack_timeouts = c->ack_timeouts;
	st->ch.queued_bytes = c->queued_bytes;
	st->ch.queue_capacity = c->queue_bytes;
	st->ch.sample_rows = c->rows[T_SAMPLES];
	st->ch.stack_rows = c->rows[T_STACKS];
	st->ch.intern_resets = c->fns.resets + c->maps.resets + c->locs.resets +
			       c->stacks.resets;
	st->ch.partitions_dropped = c->partitions_dropped;
	st->ch.rollup_dirty_hours = c->dirty_hours;
	st->ch.rollup_failures = c->rollup_failures;
	st->ch.daily_sides = c->daily_sides;
	st->ch.backfill_days = c->backfill_days_done;
	st->ch.backfill_failures = c->backfill_failures;
	st->ch.backfill_ms = c->backfill_ns / 1000000;
	st->ch.reachable = c->ch_ok && !c->schema_pending;
	st->ch.schema_pending = c->schema_pending;
	snprintf(st->ch.last_error, sizeof(st->ch.last_error), "%s", c->last_error);
	st->ch.spool = c->spool != NULL;
	st->ch.spool_pending = c->spool_pending;
	st->ch.spool_capacity = c->spool_capacity;
	st->ch.spool_spilled = c->spool_spilled;
	st->ch.spool_replayed = c->spool_replayed;
	st->ch.spool_refused = c->spool_refused;
	st->ch.spool_lost = c->spool_lost;
	st->ch.waits = c->waits;
	st->ch.wait_timeouts = c->wait_timeouts;
	st->ch.wait_ns = c->wait_ns;
	st->ch.waiting = c->waiting;
	pthread_mutex_unlock(&c->lock);
}

static void ch__free(struct store *base)
{
	struct ch_store *c = ch_of(base);

	pthread_mutex_lock(&c->lock);
	c->stop = true;
	pthread_cond_signal(&c->wake);
	pthread_cond_signal(&c->refill);
	pthread_mutex_unlock(&c->lock);
	ch_backfill__stop(c);
	if (c->replayer_started)
		pthread_join(c->replayer, NULL);
	if (c->writer_started)
		pthread_join(c->writer, NULL);
	ch_batch__free(c->open);
	while (c->head) {
		struct ch_batch *b = c->head;

		c->head = b->next;
		ch_batch__free(b);
	}
	ch_batch__free(c->spare);
	ch_scratch__free(&c->scratch);
	free(c->fns.v), free(c->maps.v), free(c->locs.v), free(c->stacks.v);
	free(c->keys.v);
	free(c->shard_urls);
	ringfile__free(c->spool);
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->wake);
	pthread_cond_destroy(&c->done);
	pthread_cond_destroy(&c->refill);
	pthread_cond_destroy(&c->backfill_wake);
	free(c);
}


/* How the spool (store/ch/ch-spool.c) puts what it reads back into the batches. */
static const struct ch_batch_ops ch_batch_ops = {
	.rows_build = ch__rows_build,
	.rows_free = ch__rows_free,
	.put_locked = ch__put_locked,
	.key_set = ch__key_set,
	.wait_room = ch__wait_room,
	.seal = ch__seal,
};

/*
 * --ch-rollup-without LIST (NULL: CONFIG_COLLECTOR_CH_ROLLUP_WITHOUT) into c->group_without:
 * label keys of letters, digits, '_', '.' and '-', comma-separated (nothing to quote in SQL).
 */
static int ch__group_rule(struct ch_store *c, const char *list, char *err, size_t errlen)
{
	if (!list)
		list = CONFIG_COLLECTOR_CH_ROLLUP_WITHOUT;
	if (strlen(list) >= sizeof(c->group_without) ||
	    list[strspn(list, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-,")]) {
		snprintf(err, errlen, "clickhouse: --ch-rollup-without '%.64s': label names (letters, "
			 "digits, _ . -), comma-separated, at most %d bytes", list,
			 CH_GROUP_WITHOUT_LEN - 1);
		return -EINVAL;
	}
	snprintf(c->group_without, sizeof(c->group_without), "%s", list);
	return 0;
}

/* A failure to reach ClickHouse (connect, timeout, reset), not an answer that refused. */
static bool ch_unreachable(int e)
{
	return e != -EIO && e != -ENOMEM && e != -EINVAL && e != -ENAMETOOLONG;
}

struct store *store_ch__open(const struct store_opts *opts, char *err, size_t errlen)
{
	struct ch_store *c = calloc(1, sizeof(*c));
	size_t intern = CONFIG_COLLECTOR_CH_INTERN_ENTRIES;
	int e;

	if (!c) {
		snprintf(err, errlen, "store: out of memory");
		errno = ENOMEM;
		return NULL;
	}
	c->base.ops = &ch_ops;
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->wake, NULL);
	pthread_cond_init(&c->done, NULL);
	pthread_cond_init(&c->refill, NULL);
	pthread_cond_init(&c->backfill_wake, NULL);
	c->backfill_days = opts->ch_backfill_days;
	c->batch_bytes = (size_t)CONFIG_COLLECTOR_CH_BATCH_KB << 10;
	c->keep_bytes = (size_t)CONFIG_COLLECTOR_CH_KEEP_MB << 20;
	c->batch_ms = opts->ch_batch_ms ? opts->ch_batch_ms : CONFIG_COLLECTOR_CH_BATCH_MS;
	c->queue_bytes = opts->ch_queue_bytes ? opts->ch_queue_bytes
					      : (size_t)CONFIG_COLLECTOR_CH_QUEUE_MB << 20;
	c->ack_ms = CONFIG_COLLECTOR_CH_ACK_MS;
	c->wait_ms = CONFIG_COLLECTOR_CH_WAIT_MS;
	c->ch_ok = true;	/* the schema went in; the writer's INSERTs say from now on */
	c->retention_days = opts->retention_days;
	c->no_rollup = opts->ch_no_rollup;
	c->keys.cap = 1;
	while (c->keys.cap < intern)
		c->keys.cap *= 2;
	c->keys.v = calloc(c->keys.cap, sizeof(*c->keys.v));
	e = ch_opts__parse(opts->clickhouse, &c->o, err, errlen);
	if (!e && opts->ch_cluster) {
		const char *n = opts->ch_cluster;

		if (!*n || strlen(n) >= sizeof(c->cluster) || n[strspn(n, "abcdefghijklmnopqrstuvwxyz"
					"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")]) {
			snprintf(err, errlen, "clickhouse: cluster name '%s': letters, digits and _ "
				 "only", n);
			e = -EINVAL;
		}
		snprintf(c->cluster, sizeof(c->cluster), "%s", n);
	}
	if (!e)
		e = ch_retain__init(c, opts->ch_shard_urls, err, errlen);
	c->samples_hour = !c->cluster[0];
	c->own_rollup = !c->cluster[0];
	if (!e)
		e = ch__group_rule(c, opts->ch_rollup_without, err, errlen);
	if (!e && (idset__init(&c->fns, intern) || idset__init(&c->maps, intern / 16) ||
		   idset__init(&c->locs, intern) || idset__init(&c->stacks, intern) ||
		   !c->keys.v)) {
		snprintf(err, errlen, "store: out of memory");
		e = -ENOMEM;
	}
	if (!e)
		e = ch_schema__create(c, err, errlen);
	if (e && opts->ch_spool && ch_unreachable(e)) {
		/* the spool exists for exactly this outage: start on it (its thread replays later) */
		pr_warn("store: ClickHouse does not answer (%s): starting on the spool %s; uploads "
			"are acknowledged once durable there and go to ClickHouse once it answers",
			err, opts->ch_spool);
		snprintf(c->last_error, sizeof(c->last_error), "%s", err);
		c->schema_pending = true;
		c->ch_ok = false;
		e = 0;
		err[0] = '\0';
	}
	if (!e && opts->ch_spool)
		e = ch_spool__open(c, opts, &ch_batch_ops, err, errlen);
	if (!e) {
		e = -pthread_create(&c->writer, NULL, ch__writer, c);
		c->writer_started = !e;
		if (e)
			snprintf(err, errlen, "clickhouse: writer thread: %s", strerror(-e));
	}
	if (!e && c->spool) {
		e = -pthread_create(&c->replayer, NULL, ch_spool__replayer, c);
		c->replayer_started = !e;
		if (e)
			snprintf(err, errlen, "clickhouse: spool thread: %s", strerror(-e));
	}
	if (!e && c->backfill_days) {
		snprintf(c->backfill_id, sizeof(c->backfill_id), "edgeprof-backfill-%s",
			 c->o.database);
		snprintf(c->backfill_settings, sizeof(c->backfill_settings),
			 "max_execution_time=%d", CONFIG_COLLECTOR_CH_BACKFILL_SECONDS);
		e = -pthread_create(&c->backfiller, NULL, ch_backfill__run, c);
		c->backfiller_started = !e;
		if (e)
			snprintf(err, errlen, "clickhouse: backfill thread: %s", strerror(-e));
	}
	if (e) {
		ch__free(&c->base);
		errno = -e;
		return NULL;
	}
	if (!opts->quiet)
		pr_info("store: ClickHouse %s:%s database %s (batches of %zu KiB or %u ms, "
			"queue %zu MiB)", c->o.host, c->o.port, c->o.database,
			c->batch_bytes >> 10, c->batch_ms, c->queue_bytes >> 20);
	return &c->base;
}

static const struct store_ops ch_ops = {
	.name = "clickhouse",
	.uses_decoded = true,
	.merges_samples = true,
	.put = ch__put,
	.get = ch__get,
	.list = ch__list,
	.services = ch__services,
	.timeline = ch__timeline,
	.merge = ch__merge,
	.sum_by_device = ch__sum_by_device,
	.read_profile = ch__read_profile,
	.merge_seqs = ch__merge_seqs,
	.stats = ch__stats,
	.free = ch__free,
};

