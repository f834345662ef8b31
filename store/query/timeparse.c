// SPDX-License-Identifier: MIT
/* store/query/timeparse.c — from=/to= parsing (forms listed in timeparse.h). */
#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "store/query/timeparse.h"

#define NS_S  1000000000LL
#define NS_MS 1000000LL

/* Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm). */
static int64_t days_from_civil(int64_t y, int m, int d)
{
	int64_t era, yoe, doy, doe;

	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = y - era * 400;
	doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

static int days_in_month(int64_t y, int m)
{
	static const int dm[] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
	bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;

	return m == 2 && leap ? 29 : dm[m - 1];
}

/* Reads exactly n digits at *p into *v. */
static bool digits(const char **p, int n, int *v)
{
	*v = 0;
	for (int i = 0; i < n; i++) {
		if (!isdigit((unsigned char)(*p)[i]))
			return false;
		*v = *v * 10 + ((*p)[i] - '0');
	}
	*p += n;
	return true;
}

static int parse_date(const char *s, int64_t *out, char *err, size_t errlen)
{
	const char *p = s;
	int y, mo, d, h = 0, mi = 0, sec = 0, oh, om;
	int64_t frac = 0, ns;

	if (!digits(&p, 4, &y) || *p++ != '-' || !digits(&p, 2, &mo) || *p++ != '-' ||
	    !digits(&p, 2, &d))
		goto bad;
	if (*p == 'T' || *p == ' ') {
		p++;
		if (!digits(&p, 2, &h) || *p++ != ':' || !digits(&p, 2, &mi) || *p++ != ':' ||
		    !digits(&p, 2, &sec))
			goto bad;
		if (*p == '.') {
			int64_t scale = NS_S;

			p++;
			if (!isdigit((unsigned char)*p))
				goto bad;
			while (isdigit((unsigned char)*p)) {
				scale /= 10;
				frac += (*p++ - '0') * scale;
			}
		}
	}
	if (y < 1700 || y > 2200 || mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo) ||
	    h > 23 || mi > 59 || sec > 60) {
		snprintf(err, errlen, "time: '%s' is not a valid date and time", s);
		return -EINVAL;
	}
	ns = (days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec) * NS_S + frac;
	if (*p == 'Z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		int sign = *p++ == '+' ? 1 : -1;

		if (!digits(&p, 2, &oh))
			goto bad;
		if (*p == ':')
			p++;
		if (!digits(&p, 2, &om) || oh > 23 || om > 59)
			goto bad;
		ns -= sign * ((int64_t)oh * 3600 + om * 60) * NS_S;
	}
	if (*p)
		goto bad;
	*out = ns;
	return 0;
bad:
	snprintf(err, errlen, "time: cannot read '%s' (expected 2006-01-02T15:04:05, unix "
		 "seconds or now-1h)", s);
	return -EINVAL;
}

/* Unix time: 10 digits or fewer = s, 13 = ms, 16 = µs, 19 = ns (as Pyroscope decides). */
static int parse_unix(const char *s, int64_t *out, char *err, size_t errlen)
{
	size_t n = strlen(s);
	uint64_t v = 0;

	if (n > 19)
		goto bad;
	for (size_t i = 0; i < n; i++)
		v = v * 10 + (s[i] - '0');
	if (v > INT64_MAX)
		goto bad;
	if (n < 13) {
		if (v > (uint64_t)INT64_MAX / NS_S)
			goto bad;
		v *= NS_S;
	} else if (n < 16)
		v *= NS_MS;
	else if (n < 19)
		v *= 1000;
	*out = (int64_t)v;
	return 0;
bad:
	snprintf(err, errlen, "time: '%s' has too many digits for a unix time", s);
	return -EINVAL;
}

#define MAX_RELATIVE_NS (100LL * 366 * 86400 * NS_S)

static int parse_relative(const char *s, int64_t now, int64_t *out, char *err, size_t errlen)
{
	static const struct { const char *name; int64_t ns; } units[] = {
		{ "ms", NS_MS }, { "s", NS_S }, { "m", 60 * NS_S }, { "h", 3600 * NS_S },
		{ "d", 86400 * NS_S }, { "w", 7 * 86400 * NS_S },
	};
	const char *p = s + 3;
	int64_t total = 0;
	int sign;

	if (!*p) {
		*out = now;
		return 0;
	}
	if (*p != '-' && *p != '+')
		goto bad;
	sign = *p++ == '-' ? -1 : 1;
	if (!*p)
		goto bad;
	while (*p) { /* now-1h30m is accepted too */
		int64_t v = 0;
		size_t i, ul = 0;

		if (!isdigit((unsigned char)*p))
			goto bad;
		while (isdigit((unsigned char)*p)) {
			if (v > 1000000000)
				goto bad;
			v = v * 10 + (*p++ - '0');
		}
		for (i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
			ul = strlen(units[i].name);
			if (!strncmp(p, units[i].name, ul) && !isalpha((unsigned char)p[ul]))
				break;
		}
		if (i == sizeof(units) / sizeof(units[0])) {
			snprintf(err, errlen, "time: unknown unit '%.*s' in '%s' (ms s m h d w)",
				 (int)strcspn(p, "0123456789"), p, s);
			return -EINVAL;
		}
		/* Each term and the sum stay below a century, so now +/- total cannot overflow. */
		if (v > MAX_RELATIVE_NS / units[i].ns || total > MAX_RELATIVE_NS - v * units[i].ns)
			goto bad;
		total += v * units[i].ns;
		p += ul;
	}
	*out = now + sign * total;
	return 0;
bad:
	snprintf(err, errlen, "time: cannot read '%s' (expected now, now-1h, now-15m, now-7d)", s);
	return -EINVAL;
}

int timeparse(const char *s, int64_t now_ns, int64_t *out_ns, char *err, size_t errlen)
{
	if (!s || !*s) {
		snprintf(err, errlen, "time: empty");
		return -EINVAL;
	}
	if (!strncmp(s, "now", 3))
		return parse_relative(s, now_ns, out_ns, err, errlen);
	if (strspn(s, "0123456789") == strlen(s))
		return parse_unix(s, out_ns, err, errlen);
	return parse_date(s, out_ns, err, errlen);
}
