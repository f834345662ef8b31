/* SPDX-License-Identifier: MIT */
/*
 * store/ring/entry.h — one stored profile as a listing sees it, whatever the backend (store/store.h):
 * the ring file's index hands out these, and so does any other backend's list.
 */
#ifndef EDGEPROF_STORE_ENTRY_H
#define EDGEPROF_STORE_ENTRY_H

#include <stddef.h>
#include <stdint.h>

#include "port/ringfile.h"

/* A read-only view of one profile; its strings are valid only during the callback. */
struct store_entry {
	uint64_t seq;		/* the profile's id */
	uint64_t time_ns;
	uint32_t size;		/* payload bytes */
	uint16_t flags;		/* the record's flags (RINGFILE_F_*, STORE_F_*) */
	const char *service, *type, *device;
	const struct record_label *labels; /* sorted by key */
	size_t n_labels;
	int64_t value;		/* the profile's total (record_meta.value) */
};

/* Called once per entry of a listing; a nonzero return stops it and is returned. */
typedef int (*store_entry_fn)(void *ctx, const struct store_entry *e);

#endif /* EDGEPROF_STORE_ENTRY_H */
