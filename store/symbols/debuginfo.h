/* SPDX-License-Identifier: MIT */
/*
 * store/symbols/debuginfo.h — the collector's debug-file store: unstripped ELF files by build-id, in
 * one directory, and the symbolization of stored profiles with them.
 *
 * Devices run stripped binaries; their profiles carry build-ids and addresses. A build host
 * uploads the unstripped twin (`edgeprof debuginfo upload FILE`), and every query that exports a
 * profile names the functions of mappings whose build-id has a file here (.symtab, else
 * .dynsym) and, with CONFIG_COLLECTOR_DWARF, gives them file:line from the DWARF line table
 * (store/symbols/dwarf-line.h). Unknown build-ids stay addresses: never a wrong name.
 *
 * Bounded: total bytes on disk (uploads past it are refused), symbol and line tables in memory
 * (least recently used dropped). Thread-safe.
 */
#ifndef EDGEPROF_STORE_DEBUGINFO_H
#define EDGEPROF_STORE_DEBUGINFO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pprof/pprof.h"

struct debuginfo_opts {
	const char *dir;	/* created when missing */
	uint64_t max_total;	/* bytes on disk; 0 = CONFIG_COLLECTOR_DEBUGINFO_TOTAL_MB */
	size_t cache_bytes;	/* symbol tables in memory; 0 = CONFIG_COLLECTOR_SYMBOL_CACHE_MB */
};

struct debuginfo;

struct debuginfo *debuginfo__open(const struct debuginfo_opts *o, char *err, size_t errlen);
void debuginfo__free(struct debuginfo *d); /* NULL-safe */

/* True for 2..80 lowercase hex digits (what pprof writes as a build_id). */
bool debuginfo__valid_build_id(const char *build_id);

/*
 * Stores data as the debug file of build_id. -EINVAL (not ELF, no build-id note, or the file's
 * build-id differs: err says which), -EDQUOT (the store's bound is reached), -ENOSPC (the
 * disk is full), -errno. A second upload of the same build-id replaces the first.
 */
int debuginfo__put(struct debuginfo *d, const char *build_id, const void *data, size_t len,
		   char *err, size_t errlen);

/* Calls cb for each stored file; returns the count or cb's negative return. */
int debuginfo__list(struct debuginfo *d,
		    int (*cb)(void *ctx, const char *build_id, uint64_t size), void *ctx);

/* Whether a debug file is stored for one of p's mappings without functions (a copy to come). */
bool debuginfo__names_any(struct debuginfo *d, const struct pprof_profile *p);

/*
 * A copy of p with the functions of known build-ids named (pprof_symbolize), or NULL in *out
 * when nothing could be named (use p as it is). 0 or -errno.
 */
int debuginfo__symbolize(struct debuginfo *d, const struct pprof_profile *p,
			 struct pprof_profile **out, size_t *n_resolved);

/* The path of build_id's stored file in path: 0, -EINVAL (not a build-id), -ENOENT (none). */
int debuginfo__file(struct debuginfo *d, const char *build_id, char *path, size_t len);

struct debuginfo_stats {
	uint64_t files, bytes, uploads, rejected, cache_hits, cache_loads, cache_evictions;
	uint64_t line_tables; /* debug files loaded with a usable DWARF line table */
	uint64_t line_errors; /* ... whose line table was malformed or too big (names only) */
};
void debuginfo__stats(struct debuginfo *d, struct debuginfo_stats *st);

#endif /* EDGEPROF_STORE_DEBUGINFO_H */
