/* SPDX-License-Identifier: MIT */
/*
 * elf/cfi.h — call frame information: the CFA rules of one pc, read from a module's
 * .eh_frame through its .eh_frame_hdr search table (PT_GNU_EH_FRAME).
 *
 * Only what a frame-pointer unwinder needs to step over one frame: where the CFA is (stack or
 * frame pointer plus an offset) and where the frame pointer and the return address were saved;
 * the outermost frame (DW_CFA_undefined on the return address: _start, clone) and x86_64's PLT
 * stubs (one DW_CFA_def_cfa_expression for the whole .plt, recognised by its shape). Anything
 * else (other expressions, registers saved in registers) makes the lookup fail.
 *
 * Pure functions over memory the caller names: no allocation, no locks, no system calls, so
 * they are async-signal-safe (the SIGPROF unwinder calls them in its handler) and serve the
 * BPF sampler too, on files of other processes mapped into the agent (bpf/leaf.c).
 * Every read is checked against [lo, hi).
 */
#ifndef EDGEPROF_ELF_CFI_H
#define EDGEPROF_ELF_CFI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* DWARF register numbers of the frame pointer, stack pointer and return address column. */
#if defined(__x86_64__)
#define CFI_REG_FP 6
#define CFI_REG_SP 7
#define CFI_REG_RA 16
#elif defined(__aarch64__)
#define CFI_REG_FP 29
#define CFI_REG_SP 31
#define CFI_REG_RA 30
#else
#define CFI_REG_FP 11
#define CFI_REG_SP 13
#define CFI_REG_RA 14
#endif

/*
 * A module's unwind table as seen in memory: reads stay inside [lo, hi); eh_hdr points at
 * .eh_frame_hdr. Pcs are in the same address space as the table's pc-relative pointers.
 */
struct cfi_table {
	uintptr_t lo, hi;
	const uint8_t *eh_hdr;
};

/*
 * cfa_reg of a PLT stub: CFA = SP + cfa_off, plus 8 when (pc & 15) >= plt_min (the stub has
 * pushed its relocation index by then): binutils' x86_64 .plt expression.
 */
#define CFI_CFA_PLT 0x100

/*
 * The rules at one pc: CFA = cfa_reg + cfa_off; FP and RA saved at CFA + off (or not saved);
 * ra_undefined: the return address column is DW_CFA_undefined, the outermost frame.
 */
struct cfi_rules { /* 32 bytes: the SIGPROF handler keeps several on the interrupted stack */
	int64_t cfa_off, fp_off, ra_off;
	unsigned int cfa_reg;
	bool fp_saved, ra_saved;
	bool ra_undefined; /* DW_CFA_undefined on the return address: the outermost frame */
	uint8_t plt_min;   /* CFI_CFA_PLT: the stub's offset from which CFA is 8 bytes further */
};

/* The rules at pc: false when pc has no FDE or its rules are beyond what is tracked. */
bool cfi__rules_at(const struct cfi_table *t, uintptr_t pc, struct cfi_rules *r);
/* The same, and the pcs [row[0], row[1]) that share these rules (one row of the FDE's table). */
bool cfi__rules_row(const struct cfi_table *t, uintptr_t pc, struct cfi_rules *r,
		    uintptr_t row[2]);

/*
 * A file with .eh_frame but no .eh_frame_hdr (gcc gives a static link none): its FDEs by
 * initial location, built once by walking the section.
 */
struct cfi_fde {
	uintptr_t pc, fde;
};

/*
 * Indexes the FDEs of eh_frame (len bytes, inside t) into out, sorted: how many (<= max). Not
 * for signal handlers (it sorts with qsort).
 */
size_t cfi__index(const struct cfi_table *t, const uint8_t *eh_frame, size_t len,
		  struct cfi_fde *out, size_t max);
/* cfi__rules_at() through such an index instead of .eh_frame_hdr. */
bool cfi__rules_indexed(const struct cfi_table *t, const struct cfi_fde *idx, size_t n,
			uintptr_t pc, struct cfi_rules *r);

/*
 * Every row of a module's table, in pc order: fn(ctx, pc, r) for the rules that hold from pc up
 * to the next row's pc; r is NULL where no rules hold (between FDEs, after an FDE's end, or
 * where its instructions go beyond what is tracked). Rows repeat when nothing tracked changed.
 * The FDEs come from idx (n of them, cfi__index) or, idx NULL, from .eh_frame_hdr. fn returns
 * false to stop. Returns the FDEs walked, or -1 when the table is unreadable. Not for signal
 * handlers (no reason it could not be, but it walks the whole table).
 */
typedef bool (*cfi_row_fn)(void *ctx, uintptr_t pc, const struct cfi_rules *r);
long cfi__rows(const struct cfi_table *t, const struct cfi_fde *idx, size_t n, cfi_row_fn fn,
	       void *ctx);

/*
 * Rules packed in 64 bits, for caches: 0 means "no usable rules". Returns 0 also for rules
 * that do not fit (offsets beyond 16 bits, a CFA on another register): correct, not cached.
 * Bits 4-7 are left to the caller (cfi__pack leaves them 0, cfi__unpack ignores them).
 */
#define CFI_PACKED_NONE 0
bool cfi__pack(const struct cfi_rules *r, uint64_t *packed);
/* false for CFI_PACKED_NONE */
bool cfi__unpack(uint64_t packed, struct cfi_rules *r);

#endif /* EDGEPROF_ELF_CFI_H */
