// SPDX-License-Identifier: MIT
/* store/api/api-metrics.c — GET /metrics in Prometheus' text format. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "port/clock.h"
#include "store/api/api.h"
#include "store/rules/metrics-rules.h"
#include "store/symbols/debuginfo.h"

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

/* A store metric (store__metrics(): the backend's, merges' and rollups'). */
static void metric_store(void *ctx, const struct store_metric *m)
{
	struct sbuf *b = ctx;

	if (!m->ns_as_s)
		return metric(b, m->name, m->type, m->help, m->value);
	sbuf_printf(b, "# HELP edgeprof_collector_%s %s\n# TYPE edgeprof_collector_%s %s\n"
		    "edgeprof_collector_%s %" PRIu64 ".%03" PRIu64 "\n", m->name, m->help, m->name,
		    m->type, m->name, m->value / (uint64_t)NSEC_PER_SEC,
		    m->value % (uint64_t)NSEC_PER_SEC / 1000000);
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
	struct metrics_rules *r = store__rules(s);

	if (!r || metrics_rules__text(r, &text, &len) || !text)
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

/* The upload memory budget (store/server/mem-budget.h). */
static void metric_mem(struct sbuf *b, const struct mem_budget *mb)
{
	metric(b, "decode_memory_bytes", "gauge",
	       "Memory held by uploads' bodies and decodes, queries' merges and renders and "
	       "open connections now, as asked of the budget (--decode-mem).",
	       (uint64_t)mb->used);
	metric(b, "decode_memory_peak_bytes", "gauge",
	       "The most memory uploads, queries and connections held at once since the start.",
	       (uint64_t)mb->peak);
	metric(b, "decode_memory_limit_bytes", "gauge", "--decode-mem.", (uint64_t)mb->limit);
	metric_family(b, "decode_memory_refused_total",
		      "Requests refused for memory: an upload over --request-mem (request, 413) or "
		      "a query over --query-mem (query, 413), or the budget momentarily full "
		      "(global, query_global: 503).", "budget", mem_refusal_names, mb->refused,
		      MEM_REFUSED__N);
	metric(b, "query_timeouts_total", "counter",
	       "Merges and renders stopped at --query-timeout-ms (503).",
	       (uint64_t)mb->query_timeouts);
}

#ifdef CONFIG_COLLECTOR_DUTY
/* Fleet-wide duty cycling (store/api/duty.h). */
static void metric_duty(struct sbuf *b, struct duty *d)
{
	struct duty_stats st;

	if (!d)
		return;
	duty__stats(d, &st);
	metric(b, "duty_devices", "gauge", "Device certificates tracked by the duty cycler.",
	       st.devices);
	metric(b, "duty_groups", "gauge", "Groups of devices (--duty-group-by values).", st.groups);
	metric(b, "duty_untracked_total", "counter",
	       "Schedules answered with the agent's default: the device table was full.",
	       st.untracked);
	metric(b, "duty_expired_total", "counter",
	       "Devices forgotten after a few of their periods without uploads.", st.expired);
	metric(b, "duty_moved_total", "counter",
	       "Devices whose latest labels put them in another group.", st.moved);
	metric(b, "duty_profiles_weighed_total", "counter",
	       "Profiles sampled in a window their device was told: weighed n / k.", st.weighed);
	metric(b, "duty_profiles_unweighed_total", "counter",
	       "Profiles from device certificates without a told window: weight 1.",
	       st.unweighed);
}
#else
static void metric_duty(struct sbuf *b, struct duty *d)
{
	(void)b, (void)d;
}
#endif

void api_metrics(struct api_ctx *a)
{
	const struct server_metrics *m = a->metrics;
	struct sbuf b = { 0 };

	metric(&b, "http_requests_total", "counter", "HTTP requests read whole.", m->requests);
	metric(&b, "profiles_received_total", "counter",
	       "Profiles received on any ingest API.", m->received);
	metric(&b, "profiles_stored_total", "counter", "Profiles stored durably.", m->stored);
	metric(&b, "profiles_duplicate_total", "counter",
	       "Uploads whose idempotency key was already stored (nothing written).",
	       m->duplicates);
	metric(&b, "received_bytes_total", "counter", "Profile bytes received.",
	       m->bytes_received);
	metric(&b, "profile_time_ahead_total", "counter",
	       "Profiles dated more than an hour ahead of the collector's clock: stored at receive "
	       "time, labelled clock=ahead.", m->time_clamped);
	metric(&b, "stack_snapshots_total", "counter",
	       "Samples received with a stack snapshot (stored without it).", m->snapshots);
	metric(&b, "stack_snapshots_exact_total", "counter",
	       "Stack snapshots unwound with the uploaded debug files (unwind=exact); the others "
	       "keep the device's chain, counted by reason in their profile's comment.",
	       m->snapshots_exact);
	metric_family(&b, "requests_rejected_total", "Requests refused, by reason.", "reason",
		      reject_reason_names, m->rejected, REJ__N);
	store__metrics(a->store, STORE_METRICS_BACKEND, metric_store, &b);
	if (IS_ENABLED(CONFIG_COLLECTOR_SCRAPE))
		metric_scrape(&b, m);
	store__metrics(a->store, STORE_METRICS_MERGES, metric_store, &b);
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
	metric_mem(&b, &m->mem);
	metric_duty(&b, a->duty);
	metric_rules(&b, a->store);
	regress_rules__metrics(a->regress_rules, &b);
	api_json(a, &b);
	a->ans.content_type = "text/plain; version=0.0.4";
}
