/* SPDX-License-Identifier: MIT */
/*
 * port/ringfile.h — a preallocated file written as a circular log of CRC-framed records.
 *
 * Used by the collector (one big ring, retention by size) and by the agent's offline spool
 * (a small ring on flash, drained oldest first with ringfile__consume()).
 *
 * ---- On-disk format (all integers little-endian) -------------------------------------------
 *
 *   offset 0                       RINGFILE_HDR_SIZE                             file size
 *   | header block (512 B)         | data area: records, 8-byte aligned, circular ...      |
 *
 * Header block (written once at creation, rewritten only when it had to be repaired):
 *   0  u8[8] magic "EPRING\0\1"     8 u32 format version (1)     12 u32 header block size (512)
 *   16 u64 file size                24 u64 data offset (512)     32 u32 generation (random)
 *   36 u32 reserved                 40 u64 created (unix ns)     48 u32 CRC-32C of bytes 0..47
 *   56 u64 eviction watermark       64 u32 its generation        68 u32 CRC-32C of bytes 56..67
 *   (bytes 56..71 are all zero until an append needs them: see "Eviction" below; rewritten in
 *   place, rarely)
 *
 * Record (starts on an 8-byte boundary in the data area, never wraps around the end):
 *   0  u32 magic 0x43525045 ("EPRC")   4 u16 header length (fixed part + metadata)
 *   6  u16 flags (RINGFILE_F_*)        8 u32 total length (header + payload, unpadded)
 *   12 u32 CRC-32C of the whole record with this field taken as 0
 *   16 u64 sequence (1, 2, 3 ... per ring; never reused once acknowledged)
 *   24 u64 time (unix ns, the profile's time)
 *   32 u64 eviction watermark: the oldest seq that survives this record and the next one
 *   40 u64 consumed-up-to sequence when this record was written (spool drain pointer)
 *   48 u32 generation (must equal the header's)   52 u32 payload length
 *   56 metadata: u16 length + bytes for service, type, device, key; u16 label count, then per
 *      label u16 length + key, u16 length + value (labels sorted by key, keys unique); then
 *      i64 value (the profile's total, for timelines; absent in records that predate it = 0);
 *      then u32 duty weight (x 1000), present only when not 1 (a duty-cycled upload)
 *   .. payload (the gzip pprof as received)
 * A skip marker (flag RINGFILE_F_SKIP, no metadata, no payload) ends a lap when the next record
 * does not fit before the end of the file; a gap shorter than the 56-byte fixed header is simply
 * left. A consume marker (RINGFILE_F_CONSUME, no payload) records a new consumed-up-to pointer.
 *
 * Why this shape: every write is an append at the head (flash-friendly: no in-place update of a
 * pointer block, but for the rare header watermark below), and every record carries the two
 * watermarks, so the newest valid record alone tells which older records are still live and
 * which were consumed. On open the whole data area
 * is scanned: records are validated (magic, lengths, generation, CRC), the newest one gives the
 * watermarks, intact-but-evicted records of an older lap are ignored, and a sequence missing
 * between the oldest live and the newest record is a torn or corrupt record: skipped, counted,
 * never served. A torn tail (crash in the middle of a write) is therefore just a gap at the
 * head that the next append overwrites. A zeroed or corrupt header is rebuilt from the records'
 * generation (or the ring reinitialised when there are none); a truncated file is extended back
 * to its size and what was cut off counts as lost.
 *
 * Eviction is declared before the write that does it. A record's watermark counts as evicted
 * not only what its own write covers but also what the next record of up to the largest size
 * seen may cover (the evict-ahead, at most a 16th of the ring), so that when a crash tears
 * that next write, the record before it already says that what the torn one destroyed is
 * gone; a record is written only once a record declaring its eviction is written (with
 * several writers it may wait for the one before it). A write that reaches records no record
 * declared (the first one after opening a ring written without the evict-ahead, one larger
 * than the evict-ahead) first writes the header's watermark and fdatasyncs it, whatever the
 * fsync policy. The scan takes the newer of the newest record's and the header's watermark,
 * so a seq missing above it is always a torn or corrupt record, never an eviction. Without
 * this, a write at the start of a lap could destroy the next-oldest record while the oldest
 * survived at the end of the lap (its eviction known only to the torn record's own header).
 * Power loss (writes not yet synced reaching the disk in any order) is covered for one writer
 * with fsync_ms == 0, which syncs each record before the next begins; with several writers or
 * group commit a power cut may leave records that were being evicted counted as corrupt.
 *
 * Durability: append() writes with pwrite(); with fsync_ms == 0 it fdatasync()s before it
 * returns. With fsync_ms = N it returns at once and the caller acknowledges a record only once
 * ringfile__durable_seq() >= its seq: ringfile__wait_durable() blocks until then (group commit:
 * the first waiter whose deadline has come leads one fdatasync that covers every record fully
 * written before it started, the others wait on a futex word and leave without the mutex when
 * the sync that covers them is done; with fsync_ms == 0 the deadline is "now", so concurrent
 * writers still share syncs). ringfile__sync() syncs now.
 * No lock is held during a pwrite (CRC included) or an fdatasync: appends only reserve their
 * place under it.
 *
 * Thread safety: all functions may be called from several threads (one internal mutex).
 */
#ifndef EDGEPROF_PORT_RINGFILE_H
#define EDGEPROF_PORT_RINGFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RINGFILE_HDR_SIZE	512u
#define RINGFILE_REC_FIXED	56u	/* fixed part of a record header */
#define RINGFILE_MIN_SIZE	(16u * 1024)
#define RINGFILE_MAX_LABELS	64u
#define RINGFILE_MAX_STR	4096u	/* longest service, type, device, key, label */

enum {
	RINGFILE_F_SKIP = 1 << 0,	/* end-of-lap filler */
	RINGFILE_F_CONSUME = 1 << 1,	/* consume marker: carries only the watermarks */
	RINGFILE_F_CLOCK_UNSET = 1 << 2,/* time was stamped at receive (device had no clock) */
	RINGFILE_F_USER_MASK = 0xff00,	/* free for callers, stored and returned as is */
};

struct record_label {
	const char *key;
	const char *value;
};

/*
 * A record's metadata. On append, strings may be NULL (stored as ""), labels in any order
 * (sorted on write; a duplicate key is -EINVAL). On read, every pointer points into the
 * payload allocation: one free(*payload) releases both (keep *payload until meta is unused).
 */
struct record_meta {
	uint64_t time_ns;
	uint16_t flags;		/* RINGFILE_F_CLOCK_UNSET and RINGFILE_F_USER_MASK bits */
	const char *service;
	const char *type;
	const char *device;
	const char *key;	/* idempotency key (may be "") */
	const struct record_label *labels;
	size_t n_labels;
	int64_t value;		/* the profile's total of its default sample type, for timelines
				 * without decoding payloads (0 = unknown) */
	uint32_t weight_milli;	/* the duty weight (0, 1000: none): what its decoded values
				 * carry in ClickHouse (its spool keeps it); the ring file keeps
				 * it beside the payload as received (a regression comparison
				 * weighs the profile with it: store/api/regress-store.c) */
};

struct ringfile_opts {
	uint64_t size;		/* file bytes, >= RINGFILE_MIN_SIZE; 0 = keep existing */
	unsigned fsync_ms;	/* 0 = fdatasync every record; N = group commit every N ms */
	bool create;		/* create the file when missing (otherwise -ENOENT) */
	bool quiet;		/* no pr_info/pr_warn about repairs (tests) */
	/*
	 * Optional: called at open for every live data record, oldest first, with its metadata
	 * (valid during the call) and payload length, so that an index is rebuilt from the
	 * scan itself. A nonzero return fails the open with that error.
	 */
	int (*on_record)(void *ctx, uint64_t seq, const struct record_meta *meta, size_t len);
	void *ctx;
};

struct ringfile_stats {
	uint64_t records;	/* live data records (consume markers excluded) */
	uint64_t bytes;		/* payload + header bytes of those records */
	uint64_t used;		/* bytes of the data area between oldest live and head */
	uint64_t capacity;	/* size of the data area */
	uint64_t oldest_time_ns;/* time of the oldest live record, 0 when empty */
	uint64_t first_seq;	/* oldest live seq (0 when empty) */
	uint64_t last_seq;	/* newest seq written (0 when none) */
	uint64_t durable_seq;	/* newest seq known durable */
	uint64_t consumed_seq;	/* consumed-up-to pointer */
	uint64_t overwritten;	/* records evicted by wraparound since open */
	uint64_t corrupt;	/* torn/corrupt records skipped (at open scan and on read) */
	uint64_t stale;		/* intact records of an older lap ignored at open */
	uint64_t appends, syncs;
	uint64_t wm_syncs;	/* evictions declared in the header (none declared ahead) */
	bool header_repaired;	/* the header was unreadable at open and was rebuilt */
	bool reinitialised;	/* ... and no records could be recovered */
};

struct ringfile;

/*
 * Opens (and scans) or creates a ring file. On error returns NULL, sets errno and writes a
 * message naming the problem into err ("ringfile: /x: size 100 is below the minimum 16384").
 */
struct ringfile *ringfile__open(const char *path, const struct ringfile_opts *opts, char *err,
				size_t errlen);

/*
 * Appends one record, evicting the oldest records as needed. Returns 0 (and the new seq) or
 * -EFBIG (cannot ever fit in this ring), -EINVAL (bad metadata), -EIO / -errno (write failed:
 * the ring is then read-only until reopened, so that nothing half-written is acknowledged).
 */
int ringfile__append(struct ringfile *rf, const struct record_meta *meta, const void *payload,
		     size_t len, uint64_t *seq_out);

/*
 * As append, but never waits for durability (also with fsync_ms == 0): the caller acknowledges
 * seq only after ringfile__wait_durable(rf, seq). Lets many writers share one fdatasync.
 */
int ringfile__append_async(struct ringfile *rf, const struct record_meta *meta,
			   const void *payload, size_t len, uint64_t *seq_out);

/*
 * The same in two steps, so that a caller can order its own bookkeeping (an index) with the
 * ring's sequence under its own lock and still write without any lock held:
 * append_begin() reserves the record's place and seq (ap->seq), which is not readable yet
 * (readers of it wait) and not covered by any sync; append_finish() computes the CRC, writes,
 * and makes it readable. Every begin that returned 0 must be finished, soon: a later append
 * that needs the space waits for it, and so may a later finish (whose eviction this record
 * declares; after 50 ms it declares it in the header instead, so one thread finishing its own
 * records out of order is slow, not stuck). payload must stay valid until finish. Errors as
 * append.
 */
struct ringfile_append {
	uint64_t seq;
	/* private */
	uint64_t off, time_ns;
	uint8_t *hdr;
	size_t hdr_len, len;	/* len: the payload's, pre's bytes included */
	const void *pre, *payload;
	size_t pre_len;
	uint64_t wm, wm_need;	/* the watermark it declares; the one it needs written first */
	uint16_t flags;
};
int ringfile__append_begin(struct ringfile *rf, const struct record_meta *meta,
			   const void *payload, size_t len, struct ringfile_append *ap);
/*
 * The same with a payload in two parts, pre (pre_len bytes, kept valid until finish too) then
 * payload: one record, as if they had been copied together first.
 */
int ringfile__append_begin_pre(struct ringfile *rf, const struct record_meta *meta,
			       const void *pre, size_t pre_len, const void *payload, size_t len,
			       struct ringfile_append *ap);
int ringfile__append_finish(struct ringfile *rf, struct ringfile_append *ap);

/* Bytes a record with this metadata and payload takes in the ring (header + payload, aligned). */
size_t ringfile__record_size(const struct record_meta *meta, size_t len);

/* fdatasync now; on return every record appended before the call is durable. 0 or -errno. */
int ringfile__sync(struct ringfile *rf);
/* Blocks until seq is durable (syncs itself when the group-commit deadline has passed). */
int ringfile__wait_durable(struct ringfile *rf, uint64_t seq);
uint64_t ringfile__durable_seq(struct ringfile *rf);
/* CLOCK_MONOTONIC ns when a pending group commit is due, 0 when nothing is pending. */
uint64_t ringfile__sync_due_ns(struct ringfile *rf);

/*
 * Reads record seq, re-validating its CRC: -ENOENT when it is not live (evicted, never written,
 * consumed marker, or overwritten meanwhile), -EIO when it no longer validates (counted).
 * On success *payload is malloc'd (free it; the same allocation holds meta's strings, so keep
 * it while meta is used) and *len (len may be NULL) is the payload length.
 */
int ringfile__read(struct ringfile *rf, uint64_t seq, struct record_meta *meta, void **payload,
		   size_t *len);

/*
 * Calls cb for every live data record from oldest to newest (cb's meta and payload are valid
 * only during the call; payload is NULL when with_payload is false, len is the payload length
 * in both cases; without payload only the header is checked, not the CRC). A nonzero return from cb
 * stops the walk and is returned. Records failing validation are skipped and counted. The ring
 * is locked during the walk: cb must not call back into rf.
 */
typedef int (*ringfile_iter_fn)(void *ctx, uint64_t seq, const struct record_meta *meta,
				const void *payload, size_t len);
int ringfile__foreach(struct ringfile *rf, uint64_t from_seq, bool with_payload,
		      ringfile_iter_fn cb, void *ctx);

/* ---- spool semantics -------------------------------------------------------------------- */

/*
 * Marks every record with seq <= upto as consumed by appending a small consume marker
 * (append-only; nothing is rewritten). With durable = true it is fdatasync'd before returning.
 */
int ringfile__consume(struct ringfile *rf, uint64_t upto, bool durable);
/* Oldest live record that is not consumed: 0 and its seq, or -ENOENT when there is none. */
int ringfile__peek_oldest(struct ringfile *rf, uint64_t *seq);
bool ringfile__is_empty(struct ringfile *rf);	/* no unconsumed live records */

/* ---- state -------------------------------------------------------------------------------- */

void ringfile__stats(struct ringfile *rf, struct ringfile_stats *st);
uint64_t ringfile__first_seq(struct ringfile *rf);	/* oldest live seq, 0 when empty */
const char *ringfile__path(const struct ringfile *rf);
void ringfile__free(struct ringfile *rf);	/* syncs pending records; NULL-safe */

#endif /* EDGEPROF_PORT_RINGFILE_H */
