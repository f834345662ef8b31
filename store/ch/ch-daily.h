/* SPDX-License-Identifier: MIT */
/*
 * store/ch/ch-daily.h — the per-device daily rollup, samples_1d (ch-daily.c): its tables, and
 * the rows a regression comparison's side sums from it.
 */
#ifndef EDGEPROF_STORE_CH_DAILY_H
#define EDGEPROF_STORE_CH_DAILY_H

#include "store/ch/ch-store.h"

/*
 * samples_1d and samples_1d_since when missing (--ch-cluster: this shard's _local tables, the
 * view that fills them, the Distributed tables): 0 or -errno with err.
 */
int ch_daily__schema(struct ch_store *c, struct ch_conn *conn, char *err, size_t errlen);
/* day (days since 1970) as 'YYYY-MM-DD', quoted (18.16 compares a Date with a string). */
void ch_day_str(char *s, size_t n, uint64_t day);
/*
 * The first day samples_1d serves on the server conn talks to (its samples_1d_since, or
 * samples_1d_since_local in a cluster): 0 and *day, or -errno with err (-ENOENT: none).
 */
int ch_daily__server_since(struct ch_store *c, struct ch_conn *conn, uint64_t *day, char *err,
			   size_t errlen);
/* That server's samples_1d serves day from now on (a row of its since table): 0 or -errno. */
int ch_daily__serve_from(struct ch_store *c, struct ch_conn *conn, uint64_t day, char *err,
			 size_t errlen);
/*
 * " FROM (...)" of rows (series, stack, v0..v{nt-1}) whose sums by (series, stack) are q's
 * samples of kind sig (filtered by in, " AND series IN ..." or ""): the whole days of q's
 * range that samples_1d serves (from samples_1d_since on, no dirty hour) from it, the rest
 * raw. false (nothing written) when it serves none of them: read raw.
 */
bool ch_daily__from(struct ch_store *c, struct rb *b, const struct store_query *q,
		    const char *in, uint64_t sig, size_t nt);

/* ---- store/ch/ch-backfill.c (--ch-backfill-days) ---- */

/*
 * The backfill thread (arg: the store): fills samples_1d on the server this collector talks
 * to for the ended days before it serves, newest first, each day in one statement, up to
 * c->backfill_days back, then ends.
 */
void *ch_backfill__run(void *arg);
/* At shutdown (c->stop set): stops the running statement, joins the thread. */
void ch_backfill__stop(struct ch_store *c);

#endif /* EDGEPROF_STORE_CH_DAILY_H */
