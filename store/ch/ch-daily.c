// SPDX-License-Identifier: MIT
/*
 * store/ch/ch-daily.c — the per-device daily rollup: samples_1d, the samples summed by
 * (series, sig, day, stack), so that a regression comparison's side (store__sum_by_device)
 * sums ~126 rows a device and day instead of one per profile and stack: ClickHouse's GROUP BY
 * series, stack of a side's 32.5 M raw rows was 13.5-24 s on the synthetic day.
 *
 * One server: summed by the collector (ch_rollup__build_daily, sent after samples_1g's rows,
 * under the same intent and dirty hours). --ch-cluster: a materialized view on each shard's
 * samples_local fills its samples_1d_local, as samples_1h's does (the same INSERT: a failed one
 * marks its hours in rollup_dirty, uploads a spool replays at start too, so a kill -9 of a
 * collector or a shard leaves no day read short; the collector's own rows would need
 * rollup_pending's intent on every shard); samples_1d is Distributed over them.
 *
 * Old data: samples_1d serves the days from samples_1d_since on. A collector that creates the
 * table writes the day after today: the day in progress, and any before, have batches written
 * before the table existed, so they are read raw, not summed short. With --ch-cluster each
 * shard has its own samples_1d_since_local (day, shard: its shard_num), written when its view
 * is created (by a collector that talks to it), and the cluster serves from the latest of the
 * shards' days, only once every shard of system.clusters has one: a shard that was down, or
 * that no collector reached yet, keeps comparisons raw until its view exists. Earlier days:
 * ch-backfill.c (--ch-backfill-days), which moves a server's day back a whole day at a time.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "port/clock.h"
#include "port/log.h"
#include "store/ch/ch-daily.h"

#define DAY_NS (24 * CH_ROLLUP_NS)
#define CH_DAILY_LAST 47482	/* 2100-01-01: Date ends in 2105 */

static const char ch_daily_table[] =
	"CREATE TABLE IF NOT EXISTS samples_1d (day Date, series UInt64, sig UInt64, "
	"stack UInt64, v0 Int64, v1 Int64, v2 Int64, v3 Int64) "
	"ENGINE = SummingMergeTree((v0, v1, v2, v3)) PARTITION BY day "
	"ORDER BY (series, sig, stack)";
static const char ch_daily_since[] =
	"CREATE TABLE IF NOT EXISTS samples_1d_since (day Date) ENGINE = Log";
/* --ch-cluster: each shard's; the view as samples_1h_mv (ch-schema.c), by day */
static const char ch_daily_view[] =
	"CREATE MATERIALIZED VIEW IF NOT EXISTS samples_1d_mv TO samples_1d_local AS SELECT day, "
	"series, sig, stack, sum(v[1]) AS v0, sum(v[2]) AS v1, sum(v[3]) AS v2, sum(v[4]) AS v3 "
	"FROM samples_local " CH_SAMPLES_JOIN " WHERE length(v) <= 4 GROUP BY day, series, sig, "
	"stack";
static const char ch_daily_since_local[] =
	"CREATE TABLE IF NOT EXISTS samples_1d_since_local (day Date, shard UInt32) ENGINE = Log";

void ch_day_str(char *s, size_t n, uint64_t day)
{
	time_t t = (time_t)(day * 86400);
	struct tm tm;

	gmtime_r(&t, &tm);
	snprintf(s, n, "'%04d-%02d-%02d'", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday);
}

/* One statement, its %s the cluster and the database (at most two of each, in that order). */
static int run_cluster(struct ch_store *c, struct ch_conn *conn, const char *fmt, char *err,
		       size_t errlen)
{
	char sql[400];

	snprintf(sql, sizeof(sql), fmt, c->cluster, c->o.database);
	return ch_conn__run(conn, sql, NULL, NULL, 0, NULL, err, errlen);
}

/* --ch-cluster: this shard's samples_1d_local, its view, and the Distributed tables. */
static int daily_schema_cluster(struct ch_store *c, struct ch_conn *conn, char *err,
				size_t errlen)
{
	char sql[400];
	int e;

	snprintf(sql, sizeof(sql), "CREATE TABLE IF NOT EXISTS samples_1d_local %s",
		 strchr(ch_daily_table, '('));
	e = ch_conn__run(conn, sql, NULL, NULL, 0, NULL, err, errlen);
	if (!e)
		e = ch_conn__run(conn, ch_daily_view, NULL, NULL, 0, NULL, err, errlen);
	if (!e)
		e = run_cluster(c, conn, "CREATE TABLE IF NOT EXISTS samples_1d AS samples_1d_local "
				"ENGINE = Distributed(%s, %s, samples_1d_local, series)", err, errlen);
	if (!e)
		e = ch_conn__run(conn, ch_daily_since_local, NULL, NULL, 0, NULL, err, errlen);
	if (!e)
		e = run_cluster(c, conn, "CREATE TABLE IF NOT EXISTS samples_1d_since AS "
				"samples_1d_since_local ENGINE = Distributed(%s, %s, "
				"samples_1d_since_local, shard)", err, errlen);
	return e;
}

/* The shard_num of the server conn talks to in c's cluster: 0 or -errno with err. */
static int this_shard(struct ch_store *c, struct ch_conn *conn, uint32_t *shard, char *err,
		      size_t errlen)
{
	struct rb res = { 0 };
	char sql[200];
	int e;

	snprintf(sql, sizeof(sql), "SELECT toUInt32(shard_num) FROM system.clusters WHERE "
		 "cluster = '%s' AND is_local LIMIT 1 FORMAT RowBinary", c->cluster);
	e = ch_conn__run(conn, sql, NULL, NULL, 0, &res, err, errlen);
	if (!e && res.len != 4) {
		snprintf(err, errlen, "clickhouse: this server is not a shard of cluster %s "
			 "(system.clusters): no per-device daily rollup", c->cluster);
		e = -EINVAL;
	}
	if (!e)
		memcpy(shard, res.p, 4);
	rb_free(&res);
	return e;
}

int ch_daily__schema(struct ch_store *c, struct ch_conn *conn, char *err, size_t errlen)
{
	struct rb res = { 0 };
	char sql[128];
	int e;

	if (c->cluster[0])
		e = daily_schema_cluster(c, conn, err, errlen);
	else
		e = ch_conn__run(conn, ch_daily_table, NULL, NULL, 0, NULL, err, errlen);
	if (!e && !c->cluster[0])
		e = ch_conn__run(conn, ch_daily_since, NULL, NULL, 0, NULL, err, errlen);
	snprintf(sql, sizeof(sql), "SELECT count() FROM samples_1d_since%s FORMAT RowBinary",
		 c->cluster[0] ? "_local" : "");
	if (!e)
		e = ch_conn__run(conn, sql, NULL, NULL, 0, &res, err, errlen);
	/* tomorrow in UTC, as the rows' day is (not the server's today(): its zone) */
	if (!e && res.len == 8 && !memcmp(res.p, "\0\0\0\0\0\0\0\0", 8)) {
		e = ch_daily__serve_from(c, conn, port_clock_real_ns() / DAY_NS + 1, err, errlen);
		if (!e)
			pr_info("clickhouse: per-device daily rollup (samples_1d%s) created: it "
				"serves the days from tomorrow on (earlier days are read raw, or "
				"backfilled: --ch-backfill-days)", c->cluster[0] ? " on this shard" : "");
	}
	rb_free(&res);
	return e;
}

int ch_daily__server_since(struct ch_store *c, struct ch_conn *conn, uint64_t *day, char *err,
			   size_t errlen)
{
	struct rb res = { 0 };
	char sql[160];
	int e;

	snprintf(sql, sizeof(sql), "SELECT toUInt64(min(day)) FROM samples_1d_since%s HAVING "
		 "count() > 0 FORMAT RowBinary", c->cluster[0] ? "_local" : "");
	e = ch_conn__run(conn, sql, NULL, NULL, 0, &res, err, errlen);
	if (!e && res.len != 8) {
		snprintf(err, errlen, "clickhouse: samples_1d_since is empty");
		e = -ENOENT;
	}
	if (!e)
		memcpy(day, res.p, 8);
	rb_free(&res);
	return e;
}

int ch_daily__serve_from(struct ch_store *c, struct ch_conn *conn, uint64_t day, char *err,
			 size_t errlen)
{
	uint32_t shard = 0;
	char sql[128], d[40];
	int e = c->cluster[0] ? this_shard(c, conn, &shard, err, errlen) : 0;

	ch_day_str(d, sizeof(d), day);
	if (c->cluster[0])
		snprintf(sql, sizeof(sql), "INSERT INTO samples_1d_since_local VALUES (%s, %u)", d,
			 shard);
	else
		snprintf(sql, sizeof(sql), "INSERT INTO samples_1d_since VALUES (%s)", d);
	return e ? e : ch_conn__run(conn, sql, NULL, NULL, 0, NULL, err, errlen);
}

/*
 * The first day samples_1d serves (days since 1970), or UINT64_MAX when unknown. A server's is
 * the earliest day in its samples_1d_since (a backfill adds earlier ones); a cluster's the
 * latest of its shards', once every shard has one.
 */
static uint64_t daily_since(struct ch_store *c)
{
	struct rb res = { 0 }, sql = { 0 };
	char err[300] = "clickhouse: out of memory";
	uint64_t d = UINT64_MAX;
	int e = 0;

	if (c->cluster[0])
		rb_printf(&sql, "SELECT toUInt64(max(d)) FROM (SELECT shard, min(day) AS d FROM "
			  "samples_1d_since GROUP BY shard) HAVING count() = (SELECT "
			  "uniqExact(shard_num) FROM system.clusters WHERE cluster = '%s') "
			  "FORMAT RowBinary", c->cluster);
	else
		rb_printf(&sql, "SELECT toUInt64(min(day)) FROM samples_1d_since HAVING count() > 0 "
			  "FORMAT RowBinary");
	rb_put(&sql, "", 1);
	e = sql.oom ? -ENOMEM : ch__select(c, (char *)sql.p, &res, err, sizeof(err));
	if (!e && res.len == 8)
		memcpy(&d, res.p, 8);
	else if (e)
		pr_warn("clickhouse: samples_1d_since: %s: comparisons read raw rows", err);
	rb_free(&sql);
	rb_free(&res);
	return d;
}

/*
 * " AND day [NOT] IN" the days of [s0, s1] the rollup may be short of: with an hour in
 * rollup_dirty, or (one server) a batch of rollup_pending not done. In a cluster GLOBAL
 * (rollup_dirty is Distributed: a subquery over it in a Distributed query is refused
 * otherwise, distributed_product_mode).
 */
static void sql_unsure_days(struct ch_store *c, struct rb *b, bool in, const char *s0,
			    const char *s1)
{
	const char *op = in ? "IN" : "NOT IN", *g = c->cluster[0] ? "GLOBAL " : "";

	rb_printf(b, " AND %sday %s%s (SELECT day FROM rollup_dirty WHERE day >= %s AND day <= %s)",
		  in ? "(" : "", g, op, s0, s1);
	if (!c->cluster[0])
		rb_printf(b, " %s day %s (SELECT day FROM (SELECT day FROM rollup_pending WHERE "
			  "day >= %s AND day <= %s GROUP BY day, hour, batch HAVING sum(sign) > 0))",
			  in ? "OR" : "AND", op, s0, s1);
	if (in)
		rb_printf(b, ")");
}

/* One raw branch: q's samples in [from, to] as (series, stack, v0..v{nt-1}). */
static void sql_raw(struct ch_store *c, struct rb *b, uint64_t from, uint64_t to,
		    const char *in, uint64_t sig, size_t nt)
{
	rb_printf(b, "SELECT series, stack");
	for (size_t i = 0; i < nt; i++)
		rb_printf(b, ", v[%zu] AS v%zu", i + 1, i);
	rb_printf(b, " FROM samples " CH_SAMPLES_JOIN);
	sql_where_samples(b, &(struct store_query){ .from_ns = from, .to_ns = to },
			  c->samples_hour);
	rb_printf(b, " AND sig = %" PRIu64 "%s", sig, in);
}

bool ch_daily__from(struct ch_store *c, struct rb *b, const struct store_query *q,
		    const char *in, uint64_t sig, size_t nt)
{
	uint64_t to = q->to_ns ? q->to_ns : UINT64_MAX / 2;
	uint64_t d0 = (q->from_ns + DAY_NS - 1) / DAY_NS, d1 = (to + 1) / DAY_NS, since;
	char s0[40], s1[40];

	if (c->no_rollup || !nt || nt > CH_ROLLUP_VALUES || d0 >= d1)
		return false;
	since = daily_since(c);
	if (since > d0)
		d0 = since;
	if (d1 > CH_DAILY_LAST) /* an open end: the days past it (none yet) read raw */
		d1 = CH_DAILY_LAST;
	if (d0 >= d1)
		return false;
	ch_day_str(s0, sizeof(s0), d0);
	ch_day_str(s1, sizeof(s1), d1 - 1);
	rb_printf(b, " FROM (SELECT series, stack");
	for (size_t i = 0; i < nt; i++)
		rb_printf(b, ", v%zu", i);
	rb_printf(b, " FROM samples_1d WHERE day >= %s AND day <= %s AND sig = %" PRIu64 "%s",
		  s0, s1, sig, in);
	sql_unsure_days(c, b, false, s0, s1);
	rb_printf(b, " UNION ALL "); /* the days the rollup may be short of: raw */
	sql_raw(c, b, d0 * DAY_NS, d1 * DAY_NS - 1, in, sig, nt);
	sql_unsure_days(c, b, true, s0, s1);
	if (q->from_ns < d0 * DAY_NS) {
		rb_printf(b, " UNION ALL ");
		sql_raw(c, b, q->from_ns, d0 * DAY_NS - 1, in, sig, nt);
	}
	if (d1 * DAY_NS <= to) {
		rb_printf(b, " UNION ALL ");
		sql_raw(c, b, d1 * DAY_NS, to, in, sig, nt);
	}
	rb_printf(b, ")");
	return true;
}
