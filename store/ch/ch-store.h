/* SPDX-License-Identifier: MIT */
/*
 * store/ch/ch-store.h — what the ClickHouse backend's files share (store/ch/store-ch.c lists
 * them; each calls only the ones below it there). Internal: nothing else includes it.
 */
#ifndef EDGEPROF_STORE_CH_STORE_H
#define EDGEPROF_STORE_CH_STORE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/ch/ch-client.h"
#include "store/store-int.h"

#ifndef CONFIG_COLLECTOR_CH_BATCH_KB
#define CONFIG_COLLECTOR_CH_BATCH_KB 4096
#endif
#ifndef CONFIG_COLLECTOR_CH_BATCH_MS
#define CONFIG_COLLECTOR_CH_BATCH_MS 500
#endif
#ifndef CONFIG_COLLECTOR_CH_QUEUE_MB
#define CONFIG_COLLECTOR_CH_QUEUE_MB 256
#endif
#ifndef CONFIG_COLLECTOR_CH_ACK_MS
#define CONFIG_COLLECTOR_CH_ACK_MS 20000
#endif
#ifndef CONFIG_COLLECTOR_CH_WAIT_MS
#define CONFIG_COLLECTOR_CH_WAIT_MS 5000
#endif
#ifndef CONFIG_COLLECTOR_CH_INTERN_ENTRIES
#define CONFIG_COLLECTOR_CH_INTERN_ENTRIES 1048576
#endif
#ifndef CONFIG_COLLECTOR_CH_SPOOL_MB
#define CONFIG_COLLECTOR_CH_SPOOL_MB 1024
#endif
#ifndef CONFIG_COLLECTOR_CH_KEEP_MB
#define CONFIG_COLLECTOR_CH_KEEP_MB 512
#endif
#ifndef CONFIG_COLLECTOR_CH_MAX_DEVICE_STACKS
#define CONFIG_COLLECTOR_CH_MAX_DEVICE_STACKS 8000000
#endif
#ifndef CONFIG_COLLECTOR_CH_BACKFILL_SECONDS
#define CONFIG_COLLECTOR_CH_BACKFILL_SECONDS 3600
#endif
#ifndef CONFIG_COLLECTOR_CH_MAX_STACKS
#define CONFIG_COLLECTOR_CH_MAX_STACKS 1000000
#endif

#define CH_DROPPED_GENS	8		/* batches dropped (out of memory) remembered */
#define CH_REPLAY_AHEAD	2		/* batches built from the spool ahead of the writer */
/* A batch is sealed at this many sample rows too: one INSERT stays one block of ClickHouse's
 * max_insert_block_size (CH_INSERT_SETTINGS), so atomic, with room for the profile that crosses
 * it. */
#define CH_BATCH_ROWS	1000000
#define CH_INSERT_SETTINGS "max_insert_block_size=2097152"
#define CH_MAX_SERIES	1000000		/* series one query may select */
#define CH_ROLLUP_NS	UINT64_C(3600000000000)	/* the rollups' bucket: an hour */
#define CH_GROUP_WITHOUT_LEN 256	/* the rollup group's rule: label keys, ","-separated */
/* How far from its first upload's time a retried key is looked for (ns): a day. */
#define CH_KEY_WINDOW_NS UINT64_C(86400000000000)
#define CH_ROLLUP_VALUES 4			/* its value columns (v0..v3) */
/* The writer's kept buffers (struct ch_scratch) are freed after this long without a batch. */
#define CH_KEEP_IDLE_NS	(10 * UINT64_C(1000000000))
#define CH_QUERY_SETTINGS "max_query_size=268435456&max_execution_time=60"

enum ch_table { T_FUNCTIONS, T_MAPPINGS, T_LOCATIONS, T_STACKS, T_SAMPLES, T_PROFILES, T__N };

/* Ids already sent (open addressing, 0 = empty); grows to max slots, cleared when 3/4 full. */
struct idset {
	uint64_t *v;
	size_t cap, max, n;
	uint64_t resets;
};

/* Idempotency keys seen (hash of the key -> profile id, batch): bounded like the id sets. */
struct keyent {
	uint64_t kh, id, gen;
};

struct keymap {
	struct keyent *v;
	size_t cap, n;
};

/* One profile's rows in a batch (offsets into the samples and profiles bodies). */
struct pmark {
	uint64_t id, series, ts;
	uint64_t grp;		/* its rollup group (ch__group_of) */
	size_t s_off, s_len, p_off, p_len;
	bool keyed;		/* has an idempotency key: its id is the key's */
	bool replay;		/* read back from the spool: its samples may be there */
};

struct ch_batch {
	struct rb rows[T__N];
	size_t n_profiles, bytes, n_rows;	/* n_rows: sample rows */
	uint64_t gen;
	uint64_t first_seq, last_seq;	/* its records in the spool (0: none) */
	size_t spool_bytes;		/* their bytes there */
	int stage;		/* the next table to insert */
	bool ambiguous;		/* the last INSERT failed in a way that may have applied it */
	bool deduped;		/* keyed profiles looked up (batch__check) */
	bool dirty;		/* its hours go to rollup_dirty before its samples (again) */
	bool rolled;		/* its rollup rows are in samples_1g, or their hours marked */
	bool rollup_failed;	/* an INSERT of them failed: their hours are marked instead */
	uint64_t id;		/* random: its rows in rollup_pending */
	enum { CH_INTENT_NONE, CH_INTENT_PENDING, CH_INTENT_DONE } intent;
	struct pmark *marks;	/* where each profile's rows are */
	size_t n_marks, cap_marks;
	struct ch_batch *next;
};

/*
 * The writer's working buffers, kept from one batch to the next within
 * CONFIG_COLLECTOR_CH_KEEP_MB: each is about a batch's size, and allocated for every batch
 * they were fresh pages every time (mmap'd, faulted in page by page, zeroed by the kernel,
 * unmapped: 40 page faults per 20 KB profile in tests/bench/fleet-bench.sh). Only the
 * writer thread touches them (ch_rollup__build is its, too).
 */
struct ch_scratch {
	struct rb rrows;	/* the rollup's rows */
	struct rb slots;	/* the rollup's hash table, a key's stacks (ch-rollup.c) */
	struct rb native;	/* the samples' Native block; then the rollup's */
	struct rb seg, key;	/* the samples' order (batch__order), then the rollup's; its keys */
};

struct ch_store {
	struct store base;
	struct ch_opts o;
	pthread_mutex_t lock;
	pthread_cond_t wake, done, refill;
	pthread_t writer, replayer, backfiller;
	bool writer_started, replayer_started, backfiller_started, stop;
	pthread_cond_t backfill_wake;	/* the backfill's sleeps: broadcast at stop */
	unsigned backfill_days;		/* --ch-backfill-days (0: none) */
	char backfill_id[96];		/* its statements' query_id: "edgeprof-backfill-DB" */
	char backfill_settings[48];	/* their bound: max_execution_time=... */
	struct ch_batch *open;		/* being filled */
	uint64_t open_since;		/* mono ns of its first profile */
	struct ch_batch *head, *tail;	/* sealed, in order */
	struct ch_batch *spare;		/* a sent batch's emptied buffers, for the next one */
	struct ch_scratch scratch;	/* the writer's */
	size_t keep_bytes;		/* CONFIG_COLLECTOR_CH_KEEP_MB: spare + scratch, at most */
	uint64_t last_sent_ns;		/* mono ns: kept buffers are freed when idle */
	size_t queued_bytes;		/* sealed + open */
	uint64_t next_gen, done_gen;	/* batches with gen <= done_gen are in ClickHouse */
	struct idset fns, maps, locs, stacks;
	struct keymap keys;
	/*
	 * --ch-spool: the durable queue (store/ch/ch-spool.c). Every upload is appended and acked
	 * once durable; its rows go to the memory batches unless the memory queue is full (or a
	 * batch was dropped), then records spill_from..spill_to are read back from the spool
	 * and replayed, in order, before new uploads go to memory again. A batch in ClickHouse
	 * consumes its records.
	 */
	struct ringfile *spool;
	const struct ch_batch_ops *batch_ops;	/* the spool's way back to the batches */
	uint64_t spill_from, spill_to;	/* records whose rows are not in memory (0: none) */
	uint64_t spool_boot_last;	/* the last record at open: those up to it may be in */
	size_t spool_pending;		/* bytes of unconsumed records */
	size_t spool_capacity, spool_max_rec;
	uint64_t spool_spilled, spool_replayed, spool_refused, spool_lost;
	size_t batch_bytes, queue_bytes;
	unsigned batch_ms, ack_ms;
	/*
	 * Back-pressure: while ClickHouse takes batches (ch_ok: the last INSERT went in), an
	 * upload that finds the memory queue full waits up to wait_ms for room (ch__wait_room)
	 * instead of spilling or being refused, so clients slow to ClickHouse's rate.
	 */
	bool ch_ok;
	/*
	 * ClickHouse did not answer at start and --ch-spool is set: the collector started on
	 * the spool alone, and the writer creates the schema once ClickHouse answers (before any
	 * batch goes in). Set at open, cleared by the writer (lock held).
	 */
	bool schema_pending;
	unsigned wait_ms;		/* CONFIG_COLLECTOR_CH_WAIT_MS (0: never wait) */
	unsigned waiting;		/* uploads waiting for room now */
	uint64_t waits, wait_timeouts, wait_ns;
	unsigned retention_days;	/* 0: keep everything */
	char cluster[64];		/* --ch-cluster ("": one server) */
	char *shard_urls;		/* --ch-shard-urls (NULL: from system.clusters) */
	bool no_rollup;			/* --rollup-seconds 0: merges read raw rows only */
	bool samples_hour;		/* samples has hour, first in its key (not --ch-cluster) */
	bool own_rollup;		/* one server: this collector sums the rollup (samples_1g);
					 * --ch-cluster: a view fills samples_1h */
	char group_without[CH_GROUP_WITHOUT_LEN]; /* own_rollup: the database's rule, the labels
						   * a rollup group leaves out ("a,b,...") */
	char last_error[300];
	/* counters */
	uint64_t puts, duplicates, put_errors, refused_full, ack_timeouts;
	uint64_t batches, insert_errors, rows[T__N], merges, merge_skipped;
	uint64_t partitions_dropped;
	uint64_t rollup_merges;		/* merges that read samples_1h or samples_1g */
	uint64_t daily_sides;		/* comparison sides that read samples_1d */
	uint64_t backfill_days_done;	/* days the backfill filled and served */
	uint64_t backfill_failures;	/* its attempts that failed (tried again, up to 3) */
	uint64_t backfill_ns;		/* the time its attempts took */
	uint64_t dirty_hours;		/* hours marked in rollup_dirty */
	uint64_t rollup_failures;	/* batches whose rollup rows failed: hours marked */
	uint64_t retries_found;		/* batches with uploads ClickHouse held already */
	uint64_t dropped_gen[CH_DROPPED_GENS];	/* batches dropped unsent (out of memory) */
	unsigned n_dropped;
};

/* One profile's rows, built outside the lock (store/ch/ch-rows.c). */
struct put_rows {
	struct rb samples, profile;
	uint64_t *stack_ids;
	struct profile_ids {
		uint64_t *fn, *map, *loc;	/* by pprof id - 1 */
	} ids;
	size_t n_samples;
	size_t *first, n_distinct;	/* the first sample of each distinct stack */
};

/* Where a profile's rows come from: its id, its spool record (seq 0: none). */
struct ch_put {
	uint64_t id, seq;
	size_t spool_bytes;
	bool lookup;		/* look its id up in ClickHouse first (a replay after a restart) */
};

static inline struct ch_store *ch_of(struct store *base)
{
	return (struct ch_store *)base;
}

/*
 * How the store decodes an upload (when the API did not, and a spilled one): its rows sum
 * samples by stack, so samples that differ only in their values are merged at once.
 */
static const struct pprof_read_limits ch_read_limits = { .merge_samples = true };

/* A string as RowBinary holds it (not terminated). */
struct ch_str {
	const char *p;
	size_t n;
};

/* ---- store/ch/ch-rows.c ---- */

int ch__rows_build(const struct record_meta *m, const struct pprof_profile *p, size_t len,
		   uint64_t id, struct put_rows *r);
void ch__rows_free(struct put_rows *r);
/* The dictionary rows this profile needs and this collector has not sent (lock held). */
void ch__rows_dict(struct ch_store *c, struct ch_batch *bt, const struct pprof_profile *p,
		   const struct put_rows *r);
/* A series: a hash of its service, type, device and labels. */
uint64_t ch__series_of(const struct record_meta *m);
/*
 * The rollup group of a series (store/README.md "How it works"): a hash of its service, type
 * and labels but those whose key is in without ("a,b,..."): the device's identity (its
 * certificate) is never in it. label[2i] is a key, label[2i + 1] its value.
 */
uint64_t ch__group_of(const char *without, struct ch_str service, struct ch_str type,
		      const struct ch_str *label, size_t n_labels);
uint64_t ch__group_of_meta(const char *without, const struct record_meta *m);
/* An idempotency key's hash; a profile's id (from its device and key, when it has one). */
uint64_t ch__key_hash(const struct record_meta *m);
uint64_t ch__new_id(const struct record_meta *m);
int idset__init(struct idset *s, size_t max);
void idset__clear(struct idset *s);

/* ---- store/ch/ch-native.c ---- */

/*
 * The batch's samples as one Native block (one row per profile) in out, in the table's order
 * (order: the writer's buffer for it): false when out of memory or the rows do not parse.
 */
bool ch_native__samples(const struct ch_batch *b, struct rb *order, struct rb *out);
/* A whole samples body, in the order it has, as one Native block. */
bool ch__samples_block(const struct rb *rows, struct rb *out);

/* ---- store/ch/ch-schema.c ---- */

extern const char *const ch_table_names[T__N];
/* Creates the database and the tables when missing. 0 or -errno with err. */
int ch_schema__create(struct ch_store *c, char *err, size_t errlen);

/* ---- store/ch/ch-ingest.c ---- */

int ch__put(struct store *base, const struct record_meta *meta, const void *payload,
	    size_t len, const struct pprof_profile *decoded, uint64_t *seq_out, bool *duplicate);
/* Adds the rows to the open batch (lock held): 0, -ENOSPC (queue full), -ENOMEM. */
int ch__put_locked(struct ch_store *c, const struct record_meta *meta,
		   const struct pprof_profile *p, struct put_rows *r, const struct ch_put *w,
		   uint64_t *gen);
/*
 * Waits (lock held) while ClickHouse takes batches, at most CONFIG_COLLECTOR_CH_WAIT_MS, until
 * an upload's rows fit in the memory queue, nothing is spilled and (rec: its record's bytes,
 * with a spool) the spool admits it: whether they do.
 */
bool ch__wait_room(struct ch_store *c, size_t rows, size_t rec);
/* Remembers an idempotency key's profile id and batch (or spool record) (lock held). */
void ch__key_set(struct ch_store *c, uint64_t kh, uint64_t id, uint64_t gen);
/* Whether the open batch is full: CONFIG_COLLECTOR_CH_BATCH_KB or CH_BATCH_ROWS. */
static inline bool ch_batch_full(const struct ch_store *c, const struct ch_batch *b)
{
	return b->bytes >= c->batch_bytes || b->n_rows >= CH_BATCH_ROWS;
}
/* Moves the open batch to the queue of sealed ones (lock held). */
void ch__seal(struct ch_store *c);
void ch_batch__free(struct ch_batch *b);
/* A sent batch (lock held): its buffers kept for the next one, within keep_bytes. */
void ch_batch__recycle(struct ch_store *c, struct ch_batch *b);
/* After CH_KEEP_IDLE_NS without a batch sent (lock held): nothing kept. */
void ch__keep_idle(struct ch_store *c);

/* ---- store/ch/ch-writer.c ---- */

/* The writer thread (arg: the store). */
void *ch__writer(void *arg);

/* ---- store/ch/ch-spool.c (with --ch-spool) ---- */

/*
 * What the spool asks of the batches (ch-rows.c and ch-ingest.c: the ch__ functions above,
 * with their contracts), given to ch_spool__open: the batches call the spool, and the spool
 * reaches them back only through this table, so that the files do not depend on each other.
 */
struct ch_batch_ops {
	int (*rows_build)(const struct record_meta *m, const struct pprof_profile *p,
			  size_t len, uint64_t id, struct put_rows *r);
	void (*rows_free)(struct put_rows *r);
	int (*put_locked)(struct ch_store *c, const struct record_meta *meta,
			  const struct pprof_profile *p, struct put_rows *r,
			  const struct ch_put *w, uint64_t *gen);
	void (*key_set)(struct ch_store *c, uint64_t kh, uint64_t id, uint64_t gen);
	bool (*wait_room)(struct ch_store *c, size_t rows, size_t rec);
	void (*seal)(struct ch_store *c);
};

/*
 * Opens the spool and finds what was not in ClickHouse at the last stop (replayed first);
 * ops (kept) is how it puts rows into the batches.
 */
int ch_spool__open(struct ch_store *c, const struct store_opts *opts,
		   const struct ch_batch_ops *ops, char *err, size_t errlen);
/* Appends the upload, queues its rows (or spills), returns once the record is durable. */
int ch_spool__put(struct ch_store *c, const struct record_meta *meta, const void *payload,
		  size_t len, const struct pprof_profile *p, struct put_rows *r, uint64_t id,
		  uint64_t kh, uint64_t *seq);
/* Whether a record of rec bytes fits without overwriting one not yet in ClickHouse (locked). */
bool ch_spool__admits(const struct ch_store *c, size_t rec);
/* The replayer thread: builds batches from spilled records while the writer sends. */
void *ch_spool__replayer(void *arg);
/* The writer, after batch b is in ClickHouse (lock not held): its records are consumed. */
void ch_spool__done(struct ch_store *c, const struct ch_batch *b);

/*
 * store/ch/ch-rollup.c: a batch's samples_1g rows, summed by group (one server), into
 * out (its contents replaced), with s's buffers (kept: rrows, slots, seg, key).
 */
int ch_rollup__build(const struct ch_batch *b, struct ch_scratch *s, struct rb *out,
		     size_t *n_rows);
/* The same rows summed by (series, sig, day) instead: samples_1d's (ch-daily.c). */
int ch_rollup__build_daily(const struct ch_batch *b, struct ch_scratch *s, struct rb *out,
			   size_t *n_rows);
void ch_scratch__free(struct ch_scratch *s);
/* A batch was dropped unsent (lock held): its records are replayed from the spool. */
void ch_spool__respill(struct ch_store *c, const struct ch_batch *b);

/* ---- store/ch/ch-retain.c (--retention-days) ---- */

/* Checks --ch-shard-urls (NULL: none) and keeps it: 0 or -EINVAL with err. */
int ch_retain__init(struct ch_store *c, const char *urls, char *err, size_t errlen);
/* The writer (lock not held): drops the old days, on every server of a cluster. */
void ch_retain__run(struct ch_store *c, struct ch_conn *conn);

/* ---- store/ch/ch-query.c ---- */

/* Runs one SELECT on a connection of its own: 0 and the answer, or -errno with err. */
int ch__select(struct ch_store *c, const char *sql, struct rb *out, char *err, size_t errlen);
/* " WHERE" over q's time range (day partitions and ts), with its type (_type). */
void sql_where(struct rb *b, const struct store_query *q);
void sql_where_type(struct rb *b, const struct store_query *q);
/* What a reader puts after FROM samples to get a row per (profile, stack): stack and v. */
#define CH_SAMPLES_JOIN "ARRAY JOIN stacks AS stack, v"

/* sql_where for samples: with its hour (the first column of its key) when it has one. */
void sql_where_samples(struct rb *b, const struct store_query *q, bool hour);

int ch__get(struct store *base, uint64_t seq, struct record_meta *meta, void **payload,
	    size_t *len);
int ch__read_profile(struct store *base, uint64_t seq, const struct pprof_budget *b,
		     struct pprof_profile **out, char *err, size_t errlen);
int ch__merge_seqs(struct store *base, const uint64_t *seqs, size_t n,
		   const struct pprof_budget *b, struct pprof_profile **out, char *err,
		   size_t errlen);
int ch__list(struct store *base, const struct store_query *q, store_entry_fn cb, void *ctx);
int ch__services(struct store *base, int (*cb)(void *ctx, const char *service), void *ctx);
int ch__timeline(struct store *base, const struct store_query *q, uint64_t from_ns,
		 uint64_t step_ns, size_t n, int64_t *values, size_t *profiles);
int ch__merge(struct store *base, const struct store_query *q, struct pprof_profile **out,
	      size_t *n_merged, size_t *skipped, char *err, size_t errlen);
int ch__sum_by_device(struct store *base, const struct store_query *q,
		      const struct store_sums_fns *fn, void *ctx, size_t *n_profiles,
		      size_t *skipped, char *err, size_t errlen);

#endif /* EDGEPROF_STORE_CH_STORE_H */
