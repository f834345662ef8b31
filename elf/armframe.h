/* SPDX-License-Identifier: MIT */
/*
 * elf/armframe.h — frames of 32-bit ARM and Thumb-2 code without unwind tables, found by reading
 * the code: where the return address and the caller's sp are at a pc.
 *
 * Two readings, in the manner of GDB's arm-tdep.c prologue analyzer (learnt from, not copied):
 *
 *  - forward (first choice): from pc, the instructions are followed on one path to the
 *    function's return (`bx lr`, `pop {..., pc}`, `ldr pc, [sp], #4`, `mov pc, lr`, in ARM or
 *    Thumb-2), adding up what the path does to sp (pop, add sp, vpop; push, sub sp, vpush
 *    where a shrink-wrapped prologue comes later) and where the return address is loaded
 *    from. Compiled code without alloca has one frame layout per pc whatever the path, so any
 *    path to a return describes the frame at pc: samples in prologues, epilogues, leaves and
 *    shrink-wrapped early exits included. Conditional branches fall through (instructions in
 *    an IT block are skipped); a loop's unconditional back edge jumps to the furthest forward
 *    exit seen instead; an unconditional branch is followed (a tail call leads into the
 *    callee, whose return is ours). Calls clobber lr. Anything that sets sp in a way not
 *    modelled (mov sp, rN; sub sp, sp, rN: alloca), a table branch (tbb/tbh), a return
 *    through another register or an undefined instruction ends the reading: no frame.
 *  - backward (when the forward reading fails, e.g. in an endless loop): the nearest
 *    `push {..., lr}` / `stmdb sp!, {..., lr}` / `str lr, [sp, #-4]!` before pc, checked by
 *    decoding forward from it to land on pc exactly, and the `sub sp` / `vpush` that follow
 *    it: the frame of the function's body.
 *
 * Frames found this way are inferred, not read from tables: the caller marks them. Every code
 * read stays inside [lo, hi) and at most `budget` instructions are read; no allocation, no
 * locks, no system calls: async-signal-safe. Little-endian code only.
 */
#ifndef EDGEPROF_ELF_ARMFRAME_H
#define EDGEPROF_ELF_ARMFRAME_H

#include <stdbool.h>
#include <stdint.h>

/* Code as seen in memory: target address a is at mem + (a - lo); reads stay in [lo, hi). */
struct armframe_code {
	const uint8_t *mem;
	uint32_t lo, hi;
};

enum armframe_how {
	ARMFRAME_NONE,	   /* no frame found */
	ARMFRAME_FORWARD,  /* the path to a return */
	ARMFRAME_BACKWARD, /* the prologue before pc */
};

/*
 * The frame at pc. The caller's sp is sp + cfa. The return address is in lr (ra_in_lr: valid
 * only where the thread was interrupted) or the word at sp + ra_off. The registers of
 * saved_mask (bit k = r[k], r4-r11 only) are at sp + saved_off upwards, lowest first, right
 * below the return address (saved_off + 4 * their count = ra_off; else saved_mask is 0).
 */
struct armframe {
	enum armframe_how how;
	uint32_t cfa;
	uint32_t ra_off;
	bool ra_in_lr;
	uint16_t saved_mask;
	uint32_t saved_off;
	unsigned int insns; /* instructions read */
};

/*
 * Analyses the frame at pc (bit 0: Thumb). exact: pc is where the thread was (lr may still
 * hold the return address); else pc is a return address (lr was clobbered by the call).
 * Returns f->how != ARMFRAME_NONE.
 */
bool armframe__analyze(const struct armframe_code *c, uint32_t pc, bool exact,
		       unsigned int budget, struct armframe *f);

/*
 * The backward reading alone: for a second opinion where the forward one's return address
 * proved wrong (a path through a noreturn call runs into whatever follows it).
 */
bool armframe__prologue(const struct armframe_code *c, uint32_t pc, bool exact,
			unsigned int budget, struct armframe *f);

/*
 * Thumb-2 function edges where no table gives them (at start, not in the handler): the nearest
 * push of lr before pc (on an instruction boundary: decoding from it lands on pc), and the first
 * one from pc on (decoding forward). Bit 0 set; 0: none within budget instructions. A leaf
 * (no push) between two such pushes is not seen.
 */
uint32_t armframe__push_before(const struct armframe_code *c, uint32_t pc, unsigned int budget);
uint32_t armframe__push_after(const struct armframe_code *c, uint32_t pc, unsigned int budget);

/*
 * The frame at pc in the body of the Thumb-2 function whose code begins at start (bit 0 set;
 * its push of lr within its first 8 instructions): the push, and the sub sp / vpush right after
 * it. Right from the end of the prologue to the epilogue, where a function without alloca keeps
 * one frame; false before (pc within the push's first 34 bytes). For a function whose edges
 * are known and whose size is beyond the readings' budget (an interpreter's loop, 13-60 KiB).
 */
bool armframe__body(const struct armframe_code *c, uint32_t start, uint32_t pc,
		    struct armframe *f);

/* ra (bit 0: Thumb) follows a call instruction (bl, blx) in c: a plausible return address. */
bool armframe__after_call(const struct armframe_code *c, uint32_t ra);

#endif /* EDGEPROF_ELF_ARMFRAME_H */
