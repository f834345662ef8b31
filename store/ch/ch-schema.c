// SPDX-License-Identifier: MIT
/*
 * store/ch/ch-schema.c — the ClickHouse backend's tables (ClickHouse 18.16: no CODEC, no TTL,
 * no LowCardinality), created at start when missing:
 *   samples   one row per profile: (day Date, ts UInt64 ns, series, sig, profile,
 *             stacks Array(UInt64), v Array(Array(Int64)), hour), read with ARRAY JOIN
 *             MergeTree PARTITION BY day ORDER BY (hour, series, ts)
 *   profiles  one row per profile: id, time, series (hash of service, type, device, labels),
 *             sig (hash of sample and period types: what can merge), metadata, header
 *             MergeTree PARTITION BY day ORDER BY (ts, id)
 *   stacks    (stack, locs Array(UInt64), label keys/values)      ReplacingMergeTree ORDER BY id
 *   locations (loc, mapping, address, fns Array(UInt64), lines Array(Int64))        "
 *   functions (fn, name, system_name, filename, start_line)                          "
 *   mappings  (mapping, start, limit, offset, filename, build_id)                    "
 *   samples_1g (day, hour, grp, sig, stack, v0..v3): one server: samples summed by hour and
 *             group (labels but the device's: ch__group_of), sent with each batch
 *             (ch-rollup.c); SummingMergeTree PARTITION BY day ORDER BY (grp, sig, hour,
 *             stack); samples_1g_rule: the labels a group leaves out (its first row)
 *   samples_1h (day, hour, series, sig, stack, v0..v3): --ch-cluster: samples summed by hour
 *             and series by a materialized view on each shard's samples_local;
 *             SummingMergeTree PARTITION BY day ORDER BY (series, sig, hour, stack)
 *   samples_1d (day, series, sig, stack, v0..v3): samples summed by day and series, on one
 *             server sent with each batch after samples_1g's rows, with --ch-cluster by a
 *             materialized view on each shard's samples_local (ch-daily.c): a regression
 *             comparison's per-device sums; SummingMergeTree PARTITION BY day
 *             ORDER BY (series, sig, stack); samples_1d_since: the first day it serves
 *   rollup_dirty, rollup_pending: the hours the rollups may be short of (read raw)
 * With --ch-cluster the tables are Distributed over <table>_local on each shard.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "port/log.h"
#include "store/ch/ch-daily.h"

const char *const ch_table_names[T__N] = {
	"functions", "mappings", "locations", "stacks", "samples", "profiles",
};

/*
 * samples' hour, computed by ClickHouse (not sent: an INSERT without a column list leaves
 * MATERIALIZED columns out) and first in its key: a time range reads the granules of its hours
 * (a range with edges mid-hour reads the raw rows of those hours; ordered by series first it
 * scanned the ts of the whole day: 10-12 s instead of 3.6 on the synthetic day).
 */
#define CH_SAMPLES_HOUR "hour UInt32 MATERIALIZED toUInt32(intDiv(ts, 3600000000000))"
/*
 * With --ch-cluster, samples_local without hour: 18.16's Distributed INSERT sends a
 * MATERIALIZED column to the shards, which refuse it ("Cannot insert column hour").
 */
static const char ch_samples_sharded[] =
	"(day Date, ts UInt64, series UInt64, sig UInt64, profile UInt64, stacks Array(UInt64), "
	"v Array(Array(Int64))) ENGINE = MergeTree PARTITION BY day ORDER BY (series, ts)";

static const char *const ch_schema[T__N] = {
	"CREATE TABLE IF NOT EXISTS functions (fn UInt64, name String, system_name String, "
	"filename String, start_line Int64) ENGINE = ReplacingMergeTree ORDER BY fn",
	"CREATE TABLE IF NOT EXISTS mappings (mapping UInt64, start UInt64, limit UInt64, "
	"offset UInt64, filename String, build_id String) "
	"ENGINE = ReplacingMergeTree ORDER BY mapping",
	"CREATE TABLE IF NOT EXISTS locations (loc UInt64, mapping UInt64, address UInt64, "
	"fns Array(UInt64), lines Array(Int64)) ENGINE = ReplacingMergeTree ORDER BY loc",
	"CREATE TABLE IF NOT EXISTS stacks (stack UInt64, locs Array(UInt64), "
	"label_keys Array(String), label_values Array(String)) "
	"ENGINE = ReplacingMergeTree ORDER BY stack",
	/*
	 * One row per profile: its distinct stacks, in stack order, and
	 * their summed values, v[i] for stacks[i]; read with ARRAY JOIN stacks AS stack, v
	 */
	"CREATE TABLE IF NOT EXISTS samples (day Date, ts UInt64, series UInt64, sig UInt64, "
	"profile UInt64, stacks Array(UInt64), v Array(Array(Int64)), " CH_SAMPLES_HOUR ") "
	"ENGINE = MergeTree PARTITION BY day ORDER BY (hour, series, ts)",
	"CREATE TABLE IF NOT EXISTS profiles (day Date, ts UInt64, id UInt64, series UInt64, "
	"sig UInt64, service String, type String, device String, label_keys Array(String), "
	"label_values Array(String), key String, value Int64, size UInt64, flags UInt16, "
	"sample_type Array(String), sample_unit Array(String), default_type String, "
	"period_type String, period_unit String, period Int64, time_nanos Int64, "
	"duration Int64, main_mapping UInt64, comments Array(String)) "
	"ENGINE = MergeTree PARTITION BY day ORDER BY (ts, id)",
};
/* With --ch-cluster, what each table's Distributed engine shards rows by. */
static const char *const ch_shard_key[T__N] = {
	"fn", "mapping", "loc", "stack", "series", "series",
};

/*
 * --ch-cluster: table t as <name>_local on this server, and <name> a Distributed table over the
 * cluster's <name>_local tables, which every query and INSERT of this file uses unchanged
 * (ON CLUSTER needs ZooKeeper in 18.16: each shard's tables are created by a collector that
 * talks to it, or by these statements run there).
 */
static int ch__schema_sharded(struct ch_store *c, struct ch_conn *conn, int t, char *err,
			      size_t errlen)
{
	const char *name = ch_table_names[t];
	const char *def = t == T_SAMPLES ? ch_samples_sharded : strchr(ch_schema[t], '(');
	struct rb sql = { 0 };
	int e;

	rb_printf(&sql, "CREATE TABLE IF NOT EXISTS %s_local %s", name, def);
	rb_put(&sql, "", 1);
	e = sql.oom ? -ENOMEM : ch_conn__run(conn, (char *)sql.p, NULL, NULL, 0, NULL, err, errlen);
	sql.len = 0;
	rb_printf(&sql, "CREATE TABLE IF NOT EXISTS %s AS %s_local ENGINE = Distributed(%s, %s, "
		  "%s_local, %s)", name, name, c->cluster, c->o.database, name, ch_shard_key[t]);
	rb_put(&sql, "", 1);
	if (!e)
		e = sql.oom ? -ENOMEM : ch_conn__run(conn, (char *)sql.p, NULL, NULL, 0, NULL, err,
						     errlen);
	rb_free(&sql);
	return e;
}

/*
 * The hourly rollup by series (--ch-cluster; store/README.md "How it works"): every INSERT
 * into a shard's samples_local summed by (series, sig, hour, stack) into its samples_1h_local
 * by a materialized view, so a merge over whole hours reads one row per series, hour and stack
 * instead of one per profile and stack. Scalar columns (v0..v3, CH_ROLLUP_VALUES) sum several
 * times faster than sumForEach over an Array; a kind with more sample types is not rolled up
 * (read raw). On one server the collector sums by group instead (samples_1g, ch-rollup.c): the
 * view's grouping and sorting of every INSERT were 30-60% of ClickHouse's CPU at ingest.
 */
static const char ch_rollup_table[] =
	"CREATE TABLE IF NOT EXISTS samples_1h_local (day Date, hour UInt32, series UInt64, "
	"sig UInt64, stack UInt64, v0 Int64, v1 Int64, v2 Int64, v3 Int64) "
	"ENGINE = SummingMergeTree((v0, v1, v2, v3)) PARTITION BY day "
	"ORDER BY (series, sig, hour, stack)";
static const char ch_rollup_view[] =
	"CREATE MATERIALIZED VIEW IF NOT EXISTS samples_1h_mv TO samples_1h_local AS SELECT day, "
	"toUInt32(intDiv(ts, 3600000000000)) AS hour, series, sig, stack, sum(v[1]) AS v0, "
	"sum(v[2]) AS v1, sum(v[3]) AS v2, sum(v[4]) AS v3 FROM samples_local " CH_SAMPLES_JOIN
	" WHERE length(v) <= 4 GROUP BY day, hour, series, sig, stack";

/*
 * The rollup by group (one server): samples summed by (group, sig, hour, stack), the group
 * (ch__group_of) being a series' labels but the device's. A fleet of 100,000 devices at one
 * upload a minute has each batch hold about one profile a device: summed per series (by
 * samples_1h's key) each profile's ~715 stacks were rows of their own, written and merged
 * again and again (~60% of ClickHouse's CPU at ingest, 0.675 ms a profile,
 * docs/notes/rollups.md); summed per group, a batch's profiles of one firmware and region fold
 * into one row a stack. Merges read it for selections of whole groups (ch-query.c), raw rows
 * otherwise.
 */
static const char ch_group_table[] =
	"CREATE TABLE IF NOT EXISTS samples_1g (day Date, hour UInt32, grp UInt64, sig UInt64, "
	"stack UInt64, v0 Int64, v1 Int64, v2 Int64, v3 Int64) "
	"ENGINE = SummingMergeTree((v0, v1, v2, v3)) PARTITION BY day "
	"ORDER BY (grp, sig, hour, stack)";
/*
 * The database's group rule: the labels a group leaves out. Its first row rules (a Log
 * table reads in the order rows went in), written by the first collector that finds none,
 * so that every collector, and every merge, computes the same groups.
 */
static const char ch_group_rule[] =
	"CREATE TABLE IF NOT EXISTS samples_1g_rule (without String) ENGINE = Log";

/* Hours whose rollup may be short (batch__mark_dirty): merges read them raw. */
static const char ch_rollup_dirty[] =
	"CREATE TABLE IF NOT EXISTS rollup_dirty%s (day Date, hour UInt32) "
	"ENGINE = ReplacingMergeTree PARTITION BY day ORDER BY hour";

/* batch__intent's table (one server only: with --ch-cluster the view fills samples_1h) */
static const char ch_rollup_pending[] =
	"CREATE TABLE IF NOT EXISTS rollup_pending (day Date, hour UInt32, batch UInt64, "
	"sign Int8) ENGINE = CollapsingMergeTree(sign) PARTITION BY day ORDER BY (hour, batch)";

/* One statement of fmt with the suffix sfx in every %s (at most two). */
static int ch__run_fmt(struct ch_conn *conn, const char *fmt, const char *sfx, struct rb *out,
		       char *err, size_t errlen)
{
	struct rb sql = { 0 };
	int e;

	rb_printf(&sql, fmt, sfx, sfx);
	rb_put(&sql, "", 1);
	e = sql.oom ? -ENOMEM : ch_conn__run(conn, (char *)sql.p, NULL, NULL, 0, out, err, errlen);
	rb_free(&sql);
	return e;
}

/* The one UInt64 that a SELECT answers (in RowBinary), 0 when it answers no row. */
static int ch__run_u64(struct ch_conn *conn, const char *fmt, const char *sfx, uint64_t *v,
		       char *err, size_t errlen)
{
	struct rb res = { 0 };
	struct rb_rd r;
	int e = ch__run_fmt(conn, fmt, sfx, &res, err, errlen);

	r = (struct rb_rd){ res.p, res.p + res.len, false };
	*v = !e && rd_more(&r) ? rd_u64(&r) : 0;
	if (!e && r.bad) {
		snprintf(err, errlen, "clickhouse: malformed answer to '%.60s'", fmt);
		e = -EIO;
	}
	rb_free(&res);
	return e;
}

/*
 * The rollup's tables on this server: with --ch-cluster samples_1h_local, its view and
 * rollup_dirty_local, with Distributed samples_1h and rollup_dirty over them; on one server
 * rollup_dirty and rollup_pending (samples_1g: ch__schema_group).
 */
static int ch__schema_rollup(struct ch_store *c, struct ch_conn *conn, char *err, size_t errlen)
{
	char sql[400];
	int e;

	if (!c->cluster[0]) {
		e = ch__run_fmt(conn, ch_rollup_dirty, "", NULL, err, errlen);
		return e ? e : ch__run_fmt(conn, ch_rollup_pending, "", NULL, err, errlen);
	}
	e = ch__run_fmt(conn, ch_rollup_table, "", NULL, err, errlen);
	if (!e)
		e = ch__run_fmt(conn, ch_rollup_view, "", NULL, err, errlen);
	if (!e)
		e = ch__run_fmt(conn, ch_rollup_dirty, "_local", NULL, err, errlen);
	if (!e) {
		snprintf(sql, sizeof(sql), "CREATE TABLE IF NOT EXISTS rollup_dirty AS "
			 "rollup_dirty_local ENGINE = Distributed(%s, %s, rollup_dirty_local, hour)",
			 c->cluster, c->o.database);
		e = ch__run_fmt(conn, sql, "", NULL, err, errlen);
	}
	if (!e) {
		snprintf(sql, sizeof(sql), "CREATE TABLE IF NOT EXISTS samples_1h AS "
			 "samples_1h_local ENGINE = Distributed(%s, %s, samples_1h_local, series)",
			 c->cluster, c->o.database);
		e = ch__run_fmt(conn, sql, "", NULL, err, errlen);
	}
	return e;
}

/*
 * samples_1g and the database's group rule (one server): the first collector writes its own
 * (--ch-rollup-without), every collector then reads the first row and keeps to it.
 */
static int ch__schema_group(struct ch_store *c, struct ch_conn *conn, char *err, size_t errlen)
{
	char without[CH_GROUP_WITHOUT_LEN];
	struct rb sql = { 0 }, res = { 0 };
	struct rb_rd r;
	uint64_t rules = 0;
	int e = ch__run_fmt(conn, ch_group_table, "", NULL, err, errlen);

	memcpy(without, c->group_without, sizeof(without));
	if (!e)
		e = ch__run_fmt(conn, ch_group_rule, "", NULL, err, errlen);
	if (!e)
		e = ch__run_u64(conn, "SELECT count() FROM samples_1g_rule FORMAT RowBinary", "",
				&rules, err, errlen);
	if (!e && !rules) {	/* without: checked by store_ch__open, nothing to quote */
		rb_printf(&sql, "INSERT INTO samples_1g_rule VALUES ('%s')", without);
		rb_put(&sql, "", 1);
		e = sql.oom ? -ENOMEM : ch_conn__run(conn, (char *)sql.p, NULL, NULL, 0, NULL, err,
						     errlen);
		if (!e)
			pr_info("clickhouse: hourly rollup by group (samples_1g) created: groups "
				"leave out the device and the labels '%s'", without);
	}
	if (!e)
		e = ch__run_fmt(conn, "SELECT without FROM samples_1g_rule LIMIT 1 FORMAT RowBinary",
				"", &res, err, errlen);
	r = (struct rb_rd){ res.p, res.p + res.len, false };
	if (!e)
		rd_strcpy(&r, c->group_without, sizeof(c->group_without));
	if (!e && r.bad) {
		snprintf(err, errlen, "clickhouse: samples_1g_rule: malformed answer");
		e = -EIO;
	}
	if (!e && strcmp(c->group_without, without))
		pr_info("clickhouse: rollup groups leave out the labels '%s' (the database's rule, "
			"not --ch-rollup-without's '%s')", c->group_without, without);
	rb_free(&sql);
	rb_free(&res);
	return e;
}

/* Creates the database and the tables when missing (18.16 syntax, checked on 18.16.1). */
int ch_schema__create(struct ch_store *c, char *err, size_t errlen)
{
	struct ch_opts o = c->o;
	struct ch_conn *conn;
	char sql[128];
	int e;

	snprintf(o.database, sizeof(o.database), "default");
	conn = ch_conn__new(&o);
	if (!conn)
		return -ENOMEM;
	snprintf(sql, sizeof(sql), "CREATE DATABASE IF NOT EXISTS %s", c->o.database);
	e = ch_conn__run(conn, sql, NULL, NULL, 0, NULL, err, errlen);
	ch_conn__free(conn);
	conn = e ? NULL : ch_conn__new(&c->o);
	if (!e && !conn)
		e = -ENOMEM;
	for (int t = 0; !e && t < T__N; t++)
		e = c->cluster[0] ? ch__schema_sharded(c, conn, t, err, errlen)
				  : ch_conn__run(conn, ch_schema[t], NULL, NULL, 0, NULL, err, errlen);
	if (!e)
		e = ch__schema_rollup(c, conn, err, errlen);
	if (!e && c->own_rollup)
		e = ch__schema_group(c, conn, err, errlen);
	if (!e)
		e = ch_daily__schema(c, conn, err, errlen);
	ch_conn__free(conn);
	return e;
}
