/* SPDX-License-Identifier: MIT */
/*
 * store/ch/ch-query.h — what the ClickHouse backend's reads share between ch-query.c (merges,
 * profiles by id) and ch-list.c (listings, timelines): the series a selector picked, and the
 * labels of a result row.
 */
#ifndef EDGEPROF_STORE_CH_QUERY_H
#define EDGEPROF_STORE_CH_QUERY_H

#include "store/ch/ch-store.h"

/* A selected series: which selector-matching (series, sig) the query covers. */
struct series_row {
	uint64_t series, sig, count, first_ts;
	uint64_t grp;			/* its rollup group (ch__group_of; 0: unknown) */
	char st[512], su[512], default_type[64], period_type[64], period_unit[64];
	int64_t period, duration;
	int64_t time_nanos;
	uint64_t main_mapping;		/* the profiles' first mapping: the main binary */
	char comments[1024];		/* '\n'-separated, deduplicated */
	char device[256];		/* the store's device field (sums by device) */
	uint32_t dev;			/* sums by device: its device's index */
};

struct series_sel {
	struct series_row *v;
	size_t n, cap;
	bool every;		/* every series in the time range matched (type and selector) */
	bool whole_groups;	/* its series' groups hold no series of the range left out */
};

/* The labels of a result row, into NUL-terminated copies (freed with the row). */
struct row_labels {
	struct record_label l[STORE_MAX_LABELS];
	char buf[8192];
	size_t n;
};

/* A result row's labels, read into rl (r->bad on a short row). */
void rd_labels(struct rb_rd *r, struct row_labels *rl);
/* The (series, sig) pairs in q's time range whose series matches q's selector: 0 or -errno. */
int ch__series(struct ch_store *c, const struct store_query *q, struct series_sel *out,
	       char *err, size_t errlen);
/* " AND series IN (a,b,...)", nothing when every series in the range matched. */
void sql_series_in(struct rb *b, const struct series_sel *s);

#endif /* EDGEPROF_STORE_CH_QUERY_H */
