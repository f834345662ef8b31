/* SPDX-License-Identifier: MIT */
/*
 * store/api/regress-store.h — a selection of the store as one side of a regression comparison
 * (pprof/view/regress.h): its profiles grouped by device, each device's summed (as merging them
 * would), then added. Only the store front: store__sum_by_device where the backend sums by
 * device itself (ClickHouse: one GROUP BY device, stack a side), else store__list and
 * store__read_profile (the ring), so both answer alike (tests/integration/regress-ch.test.sh
 * compares them). The handler (api-regress.c) and the test driver call it.
 */
#ifndef EDGEPROF_STORE_API_REGRESS_STORE_H
#define EDGEPROF_STORE_API_REGRESS_STORE_H

#include <stddef.h>

#include "pprof/view/regress.h"
#include "store/store.h"

/* Profiles one side may list (a bound on the listing's memory, ~48 bytes each). */
#define REGRESS_STORE_MAX_PROFILES 1000000u

struct regress_side_stats {
	size_t profiles;	/* listed */
	size_t devices;		/* distinct devices (the store's device field; "" is one) */
	size_t unreadable;	/* profiles that no longer read (overwritten, damaged): left out */
	size_t skipped;		/* profiles of another kind than the most common (by device) */
};

/*
 * Adds every device of q's selection to side of r. spec: the sample type (NULL: each profile's
 * default). 0; -ENOENT when nothing matches; -E2BIG past REGRESS_STORE_MAX_PROFILES; -ENOMEM;
 * -EINVAL (err says why).
 */
int regress_store_side(struct store *s, const struct store_query *q, const char *spec,
		       struct regress *r, enum regress_side side, struct regress_side_stats *st,
		       char *err, size_t errlen);
/* The same through store__list and store__read_profile always (the ring's way; benchmarks). */
int regress_store_side_profiles(struct store *s, const struct store_query *q, const char *spec,
				struct regress *r, enum regress_side side,
				struct regress_side_stats *st, char *err, size_t errlen);

#endif /* EDGEPROF_STORE_API_REGRESS_STORE_H */
