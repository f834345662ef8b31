/* SPDX-License-Identifier: MIT */
/*
 * agent/transport/spool.h — the offline spool: profiles that could not be uploaded wait in a small ring
 * file on flash (port/ringfile, the collector's own record format), oldest dropped first.
 *
 * Flash: every write is an append (a record, or a tiny consume marker); nothing is rewritten in
 * place. Power loss: each push is fdatasync'd before it returns, records are CRC-framed, and a
 * torn tail is discarded when the spool is reopened; what push() reported written is never lost
 * (unless evicted by newer profiles, which is counted). A record is consumed only after the
 * collector acknowledged it (ack()), so the worst a crash does is one re-send, which the
 * idempotency key turns into a no-op.
 */
#ifndef EDGEPROF_AGENT_SPOOL_H
#define EDGEPROF_AGENT_SPOOL_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/transport/item.h"

/* One spooled profile, read back for upload. Strings point into an allocation owned here. */
struct spool_entry {
	uint64_t seq;		/* in the ring */
	uint64_t n;		/* the spool's own item number */
	struct transport_item item;
	struct upload_label labels[UPLOAD_MAX_LABELS];
	/* profiles evicted unsent between the previous acknowledged one and this one */
	uint64_t dropped_before;
	/* written by this process (so a monotonic time is comparable with ours) */
	bool this_boot;
	void *alloc;
};

struct spool_stats {
	uint64_t pending;	/* records waiting */
	uint64_t bytes;		/* flash they take */
	uint64_t capacity;
	uint64_t pushed;	/* since open */
	uint64_t bytes_written;	/* since open: records + consume markers */
	uint64_t evicted;	/* dropped unsent since open (oldest first) */
	uint64_t corrupt;	/* torn/corrupt records skipped (open scan and reads) */
};

struct spool;

#ifdef CONFIG_SPOOL
/* Opens or creates the spool file of size bytes (0 = CONFIG_SPOOL_KB). NULL + err on error. */
struct spool *spool__open(const char *path, uint64_t size, char *err, size_t errlen);
void spool__free(struct spool *s);	/* NULL-safe */
/* Appends durably: 0, -EFBIG (larger than the spool), -EINVAL, -EIO. Evicts the oldest. */
int spool__push(struct spool *s, const struct transport_item *item);
/* The oldest waiting record: 0, -ENOENT when none. Corrupt records are skipped (counted). */
int spool__peek(struct spool *s, struct spool_entry *e);
void spool_entry__release(struct spool_entry *e);	/* NULL-safe, idempotent */
/* The collector acknowledged e: consume it (durably). 0 or -errno. */
int spool__ack(struct spool *s, const struct spool_entry *e);
bool spool__is_empty(struct spool *s);
void spool__stats(struct spool *s, struct spool_stats *st);
#else
static inline struct spool *spool__open(const char *path, uint64_t size, char *err,
					size_t errlen)
{
	if (errlen)
		err[0] = '\0';
	errno = ENOSYS;
	return NULL;
}
static inline void spool__free(struct spool *s) {}
static inline int spool__push(struct spool *s, const struct transport_item *item)
{
	return -ENOSYS;
}
static inline int spool__peek(struct spool *s, struct spool_entry *e)
{
	return -ENOENT;
}
static inline void spool_entry__release(struct spool_entry *e) {}
static inline int spool__ack(struct spool *s, const struct spool_entry *e)
{
	return -ENOSYS;
}
static inline bool spool__is_empty(struct spool *s)
{
	return true;
}
static inline void spool__stats(struct spool *s, struct spool_stats *st)
{
	*st = (struct spool_stats){ 0 };
}
#endif /* CONFIG_SPOOL */

#endif /* EDGEPROF_AGENT_SPOOL_H */
