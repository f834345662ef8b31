// SPDX-License-Identifier: MIT
/*
 * store/ch/ch-list.c — the ClickHouse backend's listings and timelines: the selector's series
 * (ch-query.c) and one GROUP BY over their profiles' rows.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "port/log.h"
#include "store/ch/ch-query.h"
#include "store/ch/ch-store.h"

/* ---- listing -------------------------------------------------------------------------------- */

int ch__list(struct store *base, const struct store_query *q, store_entry_fn cb, void *ctx)
{
	struct ch_store *c = ch_of(base);
	struct series_sel sel = { 0 };
	struct rb sql = { 0 }, res = { 0 };
	struct rb_rd r;
	char err[300];
	int e, n = 0;

	e = ch__series(c, q, &sel, err, sizeof(err));
	if (e || !sel.n) {
		if (e)
			pr_warn("clickhouse: list: %s", err);
		free(sel.v);
		return e;
	}
	rb_printf(&sql, "SELECT id, ts, service, type, device, label_keys, label_values, value, "
		  "size, flags FROM profiles");
	sql_where_type(&sql, q);
	sql_series_in(&sql, &sel);
	rb_printf(&sql, " ORDER BY ts %s, id", q->newest_first ? "DESC" : "ASC");
	if (q->limit)
		rb_printf(&sql, " LIMIT %zu", q->limit);
	rb_printf(&sql, " FORMAT RowBinary");
	rb_put(&sql, "", 1);
	free(sel.v);
	e = sql.oom ? -ENOMEM : ch__select(c, (char *)sql.p, &res, err, sizeof(err));
	rb_free(&sql);
	if (e) {
		pr_warn("clickhouse: list: %s", err);
		return e;
	}
	r = (struct rb_rd){ res.p, res.p + res.len, false };
	while (rd_more(&r) && !e) {
		struct store_entry v = { 0 };
		char service[256], type[64], device[256];
		struct row_labels rl;

		v.seq = rd_u64(&r);
		v.time_ns = rd_u64(&r);
		rd_strcpy(&r, service, sizeof(service));
		rd_strcpy(&r, type, sizeof(type));
		rd_strcpy(&r, device, sizeof(device));
		rd_labels(&r, &rl);
		v.value = (int64_t)rd_u64(&r);
		v.size = (uint32_t)rd_u64(&r);
		v.flags = rd_u16(&r);
		if (r.bad)
			break;
		v.service = service, v.type = type, v.device = device;
		v.labels = rl.l, v.n_labels = rl.n;
		e = cb(ctx, &v);
		n++;
	}
	rb_free(&res);
	if (r.bad)
		return -EIO;
	return e < 0 ? e : n;
}

int ch__services(struct store *base, int (*cb)(void *ctx, const char *service), void *ctx)
{
	struct ch_store *c = ch_of(base);
	struct rb res = { 0 };
	struct rb_rd r;
	char err[300];
	int e = ch__select(c, "SELECT DISTINCT service FROM profiles ORDER BY service "
			   "FORMAT RowBinary", &res, err, sizeof(err));

	if (e) {
		pr_warn("clickhouse: services: %s", err);
		return e;
	}
	r = (struct rb_rd){ res.p, res.p + res.len, false };
	while (rd_more(&r) && !e) {
		char service[256];

		rd_strcpy(&r, service, sizeof(service));
		if (!r.bad)
			e = cb(ctx, service);
	}
	rb_free(&res);
	return r.bad ? -EIO : e;
}

/* ---- timeline ------------------------------------------------------------------------------ */

/* The totals per time bucket, summed by ClickHouse over the matching series' profile rows. */
int ch__timeline(struct store *base, const struct store_query *q, uint64_t from_ns,
		 uint64_t step_ns, size_t n, int64_t *values, size_t *profiles)
{
	struct ch_store *c = ch_of(base);
	struct series_sel sel = { 0 };
	struct rb sql = { 0 }, res = { 0 };
	struct rb_rd r;
	char err[300];
	int e;

	*profiles = 0;
	e = ch__series(c, q, &sel, err, sizeof(err));
	if (e || !sel.n) {
		if (e)
			pr_warn("clickhouse: timeline: %s", err);
		free(sel.v);
		return e;
	}
	rb_printf(&sql, "SELECT intDiv(ts - %" PRIu64 ", %" PRIu64 ") AS b, sum(value), count() "
		  "FROM profiles", from_ns, step_ns);
	sql_where_type(&sql, q);
	rb_printf(&sql, " AND ts >= %" PRIu64, from_ns);
	sql_series_in(&sql, &sel);
	rb_printf(&sql, " GROUP BY b FORMAT RowBinary");
	rb_put(&sql, "", 1);
	free(sel.v);
	e = sql.oom ? -ENOMEM : ch__select(c, (char *)sql.p, &res, err, sizeof(err));
	rb_free(&sql);
	if (e) {
		pr_warn("clickhouse: timeline: %s", err);
		return e;
	}
	r = (struct rb_rd){ res.p, res.p + res.len, false };
	while (rd_more(&r)) {
		uint64_t b = rd_u64(&r);
		int64_t v = (int64_t)rd_u64(&r);
		uint64_t k = rd_u64(&r);

		if (!r.bad && b < n) {
			values[b] += v;
			*profiles += k;
		}
	}
	rb_free(&res);
	return r.bad ? -EIO : 0;
}
