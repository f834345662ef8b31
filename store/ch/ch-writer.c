// SPDX-License-Identifier: MIT
/*
 * store/ch/ch-writer.c — the ClickHouse backend's writer thread: it seals the open batch when
 * due and sends each sealed batch table by table (dictionaries first, profiles last), each
 * INSERT one body (RowBinary; the samples as one Native block, ch-native.c) under ClickHouse's
 * 1,048,576-row block, so each is atomic; on one server the batch's rollup rows (samples_1g,
 * ch-rollup.c) go after its samples, between a write-ahead intent and its done row. A put is
 * acknowledged once ClickHouse answered 200 for every table of its batch. A failed INSERT is
 * retried (from the table that failed, with backoff) until it succeeds: the batch stays
 * queued; rows that ClickHouse holds already (a retry, an INSERT that may have applied) are
 * taken out first. Sample rows go in the table's order, so ClickHouse does not sort them.
 * With --ch-cluster the INSERTs are synchronous Distributed ones. Hourly, --retention-days
 * (ch-retain.c).
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
#include "store/ch/ch-store.h"

/* A batch's profile ids, sorted, to find which ClickHouse holds (index into marks). */
struct idx {
	uint64_t id;
	size_t i;
};

static int idx_cmp(const void *a, const void *b)
{
	const struct idx *x = a, *y = b;

	return x->id < y->id ? -1 : x->id > y->id;
}

/*
 * Which of the batch's profiles with want[i] table t holds already (gone[i] set). With ranged,
 * only within their time range (and series, for samples: its primary key), which is exact for
 * a batch's own rows; without, within a day of it (a retry of a key may carry another time).
 * 0 or -errno.
 */
static int batch__find(struct ch_store *c, struct ch_conn *conn, const struct ch_batch *b,
		       int t, const bool *want, bool ranged, bool *gone)
{
	struct idx *ix = calloc(b->n_marks + 1, sizeof(*ix));
	struct rb sql = { 0 }, res = { 0 };
	uint64_t lo = UINT64_MAX, hi = 0;
	size_t n = 0;
	struct rb_rd r;
	char err[300];
	int e = 0;

	for (size_t i = 0; ix && i < b->n_marks; i++) {
		if (!want[i])
			continue;
		ix[n++] = (struct idx){ b->marks[i].id, i };
		lo = b->marks[i].ts < lo ? b->marks[i].ts : lo;
		hi = b->marks[i].ts > hi ? b->marks[i].ts : hi;
	}
	if (!ix || !n) {
		free(ix);
		return ix ? 0 : -ENOMEM;
	}
	qsort(ix, n, sizeof(*ix), idx_cmp);
	rb_printf(&sql, t == T_SAMPLES ? "SELECT DISTINCT profile FROM samples"
				       : "SELECT id FROM profiles");
	if (ranged) {
		if (t == T_SAMPLES)
			sql_where_samples(&sql, &(struct store_query){ .from_ns = lo, .to_ns = hi },
					  c->samples_hour);
		else
			sql_where(&sql, &(struct store_query){ .from_ns = lo, .to_ns = hi });
		if (t == T_SAMPLES) {
			rb_printf(&sql, " AND series IN (");
			for (size_t i = 0; i < n; i++)
				rb_printf(&sql, "%s%" PRIu64, i ? "," : "", b->marks[ix[i].i].series);
			rb_printf(&sql, ")");
		}
		rb_printf(&sql, " AND ");
	} else {
		/*
		 * A retry of a key carries its first upload's time (the device's record time, or
		 * the profile's), except from a device without a clock (placed at arrival): looked
		 * for within CH_KEY_WINDOW_NS of it, not in the whole table, which this lookup
		 * read at every batch (growing with the fleet's history).
		 */
		sql_where(&sql, &(struct store_query){
			.from_ns = lo > CH_KEY_WINDOW_NS ? lo - CH_KEY_WINDOW_NS : 0,
			.to_ns = hi + CH_KEY_WINDOW_NS });
		rb_printf(&sql, " AND ");
	}
	rb_printf(&sql, "%s IN (", t == T_SAMPLES ? "profile" : "id");
	for (size_t i = 0; i < n; i++)
		rb_printf(&sql, "%s%" PRIu64, i ? "," : "", ix[i].id);
	rb_printf(&sql, ") FORMAT RowBinary");
	rb_put(&sql, "", 1);
	e = sql.oom ? -ENOMEM : ch_conn__run(conn, (char *)sql.p, CH_QUERY_SETTINGS, NULL, 0,
					     &res, err, sizeof(err));
	rb_free(&sql);
	r = (struct rb_rd){ res.p, res.p + res.len, false };
	while (!e && rd_more(&r)) {
		struct idx key = { rd_u64(&r), 0 }, *f;

		f = bsearch(&key, ix, n, sizeof(*ix), idx_cmp);
		/* ids are unique in a batch, but a key retried within it repeats: all of them */
		while (f && f > ix && f[-1].id == key.id)
			f--;
		for (; f && f < ix + n && f->id == key.id; f++)
			gone[f->i] = true;
	}
	if (!e && r.bad)
		e = -EIO;
	rb_free(&res);
	free(ix);
	return e;
}

/*
 * Removes the rows of marks[i] with gone[i] from the samples body (samples), the profiles
 * body (profiles), or both. Returns the bytes cut.
 */
static size_t batch__cut(struct ch_batch *b, const bool *gone, bool samples, bool profiles)
{
	size_t so = 0, po = 0, cut = 0, n = 0;

	for (size_t i = 0; i < b->n_marks; i++) {
		struct pmark m = b->marks[i];

		if (gone[i] && samples)
			cut += m.s_len, m.s_len = 0;
		if (gone[i] && profiles)
			cut += m.p_len, m.p_len = 0;
		memmove(b->rows[T_SAMPLES].p + so, b->rows[T_SAMPLES].p + m.s_off, m.s_len);
		memmove(b->rows[T_PROFILES].p + po, b->rows[T_PROFILES].p + m.p_off, m.p_len);
		m.s_off = so, m.p_off = po;
		so += m.s_len, po += m.p_len;
		if (m.s_len || m.p_len)
			b->marks[n++] = m;
	}
	b->rows[T_SAMPLES].len = so;
	b->rows[T_PROFILES].len = po;
	b->n_marks = n;
	return cut;
}

/*
 * Before a batch's samples or profiles go, the rows ClickHouse holds already are taken out:
 *  - before the samples, once: keyed profiles whose profile row is there (a retry that another
 *    collector, or this one before a restart, stored): out of both bodies;
 *  - before the samples, profiles replayed from the spool (a batch of them may have landed
 *    just before a kill -9, not yet marked sent), and after an INSERT that failed in a way that
 *    may have applied it (a broken connection; with --ch-cluster, any failure: a Distributed
 *    INSERT reaches each shard apart): those whose rows that table holds, out of its body.
 * Each profile's rows of one table go to one shard in one block, so they land or not whole:
 * the lookup is per profile. 0 or -errno (retried later).
 */
static int batch__check(struct ch_store *c, struct ch_conn *conn, struct ch_batch *b)
{
	bool *want = calloc(b->n_marks + 1, sizeof(bool));
	bool *gone = calloc(b->n_marks + 1, sizeof(bool));
	bool any = false;
	size_t cut = 0;
	int e = want && gone ? 0 : -ENOMEM;

	if (!e && b->stage == T_SAMPLES && !b->deduped) {
		for (size_t i = 0; i < b->n_marks; i++)
			want[i] = b->marks[i].keyed;
		e = batch__find(c, conn, b, T_PROFILES, want, false, gone);
		if (!e)
			cut += batch__cut(b, gone, true, true);
		if (!e)
			b->deduped = true;
	}
	for (size_t i = 0; !e && i < b->n_marks; i++) {
		want[i] = b->ambiguous || (b->stage == T_SAMPLES && b->marks[i].replay);
		gone[i] = false;
		any |= want[i];
	}
	if (!e && any)
		e = batch__find(c, conn, b, b->stage, want, true, gone);
	if (!e && any) {
		cut += batch__cut(b, gone, b->stage == T_SAMPLES, b->stage == T_PROFILES);
		b->ambiguous = false;
	}
	free(want);
	free(gone);
	if (cut) {
		pthread_mutex_lock(&c->lock);
		pr_info("clickhouse: %zu bytes of rows ClickHouse holds already: not sent again",
			cut);
		c->queued_bytes -= cut;
		b->bytes -= cut;
		c->retries_found++;
		pthread_mutex_unlock(&c->lock);
	}
	return e;
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * Appends the batch's hours to sql as VALUES "('day', hour<tail>), ..." (each hour once) and
 * their count to *u, with the terminating NUL. 0 or -ENOMEM (n_marks x 8 bytes).
 */
static int batch__hours(const struct ch_batch *b, struct rb *sql, const char *tail, size_t *u)
{
	uint64_t *h = malloc((b->n_marks + 1) * sizeof(*h));
	size_t n = 0;

	if (!h)
		return -ENOMEM;
	for (size_t i = 0; i < b->n_marks; i++)
		if (b->marks[i].s_len)
			h[n++] = b->marks[i].ts / CH_ROLLUP_NS;
	qsort(h, n, sizeof(*h), u64_cmp);
	for (size_t i = 0; i < n; i++) {
		time_t t = (time_t)(h[i] * 3600);
		struct tm tm;

		if (i && h[i] == h[i - 1])
			continue;
		gmtime_r(&t, &tm);
		rb_printf(sql, "%s('%04d-%02d-%02d', %" PRIu64 "%s)", (*u)++ ? ", " : "",
			  tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, h[i], tail);
	}
	rb_put(sql, "", 1);
	free(h);
	return sql->oom ? -ENOMEM : 0;
}

/*
 * Write-ahead intent for the two INSERTs of a batch on one server (samples, then its rollup
 * rows): a collector killed between them (kill -9, OOM) would leave rows in samples that
 * samples_1g never gets, with no hour marked. So before its samples the batch's hours go to
 * rollup_pending with sign 1 (intent), and once its rollup rows are in (or its hours marked
 * dirty) the same rows with sign -1 (done). Merges read an hour raw while a batch of it has
 * more intents than dones (ch-query.c), and CollapsingMergeTree's merges take the pairs away:
 * the table holds little beyond batches in flight or lost. An intent that failed ambiguously
 * and was sent again leaves its hours read raw for good: exact, only slower.
 * 0 or -errno (retried: the batch waits).
 */
static int batch__intent(struct ch_store *c, struct ch_conn *conn, struct ch_batch *b, int sign)
{
	struct rb sql = { 0 };
	char tail[48], err[300];
	size_t u = 0;
	int e;

	snprintf(tail, sizeof(tail), ", %" PRIu64 ", %d", b->id, sign);
	rb_printf(&sql, "INSERT INTO rollup_pending (day, hour, batch, sign) VALUES ");
	e = batch__hours(b, &sql, tail, &u);
	e = e ? e : !u ? 0 : ch_conn__run(conn, (char *)sql.p, NULL, NULL, 0, NULL, err,
					  sizeof(err));
	rb_free(&sql);
	if (e) {
		pthread_mutex_lock(&c->lock);
		c->insert_errors++;
		if (strcmp(c->last_error, err))
			pr_warn("clickhouse: INSERT INTO rollup_pending: %s", err);
		snprintf(c->last_error, sizeof(c->last_error), "%s", err);
		pthread_mutex_unlock(&c->lock);
	} else {
		b->intent = sign > 0 ? CH_INTENT_PENDING : CH_INTENT_DONE;
	}
	return e;
}

/*
 * ClickHouse writes an INSERT's part of samples, then its view's part of samples_1h, not at
 * once (on one server the collector's rollup rows, samples_1g's, are an INSERT of their own,
 * after the samples: batch__rollup): an INSERT into samples that failed (a server dying or
 * restarting in it) may leave rows in samples that the rollup never gets, for good (the retry
 * sends only what is not there). So before the batch's samples go again, the hours of its
 * rows go to rollup_dirty, which merges read raw (ch-query.c): by the time a profile of it is
 * acknowledged, they are marked. The same for uploads replayed from the spool at start (a
 * collector killed between a failed INSERT and its mark), and for a batch whose rollup rows
 * failed (batch__rollup). 0 or -errno (retried first: the samples wait).
 */
static int batch__mark_dirty(struct ch_store *c, struct ch_conn *conn, struct ch_batch *b)
{
	const char *settings = c->cluster[0] ? "insert_distributed_sync=1" : NULL;
	struct rb sql = { 0 };
	size_t u = 0;
	char err[300];
	int e;

	rb_printf(&sql, "INSERT INTO rollup_dirty (day, hour) VALUES ");
	e = batch__hours(b, &sql, "", &u);
	e = e ? e : !u ? 0 : ch_conn__run(conn, (char *)sql.p, settings, NULL, 0, NULL, err,
					  sizeof(err));
	rb_free(&sql);
	pthread_mutex_lock(&c->lock);
	if (!e && u) {
		c->dirty_hours += u;
		pr_warn("clickhouse: %zu hour%s marked in rollup_dirty (%s): merges read %s raw",
			u, u > 1 ? "s" : "", b->rollup_failed ? "its samples_1g rows failed" :
			"an INSERT into samples failed, or replayed at start", u > 1 ? "them" : "it");
	} else if (e) {
		c->insert_errors++;
		if (strcmp(c->last_error, err))
			pr_warn("clickhouse: INSERT INTO rollup_dirty: %s", err);
		snprintf(c->last_error, sizeof(c->last_error), "%s", err);
	}
	pthread_mutex_unlock(&c->lock);
	if (!e)
		b->dirty = false;
	return e;
}

/*
 * The batch's rollup rows were not built, or their INSERT failed: its hours go to rollup_dirty
 * instead (batch__mark_dirty). Counted, logged once per distinct error, kept as last_error.
 */
static void batch__rollup_failed(struct ch_store *c, struct ch_batch *b, const char *what,
				 const char *err)
{
	b->rollup_failed = true;
	pthread_mutex_lock(&c->lock);
	c->rollup_failures++;
	if (strcmp(c->last_error, err))
		pr_warn("clickhouse: %s (%zu profiles waiting): %s: their hours are marked dirty",
			what, b->n_profiles, err);
	snprintf(c->last_error, sizeof(c->last_error), "%s", err);
	pthread_mutex_unlock(&c->lock);
}

/*
 * The batch's per-device daily rollup rows (samples_1d, ch-daily.c), after its samples_1g
 * rows: a failure marks the batch's hours dirty as for those (both rollups read raw there;
 * samples_1g's rows are not sent again). 0 or -errno with err.
 */
static int batch__rollup_daily(struct ch_store *c, struct ch_conn *conn, struct ch_batch *b,
			       char *err, size_t errlen)
{
	struct rb *body = &c->scratch.native;
	size_t n = 0;
	int e = ch_rollup__build_daily(b, &c->scratch, body, &n);

	if (e)
		snprintf(err, errlen, "clickhouse: samples_1d rows not built: %s", e == -EINVAL ?
			 "sample rows that do not parse" : strerror(-e));
	else if (n)
		e = ch_conn__run(conn, "INSERT INTO samples_1d FORMAT Native", CH_INSERT_SETTINGS,
				 body->p, body->len, NULL, err, errlen);
	return e;
}

/*
 * The batch's hourly rollup rows (ch-rollup.c), once its samples are in and before its profile
 * rows (a profile row means stored to a retry). Not sent again after a failed INSERT (any
 * error, -ENOMEM too: it may come from reading the answer, after the body went): that one
 * may have been applied and a second would count its rows twice, so the
 * retry marks their hours in rollup_dirty instead (merges read them raw), as for samples whose
 * view insert may be lost. A collector killed before this leaves its records in the spool,
 * whose replay at start marks their hours. 0 or -errno (retried: the profiles wait).
 */
static int batch__rollup(struct ch_store *c, struct ch_conn *conn, struct ch_batch *b)
{
	struct rb *body = &c->scratch.native;
	size_t n = 0;
	char err[300] = "clickhouse: out of memory";
	int e;

	if (b->rollup_failed) {
		e = batch__mark_dirty(c, conn, b);
		b->rolled = !e;
		return e;
	}
	e = ch_rollup__build(b, &c->scratch, body, &n);
	if (e) {
		/* built again, it would most likely fail again (and hold the queue): marked */
		snprintf(err, sizeof(err), "clickhouse: %s", e == -EINVAL ?
			 "sample rows that do not parse" : strerror(-e));
		batch__rollup_failed(c, b, "samples_1g rows not built", err);
		e = batch__mark_dirty(c, conn, b);
		b->rolled = !e;
		return e;
	}
	/*
	 * Any failure from here on may come after the body was written (ch_conn__run's -ENOMEM
	 * too: from reading the answer), so the INSERT may be applied: never sent again.
	 */
	if (n)
		e = ch_conn__run(conn, "INSERT INTO samples_1g FORMAT Native",
				 CH_INSERT_SETTINGS, body->p, body->len, NULL, err, sizeof(err));
	if (!e)
		e = batch__rollup_daily(c, conn, b, err, sizeof(err));
	if (e) {
		pthread_mutex_lock(&c->lock);
		c->insert_errors++;
		pthread_mutex_unlock(&c->lock);
		batch__rollup_failed(c, b, "INSERT INTO samples_1g or samples_1d", err);
	}
	b->rolled = !e;
	return e;
}

static int batch__send(struct ch_store *c, struct ch_conn *conn, struct ch_batch *b)
{
	const char *settings = c->cluster[0] ? "insert_distributed_sync=1&" CH_INSERT_SETTINGS
					     : CH_INSERT_SETTINGS;
	char sql[128], err[300];

	for (; b->stage < T__N; b->stage++) {
		const struct rb *body = &b->rows[b->stage];
		struct rb *order = &c->scratch.seg, *native = &c->scratch.native;
		int e;

		if (b->stage == T_SAMPLES && c->own_rollup && b->intent == CH_INTENT_NONE) {
			e = batch__intent(c, conn, b, 1);
			if (e)
				return e;
		}
		if (b->stage == T_SAMPLES && b->dirty) {
			e = batch__mark_dirty(c, conn, b);
			if (e)
				return e;
		}
		if (b->stage == T_PROFILES && c->own_rollup && !b->rolled) {
			e = batch__rollup(c, conn, b);
			if (e)
				return e;
		}
		if (b->stage == T_PROFILES && b->intent == CH_INTENT_PENDING) {
			e = batch__intent(c, conn, b, -1);
			if (e)
				return e;
		}
		if (b->stage == T_SAMPLES || b->stage == T_PROFILES) {
			e = batch__check(c, conn, b);
			if (e)
				return e;
		}
		if (!b->rows[b->stage].len)
			continue;
		if (b->stage == T_SAMPLES) {
			if (!ch_native__samples(b, order, native))
				return -ENOMEM;	/* no RowBinary of a profile's row: later */
			body = native;
		}
		snprintf(sql, sizeof(sql), "INSERT INTO %s FORMAT %s", ch_table_names[b->stage],
			 body == native ? "Native" : "RowBinary");
		e = ch_conn__run(conn, sql, settings, body->p, body->len, NULL, err, sizeof(err));
		if (e) {
			/* an answer from ClickHouse (-EIO) means not applied (one server); a
			 * broken connection, or any failure of a Distributed INSERT, either; and
			 * samples' part may be written without its view's (batch__mark_dirty) */
			b->ambiguous = e != -EIO || c->cluster[0] || b->stage == T_SAMPLES;
			b->dirty |= b->stage == T_SAMPLES;
			pthread_mutex_lock(&c->lock);
			c->insert_errors++;
			if (strcmp(c->last_error, err))
				pr_warn("clickhouse: INSERT INTO %s (%zu profiles waiting): %s",
					ch_table_names[b->stage], b->n_profiles, err);
			snprintf(c->last_error, sizeof(c->last_error), "%s", err);
			pthread_mutex_unlock(&c->lock);
			return e;
		}
	}
	return 0;
}

/* Seals the open batch when it is due (lock held): full, old enough, or stopping. */
static void ch__seal_due(struct ch_store *c)
{
	struct ch_batch *b = c->open;
	uint64_t now = port_clock_mono_ns();

	if (!b || (!ch_batch_full(c, b) && !c->stop &&
		   now - c->open_since < (uint64_t)c->batch_ms * 1000000))
		return;
	ch__seal(c);
}

/*
 * Started without ClickHouse (--ch-spool): creates the schema once it answers, retrying every
 * second or so, before any batch is sent (lock held; released while trying). False when
 * stopping first.
 */
static bool ch__schema_wait(struct ch_store *c)
{
	unsigned tries = 0;

	while (c->schema_pending && !c->stop) {
		char err[300] = "";
		struct timespec ts;
		int e;

		pthread_mutex_unlock(&c->lock);
		e = ch_schema__create(c, err, sizeof(err));
		pthread_mutex_lock(&c->lock);
		tries++;
		if (!e) {
			c->schema_pending = false;
			c->ch_ok = true;
			c->last_error[0] = '\0';
			pr_info("store: ClickHouse answers after %u tries: schema ready, sending what "
				"the spool holds (%zu bytes)", tries, c->spool_pending);
			break;
		}
		snprintf(c->last_error, sizeof(c->last_error), "%s", err);
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 1;
		pthread_cond_timedwait(&c->wake, &c->lock, &ts);
	}
	return !c->schema_pending;
}

void *ch__writer(void *arg)
{
	struct ch_store *c = arg;
	struct ch_conn *conn = ch_conn__new(&c->o);
	unsigned backoff_ms = 0;
	uint64_t retain_due = 0;

	pthread_mutex_lock(&c->lock);
	if (!ch__schema_wait(c)) {
		pthread_mutex_unlock(&c->lock);
		ch_conn__free(conn);
		return NULL; /* stopping: what was acknowledged is in the spool */
	}
	while (conn) {
		struct ch_batch *b;
		struct timespec ts;
		int e;

		if (c->retention_days && port_clock_mono_ns() >= retain_due && !c->stop) {
			pthread_mutex_unlock(&c->lock);
			ch_retain__run(c, conn);
			pthread_mutex_lock(&c->lock);
			retain_due = port_clock_mono_ns() + 3600 * NSEC_PER_SEC;
		}
		ch__seal_due(c);
		b = c->head;
		if (!b && c->stop)
			break;
		if (!b)
			ch__keep_idle(c);
		if (!b || backoff_ms) {
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += (long)(backoff_ms ? backoff_ms : 20) * 1000000;
			ts.tv_sec += ts.tv_nsec / 1000000000;
			ts.tv_nsec %= 1000000000;
			pthread_cond_timedwait(&c->wake, &c->lock, &ts);
			if (backoff_ms && c->stop)
				break; /* ClickHouse is down at exit: nothing queued was acked */
			backoff_ms = 0;
			if (!b)
				continue;
		}
		pthread_mutex_unlock(&c->lock);
		e = batch__send(c, conn, b);
		if (!e && c->spool)
			ch_spool__done(c, b);
		pthread_mutex_lock(&c->lock);
		if (e) {
			backoff_ms = 100;
			c->ch_ok = false;	/* uploads waiting for room spill now */
			pthread_cond_broadcast(&c->done);
			continue;
		}
		c->ch_ok = true;
		c->head = b->next;
		if (!c->head)
			c->tail = NULL;
		c->queued_bytes -= b->bytes;
		c->done_gen = b->gen;
		c->batches++;
		c->last_error[0] = '\0';
		pthread_cond_broadcast(&c->done);
		pthread_cond_signal(&c->refill);
		ch_batch__recycle(c, b);
		c->last_sent_ns = port_clock_mono_ns();
	}
	pthread_mutex_unlock(&c->lock);
	ch_conn__free(conn);
	return NULL;
}

