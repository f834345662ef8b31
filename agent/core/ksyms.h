/* SPDX-License-Identifier: MIT */
/*
 * agent/core/ksyms.h — kernel symbols from /proc/kallsyms, for the kernel frames of BPF samples.
 *
 * Two ways to hold them:
 *  - resident (ksyms__load): every text symbol, sorted by address. About 12 bytes plus the name
 *    per symbol (~2.3 MB for 64k symbols on a 6.x x86 kernel): for short-lived tools.
 *  - lazy (ksyms__open): nothing is read up front. Addresses are noted as samples arrive
 *    (ksyms__want), and ksyms__update names all of them, once a round and only when new call
 *    sites showed up: by asking the kernel for each (a namer, see ksyms__set_namer), or in one
 *    streaming pass over kallsyms. Names stay cached (at most
 *    max_entries addresses; when full the cache starts over, counted), so the agent holds
 *    only the kernel functions it has seen: tens of KB, and no 35 ms kallsyms read at start.
 * Both skip non-text symbols and the __pfx_ padding of 6.x kernels; the same address listed
 * twice keeps the first name. With kernel.kptr_restrict (or without CAP_SYSLOG) the kernel shows
 * every address as 0: ksyms__hidden() says so, it is logged once, and nothing resolves.
 */
#ifndef EDGEPROF_AGENT_KSYMS_H
#define EDGEPROF_AGENT_KSYMS_H

#include <stdbool.h>
#include <stdint.h>

struct ksyms;

struct ksyms_stats {
	uint64_t passes;    /* streaming reads of kallsyms */
	uint64_t lookups;   /* addresses the namer (the kernel, through BPF) was asked for */
	uint64_t named;     /* addresses named by those reads */
	uint64_t unnamed;   /* addresses no text symbol holds */
	uint64_t dropped;   /* wants that did not fit (their frames stay unnamed this round) */
	uint64_t resets;    /* times the full cache started over */
	unsigned cached;    /* addresses cached now */
};

struct ksyms *ksyms__load(void);                  /* NULL (errno set) if unreadable */
struct ksyms *ksyms__load_file(const char *path); /* same, from a kallsyms-format file */
/* Lazy: checks the file is readable and not hidden; caches at most max_entries addresses. */
struct ksyms *ksyms__open(const char *path, unsigned max_entries);
/* Lazy: notes addr for the next ksyms__update unless it is named already. */
void ksyms__want(struct ksyms *ks, uint64_t addr);
/*
 * Lazy: names every address wanted since the last call: through the namer if one is set, else
 * (or when it fails) in one pass over kallsyms; 0 or -errno.
 */
int ksyms__update(struct ksyms *ks);
/*
 * A cheaper source of names (the kernel's own lookup, run through BPF): the function holding
 * addr into name (len bytes) and its start; 0, -ENOENT (no symbol), other -errno: unusable.
 */
typedef int (*ksyms_namer_fn)(void *ctx, uint64_t addr, char *name, size_t len,
			      uint64_t *start);
void ksyms__set_namer(struct ksyms *ks, ksyms_namer_fn fn, void *ctx);
/* Name of the function holding addr (its start in *sym_start if not NULL), or NULL. */
const char *ksyms__resolve(const struct ksyms *ks, uint64_t addr, uint64_t *sym_start);
bool ksyms__hidden(const struct ksyms *ks);       /* addresses zeroed by kptr_restrict */
unsigned ksyms__count(const struct ksyms *ks);    /* symbols (resident) or addresses (lazy) */
void ksyms__stats(const struct ksyms *ks, struct ksyms_stats *st);
void ksyms__free(struct ksyms *ks);               /* NULL-safe */

#endif /* EDGEPROF_AGENT_KSYMS_H */
