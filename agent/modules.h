/* SPDX-License-Identifier: MIT */
/*
 * agent/modules.h — the loaded modules as the SIGPROF unwinder may read them: which pcs are
 * code (text ranges) and where a module's unwind table is (.eh_frame_hdr, bounded by its
 * PT_LOAD segments).
 *
 * The table is built outside the handler from dl_iterate_phdr() and rebuilt whenever the
 * loader's load/unload counters (dlpi_adds, dlpi_subs) moved: glibc loads and unloads modules
 * behind the program's back (gconv modules for iconv, NSS modules), so the interposed
 * dlopen()/dlclose() are not the only changes. The handler never trusts the table for a read:
 * before it reads a module's unwind table, glibc's async-signal-safe _dl_find_object() (2.35+)
 * must find the pc in an object loaded now, and the table read is the one it names. Without
 * _dl_find_object (older glibc, other C libraries) the handler reads no unwind table at all
 * (frame pointers only), unless modules__trust_table() allowed it.
 *
 * Handler side (async-signal-safe): modules__enter/leave around a walk, modules__is_code(),
 * modules__cfi(). Everything else takes the loader's lock: never from the handler.
 */
#ifndef EDGEPROF_AGENT_MODULES_H
#define EDGEPROF_AGENT_MODULES_H

#include <stdbool.h>
#include <stdint.h>

#include "elf/cfi.h"

#define MODULES_MAX 256

struct modules_stats {
	uint64_t rebuilds;   /* tables built (a load or an unload seen, or asked for) */
	uint64_t stale;	     /* lookups where the table named a module not loaded now */
	uint64_t unverified; /* unwind-table reads refused: no _dl_find_object to prove them */
	unsigned int n, max; /* modules now; MODULES_MAX */
	uint64_t overflow;   /* modules beyond MODULES_MAX (their frames end the walk) */
};

/* Rebuilds the table now (waits for walks in flight). Returns the number of modules. */
int modules__rebuild(void);
/*
 * Rebuilds the table when a module came or went since the last build (or a walk saw a stale
 * entry): one dl_iterate_phdr() callback when nothing changed. Returns 1 if it rebuilt.
 */
int modules__refresh(void);
/* Empties the table and waits for walks in flight: call before something unmaps a module. */
void modules__suspend(void);
/* Without _dl_find_object, let walks read unwind tables on the table's word (tests only). */
void modules__trust_table(bool on);

/* Handler side. A walk is bracketed by enter/leave so modules__suspend() can wait for it. */
void modules__enter(void);
void modules__leave(void);
/* Bumped whenever the table (or what a pc means) changed: caches of older ones are void. */
unsigned int modules__generation(void);
/* pc is inside a loaded module's executable segment. */
bool modules__is_code(uintptr_t pc);
/* The unwind table covering pc, of a module loaded now: false when there is none proven. */
bool modules__cfi(uintptr_t pc, struct cfi_table *t);

void modules__stats(struct modules_stats *st);

#endif /* EDGEPROF_AGENT_MODULES_H */
