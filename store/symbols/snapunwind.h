/* SPDX-License-Identifier: MIT */
/*
 * store/symbols/snapunwind.h — the exact chains of samples that came with a stack snapshot
 * (pprof/snapshot.h), unwound at ingest with the .debug_frame of the debug files uploaded
 * with `edgeprof debuginfo upload` (elf/dwcfi.h): what perf --call-graph dwarf does on a desktop,
 * done where the debug files are.
 *
 * A sample's walk starts from its registers and reads saved registers only inside the copied
 * stack. Its chain replaces the device's, labelled unwind=exact, when the walk stepped and
 * every frame it gives came from the tables: it ended at the outermost frame (return address
 * undefined), or at a return address into code without tables here (a module without a debug
 * file, a pc without an FDE: _start, a C library without its debug file). There the chain is
 * cut, unless the device's chain was found by tables too (not labelled unwind=inferred) and
 * holds the same return address: it then goes on as the device's. A walk that cannot step from
 * the leaf, or stops inside the tables (a saved register beyond the copy, a register not
 * known, malformed CFI, too deep) keeps the device's chain and labels; counted by reason.
 * Every snapshot label is removed: stored profiles carry no stack bytes.
 *
 * Bounded: SNAPUNWIND_MAX_SAMPLES snapshots unwound per profile (the rest only stripped,
 * counted), SNAPUNWIND_MAX_FILES debug files read per profile, each's .debug_frame at most
 * SNAPUNWIND_MAX_SECTION bytes, SNAPUNWIND_MAX_DEPTH frames per walk.
 */
#ifndef EDGEPROF_STORE_SNAPUNWIND_H
#define EDGEPROF_STORE_SNAPUNWIND_H

#include <stdint.h>

#include "pprof/pprof.h"
#include "store/symbols/debuginfo.h"

#define SNAPUNWIND_MAX_SAMPLES 4096
#define SNAPUNWIND_MAX_FILES   16
#define SNAPUNWIND_MAX_SECTION (16u << 20)
#define SNAPUNWIND_MAX_DEPTH   128

struct snapunwind_stats {
	uint64_t snapshots;	/* samples that carried one */
	uint64_t exact;		/* chains replaced by the walk's (outermost or spliced) */
	uint64_t spliced;	/* ... of which go on as the device's (tables) beyond the walk */
	uint64_t cut;		/* ... of which end at code without tables here (_start, libc) */
	uint64_t bad_snapshot;	/* unreadable label, or not of this profile's machine */
	uint64_t no_debug_file; /* the leaf's module has no debug file with .debug_frame */
	uint64_t no_fde;	/* the leaf's pc has no FDE */
	uint64_t left_snapshot; /* a saved return address beyond the copied stack */
	uint64_t unknown_reg;	/* the CFA or the return address from a register not known */
	uint64_t bad_cfi;	/* malformed or unsupported CFA instructions */
	uint64_t too_deep;	/* more than SNAPUNWIND_MAX_DEPTH frames */
	uint64_t over_limit;	/* beyond SNAPUNWIND_MAX_SAMPLES: stripped, not unwound */
};

/* One call's inputs and outputs. */
struct snapunwind_call {
	struct debuginfo *d;
	const struct pprof_budget *b; /* NULL: nothing charged */
	struct pprof_buf *out;
	size_t out_held;	      /* of b, held by out on return: the caller gives it back */
	struct snapunwind_stats *st;  /* what happened, added to */
	char err[200];		      /* the budget's refusal */
};

/*
 * When p has samples with a snapshot: writes p with their chains unwound and every snapshot
 * label removed (gzip) into call->out, adds what happened to *call->st, and returns 1. Returns
 * 0 (out untouched) when p has none; -ENOMEM; or the budget's refusal (-EFBIG: over the
 * request's bound; -EAGAIN: the budget is momentarily full), its words in call->err.
 * Everything the rewrite allocates is taken from call->b before it is allocated: the debug
 * files' sections and FDE indexes, the walks, the copy's tables, the output (given back but
 * for the output's share, call->out_held).
 */
int snapunwind__profile(struct snapunwind_call *call, const struct pprof_profile *p);

#endif /* EDGEPROF_STORE_SNAPUNWIND_H */
