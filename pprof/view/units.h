/* SPDX-License-Identifier: MIT */
/*
 * pprof/view/units.h — values and percentages printed the way pprof prints them, so that our
 * `top` and `go tool pprof -top` can be compared line by line.
 */
#ifndef EDGEPROF_TOOLS_UNITS_H
#define EDGEPROF_TOOLS_UNITS_H

#include <stddef.h>
#include <stdint.h>

struct units_scale {
	double factor;	   /* raw value / factor = displayed number */
	const char *label; /* "ms", "MB", or "" for counts */
};

/*
 * pprof's report unit: chosen from the smallest non-zero value shown and the total, so that
 * every line of one report uses the same unit. unit is the sample type's ("nanoseconds").
 */
struct units_scale units__pick(const char *unit, int64_t min_value, int64_t total);

/* The best unit for one value on its own (pprof's "auto"): 5000000000 ns -> "5s". */
struct units_scale units__auto(const char *unit, int64_t value);

/* v in unit converted to nanoseconds: 0, or -EINVAL when unit is not a time unit. */
int units__nanos(const char *unit, int64_t v, int64_t *ns);

/* "%.2f" without a ".00" tail, plus the label; "0" for zero. Returns buf. */
char *units__format(char *buf, size_t len, int64_t value, struct units_scale sc);

/* pprof's measurement.Percentage: "  100%", "48.39%", " 0.33%". Returns buf. */
char *units__percent(char *buf, size_t len, int64_t value, int64_t total);

#endif /* EDGEPROF_TOOLS_UNITS_H */
