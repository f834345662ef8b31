/* SPDX-License-Identifier: MIT */
/*
 * store/store-int.h — what the store's backends share with its front (store/store.c), and nobody
 * else: the table of operations every backend fills, the struct store they all start with, the
 * backends' counters, and their open functions. curl's vtls_int.h: callers see store/store.h.
 *
 * Included by store/store.c, the backends (store/ring/, store/ch/), and
 * the tests and drivers that check a backend's own counters.
 */
#ifndef EDGEPROF_STORE_STORE_INT_H
#define EDGEPROF_STORE_STORE_INT_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "port/ringfile.h"
#include "pprof/pprof.h"
#include "store/query/selector.h"
#include "store/rules/metrics-rules.h"
#include "store/store.h"

/* The ClickHouse backend's counters. */
struct store_ch_stats {
	uint64_t batches, insert_errors;	/* batches in; INSERTs that failed (retried) */
	uint64_t refused_full, ack_timeouts;	/* puts refused: queue full; not in in time */
	uint64_t queued_bytes, queue_capacity;
	uint64_t sample_rows, stack_rows;	/* rows queued */
	uint64_t intern_resets;			/* id sets cleared when full */
	uint64_t partitions_dropped;		/* days dropped by retention */
	uint64_t rollup_dirty_hours;		/* hours merges read raw (rollup short) */
	uint64_t rollup_failures;		/* rollup rows not built or not sent */
	uint64_t daily_sides;			/* comparison sides read from samples_1d */
	uint64_t backfill_days, backfill_failures; /* --ch-backfill-days: days served; tries */
	uint64_t backfill_ms;			/* the time its attempts took */
	bool reachable;				/* the last INSERT (or the schema) went in */
	bool schema_pending;			/* started while ClickHouse was down */
	char last_error[300];
	bool spool;				/* --ch-spool: */
	uint64_t spool_pending, spool_capacity;	/* bytes not yet in ClickHouse; bound */
	uint64_t spool_spilled, spool_replayed;	/* uploads whose rows were read back */
	uint64_t spool_refused, spool_lost;	/* refused: spool full; lost: unreadable */
	uint64_t waits, wait_timeouts, wait_ns;	/* uploads that waited for room; in vain */
	uint64_t waiting;			/* waiting now */
};

/* The ring backend's index (store/ring/index.h), reported through the front's stats. */
struct index_stats {
	size_t entries, max_entries;
	size_t strings, labelsets;	/* interned */
	size_t mem_bytes;		/* heap bytes held by the index (tables + strings) */
	uint64_t dropped;		/* entries dropped because the index was full */
	uint64_t evicted;		/* entries removed because the ring overwrote them */
};

struct store_stats {
	enum store_backend backend;
	struct store_ch_stats ch;
	struct ringfile_stats ring;
	struct index_stats index;
	uint64_t puts, duplicates, put_errors;
	uint64_t merges, merge_skipped;
	uint64_t rollups_built, rollups_dropped;	/* by the compactor; dropped = failed */
	uint64_t rollups_read, rollups_stale;	/* by merges; stale: merged from raws */
	uint64_t rollup_build_ns;		/* compactor thread CPU time */
};
/* The backend's counters (store__metrics() exports them; tests check them directly). */
void store__stats(struct store *s, struct store_stats *st);

struct store_ops {
	const char *name;
	bool uses_decoded;	/* put() uses a decoded profile (decodes one itself without) */
	/*
	 * put() only sums samples by stack: the decoded profile may have samples that differ
	 * only in their values merged (pprof_read_limits.merge_samples; they sum alike for the
	 * metrics rules too, as merging is off when a value is negative)
	 */
	bool merges_samples;
	int (*put)(struct store *s, const struct record_meta *meta, const void *payload,
		   size_t len, const struct pprof_profile *decoded, uint64_t *seq_out,
		   bool *duplicate);
	int (*get)(struct store *s, uint64_t seq, struct record_meta *meta, void **payload,
		   size_t *len);
	int (*list)(struct store *s, const struct store_query *q, store_entry_fn cb, void *ctx);
	int (*services)(struct store *s, int (*cb)(void *ctx, const char *service), void *ctx);
	/* optional: NULL = from list() */
	int (*timeline)(struct store *s, const struct store_query *q, uint64_t from_ns,
			uint64_t step_ns, size_t n, int64_t *values, size_t *profiles);
	int (*merge)(struct store *s, const struct store_query *q, struct pprof_profile **out,
		     size_t *n_merged, size_t *skipped, char *err, size_t errlen);
	/* optional: NULL = -EOPNOTSUPP (store__sum_by_device) */
	int (*sum_by_device)(struct store *s, const struct store_query *q,
			     const struct store_sums_fns *fn, void *ctx, size_t *n_profiles,
			     size_t *skipped, char *err, size_t errlen);
	int (*read_profile)(struct store *s, uint64_t seq, const struct pprof_budget *b,
			    struct pprof_profile **p, char *err, size_t errlen);
	int (*merge_seqs)(struct store *s, const uint64_t *seqs, size_t n,
			  const struct pprof_budget *b, struct pprof_profile **out, char *err,
			  size_t errlen);
	void (*stats)(struct store *s, struct store_stats *st);
	void (*free)(struct store *s);
};

/* What every backend's own struct starts with. */
struct store {
	const struct store_ops *ops;
	struct metrics_rules *rules;	/* set by store__open() */
};

/* The ring-file backend (store/ring/store-ring.c). */
struct store *store_ring__open(const struct store_opts *opts, char *err, size_t errlen);

/* The ClickHouse backend (store/ch/store-ch.c). */
#ifdef CONFIG_COLLECTOR_CLICKHOUSE
struct store *store_ch__open(const struct store_opts *opts, char *err, size_t errlen);
#else
static inline struct store *store_ch__open(const struct store_opts *opts, char *err,
					   size_t errlen)
{
	(void)opts;
	snprintf(err, errlen, "store: this collector was built without ClickHouse "
		 "(CONFIG_COLLECTOR_CLICKHOUSE)");
	errno = ENOTSUP;
	return NULL;
}
#endif /* CONFIG_COLLECTOR_CLICKHOUSE */

#endif /* EDGEPROF_STORE_STORE_INT_H */
