// SPDX-License-Identifier: MIT
/* store/api/api-metrics.c — GET /metrics in Prometheus' text format. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "port/clock.h"
#include "store/symbols/debuginfo.h"
#include "store/server/server.h"

static void metric(struct sbuf *b, const char *name, const char *type, const char *help,
		   uint64_t v)
{
	sbuf_printf(b, "# HELP edgeprof_collector_%s %s\n# TYPE edgeprof_collector_%s %s\n"
		    "edgeprof_collector_%s %" PRIu64 "\n", name, help, name, type, name, v);
}

static void metric_family(struct sbuf *b, const char *name, const char *help,
			  const char *label, const char *const *names,
			  const atomic_uint_fast64_t *values, size_t n)
{
	sbuf_printf(b, "# HELP edgeprof_collector_%s %s\n# TYPE edgeprof_collector_%s counter\n",
		    name, help, name);
	for (size_t i = 0; i < n; i++)
		sbuf_printf(b, "edgeprof_collector_%s{%s=\"%s\"} %" PRIu64 "\n", name, label,
			    names[i], (uint64_t)values[i]);
}

static void metric_rollups(struct sbuf *b, const struct store_stats *st)
{
	metric(b, "rollups_built_total", "counter",
	       "Rollup records built (one series bucket merged into one record).",
	       st->rollups_built);
	metric(b, "rollups_dropped_total", "counter",
	       "Rollups not built (merge or append failed, bucket too large): left raw.",
	       st->rollups_dropped);
	/* seconds, Prometheus' base unit (promtool check metrics refuses milliseconds) */
	sbuf_printf(b, "# HELP edgeprof_collector_rollup_build_cpu_seconds_total CPU time spent "
		    "building rollups.\n# TYPE edgeprof_collector_rollup_build_cpu_seconds_total "
		    "counter\nedgeprof_collector_rollup_build_cpu_seconds_total %" PRIu64 ".%03"
		    PRIu64 "\n", st->rollup_build_ns / (uint64_t)NSEC_PER_SEC,
		    st->rollup_build_ns % (uint64_t)NSEC_PER_SEC / 1000000);
	metric(b, "rollups_read_total", "counter", "Rollups read by merges.", st->rollups_read);
	metric(b, "rollups_stale_total", "counter",
	       "Rollups not used because their raws changed (late or evicted): merged raw.",
	       st->rollups_stale);
}

/* The ring file backend's own gauges and counters. */
static void metric_ring(struct sbuf *b, const struct store_stats *st, uint64_t age)
{
	metric(b, "ring_capacity_bytes", "gauge", "Data area of the ring file.",
	       st->ring.capacity);
	metric(b, "ring_used_bytes", "gauge", "Bytes of the ring holding live records.",
	       st->ring.used);
	metric(b, "ring_records", "gauge", "Live records in the ring.", st->ring.records);
	metric(b, "ring_oldest_record_age_seconds", "gauge",
	       "Age of the oldest live record (the retention the ring gives now).", age);
	metric(b, "ring_overwritten_total", "counter",
	       "Records evicted by wraparound since start.", st->ring.overwritten);
	metric(b, "ring_corrupt_records_total", "counter",
	       "Torn or corrupt records skipped (never served).", st->ring.corrupt);
	metric(b, "ring_syncs_total", "counter", "fdatasync calls.", st->ring.syncs);
	metric(b, "index_entries", "gauge", "Profiles in the in-memory index.",
	       st->index.entries);
	metric(b, "index_memory_bytes", "gauge", "Heap held by the index.", st->index.mem_bytes);
	metric(b, "index_dropped_total", "counter",
	       "Index entries dropped because the index was full.", st->index.dropped);
}

/* The ClickHouse backend's. */
static void metric_ch(struct sbuf *b, const struct store_ch_stats *ch)
{
	metric(b, "clickhouse_batches_total", "counter", "Batches ClickHouse accepted.",
	       ch->batches);
	metric(b, "clickhouse_insert_errors_total", "counter",
	       "INSERTs ClickHouse refused or that failed (retried).", ch->insert_errors);
	metric(b, "clickhouse_refused_full_total", "counter",
	       "Uploads refused (503) because the queue was full.", ch->refused_full);
	metric(b, "clickhouse_ack_timeouts_total", "counter",
	       "Uploads answered 503 because their batch was not in ClickHouse in time.",
	       ch->ack_timeouts);
	metric(b, "clickhouse_queued_bytes", "gauge", "Rows waiting for ClickHouse.",
	       ch->queued_bytes);
	metric(b, "clickhouse_queue_capacity_bytes", "gauge", "Bound of the queue.",
	       ch->queue_capacity);
	metric(b, "clickhouse_sample_rows_total", "counter", "Sample rows queued.",
	       ch->sample_rows);
	metric(b, "clickhouse_stack_rows_total", "counter", "New stacks queued.",
	       ch->stack_rows);
	metric(b, "clickhouse_intern_resets_total", "counter",
	       "Sets of ids sent that were full and cleared.", ch->intern_resets);
	metric(b, "clickhouse_partitions_dropped_total", "counter",
	       "Day partitions dropped by --retention-days.", ch->partitions_dropped);
	metric(b, "clickhouse_rollup_dirty_hours_total", "counter",
	       "Hours marked in rollup_dirty (an INSERT into samples or samples_1h failed): "
	       "merges read them raw.",
	       ch->rollup_dirty_hours);
	metric(b, "clickhouse_rollup_failures_total", "counter",
	       "Batches whose samples_1h rows were not built or their INSERT failed: hours marked.",
	       ch->rollup_failures);
	metric(b, "clickhouse_rollup_views_found_total", "counter",
	       "Hourly checks that found a materialized view samples_1h_mv (an older collector).",
	       ch->rollup_views);
	metric(b, "clickhouse_waits_total", "counter",
	       "Uploads that found the queue full while ClickHouse took batches, and waited.",
	       ch->waits);
	metric(b, "clickhouse_wait_timeouts_total", "counter",
	       "Waits that ended without room (timed out, or ClickHouse failed): spilled or 503.",
	       ch->wait_timeouts);
	metric(b, "clickhouse_wait_milliseconds_total", "counter",
	       "Time uploads spent waiting for room.", ch->wait_ns / 1000000);
	metric(b, "clickhouse_waiting", "gauge", "Uploads waiting for room now.", ch->waiting);
	if (!ch->spool)
		return;
	metric(b, "clickhouse_spool_pending_bytes", "gauge",
	       "Acknowledged uploads in the spool not yet in ClickHouse.", ch->spool_pending);
	metric(b, "clickhouse_spool_capacity_bytes", "gauge", "Size of the spool's ring.",
	       ch->spool_capacity);
	metric(b, "clickhouse_spool_spilled_total", "counter",
	       "Uploads queued only in the spool (memory queue full), read back later.",
	       ch->spool_spilled);
	metric(b, "clickhouse_spool_replayed_total", "counter",
	       "Uploads read back from the spool and sent.", ch->spool_replayed);
	metric(b, "clickhouse_spool_refused_total", "counter",
	       "Uploads refused (503) because the spool was full.", ch->spool_refused);
	metric(b, "clickhouse_spool_lost_total", "counter",
	       "Spool records unreadable at replay (damaged disk).", ch->spool_lost);
}

static void metric_debuginfo(struct sbuf *b, struct debuginfo *d)
{
	struct debuginfo_stats st;

	if (!d)
		return;
	debuginfo__stats(d, &st);
	metric(b, "debuginfo_files", "gauge", "Debug files stored.", st.files);
	metric(b, "debuginfo_line_tables_total", "counter",
	       "Debug files loaded with a DWARF line table (file:line).", st.line_tables);
	metric(b, "debuginfo_line_errors_total", "counter",
	       "Debug files whose DWARF line table was malformed or too big: names only.",
	       st.line_errors);
}

/* The counters of --metrics-rule (store/rules/metrics-rules.h). */
static void metric_rules(struct sbuf *b, struct store *s)
{
	char *text;
	size_t len;

	if (!s->rules || metrics_rules__text(s->rules, &text, &len) || !text)
		return;
	sbuf_printf(b, "%s", text);
	free(text);
}

/* The collector's own scrapes (store/scrape/scrape.h). */
static void metric_scrape(struct sbuf *b, const struct server_metrics *m)
{
	metric(b, "scrape_targets", "gauge", "Targets of --scrape-targets now.",
	       (uint64_t)m->scrape_targets);
	metric(b, "scrape_reload_errors", "gauge",
	       "1 when the last read of --scrape-targets failed (the targets before stay).",
	       (uint64_t)m->scrape_reload_errors);
	metric(b, "scrape_fetches_total", "counter", "Profiles fetched from scrape targets.",
	       m->scrape_fetches);
	metric(b, "scrape_stored_total", "counter", "Scraped profiles stored.", m->scrape_stored);
	metric(b, "scrape_baselines_total", "counter",
	       "Scrapes of cumulative profiles that only set a delta baseline.",
	       m->scrape_baselines);
	metric(b, "scrape_bad_profile_total", "counter",
	       "Scraped answers that were no profile, or that the store refused.",
	       m->scrape_bad_profile);
	metric_family(b, "scrape_failed_total", "Scrapes that failed, by reason.", "reason",
		      scrape_fail_names, m->scrape_failed, SCRAPE_FAIL__N);
}

void api_metrics(struct api_ctx *a)
{
	const struct server_metrics *m = a->metrics;
	struct store_stats st;
	struct sbuf b = { 0 };
	uint64_t now = port_clock_real_ns(), age = 0;

	store__stats(a->store, &st);
	if (st.ring.oldest_time_ns && st.ring.oldest_time_ns < now)
		age = (now - st.ring.oldest_time_ns) / NSEC_PER_SEC;
	metric(&b, "http_requests_total", "counter", "HTTP requests read whole.", m->requests);
	metric(&b, "profiles_received_total", "counter",
	       "Profiles received on any ingest API.", m->received);
	metric(&b, "profiles_stored_total", "counter", "Profiles stored durably.", m->stored);
	metric(&b, "profiles_duplicate_total", "counter",
	       "Uploads whose idempotency key was already stored (nothing written).",
	       m->duplicates);
	metric(&b, "received_bytes_total", "counter", "Profile bytes received.",
	       m->bytes_received);
	metric_family(&b, "requests_rejected_total", "Requests refused, by reason.", "reason",
		      reject_reason_names, m->rejected, REJ__N);
	if (st.backend == STORE_RING)
		metric_ring(&b, &st, age);
	else
		metric_ch(&b, &st.ch);
	if (IS_ENABLED(CONFIG_COLLECTOR_SCRAPE))
		metric_scrape(&b, m);
	metric(&b, "merge_skipped_total", "counter", "Profiles merges left out: unreadable, or "
	       "sample or period types that cannot merge with the rest.", st.merge_skipped);
	if (IS_ENABLED(CONFIG_COLLECTOR_ROLLUP))
		metric_rollups(&b, &st);
	metric_debuginfo(&b, a->debuginfo);
	metric(&b, "tls_handshakes_total", "counter", "Completed TLS handshakes.",
	       m->tls_handshakes);
	metric(&b, "tls_resumed_total", "counter", "Handshakes that resumed a session.",
	       m->tls_resumed);
	metric_family(&b, "tls_handshake_failures_total", "TLS handshakes refused or failed.",
		      "reason", tls_fail_names, m->tls_failures, TLSF__N);
	metric(&b, "connections_active", "gauge", "Open connections.",
	       (uint64_t)m->conns_active);
	metric(&b, "connections_total", "counter", "Accepted connections.", m->conns_total);
	metric(&b, "connections_refused_total", "counter",
	       "Authenticated connections closed because their listener's --max-conns was reached.",
	       m->conns_refused);
	metric(&b, "connections_unauthenticated", "gauge",
	       "Connections in their TLS handshake or before their first request head.",
	       (uint64_t)m->conns_preauth);
	metric(&b, "connections_evicted_total", "counter",
	       "Unauthenticated connections closed to make room (--max-handshakes).",
	       m->conns_evicted);
	metric_rules(&b, a->store);
	api_json(a, &b);
	a->content_type = "text/plain; version=0.0.4";
}
