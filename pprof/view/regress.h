/* SPDX-License-Identifier: MIT */
/*
 * pprof/view/regress.h — fleet regression detection: which functions take a different share of
 * the CPU in a candidate selection (new firmware) than in a base one, with statistics. No I/O:
 * the collector feeds it each device's sums of a selection's stacks (store/api/regress-store.c:
 * ClickHouse's rows summed by device, or the ring's profiles read one by one), the tests built
 * profiles.
 *
 * The unit is the device, not the profile: each device's profiles in the range are summed
 * first (as merging them would) and the device added once, so a chatty device counts once.
 * For each device every function gets its self share (samples where it is the leaf / the
 * device's total) and its cumulative share (samples whose stack holds it, counted once per
 * stack / total). Then, per function and per metric (self for functions that are ever a leaf,
 * cumulative for those that are ever a caller), the base
 * devices' shares against the candidate devices' shares (a device without the function has
 * share 0):
 *
 *   - Mann-Whitney U, two-sided, normal approximation with tie correction and continuity
 *     correction (scipy.stats.mannwhitneyu(method="asymptotic")): rank-based, so one device
 *     with a strange workload moves it by one rank, and no distribution is assumed (shares are
 *     skewed, bounded, zero-inflated for rare functions);
 *   - Benjamini-Hochberg across every test of the comparison (see regress.c for why not
 *     Bonferroni);
 *   - the effect: the mean per-device share in each selection, the relative change, and a
 *     percentile bootstrap interval (seeded, regress_opts.bootstrap resamples) of the difference
 *     of the means, computed for findings only.
 *
 * A finding: adjusted p < alpha and |relative change| >= min_change; "new" when no base device
 * has the function (adjusted p < alpha), "gone" when no candidate device has it.
 *
 * Bounded: at most max_functions distinct function names (more are counted in dropped_functions,
 * their samples still in the devices' totals); memory ~ 24 bytes per (function, device) pair
 * where the function has samples.
 */
#ifndef EDGEPROF_PPROF_VIEW_REGRESS_H
#define EDGEPROF_PPROF_VIEW_REGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pprof/pprof.h"

#define REGRESS_DEFAULT_ALPHA 0.001
#define REGRESS_DEFAULT_MIN_CHANGE 0.05
#define REGRESS_DEFAULT_MAX_FUNCTIONS 200000u
#define REGRESS_DEFAULT_BOOTSTRAP 1000u

struct regress_opts {
	double alpha;		/* adjusted p below this (0: REGRESS_DEFAULT_ALPHA) */
	double min_change;	/* |relative change| at least (0: REGRESS_DEFAULT_MIN_CHANGE;
				 * negative: no effect threshold) */
	size_t max_functions;	/* 0: REGRESS_DEFAULT_MAX_FUNCTIONS */
	unsigned bootstrap;	/* resamples of the interval (0: REGRESS_DEFAULT_BOOTSTRAP) */
	uint64_t seed;		/* of the bootstrap (0: a fixed one): answers are reproducible */
	size_t max_stack_entries; /* (device, stack) sums kept for the chains, ~16 bytes each
				   * (0: REGRESS_DEFAULT_MAX_STACK_ENTRIES); past it a device's
				   * stacks are left out of the chains, counted */
};

enum regress_side { REGRESS_BASE = 0, REGRESS_CAND = 1 };
enum regress_metric { REGRESS_SELF = 0, REGRESS_CUM = 1 };
enum regress_verdict {
	REGRESS_NONE = 0,	/* not past the thresholds (listed only with all) */
	REGRESS_REGRESSION,	/* a larger share in the candidate */
	REGRESS_IMPROVEMENT,
	REGRESS_NEW,		/* on no base device */
	REGRESS_GONE,		/* on no candidate device */
};

/*
 * "The stacks that changed": the caller chains of a finding's function (its nearest
 * REGRESS_CHAIN_CALLERS callers, root first; of the outermost call where it recurses) whose mean
 * per-device share of the finding's metric moved most between the selections, the largest
 * moves first, at most REGRESS_MAX_CHAINS.
 */
#define REGRESS_CHAIN_CALLERS 4
#define REGRESS_MAX_CHAINS 3
#define REGRESS_DEFAULT_MAX_STACK_ENTRIES 16000000u

struct regress_chain {
	const char *callers[REGRESS_CHAIN_CALLERS];	/* root first; valid until regress__free() */
	size_t n_callers;				/* 0: the function is a root */
	bool cut;					/* it has more callers than these */
	double base_share, cand_share;			/* mean per-device share, 0..1 */
};

struct regress_finding {
	const char *function;		/* valid until regress__free() */
	enum regress_metric metric;
	double base_share, cand_share;	/* mean per-device share, 0..1 */
	double rel_change;		/* (cand - base) / base; +inf when base is 0 */
	double diff_lo, diff_hi;	/* 95 % bootstrap interval of cand - base (findings only) */
	double u;			/* Mann-Whitney U of the candidate devices */
	double z, p_value, p_adjusted;	/* p two-sided; adjusted by Benjamini-Hochberg */
	size_t devices_base, devices_cand;	/* devices in each selection */
	size_t present_base, present_cand;	/* of those, devices with the function */
	enum regress_verdict verdict;
	struct regress_chain chains[REGRESS_MAX_CHAINS];	/* findings only */
	size_t n_chains;
};

struct regress_stats {
	size_t devices[2];		/* added per side (with a nonzero total) */
	size_t empty_devices;		/* added with a zero total: left out */
	size_t functions, tests;	/* distinct functions; tests run (self + cumulative) */
	size_t dropped_functions;	/* names past max_functions */
	size_t dropped_stack_entries;	/* (device, stack) sums past max_stack_entries: the
					 * chains leave them out (the tests do not) */
};

struct regress;

struct regress *regress__new(const struct regress_opts *o);
void regress__free(struct regress *r);

/*
 * The input, whatever the store: a profile whose samples are the stacks (regress__stacks(): a
 * stored profile, or every stack of a selection once, ClickHouse's), then the open device's
 * rows, (sample, value) of those stacks (regress__add_rows()), then regress__end_device().
 * Rows are summed by stack as stacks__unique() sums a profile's samples (the same locations:
 * one stack, first seen first; zero rows and sums left out), then each stack's functions
 * counted; a stack's functions are named once per regress__stacks(), however many devices'
 * rows use it. The stacks profile must outlive its rows; regress__stacks(r, NULL) lets it go.
 * 0, -ENOMEM, or -EINVAL with err (a drop_frames regex that does not compile, a row's sample
 * out of range). A failed call may have added part of its rows: callers stop there, or
 * regress__drop_device() forgets the open device.
 */
struct regress_row {
	size_t sample;		/* index into the stacks profile's samples */
	int64_t value;
};
int regress__stacks(struct regress *r, const struct pprof_profile *p, char *err, size_t errlen);
int regress__add_rows(struct regress *r, const struct regress_row *rows, size_t n, char *err,
		      size_t errlen);
int regress__end_device(struct regress *r, enum regress_side side);
void regress__drop_device(struct regress *r);

/*
 * One profile's samples as a device's rows (value index vi, stacks__sample_index()): its
 * own stacks, every sample a row. add_device() adds a device of one profile (its profiles in
 * the range merged); add_profile() one of its profiles, for a device whose profiles are read
 * one at a time (their sums are the merged profile's), closed by end_device().
 */
int regress__add_device(struct regress *r, enum regress_side side, const struct pprof_profile *p,
			int vi, char *err, size_t errlen);
/*
 * What add_profile() allocates for p besides its stacks view, at most, for a caller's budget:
 * per sample the input's five arrays, a row and the grouping's hash. It gives it back before
 * it returns (one profile's at a time).
 */
size_t regress__profile_mem(const struct pprof_profile *p);
int regress__add_profile(struct regress *r, const struct pprof_profile *p, int vi, char *err,
			 size_t errlen);

/*
 * Runs the tests. *out (malloc'd, caller frees; NULL when *n is 0) gets the findings sorted
 * by adjusted p then by |relative change|, or with all every test run (verdict REGRESS_NONE
 * for those below the thresholds). 0 or -ENOMEM.
 */
int regress__run(struct regress *r, bool all, struct regress_finding **out, size_t *n);

void regress__stats(const struct regress *r, struct regress_stats *st);

/*
 * Every per-device share the tests use, zeros included (for an independent reference): cb
 * gets the function, the metric (where it is tested), the side, the device's
 * index within its side and the share. Call after the devices are added.
 */
typedef void (*regress_share_fn)(void *ctx, const char *function, enum regress_metric m,
				 enum regress_side side, size_t device, double share);
void regress__each_share(struct regress *r, regress_share_fn cb, void *ctx);

/* The pieces, for the tests. */
/* Two-sided p of Mann-Whitney U of b against a (see above); *u is b's U, *z the statistic. */
double regress__mann_whitney(const double *a, size_t na, const double *b, size_t nb, double *u,
			     double *z);
/* Benjamini-Hochberg adjusted p-values of p[0..n) into adj (monotone, capped at 1). 0/-ENOMEM. */
int regress__bh(const double *p, size_t n, double *adj);

const char *regress__verdict_name(enum regress_verdict v);
const char *regress__metric_name(enum regress_metric m);

#endif /* EDGEPROF_PPROF_VIEW_REGRESS_H */
