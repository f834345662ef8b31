/* SPDX-License-Identifier: MIT */
/*
 * agent/lib/modules.h — the loaded modules as the SIGPROF unwinder may read them: which pcs are
 * code (text ranges) and where a module's unwind tables are (.eh_frame_hdr, or .ARM.exidx on
 * 32-bit ARM, each bounded by the load segment that holds it).
 *
 * The table is built outside the handler from dl_iterate_phdr() and rebuilt whenever the
 * loader's load/unload counters (dlpi_adds, dlpi_subs) moved: glibc loads and unloads modules
 * behind the program's back (gconv modules for iconv, NSS modules), so the interposed
 * dlopen()/dlclose() are not the only changes. The handler never trusts the table for a read:
 * before it reads a module's memory (unwind tables, code bytes), glibc's async-signal-safe
 * _dl_find_object() (2.35+) must find the pc in an object loaded now, and that object must be
 * the table's module (modules__readable). Without _dl_find_object (older glibc, other C
 * libraries) the handler reads no module memory at all (frame pointers only), unless
 * modules__trust_table() allowed it.
 *
 * Handler side (async-signal-safe): modules__enter/leave around a walk, modules__find(),
 * modules__readable(), modules__is_code(). Everything else takes the loader's lock: never
 * from the handler.
 */
#ifndef EDGEPROF_AGENT_MODULES_H
#define EDGEPROF_AGENT_MODULES_H

#include <stdbool.h>
#include <stdint.h>

#include "elf/cfi.h"
#include "elf/ehabi.h"

#define MODULES_MAX 256

struct module {
	uintptr_t text_lo, text_hi; /* executable segments */
	uintptr_t map_lo;	    /* where the loader mapped it (page of the first segment) */
	struct cfi_table cfi;	    /* reads bound by the load segment of .eh_frame_hdr (or NULL) */
	struct ehabi_table ehabi;   /* 32-bit ARM: .ARM.exidx (n == 0: none), in its segment */
};

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
/* pc is inside a loaded module's executable segment (the table's, or one loaded since). */
bool modules__is_code(uintptr_t pc);
/* The table's module whose text holds pc, or NULL. Names ranges only: read none of it yet. */
const struct module *modules__find(uintptr_t pc);
/* m (found for pc) is loaded now, so its memory may be read: proven by the loader. */
bool modules__readable(const struct module *m, uintptr_t pc);

void modules__stats(struct modules_stats *st);

#endif /* EDGEPROF_AGENT_MODULES_H */
