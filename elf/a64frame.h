/* SPDX-License-Identifier: MIT */
/*
 * elf/a64frame.h — frames of AArch64 code without unwind tables (built -fno-asynchronous-
 * unwind-tables -fno-unwind-tables, without frame pointers), found by reading the code: where
 * the return address, the caller's sp and the caller's x29 are at a pc. The AArch64 counterpart
 * of elf/armframe.h, in the same two readings (learnt from GDB's aarch64-tdep.c prologue
 * analyzer and Android libunwindstack's fallback, not copied):
 *
 *  - forward (first choice): from pc, the instructions are followed on one path to the
 *    function's `ret` (retaa, retab), adding up what the path does to sp (ldp/ldr with
 *    post-index, add sp; stp/str with pre-index, sub sp where a shrink-wrapped prologue comes
 *    later; `mov sp, x29` / `add sp, x29, #n` where x29 was set from sp on the path) and where
 *    x30 and x29 are loaded from. Conditional branches (b.cond, cbz, cbnz, tbz, tbnz) fall
 *    through; a loop's unconditional back edge jumps to the furthest forward exit seen
 *    instead; `b` is followed (a tail call leads into the callee, whose return is ours);
 *    `br` where the frame is gone is a tail call. bl/blr clobber x30. Anything that sets sp in
 *    a way not modelled (sub sp, sp, xN: alloca), a `br` inside a frame (a switch), a return
 *    through another register, brk, hlt or udf ends the reading: no frame.
 *  - backward (when the forward reading fails): the nearest store of x30 to the stack before
 *    pc (stp ..., x30, [sp, ...]; str x30, [sp, ...]), the prologue instructions just before
 *    it (sub sp, stores to [sp], paciasp, bti), and what that prologue does to sp up to its
 *    first branch or pc: the frame of the function's body.
 *
 * Hints (paciasp, autiasp, bti, nop) are no-ops to the reading. Frames found this way are
 * inferred, not read from tables: the caller marks them. Every code read stays inside [lo, hi);
 * the forward reading reads at most `budget` instructions, the backward one twice that; no
 * allocation, no locks, no system calls: async-signal-safe. Little-endian code only.
 */
#ifndef EDGEPROF_ELF_A64FRAME_H
#define EDGEPROF_ELF_A64FRAME_H

#include <stdbool.h>
#include <stdint.h>

/* Code as seen in memory: target address a is at mem + (a - lo); reads stay in [lo, hi). */
struct a64frame_code {
	const uint8_t *mem;
	uint64_t lo, hi;
};

enum a64frame_how {
	A64FRAME_NONE,	   /* no frame found */
	A64FRAME_FORWARD,  /* the path to a return */
	A64FRAME_BACKWARD, /* the prologue before pc */
};

/*
 * The frame at pc. The caller's sp is sp + cfa. The return address is in x30 (ra_in_lr: valid
 * only where the thread was interrupted) or the word at sp + ra_off. The caller's x29 is the
 * word at sp + fp_off when fp_saved, else x29 as it is.
 */
struct a64frame {
	enum a64frame_how how;
	uint32_t cfa;
	uint32_t ra_off;
	bool ra_in_lr;
	bool fp_saved;
	uint32_t fp_off;
	unsigned int insns; /* instructions read */
};

/*
 * A value the reading knows: the register as it was at the reading's start (V_REG: x30 the
 * interrupted lr, x29 the caller's x29), the word at sp + off (sp at the start), sp + off
 * itself (x29 set from sp), or nothing usable.
 */
enum a64frame_val_kind { A64FRAME_V_NONE, A64FRAME_V_REG, A64FRAME_V_MEM, A64FRAME_V_SP };

struct a64frame_val {
	enum a64frame_val_kind kind;
	int32_t off; /* offsets stay within +-2^27 (sp_add) */
};

/* A word stored to the stack by the reading, at sp + off: x29's or x30's value then. */
struct a64frame_slot {
	int32_t off;
	struct a64frame_val v;
	uint8_t reg;
};

/*
 * One reading's state (sp now = sp at the start + d), for a64frame.c only: the caller gives
 * its room (a thread's, not the interrupted stack's: a signal handler's stack is small).
 */
struct a64frame_work {
	const struct a64frame_code *c;
	uint64_t addr;
	bool exact;
	bool entry; /* started at the function's entry: nothing above sp is the frame's */
	int64_t d;
	struct a64frame_val lr, fp;  /* what x30 and x29 hold now */
	struct a64frame_slot slot[4]; /* x29 and x30 stored by the reading */
	unsigned int n_slot;
	/* registers holding a constant the path set (mov, movk): a large frame's size, for
	 * sub sp, sp, xN; a few (compilers use one scratch register for it) */
	uint8_t k_reg[4];
	int64_t k_val[4];
	unsigned int n_k;
	/* code offsets (from lo) + 1 of conditional branch targets not taken yet (0: taken), and
	 * of the unconditional back edges taken (their sources: loops) */
	uint32_t exits[12];
	unsigned int n_exits;
	uint32_t back[8];
	unsigned int n_back;
	bool tail_br;	    /* ended at a br with x30 as at pc: a tail call if the frame is gone */
	unsigned int n, budget;
	struct a64frame *f;
};

/*
 * Analyses the frame at pc. exact: pc is where the thread was (x30 may still hold the return
 * address); else pc is a return address (x30 was clobbered by the call). work: room for the
 * reading's state (~300 bytes), NULL: on the stack. Returns f->how != A64FRAME_NONE.
 */
bool a64frame__analyze(const struct a64frame_code *c, uint64_t pc, bool exact,
		       unsigned int budget, struct a64frame *f, struct a64frame_work *work);

/*
 * The backward reading alone: for a second opinion where the forward one's return address
 * proved wrong (a path through a noreturn call runs into whatever follows it).
 */
bool a64frame__prologue(const struct a64frame_code *c, uint64_t pc, bool exact,
			unsigned int budget, struct a64frame *f, struct a64frame_work *work);

/* ra follows a call instruction (bl, blr, blraa...) in c: a plausible return address. */
bool a64frame__after_call(const struct a64frame_code *c, uint64_t ra);

#endif /* EDGEPROF_ELF_A64FRAME_H */
