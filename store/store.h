/* SPDX-License-Identifier: MIT */
/*
 * store/store.h — the collector's store, as its callers (api, server, main, tests) see it: one
 * opaque struct store and its store__ functions. Backends sit behind a table of operations
 * (curl's vtls shape) in store/store-int.h, which only the backends and store/store.c include;
 * only store/store.c calls the table. The backend is chosen when the store is opened.
 *
 *   ingest     store__put()            one validated profile; returns once durable (then ack)
 *   by id      store__get(), store__read_profile(), store__merge_seqs()
 *   select     store__list(), store__services()   by selector (labels), type and time range
 *   merge      store__merge()          the selection as one decoded pprof
 *   render     top, flame, folded and diff are computed from that merged pprof, for every
 *              backend (store/api/render.c, tools/cli): a backend answers "merge", and whatever it
 *              aggregates itself (a ClickHouse GROUP BY stack) arrives as that pprof
 *   retention  the ring file retains by size (oldest overwritten, ringfile_stats says how far
 *              back it reaches); ClickHouse by age (store_opts.retention_days: whole days
 *              dropped); store__metrics() says what each backend holds
 *
 * Backends: the ring file (store/ring/store-ring.c: port/ringfile + store/index + rollups), the
 * default, and nothing outside it touches the ring's or the index's functions; ClickHouse
 * (store/ch/store-ch.c): profiles decoded into rows, stacks interned, merges aggregated there.
 *
 * Thread-safe: every operation may be called from any thread.
 */
#ifndef EDGEPROF_STORE_STORE_H
#define EDGEPROF_STORE_STORE_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "port/ringfile.h"
#include "pprof/pprof.h"

struct metrics_rules;
struct selector;

/* Profile metadata is the ring's record_meta (port/ringfile.h) for every backend. */
#define STORE_MAX_LABELS	RINGFILE_MAX_LABELS
#define STORE_F_CLOCK_UNSET	RINGFILE_F_CLOCK_UNSET

/* A read-only view of one stored profile, as a listing hands it out, whatever the backend;
 * its strings are valid only during the callback. */
struct store_entry {
	uint64_t seq;		/* the profile's id */
	uint64_t time_ns;
	uint32_t size;		/* payload bytes */
	uint16_t flags;		/* the record's flags (RINGFILE_F_*, STORE_F_*) */
	const char *service, *type, *device;
	const struct record_label *labels; /* sorted by key */
	size_t n_labels;
	int64_t value;		/* the profile's total (record_meta.value) */
	uint32_t weight_milli;	/* its duty weight, x 1000, to apply to its values when read
				 * (the ring's; 0: none, or ClickHouse's, applied at ingest) */
};

/* Called once per entry of a listing; a nonzero return stops it and is returned. */
typedef int (*store_entry_fn)(void *ctx, const struct store_entry *e);

enum store_backend {
	STORE_RING,		/* the ring file (default) */
	STORE_CLICKHOUSE,	/* ClickHouse over HTTP (store/ch/store-ch.c, COLLECTOR_CLICKHOUSE) */
};

/* The ring's rollup compactor's knobs (store/ring/rollup.h); 0 = the Kconfig default. */
struct rollup_opts {
	unsigned bucket_s;	/* CONFIG_COLLECTOR_ROLLUP_BUCKET_S */
	unsigned grace_s;	/* wait after a bucket's end before rolling it up */
	unsigned poll_ms;	/* how often the compactor looks for closed buckets */
	size_t max_pending;	/* CONFIG_COLLECTOR_ROLLUP_MAX_PENDING: rollups built per pass */
	/*
	 * What the compactor's decodes and merges may take (NULL = no bound): the collector's
	 * memory budget, as a query's; a build it refuses is counted dropped (queries then merge
	 * the raws, under their own budget).
	 */
	const struct pprof_budget *budget;
};

/*
 * What the command line sets. The ClickHouse fields are plain values (no ClickHouse type
 * leaks): they stay flat here, read by store/ch/store-ch.c as they are.
 */
struct store_opts {
	enum store_backend backend;
	const char *path;	/* ring file */
	uint64_t size;		/* bytes (0 = the file's, or CONFIG_COLLECTOR_RING_MB) */
	unsigned fsync_ms;	/* CONFIG_COLLECTOR_FSYNC_MS */
	size_t index_entries;	/* 0 = CONFIG_COLLECTOR_INDEX_ENTRIES */
	size_t max_merge;	/* profiles per merge/get query; 0 = STORE_DEFAULT_MAX_MERGE */
	bool quiet;
	struct rollup_opts rollup; /* bucket_s 0 = no rollups */
	const char *clickhouse;	/* STORE_CLICKHOUSE: http://HOST:PORT/DATABASE */
	unsigned ch_batch_ms;	/* 0 = CONFIG_COLLECTOR_CH_BATCH_MS */
	unsigned retention_days; /* STORE_CLICKHOUSE: drop days older than this (0 = keep) */
	struct metrics_rules *rules; /* NULL, or counters evaluated by store__ingest (not owned) */
	const char *ch_spool;	/* STORE_CLICKHOUSE: the durable queue's ring file (NULL: none),
				 * of size bytes when created (0: CONFIG_COLLECTOR_CH_SPOOL_MB) */
	size_t ch_queue_bytes;	/* rows held in memory (0: CONFIG_COLLECTOR_CH_QUEUE_MB) */
	const char *ch_cluster;	/* a cluster of ClickHouse's remote_servers: the tables are
				 * Distributed over <name>_local tables on each shard */
	const char *ch_shard_urls; /* retention's HTTP URLs of the cluster's servers, comma-
				    * separated (NULL: system.clusters' hosts, our port) */
	bool ch_no_rollup;	/* merges read raw sample rows only (--rollup-seconds 0) */
	unsigned ch_backfill_days; /* fill samples_1d for up to this many ended days back (0: no) */
	const char *ch_rollup_without; /* label keys a rollup group leaves out, comma-separated
					* (NULL: CONFIG_COLLECTOR_CH_ROLLUP_WITHOUT) */
};

#define STORE_DEFAULT_MAX_MERGE 10000

struct store;

/*
 * Opens the backend (the ring: opens or creates it, scans it and rebuilds the index).
 * NULL + errno + a message in err on error.
 */
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
/*
 * The ingest path of every API: the same when the caller decoded the payload already (it
 * validated it), and the metrics rules (store_opts.rules, store/rules/metrics-rules.h) evaluated on p
 * here, for every backend, counted once the profile is stored (not for a duplicate). Takes p
 * (NULL: no rules evaluated) and frees it; before the put when the backend does not use a
 * decoded profile (the ring's fsync wait should not hold one), else after it (ClickHouse turns
 * it into rows).
 */
int store__ingest(struct store *s, const struct record_meta *meta, const void *payload,
		  size_t len, struct pprof_profile *p, uint64_t *seq_out, bool *duplicate);
/* Whether store__ingest() takes p decoded with pprof_read_limits.merge_samples. */
bool store__merges_samples(const struct store *s);

/*
 * One stored profile by seq (the profile id of the API), as uploaded: 0, -ENOENT (not stored,
 * or overwritten), -EIO (damaged). *payload is malloc'd and also holds meta's strings.
 */
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
	/*
	 * merge: what it may spend (NULL = no bound): the memory of its decodes, merge tables and
	 * merged profile asked before it is allocated, and a deadline; past either it stops
	 * (-EFBIG / -EAGAIN / -ETIMEDOUT, err says which) and nothing is returned. The merged
	 * profile stays charged: the caller gives back pprof_profile__mem() when done with it.
	 */
	const struct pprof_budget *budget;
};

/*
 * Calls cb for each matching entry (under the store's lock: cb must not call into s; copy what
 * it needs). Returns the number of entries passed to cb, or cb's nonzero return (< 0).
 */
int store__list(struct store *s, const struct store_query *q, store_entry_fn cb, void *ctx);

/*
 * The selection's totals (store_entry.value) per time bucket: values[i] gets the sum over the
 * profiles whose time is in [from_ns + i * step_ns, from_ns + (i + 1) * step_ns), *profiles
 * how many fell in a bucket. Returns 0 or -errno. (The ring walks its index; ClickHouse
 * aggregates.)
 */
int store__timeline(struct store *s, const struct store_query *q, uint64_t from_ns,
		    uint64_t step_ns, size_t n, int64_t *values, size_t *profiles);

/* Distinct services, sorted (under the lock as store__list). */
int store__services(struct store *s, int (*cb)(void *ctx, const char *service), void *ctx);

/*
 * Merges every profile matching q into one decoded profile (write it with
 * pprof_write_profile()), reading rollups for whole buckets (store/ring/rollup.h) and decoding on
 * worker threads. Errors: -ENOENT "no profiles match", -E2BIG "query matches 12000 profiles,
 * more than the limit of 10000: narrow the time range or the selector" (counting records read:
 * a rollup counts once), -EINVAL (incompatible profiles, named). A stored record that no longer
 * decodes is skipped and counted in *skipped (may be NULL). *n_merged (may be NULL) gets the
 * number of raw profiles merged (directly or through rollups).
 */
int store__merge(struct store *s, const struct store_query *q, struct pprof_profile **out,
		 size_t *n_merged, size_t *skipped, char *err, size_t errlen);

/* One row of a device's sums: a stack of the selection and its values (one per sample type). */
struct store_stack_sum {
	size_t sample;		/* the stack: its sample in the stacks profile */
	const int64_t *v;
};

/*
 * What store__sum_by_device() hands out. stacks(): once, before any device, a profile holding
 * each distinct stack of the selection once (one sample each, its values 1; the header of its
 * first series), valid until the call returns. device(): each device's sums of them (rows
 * whose values are all 0 left out), in the order of the device names; default_type: the
 * default sample type of its first series ("" none), the one a merged profile of the device
 * would carry. A nonzero return stops.
 */
struct store_sums_fns {
	int (*stacks)(void *ctx, const struct pprof_profile *stacks);
	int (*device)(void *ctx, const char *device, const char *default_type,
		      const struct store_stack_sum *rows, size_t n);
};

/*
 * q's selection summed per device (the store's device field) and stack, by the backend in one
 * pass: each device's sums are those of the samples store__merge() of the device's profiles
 * gives (the kind with the most profiles, the others counted in *skipped), without a profile
 * built per device (a regression comparison: pprof/view/regress.h). *n_profiles gets the
 * profiles summed. -EOPNOTSUPP when the backend has no such pass (the ring: read its profiles
 * one by one), -ENOENT when nothing matches, -E2BIG past the backend's bound (err says which),
 * -ETIMEDOUT past q's time bound, a callback's return.
 */
int store__sum_by_device(struct store *s, const struct store_query *q,
			 const struct store_sums_fns *fn, void *ctx, size_t *n_profiles,
			 size_t *skipped, char *err, size_t errlen);

/*
 * Reads and decodes one stored profile: 0, -ENOENT (not stored), -EIO (does not decode), or
 * b's refusal (store_query.budget; b NULL = none: free it with pprof_profile__free_budget()).
 */
int store__read_profile(struct store *s, uint64_t seq, const struct pprof_budget *b,
			struct pprof_profile **p, char *err, size_t errlen);

/*
 * Merges the given seqs (GET /api/0/profiles/<id1>+<id2>) under b (as store_query.budget);
 * -ENOENT names the missing id.
 */
int store__merge_seqs(struct store *s, const uint64_t *seqs, size_t n, const struct pprof_budget *b,
		      struct pprof_profile **out, char *err, size_t errlen);

/*
 * The backend's health for GET /healthz, one line into buf (empty for the ring): ClickHouse
 * reachable, or not and what happens to uploads meanwhile (the spool takes them). Returns
 * false when uploads are refused now (ClickHouse down and no spool).
 */
bool store__health(struct store *s, char *buf, size_t len);

/* The metrics rules the store evaluates (store_opts.rules): NULL when none. */
struct metrics_rules *store__rules(const struct store *s);

/*
 * One of the store's counters or gauges, as GET /metrics exports it
 * (edgeprof_collector_<name>): what each backend holds, without its types.
 */
struct store_metric {
	const char *name;
	const char *type;	/* "counter" or "gauge" */
	const char *help;
	uint64_t value;
	bool ns_as_s;		/* value in ns, exported as seconds with 3 decimals */
};

enum store_metrics_part {
	STORE_METRICS_BACKEND,	/* the backend's own: the ring and index, or ClickHouse */
	STORE_METRICS_MERGES,	/* merges and rollups, any backend */
};

/* Calls cb for each metric of one part (in a fixed order). */
void store__metrics(struct store *s, enum store_metrics_part part,
		    void (*cb)(void *ctx, const struct store_metric *m), void *ctx);

#endif /* EDGEPROF_STORE_STORE_H */
