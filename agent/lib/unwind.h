/* SPDX-License-Identifier: MIT */
/*
 * agent/lib/unwind.h — the SIGPROF sampler's async-signal-safe stack walker.
 *
 * Every frame by the module's unwind tables where it has them (.eh_frame through
 * PT_GNU_EH_FRAME on x86_64 and aarch64, .ARM.exidx through PT_ARM_EXIDX on armv7), by the
 * frame pointer where it has none. The tables' outermost frame ends the walk; PLT stubs and
 * signal trampolines are walked through.
 *
 * Every stack read is checked: against the thread's stack bounds when known, else through
 * process_vm_readv(2) (which fails instead of faulting). Unwind tables are read only inside
 * the load segment holding them, in modules the loader reports loaded at the time of the read
 * (agent/lib/modules.h; unwind__init() builds the table: not async-signal-safe, call it outside
 * the handler). Depth is bounded by the caller.
 */
#ifndef EDGEPROF_AGENT_UNWIND_H
#define EDGEPROF_AGENT_UNWIND_H

#include <stdbool.h>
#include <stdint.h>

#include "elf/a64frame.h"

struct unwind_stats {
	uint64_t cfi_leaf;	/* leaf frames unwound through .eh_frame */
	uint64_t cfi_rescue;	/* frames above the leaf unwound through .eh_frame */
	uint64_t no_fde;	/* pc in no module or no usable FDE: frame pointer instead */
	uint64_t fp_steps;	/* frames unwound by the frame pointer chain */
	uint64_t outermost;	/* walks ended by the tables' outermost frame (_start, clone) */
	uint64_t signal_frames; /* signal trampolines walked through */
	uint64_t inferred;	/* frames found by reading code, not tables (armv7: armframe.h,
				 * arm64: a64frame.h) */
}; /* all uint64_t: unwind.c adds them up as an array */

/*
 * Records the loaded modules and their .eh_frame_hdr; returns how many. Safe while other
 * threads unwind (it waits for them); call it again after dlopen()/dlclose().
 */
int unwind__init(void);
/* Forgets the modules (until the next unwind__init): call before dlclose() unmaps one. */
void unwind__suspend(void);

/*
 * armv7: a function whose edges a walker found (an interpreter's loop: agent/lib/luaframes.c,
 * pyframes.c), larger than the code readings' budget (CONFIG_UNWIND_ARM_SCAN_INSNS): its frames
 * are read from its prologue (elf/armframe.h: armframe__body). At start, outside the handler.
 * false: the table is full, or not armv7.
 */
#define UNWIND_ARM_BODIES 4
bool unwind__arm_body(uintptr_t lo, uintptr_t hi);

/* UNWIND_TABLES: the tables and frame pointers, no frame read from code (a control) */
enum unwind_mode { UNWIND_FP = 0, UNWIND_CFI = 1, UNWIND_TABLES = 2 };

/*
 * The CFA rules of recently unwound pcs. A handler starts with cold caches and TLBs (the
 * kernel entry flushed them), so walking .eh_frame_hdr and the FDE again costs microseconds;
 * a hit costs a cache line or two. Return addresses repeat exactly: a table by pc, four ways
 * per set (one cache line), so that two hot return addresses hashed alike do not evict each
 * other on every sample. Interrupted pcs (the leaf) rarely repeat: rows of the tables ([lo, hi)
 * ranges sharing one rule), replaced in turn. One per thread (TLS), never shared: no locking.
 */
#define UNWIND_CACHE_SETS 32
#define UNWIND_CACHE_WAYS 4
#define UNWIND_CACHE_ROWS 32
struct unwind_cache {
	struct {
		uint64_t pc, rule;
	} e[UNWIND_CACHE_SETS][UNWIND_CACHE_WAYS] __attribute__((aligned(64)));
	struct {
		uint64_t lo, hi, rule;
	} row[UNWIND_CACHE_ROWS];
	unsigned int row_next;
	uint64_t hits, misses;
	unsigned int gen; /* the module table these entries belong to */
	unsigned int inferred; /* the last walk's frames found by reading code: marked */
#if defined(__aarch64__)
	struct a64frame_work a64; /* a reading of code's state: here, not on the signal stack */
#endif
};

/*
 * Walks the stack of the interrupted context uctx (a ucontext_t *). Writes at most max return
 * addresses, leaf first (frames[0] is the interrupted pc), sets *truncated when the chain went
 * on beyond max. stack_lo/hi bound the thread's stack (0/0 = unknown). Returns the count.
 */
unsigned int unwind__stack(const void *uctx, uintptr_t stack_lo, uintptr_t stack_hi,
			   enum unwind_mode mode, struct unwind_cache *cache, uint64_t *frames,
			   unsigned int max, bool *truncated);

void unwind__stats(struct unwind_stats *st);

#endif /* EDGEPROF_AGENT_UNWIND_H */
