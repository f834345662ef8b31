/* SPDX-License-Identifier: MIT */
/*
 * agent/lib/env.h — libedgeprof.so's settings from the environment (EDGEPROF_*), read at start
 * (not async-signal-safe): one parser, so every setting takes and refuses the same values.
 */
#ifndef EDGEPROF_AGENT_ENV_H
#define EDGEPROF_AGENT_ENV_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

/* The environment's setting name, a decimal in [lo, hi]; else def (a bad value is told on
 * stderr, not taken; unset or empty: def). */
static inline unsigned long env__ulong(const char *name, unsigned long def, unsigned long lo,
				       unsigned long hi)
{
	const char *v = getenv(name);
	char *end;
	unsigned long x;

	if (!v || !*v)
		return def;
	errno = 0;
	x = strtoul(v, &end, 10);
	if (errno || *end || x < lo || x > hi) {
		fprintf(stderr, "edgeprof: %s=%s is not a number in %lu..%lu; using %lu\n", name, v,
			lo, hi, def);
		return def;
	}
	return x;
}

#endif /* EDGEPROF_AGENT_ENV_H */
