/* SPDX-License-Identifier: MIT */
/*
 * elf/ehabi.h — ARM EHABI unwind tables (32-bit ARM and Thumb-2): the .ARM.exidx entry of a
 * pc (found through PT_ARM_EXIDX), its unwind opcodes (inline personality 0, personality 1/2
 * in .ARM.extab, or the data after a generic personality such as __gxx_personality_v0) and
 * their effect on the registers: one frame unwound.
 *
 * Pure functions over memory the caller names, with 32-bit target addresses: no allocation,
 * no locks, no system calls — async-signal-safe for the armv7 SIGPROF handler, and usable on
 * any host for tests on real files. Every table read is checked against [lo, hi); every stack
 * read goes through the caller's reader (which checks the stack bounds).
 *
 * The tables describe the frame after the prologue (a call-site model, not one row per
 * instruction): a sample inside a prologue or epilogue can be unwound wrongly. gcc emits them
 * for C only with -funwind-tables (or -fasynchronous-unwind-tables, or C++ exceptions).
 */
#ifndef EDGEPROF_ELF_EHABI_H
#define EDGEPROF_ELF_EHABI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * A module's tables as seen in memory: target address a is at mem + (a - lo), reads stay in
 * [lo, hi) (the load segment holding .ARM.exidx, where the linker puts .ARM.extab too).
 */
struct ehabi_table {
	const uint8_t *mem;
	uint32_t lo, hi;
	uint32_t exidx; /* address of .ARM.exidx */
	uint32_t n;	/* its 8-byte entries */
};

#define EHABI_MAX_OPS 64 /* personality 1/2 hold at most 2 + 4 * 255 bytes: more is refused */

enum ehabi_kind {
	EHABI_NONE,	  /* no entry for pc, or one that cannot be read or is not understood */
	EHABI_CANTUNWIND, /* EXIDX_CANTUNWIND: the outermost frame, or code without tables */
	EHABI_OPS,	  /* opcodes follow */
};

/* The entry covering pc (Thumb bit ignored): its kind, its function's start, its opcodes. */
struct ehabi_entry {
	enum ehabi_kind kind;
	uint32_t start;
	uint8_t ops[EHABI_MAX_OPS];
	unsigned int n_ops;
};

/* Finds pc's entry (binary search on the prel31 function starts) and reads its opcodes. */
void ehabi__lookup(const struct ehabi_table *t, uint32_t pc, struct ehabi_entry *e);

/* Index of pc's entry, or -1: for caches (ehabi__entry_at reads entry i). */
int32_t ehabi__find(const struct ehabi_table *t, uint32_t pc);
void ehabi__entry_at(const struct ehabi_table *t, uint32_t i, struct ehabi_entry *e);

/* Reads one stack word at addr: false when addr is outside the stack. */
typedef bool (*ehabi_read_fn)(void *ctx, uint32_t addr, uint32_t *val);

enum ehabi_result {
	EHABI_STEP_OK,	 /* r[] holds the caller's registers; r[15] its pc */
	EHABI_STEP_STOP, /* the tables say stop: CANTUNWIND, or "refuse to unwind" */
	EHABI_STEP_BAD,	 /* spare or unsupported opcode, or a stack read failed */
};

/*
 * Runs e's opcodes on the registers r[0..15] (vsp starts at r[13]); at the end r[13] = vsp and,
 * unless an opcode popped r15, r[15] = r[14]. *ra_from_stack: r14 or r15 was popped (else the
 * return address is the link register as it was: right only for the interrupted frame).
 */
enum ehabi_result ehabi__execute(const struct ehabi_entry *e, uint32_t r[16], ehabi_read_fn rd,
				 void *ctx, bool *ra_from_stack);

#endif /* EDGEPROF_ELF_EHABI_H */
