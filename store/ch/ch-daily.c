// SPDX-License-Identifier: MIT
/*
 * store/ch/ch-daily.c — the per-device daily rollup (one server): samples_1d, the batch's
 * sample rows summed by (series, sig, day, stack) by the collector (ch_rollup__build_daily,
 * sent after samples_1g's rows, under the same intent and dirty hours), so that a regression
 * comparison's side (store__sum_by_device) sums ~126 rows a device and day instead of one
 * per profile and stack: ClickHouse's GROUP BY series, stack of a side's 32.5 M raw rows was
 * 13.5-24 s on the synthetic day.
 *
 * Old data: samples_1d serves the days from samples_1d_since's earliest day on. A collector
 * that creates the table writes the day after today: the day in progress, and any before,
 * have batches written before the table existed, so they are read raw, not summed short.
 * No backfill runs at start (an INSERT ... SELECT of a day of 1,000,000 profiles took 23 s
 * of the server's CPU, times the days kept, while batches of the same days keep coming,
 * which it would race with); a backfill done by hand, or tests/bench/regressions-bench.sh's,
 * fills whole days and then inserts the first of them into samples_1d_since.
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

/* day (days since 1970) as 'YYYY-MM-DD' (18.16 compares a Date with a string). */
static void day_str(char *s, size_t n, uint64_t day)
{
	time_t t = (time_t)(day * 86400);
	struct tm tm;

	gmtime_r(&t, &tm);
	snprintf(s, n, "'%04d-%02d-%02d'", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday);
}

int ch_daily__schema(struct ch_conn *conn, char *err, size_t errlen)
{
	struct rb res = { 0 };
	int e = ch_conn__run(conn, ch_daily_table, NULL, NULL, 0, NULL, err, errlen);

	if (!e)
		e = ch_conn__run(conn, ch_daily_since, NULL, NULL, 0, NULL, err, errlen);
	if (!e)
		e = ch_conn__run(conn, "SELECT count() FROM samples_1d_since FORMAT RowBinary", NULL,
				 NULL, 0, &res, err, errlen);
	if (!e && res.len == 8 && !memcmp(res.p, "\0\0\0\0\0\0\0\0", 8)) {
		/* tomorrow in UTC, as the rows' day is (not the server's today(): its zone) */
		char sql[96], day[40];

		day_str(day, sizeof(day), port_clock_real_ns() / DAY_NS + 1);
		snprintf(sql, sizeof(sql), "INSERT INTO samples_1d_since VALUES (%s)", day);
		e = ch_conn__run(conn, sql, NULL, NULL, 0, NULL, err, errlen);
		if (!e)
			pr_info("clickhouse: per-device daily rollup (samples_1d) created: it serves "
				"the days from tomorrow on (earlier days are read raw)");
	}
	rb_free(&res);
	return e;
}

/* The first day samples_1d serves (days since 1970), or UINT64_MAX when unknown. */
static uint64_t daily_since(struct ch_store *c)
{
	struct rb res = { 0 };
	char err[300];
	uint64_t d = UINT64_MAX;
	int e = ch__select(c, "SELECT toUInt64(min(day)) FROM samples_1d_since HAVING count() > 0 "
			   "FORMAT RowBinary", &res, err, sizeof(err));

	if (!e && res.len == 8)
		memcpy(&d, res.p, 8);
	else if (e)
		pr_warn("clickhouse: samples_1d_since: %s: comparisons read raw rows", err);
	rb_free(&res);
	return d;
}

/* The days of [d0, d1] in rollup_dirty, or with a batch of rollup_pending not done. */
#define SQL_DIRTY_DAYS \
	"(SELECT day FROM rollup_dirty WHERE day >= %s AND day <= %s)"
#define SQL_PENDING_DAYS \
	"(SELECT day FROM (SELECT day FROM rollup_pending WHERE day >= %s AND day <= %s " \
	"GROUP BY day, hour, batch HAVING sum(sign) > 0))"

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

	if (c->no_rollup || !c->own_rollup || !nt || nt > CH_ROLLUP_VALUES || d0 >= d1)
		return false;
	since = daily_since(c);
	if (since > d0)
		d0 = since;
	if (d1 > CH_DAILY_LAST) /* an open end: the days past it (none yet) read raw */
		d1 = CH_DAILY_LAST;
	if (d0 >= d1)
		return false;
	day_str(s0, sizeof(s0), d0);
	day_str(s1, sizeof(s1), d1 - 1);
	rb_printf(b, " FROM (SELECT series, stack");
	for (size_t i = 0; i < nt; i++)
		rb_printf(b, ", v%zu", i);
	rb_printf(b, " FROM samples_1d WHERE day >= %s AND day <= %s AND sig = %" PRIu64 "%s",
		  s0, s1, sig, in);
	rb_printf(b, " AND day NOT IN " SQL_DIRTY_DAYS " AND day NOT IN " SQL_PENDING_DAYS,
		  s0, s1, s0, s1);
	rb_printf(b, " UNION ALL "); /* the days the rollup may be short of: raw */
	sql_raw(c, b, d0 * DAY_NS, d1 * DAY_NS - 1, in, sig, nt);
	rb_printf(b, " AND (day IN " SQL_DIRTY_DAYS " OR day IN " SQL_PENDING_DAYS ")",
		  s0, s1, s0, s1);
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
