/* SPDX-License-Identifier: MIT */
/*
 * store/rules/metrics-rules.h — Prometheus counters computed from the profiles as they are ingested
 * (Pyroscope's recording rules): --metrics-rule 'NAME=SELECTOR [function="F"] [by (l, ...)]'.
 *
 *   cpu_checksum=gateway{region="eu"} function="checksum" by (version)
 *
 * SELECTOR is the query selector (store/query/selector.h) matched on the profile's service, type,
 * device and labels; function="F" (or =~ with a regex) keeps the samples whose stack holds a
 * matching function, each sample counted once however often it appears in it, != and !~ those
 * whose stack holds none; by ()
 * names the labels (and service, type, device) the series are split by. The value of a
 * profile is the sum of one of its sample types, chosen from the types (the unit follows):
 * a time (cpu/nanoseconds, delay/nanoseconds) -> NAME_seconds_total; else bytes other than a
 * snapshot (alloc_space, not inuse_space) -> NAME_bytes_total; else a count -> NAME_total.
 * Snapshot types (inuse_*, goroutine) are not counters: such a profile adds nothing.
 *
 * Evaluated once per stored profile, in store/store.c (store__ingest): every API and every
 * backend, a duplicate upload counts nothing. Bounded: at most CONFIG_COLLECTOR_METRICS_RULES
 * rules and CONFIG_COLLECTOR_METRICS_SERIES series in all; a profile whose series does not fit
 * is counted in metrics_rule_series_dropped_total instead.
 */
#ifndef EDGEPROF_STORE_METRICS_RULES_H
#define EDGEPROF_STORE_METRICS_RULES_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "pprof/pprof.h"
#include "port/ringfile.h"

#ifdef CONFIG_COLLECTOR_METRICS_RULES
#define METRICS_RULES_MAX CONFIG_COLLECTOR_METRICS_RULES_MAX
#else
#define METRICS_RULES_MAX 1
#endif

/* What one profile adds, per rule (computed before the put, added once it is stored). */
struct metrics_pending {
	int64_t value[METRICS_RULES_MAX];
	unsigned char unit[METRICS_RULES_MAX];
	bool hit[METRICS_RULES_MAX];
	bool any;
};

struct metrics_rules;

#ifdef CONFIG_COLLECTOR_METRICS_RULES
/* An empty rule set holding at most max_series series (0 = CONFIG_COLLECTOR_METRICS_SERIES). */
struct metrics_rules *metrics_rules__new(size_t max_series);
void metrics_rules__free(struct metrics_rules *r); /* NULL-safe */
/*
 * Series no profile updated for ms (0: never) are freed when room is needed and before
 * /metrics is written, counted (default CONFIG_COLLECTOR_METRICS_SERIES_IDLE_S).
 */
void metrics_rules__set_idle_ms(struct metrics_rules *r, uint64_t ms);
/* Parses one rule and adds it: 0 or -EINVAL / -E2BIG / -ENOMEM with a message in err. */
int metrics_rules__add(struct metrics_rules *r, const char *text, char *err, size_t errlen);
size_t metrics_rules__count(const struct metrics_rules *r);
/* What p adds to each rule (no lock, no change to r). */
void metrics_rules__eval(const struct metrics_rules *r, const struct record_meta *meta,
			 const struct pprof_profile *p, struct metrics_pending *out);
/* Adds it (under the rules' lock); a series that does not fit is counted as dropped. */
void metrics_rules__commit(struct metrics_rules *r, const struct record_meta *meta,
			   const struct metrics_pending *pend);
/* The counters in Prometheus' text format (0.0.4), NUL-terminated, malloc'd: 0 or -ENOMEM. */
int metrics_rules__text(struct metrics_rules *r, char **out, size_t *len);
#else
static inline struct metrics_rules *metrics_rules__new(size_t max_series)
{
	(void)max_series;
	return NULL;
}
static inline void metrics_rules__free(struct metrics_rules *r)
{
	(void)r;
}
static inline int metrics_rules__add(struct metrics_rules *r, const char *text, char *err,
				     size_t errlen)
{
	(void)r;
	(void)text;
	snprintf(err, errlen,
		 "this collector was built without metrics rules "
		 "(CONFIG_COLLECTOR_METRICS_RULES)");
	return -ENOTSUP;
}
static inline void metrics_rules__set_idle_ms(struct metrics_rules *r, uint64_t ms)
{
	(void)r;
	(void)ms;
}
static inline size_t metrics_rules__count(const struct metrics_rules *r)
{
	(void)r;
	return 0;
}
static inline void metrics_rules__eval(const struct metrics_rules *r,
				       const struct record_meta *meta,
				       const struct pprof_profile *p, struct metrics_pending *out)
{
	(void)r;
	(void)meta;
	(void)p;
	out->any = false;
}
static inline void metrics_rules__commit(struct metrics_rules *r, const struct record_meta *meta,
					 const struct metrics_pending *pend)
{
	(void)r;
	(void)meta;
	(void)pend;
}
static inline int metrics_rules__text(struct metrics_rules *r, char **out, size_t *len)
{
	(void)r;
	*out = NULL;
	*len = 0;
	return 0;
}
#endif /* CONFIG_COLLECTOR_METRICS_RULES */

#endif /* EDGEPROF_STORE_METRICS_RULES_H */
