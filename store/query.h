/* SPDX-License-Identifier: MIT */
/*
 * store/query.h — the collector's store: a ring file plus its index, and queries over them
 * (select by selector + type + time range, read the records, merge them into one pprof).
 *
 * This is the one object the HTTP handlers use. It is thread-safe (one mutex for the index and
 * the ring; durability waits happen outside it, so a group commit serves many writers).
 */
#ifndef EDGEPROF_STORE_QUERY_H
#define EDGEPROF_STORE_QUERY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pprof/pprof.h"
#include "store/index.h"
#include "store/ringfile.h"
#include "store/rollup.h"
#include "store/selector.h"

struct store_opts {
	const char *path;	/* ring file */
	uint64_t size;		/* bytes (0 = the file's, or CONFIG_COLLECTOR_RING_MB) */
	unsigned fsync_ms;	/* CONFIG_COLLECTOR_FSYNC_MS */
	size_t index_entries;	/* 0 = CONFIG_COLLECTOR_INDEX_ENTRIES */
	size_t max_merge;	/* profiles per merge/get query; 0 = STORE_DEFAULT_MAX_MERGE */
	bool quiet;
	struct rollup_opts rollup; /* bucket_s 0 = no rollups (store/rollup.h) */
};

#define STORE_DEFAULT_MAX_MERGE 10000

struct store;

/* Opens or creates the ring, scans it and rebuilds the index. NULL + errno + message on error. */
struct store *store__open(const struct store_opts *opts, char *err, size_t errlen);
void store__free(struct store *s); /* syncs; NULL-safe */

/*
 * Stores one profile and returns once it is durable under the fsync policy (then acknowledge
 * it). When meta->key is non-empty and already stored, nothing is written, *duplicate is set
 * and *seq_out is the stored seq. The payload is stored as given (validate it before).
 * Returns 0 or -EFBIG (larger than the ring can hold), -EINVAL, -EIO.
 */
int store__put(struct store *s, const struct record_meta *meta, const void *payload, size_t len,
	       uint64_t *seq_out, bool *duplicate);

/* One stored profile by seq (the profile id of the API): as ringfile__read(). */
int store__get(struct store *s, uint64_t seq, struct record_meta *meta, void **payload,
	       size_t *len);

struct store_query {
	const struct selector *sel;	/* NULL = everything */
	const char *type;		/* NULL or "" = any type */
	uint64_t from_ns, to_ns;	/* inclusive; 0 / 0 = no bound (to_ns 0 means no upper) */
	size_t limit;			/* 0 = no limit (list); merge uses max_merge */
	bool newest_first;		/* list order (merge reads oldest first) */
	bool raw_only;			/* merge: read raw records, no rollups (benchmarks) */
	bool with_rollups;		/* list: rollup records too (the compactor) */
};

/*
 * Calls cb for each matching entry (under the store's lock: cb must not call into s; copy what
 * it needs). Returns the number of entries passed to cb, or cb's nonzero return (< 0).
 */
int store__list(struct store *s, const struct store_query *q, index_iter_fn cb, void *ctx);

/* Distinct services, sorted (under the lock as store__list). */
int store__services(struct store *s, int (*cb)(void *ctx, const char *service), void *ctx);

/*
 * Merges every profile matching q into one decoded profile (write it with
 * pprof_write_profile()), reading rollups for whole buckets (store/rollup.h) and decoding on
 * worker threads. Errors: -ENOENT "no profiles match", -E2BIG "query matches 12000 profiles,
 * more than the limit of 10000: narrow the time range or the selector" (counting records read:
 * a rollup counts once), -EINVAL (incompatible profiles, named). A stored record that no longer
 * decodes is skipped and counted in *skipped (may be NULL). *n_merged (may be NULL) gets the
 * number of raw profiles merged (directly or through rollups).
 */
int store__merge(struct store *s, const struct store_query *q, struct pprof_profile **out,
		 size_t *n_merged, size_t *skipped, char *err, size_t errlen);

/* Reads and decodes one stored profile: 0, -ENOENT (not stored), -EIO (does not decode). */
int store__read_profile(struct store *s, uint64_t seq, struct pprof_profile **p, char *err,
			size_t errlen);

/* Merges the given seqs (GET /api/0/profiles/<id1>+<id2>); -ENOENT names the missing id. */
int store__merge_seqs(struct store *s, const uint64_t *seqs, size_t n, struct pprof_profile **out,
		      char *err, size_t errlen);

struct store_stats {
	struct ringfile_stats ring;
	struct index_stats index;
	uint64_t puts, duplicates, put_errors;
	uint64_t merges, merge_skipped;
	uint64_t rollups_built, rollups_dropped;	/* by the compactor; dropped = failed */
	uint64_t rollups_read, rollups_stale;	/* by merges; stale: merged from raws */
	uint64_t rollup_build_ns;		/* compactor thread CPU time */
};
void store__stats(struct store *s, struct store_stats *st);

#endif /* EDGEPROF_STORE_QUERY_H */
