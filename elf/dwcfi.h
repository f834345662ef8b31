/* SPDX-License-Identifier: MIT */
/*
 * elf/dwcfi.h — DWARF call frame information of a file of another machine, read from its
 * .debug_frame, for unwinding a copy of that machine's registers and stack (the collector's
 * stack snapshots, pprof/snapshot.h), as perf --call-graph dwarf does with libunwind/libdw.
 *
 * elf/cfi.h serves the SIGPROF handler: .eh_frame of the running process, native pointers, only
 * the CFA, the frame pointer and the return address. This one reads .debug_frame (what gcc -g
 * writes on ARM, where -O2 code has no .eh_frame: CIE id 0xffffffff, CIE pointers from the
 * section's start, addresses of the target's size, no augmentation data) and tracks every
 * register of a 32-bit ARM frame (r0-r15), since a caller's CFA may be computed from any
 * register the callee saved (r7 in Thumb-2 frames with alloca). Registers beyond r15 (VFP
 * d8-d15 are 256-271) are read and ignored: the chain needs only the core registers.
 * The rules: CFA = register + offset (DW_CFA_def_cfa_expression refused), a register
 * undefined, unchanged, saved at CFA + n, equal to CFA + n, or in another register; a
 * DW_CFA_expression on r0-r15 refuses the row. Every read is checked against the section;
 * instructions per FDE and the remember-state stack are bounded.
 */
#ifndef EDGEPROF_ELF_DWCFI_H
#define EDGEPROF_ELF_DWCFI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DWCFI_REGS	 16
#define DWCFI_ARM_SP	 13
#define DWCFI_ARM_LR	 14
#define DWCFI_ARM_PC	 15
#define DWCFI_MAX_INSNS	 4096 /* CFA instructions run per lookup */
#define DWCFI_MAX_STATES 8    /* DW_CFA_remember_state depth */

enum dwcfi_how { DWCFI_SAME = 0, DWCFI_UNDEF, DWCFI_OFFSET, DWCFI_VAL_OFFSET, DWCFI_REGISTER };

struct dwcfi_rule {
	uint8_t how; /* enum dwcfi_how */
	uint8_t reg; /* DWCFI_REGISTER: the register holding the value */
	int32_t off; /* DWCFI_OFFSET, DWCFI_VAL_OFFSET: from the CFA */
};

/* The rules at one pc: CFA = cfa_reg + cfa_off; the caller's pc is in column ra_reg. */
struct dwcfi_row {
	uint8_t cfa_reg, ra_reg;
	int32_t cfa_off;
	struct dwcfi_rule reg[DWCFI_REGS];
};

struct dwcfi_fde {
	uint32_t lo, hi; /* [lo, hi): the pcs it covers, the Thumb bit cleared */
	uint32_t off;	 /* of the FDE in the section */
};

/* A .debug_frame section of a 32-bit file, indexed by pc. */
struct dwcfi {
	const uint8_t *sec;
	size_t len;
	struct dwcfi_fde *fdes; /* sorted by lo */
	size_t n_fdes;
};

/*
 * Indexes the FDEs of sec (len bytes; kept by the caller while t is used): 0, -EINVAL (a
 * malformed entry: err says which), -E2BIG (more than max_fdes), -ENOMEM.
 */
int dwcfi__open(struct dwcfi *t, const uint8_t *sec, size_t len, size_t max_fdes, char *err,
		size_t errlen);
void dwcfi__close(struct dwcfi *t); /* NULL-safe, twice-safe */

/* The rules at pc: 0, -ENOENT (no FDE covers pc), -EINVAL (malformed or beyond what is kept). */
int dwcfi__row_at(const struct dwcfi *t, uint32_t pc, struct dwcfi_row *row);

/* Registers of one frame: known has bit i when r[i] is known. */
struct dwcfi_regs {
	uint32_t r[DWCFI_REGS];
	uint32_t known;
};

/* Reads 4 bytes at addr of the copied stack: false when outside it. */
typedef bool (*dwcfi_read_fn)(void *ctx, uint32_t addr, uint32_t *val);

enum dwcfi_step {
	DWCFI_STEPPED = 0, /* regs are the caller's: r[15] its pc (the return address) */
	DWCFI_OUTERMOST,   /* the return address column is undefined: the chain ends here */
	DWCFI_LEFT_COPY,   /* a saved register lies outside the copied stack */
	DWCFI_UNKNOWN_REG, /* the CFA or a saved value needs a register not known */
};

/* One frame up by row: the caller's registers in regs. */
enum dwcfi_step dwcfi__step(const struct dwcfi_row *row, struct dwcfi_regs *regs,
			    dwcfi_read_fn read, void *ctx);

#endif /* EDGEPROF_ELF_DWCFI_H */
