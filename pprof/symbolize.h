/* SPDX-License-Identifier: MIT */
/*
 * pprof/symbolize.h — give names to a profile's unsymbolized locations where the debug files
 * are (the collector's debug-file store, or a desktop directory).
 *
 * Devices send build-ids and addresses (profiles from stripped binaries, or an agent built
 * without on-device symbolization). For each location that has no line entries and whose
 * mapping the resolver knows, one line with the resolved function (and its source file and line
 * when the resolver has them) is added, and the mapping is marked has_functions (and
 * has_filenames, has_line_numbers) so pprof does not try again. Everything else is copied as is.
 */
#ifndef EDGEPROF_PPROF_SYMBOLIZE_H
#define EDGEPROF_PPROF_SYMBOLIZE_H

#include "pprof/pprof.h"

/* What a resolver knows of an address: always the function, file:line when it has them. */
struct pprof_resolved {
	const char *function;
	const char *filename; /* NULL when unknown */
	int64_t line;	      /* 0 when unknown */
};

/*
 * Fills *out (zeroed by the caller) for address in mapping m of p; false when the function is
 * unknown. Called at most once per location; the strings must stay valid until
 * pprof_symbolize() returns.
 */
typedef bool (*pprof_resolve_fn)(void *ctx, const struct pprof_profile *p,
				 const struct pprof_mapping *m, uint64_t address,
				 struct pprof_resolved *out);

/*
 * A symbolized copy of p in *out (p is untouched). *n_resolved (may be NULL) counts the
 * locations that got a name. Returns 0 or -errno (-ENOMEM, a builder bound).
 */
int pprof_symbolize(const struct pprof_profile *p, pprof_resolve_fn resolve, void *ctx,
		    struct pprof_profile **out, size_t *n_resolved);

#endif /* EDGEPROF_PPROF_SYMBOLIZE_H */
