/* SPDX-License-Identifier: MIT */
/*
 * store/ring/store-ring.h — the ring backend's own functions, for its compactor
 * (store/ring/rollup.c): it reads, lists and appends records through these, below the store's
 * front (store/store.c), so that calls point one way: front -> ring backend -> rollups.
 * Internal to store/ring/: nothing outside it includes this.
 */
#ifndef EDGEPROF_STORE_RING_STORE_RING_H
#define EDGEPROF_STORE_RING_STORE_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/store-int.h"

struct ring_store;

/* As store__put(): one record, durable on return (rollup records, from the compactor). */
int ring_store__put(struct ring_store *s, const struct record_meta *meta, const void *payload,
		    size_t len, uint64_t *seq_out, bool *duplicate);
/* As store__get(). */
int ring_store__get(struct ring_store *s, uint64_t seq, struct record_meta *meta,
		    void **payload, size_t *len);
/* As store__list(). */
int ring_store__list(struct ring_store *s, const struct store_query *q, store_entry_fn cb,
		     void *ctx);
/* As store__read_profile(). */
int ring_store__read_profile(struct ring_store *s, uint64_t seq, struct pprof_profile **p,
			     char *err, size_t errlen);

#endif /* EDGEPROF_STORE_RING_STORE_RING_H */
