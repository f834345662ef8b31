/* SPDX-License-Identifier: MIT */
/*
 * store/ch/ch-daily.h — the per-device daily rollup, samples_1d (ch-daily.c): its tables, and
 * the rows a regression comparison's side sums from it.
 */
#ifndef EDGEPROF_STORE_CH_DAILY_H
#define EDGEPROF_STORE_CH_DAILY_H

#include "store/ch/ch-store.h"

/* samples_1d and samples_1d_since when missing (one server): 0 or -errno with err. */
int ch_daily__schema(struct ch_conn *conn, char *err, size_t errlen);
/*
 * " FROM (...)" of rows (series, stack, v0..v{nt-1}) whose sums by (series, stack) are q's
 * samples of kind sig (filtered by in, " AND series IN ..." or ""): the whole days of q's
 * range that samples_1d serves (from samples_1d_since on, no dirty hour) from it, the rest
 * raw. false (nothing written) when it serves none of them: read raw.
 */
bool ch_daily__from(struct ch_store *c, struct rb *b, const struct store_query *q,
		    const char *in, uint64_t sig, size_t nt);

#endif /* EDGEPROF_STORE_CH_DAILY_H */
