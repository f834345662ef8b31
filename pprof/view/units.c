// SPDX-License-Identifier: MIT
/* pprof/view/units.c — pprof's unit scaling (internal/measurement), rewritten in C. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "pprof/view/units.h"

struct unit_def {
	const char *label;
	const char *aliases[4];
	double factor;
};

/* The two families pprof scales; other units (count, samples, ...) print as plain numbers. */
static const struct unit_def bytes_units[] = {
    {"B", {"b", "byte"}, 1},
    {"kB", {"kb", "kbyte", "kilobyte"}, 1024.0},
    {"MB", {"mb", "mbyte", "megabyte"}, 1048576.0},
    {"GB", {"gb", "gbyte", "gigabyte"}, 1073741824.0},
    {"TB", {"tb", "tbyte", "terabyte"}, 1099511627776.0},
    {"PB", {"pb", "pbyte", "petabyte"}, 1125899906842624.0},
    {NULL, {NULL}, 0},
};

static const struct unit_def time_units[] = {
    {"ns", {"ns", "nanosecond"}, 1},	{"us", {"\xce\xbcs", "us", "microsecond"}, 1e3},
    {"ms", {"ms", "millisecond"}, 1e6}, {"s", {"s", "sec", "second"}, 1e9},
    {"hrs", {"hour", "hr"}, 3600e9},	{NULL, {NULL}, 0},
};

/* pprof's sniffUnit: lower case, a plural 's' dropped from names longer than two letters. */
static const struct unit_def *sniff(const char *unit, const struct unit_def **family)
{
	static const struct unit_def *const families[] = {bytes_units, time_units};
	char u[32];
	size_t n, f, i, a;

	for (n = 0; unit && unit[n] && n < sizeof(u) - 1; n++)
		u[n] = (char)tolower((unsigned char)unit[n]);
	u[n] = '\0';
	if (n > 2 && u[n - 1] == 's')
		u[--n] = '\0';
	for (f = 0; f < 2; f++)
		for (i = 0; families[f][i].label; i++)
			for (a = 0; a < 4 && families[f][i].aliases[a]; a++)
				if (!strcmp(u, families[f][i].aliases[a])) {
					*family = families[f];
					return &families[f][i];
				}
	return NULL;
}

struct units_scale units__auto(const char *unit, int64_t value)
{
	const struct unit_def *family = NULL, *from = sniff(unit, &family), *best = NULL;
	struct units_scale sc = {1, ""};
	double v;
	size_t i;

	if (!from)
		return sc;
	v = fabs((double)value) * from->factor;
	for (i = 0; family[i].label; i++)
		if ((!best || family[i].factor >= best->factor) && v / family[i].factor >= 1.0)
			best = &family[i];
	if (!best) /* below the smallest unit: pprof falls back to B or s */
		best = family == time_units ? &time_units[3] : &bytes_units[0];
	sc.factor = best->factor / from->factor;
	sc.label = best->label;
	return sc;
}

struct units_scale units__pick(const char *unit, int64_t min_value, int64_t total)
{
	struct units_scale lo, hi;

	if (min_value == 0)
		min_value = total;
	lo = units__auto(unit, min_value);
	hi = units__auto(unit, total);
	/* Different units: let the smallest value go down to 0.01 of the larger unit. */
	if (strcmp(lo.label, hi.label) && fabs((double)min_value) * 100 < fabs((double)total))
		lo = units__auto(unit, min_value * 100);
	return lo;
}

int units__nanos(const char *unit, int64_t v, int64_t *ns)
{
	const struct unit_def *family = NULL, *from = sniff(unit, &family);

	if (!from || family != time_units)
		return -EINVAL;
	*ns = (int64_t)((double)v * from->factor);
	return 0;
}

char *units__format(char *buf, size_t len, int64_t value, struct units_scale sc)
{
	size_t n;

	snprintf(buf, len, "%.2f", (double)value / sc.factor);
	n = strlen(buf);
	if (n > 3 && !strcmp(buf + n - 3, ".00"))
		buf[n - 3] = '\0';
	if (!strcmp(buf, "0") || !strcmp(buf, "-0"))
		return buf;
	n = strlen(buf);
	snprintf(buf + n, len - n, "%s", sc.label);
	return buf;
}

char *units__percent(char *buf, size_t len, int64_t value, int64_t total)
{
	double r = total ? fabs((double)value / (double)total) * 100 : 0;

	if (r >= 99.95 && r <= 100.05)
		snprintf(buf, len, "  100%%");
	else if (r >= 1.0)
		snprintf(buf, len, "%5.2f%%", r);
	else
		snprintf(buf, len, "%5.2g%%", r);
	return buf;
}
