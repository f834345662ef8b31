/* SPDX-License-Identifier: MIT */
/*
 * pprof/delta.h — cumulative profiles into deltas between rounds, as Pyroscope's godeltaprof
 * does for Go: a heap profile's alloc_objects/alloc_space and the mutex and block profiles count
 * everything since the program started; merged over a fleet and a day, those would be counted
 * again every round. A delta state remembers, per sample (its stack by address and function
 * names, and its labels, hashed to 64 bits), the last cumulative values; the next profile's
 * values become their growth since then. A value that went down is a restarted program: its
 * growth is the new value (a counter reset, as Prometheus' rate()).
 *
 * Memory: 80 bytes per distinct sample (with slack: the table runs at most half full), twice
 * while a profile is applied, for at most max_samples samples (beyond them samples are left out
 * of the delta, and counted). The delta's duration is the time between the two profiles.
 */
#ifndef EDGEPROF_PPROF_DELTA_H
#define EDGEPROF_PPROF_DELTA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pprof/pprof.h"

#define PPROF_DELTA_MAX_TYPES 8

/* The profiles of Go's net/http/pprof that the scrapers fetch; a set of them is 1u << kind. */
enum pprof_kind {
	PPROF_KIND_CPU,
	PPROF_KIND_HEAP,
	PPROF_KIND_GOROUTINE,
	PPROF_KIND_MUTEX,
	PPROF_KIND_BLOCK,
	PPROF_KIND__N
};
extern const char *const pprof_kind_names[PPROF_KIND__N]; /* "cpu", "heap", ... */
extern const char *const pprof_kind_paths[PPROF_KIND__N]; /* under /debug/pprof/: cpu's "profile" */

/* A list like "cpu,heap" as a set of kinds in *kinds: 0, or -EINVAL with why in err. */
int pprof_kinds_parse(const char *list, unsigned *kinds, char *err, size_t errlen);

struct pprof_delta;

struct pprof_delta_stats {
	uint64_t profiles;	/* applied (the first one included) */
	uint64_t resets;	/* samples whose value went down (the program restarted) */
	uint64_t over_bound;	/* samples left out: more distinct ones than max_samples */
	uint64_t zero_dropped;	/* samples of the last profile without growth, left out */
};

struct pprof_delta *pprof_delta__new(size_t max_samples);
void pprof_delta__free(struct pprof_delta *d);	/* NULL-safe */

/*
 * Which of p's sample types are cumulative for a profile of this kind ("heap": alloc_*;
 * "mutex", "block": all; anything else: none). Returns how many are.
 */
size_t pprof_delta_cumulative(const char *kind, const struct pprof_profile *p,
			      bool cumulative[PPROF_DELTA_MAX_TYPES]);

/*
 * Turns p's cumulative values into their growth since the previous profile given to d, leaving
 * the others (a heap's inuse_*) as they are, and drops samples that are then all zero. Returns 1
 * for the first profile (p is unchanged: it only sets the baseline, the caller sends nothing),
 * 0 when p now holds deltas, -EINVAL when the sample types differ from the previous profile's
 * (d starts over from p), -ENOMEM.
 */
int pprof_delta__apply(struct pprof_delta *d, struct pprof_profile *p,
		       const bool cumulative[PPROF_DELTA_MAX_TYPES]);
void pprof_delta__stats(const struct pprof_delta *d, struct pprof_delta_stats *st);

/*
 * A scraped profile of kind (cpu, heap, goroutine, mutex, block) as a scraper ships it: with d,
 * its cumulative values turned into deltas (pprof_delta__apply) and re-encoded; without d, or
 * when nothing in it is cumulative, as fetched (re-encoded only when it is not gzip). Returns 0
 * with out filled (gzip, malloc'd); 1 when there is nothing to send because it is d's baseline
 * (or a new one after the sample types changed) and all its types are cumulative (mutex,
 * block); 2 when it has no sample, or none grew (an idle service's CPU profile, a mutex profile
 * of a quiet interval); or -errno with err saying why (not a profile: -EINVAL). A heap's
 * baseline is sent (0) with its inuse_* snapshot and its alloc_* at 0: a snapshot needs no
 * previous round.
 */
int pprof_delta_scraped(struct pprof_delta *d, const char *kind, const void *body, size_t len,
			size_t max_input, struct pprof_buf *out, char *err, size_t errlen);

#endif /* EDGEPROF_PPROF_DELTA_H */
