// SPDX-License-Identifier: MIT
/*
 * store/ch/ch-backfill.c — --ch-backfill-days N: fills the per-device daily rollup (samples_1d,
 * ch-daily.c) for the days stored before it existed, in a thread of its own at start, so
 * that comparisons over those days read it instead of the raw rows.
 *
 * On the server this collector talks to (in a cluster, that shard's _local tables: run one
 * such collector per shard; the cluster serves a day once every shard does), for the days
 * before the first it serves that have ended (before today, UTC), newest first, at most N
 * back from today: a day at a time, samples_1d_since moved back by a day once that day is
 * complete, so a backfill cut short still serves the days it did (oldest first would move it
 * only at the very end: it is one boundary, not a set of days).
 *
 * A day, exactly once, whatever stops it: any statement of an earlier attempt still running
 * (a collector killed mid-day: ClickHouse goes on with it) is waited for (its query_id); the
 * day's partition of samples_1d is dropped (what an attempt cut short left, and what batches
 * of late uploads wrote there: a day not served is read by nobody); one INSERT ... SELECT
 * sums the day's raw rows by (day, series, sig, stack), under ClickHouse's max_execution_time
 * (CONFIG_COLLECTOR_CH_BACKFILL_SECONDS); then the day's totals in samples_1d must equal the
 * raw rows' (a late upload of that day that raced with the fill, written twice or not at all,
 * shows there: the day is tried again); only then is it served. A day whole already (its sums
 * equal the raw rows': another collector of the database filled it, or an attempt of ours was
 * cut after its fill) is served, not dropped and filled again: two collectors may backfill one
 * database at once. At shutdown the running statement is killed and the day left unserved.
 * Counted at /metrics, said in the log.
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
#define BACKFILL_TRIES 3	/* attempts a day, then the backfill ends (logged) */
#define BACKFILL_RETRY_S 10	/* between them */

/* Sleeps up to s seconds, less when stopping: whether still running. */
static bool backfill_sleep(struct ch_store *c, unsigned s)
{
	struct timespec ts;
	bool run;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += s;
	pthread_mutex_lock(&c->lock);
	if (!c->stop)
		pthread_cond_timedwait(&c->backfill_wake, &c->lock, &ts);
	run = !c->stop;
	pthread_mutex_unlock(&c->lock);
	return run;
}

static bool stopping(struct ch_store *c)
{
	bool s;

	pthread_mutex_lock(&c->lock);
	s = c->stop;
	pthread_mutex_unlock(&c->lock);
	return s;
}

/* The one UInt64 that sql answers: 0 or -errno with err. */
static int run_u64(struct ch_conn *conn, const char *sql, uint64_t *v, char *err, size_t errlen)
{
	struct rb res = { 0 };
	int e = ch_conn__run(conn, sql, NULL, NULL, 0, &res, err, errlen);

	if (!e && res.len != 8) {
		snprintf(err, errlen, "clickhouse: malformed answer to '%.60s'", sql);
		e = -EIO;
	}
	if (!e)
		memcpy(v, res.p, 8);
	rb_free(&res);
	return e;
}

/* Waits while a statement of ours (an earlier attempt's) runs: 0, -EINTR (stopping), -errno. */
static int backfill_wait_ours(struct ch_store *c, struct ch_conn *conn, char *err,
			      size_t errlen)
{
	char sql[200];

	snprintf(sql, sizeof(sql), "SELECT count() FROM system.processes WHERE query_id = "
		 "'%s' FORMAT RowBinary", c->backfill_id);
	for (unsigned s = 0;; s++) {
		uint64_t n;
		int e = run_u64(conn, sql, &n, err, errlen);

		if (e || !n)
			return e;
		if (!s)
			pr_info("clickhouse: backfill: an earlier backfill statement still runs: "
				"waiting for it");
		if (!backfill_sleep(c, 1))
			return -EINTR;
	}
}

/* The day's four value sums, from samples_1d (rollup) or the raw rows, as 32 bytes. */
static int day_totals(struct ch_store *c, struct ch_conn *conn, const char *day, bool rollup,
		      unsigned char out[32], char *err, size_t errlen)
{
	const char *sfx = c->cluster[0] ? "_local" : "";
	struct rb res = { 0 };
	char sql[400];
	int e;

	if (rollup)
		snprintf(sql, sizeof(sql), "SELECT sum(v0), sum(v1), sum(v2), sum(v3) FROM "
			 "samples_1d%s WHERE day = %s FORMAT RowBinary", sfx, day);
	else	/* v[k] past a stack's values is 0, as the rollup's columns are */
		snprintf(sql, sizeof(sql), "SELECT sum(v[1]), sum(v[2]), sum(v[3]), sum(v[4]) FROM "
			 "samples%s ARRAY JOIN v WHERE day = %s AND length(v) <= %d FORMAT RowBinary",
			 sfx, day, CH_ROLLUP_VALUES);
	e = ch_conn__run(conn, sql, c->backfill_settings, NULL, 0, &res, err, errlen);
	if (!e && res.len != 32) {
		snprintf(err, errlen, "clickhouse: malformed answer to the day's totals");
		e = -EIO;
	}
	if (!e)
		memcpy(out, res.p, 32);
	rb_free(&res);
	return e;
}

/*
 * Whether day ds is whole in samples_1d already: its sums there, when not all 0, equal the raw
 * rows'. Another collector of the same database (its statement waited for: the same query_id)
 * filled it, or an attempt of ours was cut between its INSERT and serving the day: dropping
 * it again would empty a day that may be served already, for the time the INSERT takes.
 */
static int day_whole(struct ch_store *c, struct ch_conn *conn, const char *ds, bool *whole,
		     char *err, size_t errlen)
{
	static const unsigned char zero[32];
	unsigned char raw[32], rolled[32];
	int e = day_totals(c, conn, ds, true, rolled, err, errlen);

	*whole = false;
	if (e || !memcmp(rolled, zero, sizeof(zero)))	/* nothing there: the raw scan spared */
		return e;
	e = day_totals(c, conn, ds, false, raw, err, errlen);
	*whole = !e && !memcmp(raw, rolled, sizeof(raw));
	return e;
}

/*
 * One attempt at day d ('YYYY-MM-DD' in ds): 0 (complete), 1 (whole already: not filled
 * again), -EAGAIN (totals differ), -errno.
 */
static int backfill_day(struct ch_store *c, struct ch_conn *conn, uint64_t d, const char *ds,
			char *err, size_t errlen)
{
	const char *sfx = c->cluster[0] ? "_local" : "";
	unsigned char raw[32], rolled[32];
	struct rb sql = { 0 };
	char settings[300];
	time_t t = (time_t)(d * 86400);
	struct tm tm;
	bool whole = false;
	int e = backfill_wait_ours(c, conn, err, errlen);

	if (!e)
		e = day_whole(c, conn, ds, &whole, err, errlen);
	if (!e && whole)
		return 1;
	gmtime_r(&t, &tm);
	rb_printf(&sql, "ALTER TABLE samples_1d%s DROP PARTITION ID '%04d%02d%02d'", sfx,
		  tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday);
	rb_put(&sql, "", 1);
	if (!e)
		e = sql.oom ? -ENOMEM : ch_conn__run(conn, (char *)sql.p, NULL, NULL, 0, NULL, err,
						     errlen);
	sql.len = 0;
	rb_printf(&sql, "INSERT INTO samples_1d%s SELECT day, series, sig, stack, sum(v[1]), "
		  "sum(v[2]), sum(v[3]), sum(v[4]) FROM samples%s " CH_SAMPLES_JOIN " WHERE day = "
		  "%s AND length(v) <= %d GROUP BY day, series, sig, stack ORDER BY series, sig, "
		  "stack", sfx, sfx, ds, CH_ROLLUP_VALUES);
	rb_put(&sql, "", 1);
	snprintf(settings, sizeof(settings), "query_id=%s&%s&" CH_INSERT_SETTINGS, c->backfill_id,
		 c->backfill_settings);
	if (!e && !stopping(c))
		e = sql.oom ? -ENOMEM : ch_conn__run(conn, (char *)sql.p, settings, NULL, 0, NULL,
						     err, errlen);
	rb_free(&sql);
	if (stopping(c))	/* its statement killed by ch_backfill__stop: not a failure */
		e = -EINTR;
	if (!e)
		e = day_totals(c, conn, ds, false, raw, err, errlen);
	if (!e)
		e = day_totals(c, conn, ds, true, rolled, err, errlen);
	if (!e && memcmp(raw, rolled, sizeof(raw))) {
		snprintf(err, errlen, "its totals in samples_1d differ from the raw rows' (uploads "
			 "of that day came meanwhile)");
		e = -EAGAIN;
	}
	return e;
}

/* Counts one attempt (failed: e) and its time. */
static void backfill_count(struct ch_store *c, int e, uint64_t t0)
{
	pthread_mutex_lock(&c->lock);
	if (e)
		c->backfill_failures++;
	else
		c->backfill_days_done++;
	c->backfill_ns += port_clock_mono_ns() - t0;
	pthread_mutex_unlock(&c->lock);
}

/* The next day to fill (0 and *d), 1 when none is left, -errno on failure. */
static int backfill_next(struct ch_store *c, struct ch_conn *conn, uint64_t *d, char *err,
			 size_t errlen)
{
	uint64_t today = port_clock_real_ns() / DAY_NS, since;
	int e = ch_daily__server_since(c, conn, &since, err, errlen);

	if (e)
		return e;
	*d = (since < today ? since : today) - 1;
	return *d + c->backfill_days < today ? 1 : 0;
}

/* Fills day d, BACKFILL_TRIES times at most, and serves it: 0 or -errno (logged). */
static int backfill_one(struct ch_store *c, struct ch_conn *conn, uint64_t d)
{
	char ds[40], err[300] = "";
	int e = -EAGAIN;

	ch_day_str(ds, sizeof(ds), d);
	for (int i = 0; e && i < BACKFILL_TRIES; i++) {
		uint64_t t0 = port_clock_mono_ns(), rows = 0;
		char sql[200];

		if (i && !backfill_sleep(c, BACKFILL_RETRY_S))
			return -EINTR;
		e = backfill_day(c, conn, d, ds, err, sizeof(err));
		if (e == 1) {
			pr_info("clickhouse: backfill: day %s is whole in samples_1d already "
				"(another collector's, or an attempt cut short after its fill): "
				"served, not filled again", ds);
			e = ch_daily__serve_from(c, conn, d, err, sizeof(err));
			backfill_count(c, e, t0);
			return e;
		}
		if (!e)
			e = ch_daily__serve_from(c, conn, d, err, sizeof(err));
		if (e == -EINTR)
			return e;
		backfill_count(c, e, t0);
		snprintf(sql, sizeof(sql), "SELECT count() FROM samples_1d%s WHERE day = %s FORMAT "
			 "RowBinary", c->cluster[0] ? "_local" : "", ds);
		if (!e && !run_u64(conn, sql, &rows, err, sizeof(err)))
			pr_info("clickhouse: backfill: day %s in samples_1d (%" PRIu64 " rows, "
				"%.1f s): comparisons read it from the rollup", ds, rows,
				(double)(port_clock_mono_ns() - t0) / 1e9);
		else if (e)
			pr_warn("clickhouse: backfill: day %s, attempt %d of %d: %s", ds, i + 1,
				BACKFILL_TRIES, err);
	}
	return e;
}

void *ch_backfill__run(void *arg)
{
	struct ch_store *c = arg;
	struct ch_opts o = c->o;
	struct ch_conn *conn;
	char err[300] = "";
	unsigned days = 0;
	int e;

	/* its statement's answer waits for ClickHouse's bound, not the client's 30 s */
	o.timeout_ms = (CONFIG_COLLECTOR_CH_BACKFILL_SECONDS + 60) * 1000u;
	conn = ch_conn__new(&o);
	e = conn ? 0 : -ENOMEM;

	pr_info("clickhouse: backfill of samples_1d: the ended days before it serves, newest "
		"first, up to %u days back", c->backfill_days);
	while (!e) {
		uint64_t d;

		pthread_mutex_lock(&c->lock);
		e = c->stop ? -EINTR : c->schema_pending ? -EAGAIN : 0;
		pthread_mutex_unlock(&c->lock);
		if (e == -EAGAIN) {	/* the writer creates the schema once ClickHouse answers */
			e = backfill_sleep(c, 1) ? 0 : -EINTR;
			continue;
		}
		if (!e)
			e = backfill_next(c, conn, &d, err, sizeof(err));
		if (e == 1)
			break;
		if (!e)
			e = backfill_one(c, conn, d);
		days += !e;
	}
	if (e == 1)
		pr_info("clickhouse: backfill done: %u days served; samples_1d serves the last %u "
			"days", days, c->backfill_days);
	else if (e == -EINTR)
		pr_info("clickhouse: backfill stopped (%u days served): the next start goes on",
			days);
	else
		pr_warn("clickhouse: backfill ended (%u days served): %s", days,
			err[0] ? err : strerror(-e));
	ch_conn__free(conn);
	return NULL;
}

void ch_backfill__stop(struct ch_store *c)
{
	struct ch_conn *conn;
	char sql[160], err[300];

	if (!c->backfiller_started)
		return;
	pthread_mutex_lock(&c->lock);
	pthread_cond_broadcast(&c->backfill_wake);
	pthread_mutex_unlock(&c->lock);
	conn = ch_conn__new(&c->o);
	snprintf(sql, sizeof(sql), "KILL QUERY WHERE query_id = '%s' ASYNC", c->backfill_id);
	if (conn && ch_conn__run(conn, sql, NULL, NULL, 0, NULL, err, sizeof(err)))
		pr_warn("clickhouse: backfill: stopping its statement: %s", err);
	ch_conn__free(conn);
	pthread_join(c->backfiller, NULL);
	c->backfiller_started = false;
}
