/* SPDX-License-Identifier: MIT */
/*
 * store/ring/index.h — the collector's in-memory index of the records in the ring file.
 *
 * Bounded (max_entries, CONFIG_COLLECTOR_INDEX_ENTRIES); entries are kept in seq order (the
 * ring assigns increasing seqs), strings are interned (service, type, device) and whole label
 * sets are interned once (a fleet sends the same few label sets over and over), the idempotency
 * key is kept as a 64-bit hash in an open-addressing table. Per entry: a 48-byte slot plus
 * 8 bytes of key table, plus the interned strings it does not share (see tests/bench).
 *
 * When full, the oldest entry is dropped (counted in dropped) although its record may still be
 * in the ring; records the ring overwrites are removed with index__evict_before().
 *
 * Not thread-safe: the caller (the ring backend, store/ring/store-ring.c) holds its lock.
 */
#ifndef EDGEPROF_STORE_INDEX_H
#define EDGEPROF_STORE_INDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "port/ringfile.h"
#include "store/store-int.h"


struct index;

struct index *index__new(size_t max_entries);
void index__free(struct index *ix); /* NULL-safe */

/*
 * Adds the record seq (seqs must increase from one add to the next: -EINVAL otherwise).
 * A non-empty meta->key already present returns -EEXIST with its seq in *existing (may be NULL).
 */
int index__add(struct index *ix, uint64_t seq, const struct record_meta *meta, uint32_t size,
	       uint64_t *existing);

/* 0 and the seq of the record that carries this idempotency key, or -ENOENT. */
int index__find_key(const struct index *ix, const char *key, uint64_t *seq);

/* 0 and the entry of seq (its strings are the index's, valid until removal), or -ENOENT. */
int index__get(const struct index *ix, uint64_t seq, struct store_entry *v);

/* Removes every entry with seq < first_live (they were overwritten in the ring). */
void index__evict_before(struct index *ix, uint64_t first_live);

/*
 * Calls cb for entries whose time is in [from_ns, to_ns] (inclusive; pass 0/UINT64_MAX for
 * all), newest first when newest_first, else oldest first. cb returns nonzero to stop (returned).
 */
int index__foreach(const struct index *ix, uint64_t from_ns, uint64_t to_ns, bool newest_first,
		   store_entry_fn cb, void *ctx);

/* Calls cb once per distinct service that has at least one entry (sorted by name). */
int index__foreach_service(const struct index *ix, int (*cb)(void *ctx, const char *service),
			   void *ctx);

void index__stats(const struct index *ix, struct index_stats *st);

#endif /* EDGEPROF_STORE_INDEX_H */
