// SPDX-License-Identifier: MIT
/*
 * elf/a64frame.c — see a64frame.h. Encodings from the Arm Architecture Reference Manual for
 * A-profile (DDI 0487), C4.1: branches and exception generation, loads and stores (pair,
 * unsigned offset, pre/post-index, unscaled, register offset, literal), data processing
 * (immediate, register), hints.
 */
#include <string.h>

#include "elf/a64frame.h"

#define REG_FP 29
#define REG_LR 30
#define REG_SP 31 /* as a base register and in add/sub (immediate, extended) */

enum sim_step { S_NEXT, S_DONE, S_FAIL };

/*
 * A reading's start: only the counts and what they guard are set (the arrays are read below
 * their counts): the handler spends no time zeroing them.
 */
static void sim_init(struct a64frame_work *s, const struct a64frame_code *c, uint64_t addr, bool exact,
		     bool entry, struct a64frame *f)
{
	s->c = c;
	s->addr = addr;
	s->exact = exact;
	s->entry = entry;
	s->d = 0;
	s->lr = (struct a64frame_val){exact || entry ? A64FRAME_V_REG : A64FRAME_V_NONE, 0};
	s->fp = (struct a64frame_val){A64FRAME_V_REG, 0};
	s->n_slot = s->n_exits = s->n_back = s->n = s->n_k = 0;
	s->tail_br = false;
	s->f = f;
}

static bool is_branch(uint32_t w)
{
	return (w & 0x7c000000) == 0x14000000 || (w & 0xff000010) == 0x54000000 ||
	       (w & 0x7c000000) == 0x34000000 || (w & 0xfe1f0000) == 0xd61f0000;
}

static bool read32(const struct a64frame_code *c, uint64_t a, uint32_t *v)
{
	if (a < c->lo || c->hi < 4 || a > c->hi - 4 || (a & 3))
		return false;
	memcpy(v, c->mem + (a - c->lo), 4);
	return true;
}

static int64_t sext(uint32_t v, unsigned int bits)
{
	uint64_t m = 1ull << (bits - 1);

	return (int64_t)((v ^ m) - m);
}

/* ---- the stack words the reading wrote ------------------------------------------------- */

/* The value read from the stack word at sp + off. */
static struct a64frame_val stack_word(const struct a64frame_work *s, int64_t off)
{
	for (unsigned int i = 0; i < s->n_slot; i++)
		if (s->slot[i].off == off)
			return s->slot[i].v;
	if (off >= 0 && !s->entry)
		return (struct a64frame_val){A64FRAME_V_MEM, (int32_t)off}; /* the frame at pc: a word above its sp */
	return (struct a64frame_val){A64FRAME_V_NONE, 0};
}

/* A 64-bit store of reg (x29, x30: their value is kept; others make the word unknown). */
static void store_word(struct a64frame_work *s, int64_t off, unsigned int reg)
{
	struct a64frame_val v = reg == REG_LR ? s->lr : reg == REG_FP ? s->fp : (struct a64frame_val){A64FRAME_V_NONE, 0};
	unsigned int i;

	for (i = 0; i < s->n_slot && s->slot[i].off != off; i++)
		;
	if (i == s->n_slot) {
		if (v.kind == A64FRAME_V_NONE || i == sizeof(s->slot) / sizeof(s->slot[0]))
			return; /* nothing known stored over nothing known */
		s->n_slot++;
	}
	s->slot[i] = (struct a64frame_slot){(int32_t)off, v, (uint8_t)reg};
}

/* The constant reg holds (a mov on the path set it), or false. */
static bool constant(const struct a64frame_work *s, unsigned int reg, int64_t *v)
{
	for (unsigned int i = 0; i < s->n_k; i++) {
		if (s->k_reg[i] == reg) {
			*v = s->k_val[i];
			return true;
		}
	}
	return false;
}

static void clobber(struct a64frame_work *s, unsigned int reg)
{
	for (unsigned int i = 0; i < s->n_k; i++) {
		if (s->k_reg[i] == reg) {
			s->k_reg[i] = s->k_reg[s->n_k - 1];
			s->k_val[i] = s->k_val[--s->n_k];
			break;
		}
	}
	if (reg == REG_LR)
		s->lr.kind = A64FRAME_V_NONE;
	else if (reg == REG_FP)
		s->fp.kind = A64FRAME_V_NONE;
}

/* A load of reg from the word at sp + off (sp_based), or from elsewhere. */
static void load_reg(struct a64frame_work *s, unsigned int reg, bool sp_based, int64_t off)
{
	struct a64frame_val v = sp_based ? stack_word(s, off) : (struct a64frame_val){A64FRAME_V_NONE, 0};

	clobber(s, reg);
	if (reg == REG_LR)
		s->lr = v;
	else if (reg == REG_FP)
		s->fp = v;
}

static enum sim_step sp_add(struct a64frame_work *s, int64_t v)
{
	if (v > (1 << 24) || v < -(1 << 24) || s->d + v > (1 << 26) || s->d + v < -(1 << 26))
		return S_FAIL;
	s->d += v;
	return S_NEXT;
}

/* ---- the forward reading: to the function's return ------------------------------------- */

/* A return to v with sp now at d: the frame is found when v is a usable return address. */
static enum sim_step ret(struct a64frame_work *s, struct a64frame_val v)
{
	struct a64frame *f = s->f;

	if (s->d < 0 || v.kind == A64FRAME_V_NONE || v.kind == A64FRAME_V_SP || (v.kind == A64FRAME_V_REG && !s->exact) ||
	    (v.kind == A64FRAME_V_MEM && (v.off > s->d - 8 || v.off < 0)))
		return S_FAIL; /* a return address not in the frame's words, or not known */
	f->cfa = (uint32_t)s->d;
	f->ra_in_lr = v.kind == A64FRAME_V_REG;
	f->ra_off = v.kind == A64FRAME_V_MEM ? (uint32_t)v.off : 0;
	f->fp_saved = s->fp.kind == A64FRAME_V_MEM && s->fp.off >= 0 && s->fp.off <= s->d - 8;
	f->fp_off = f->fp_saved ? (uint32_t)s->fp.off : 0;
	return S_DONE;
}

/*
 * A branch to target: conditional ones fall through (the furthest forward target is kept as
 * a loop's exit). Unconditional ones are followed, backward ones too (blocks are laid out in
 * any order) until one is taken a second time: a loop, left through the exit instead.
 */
static enum sim_step branch(struct a64frame_work *s, uint64_t target, bool cond, uint64_t next)
{
	uint32_t here = (uint32_t)(s->addr - s->c->lo + 1);

	if (cond) {
		if (target >= s->c->lo && target < s->c->hi &&
		    s->n_exits < sizeof(s->exits) / sizeof(s->exits[0]))
			s->exits[s->n_exits++] = (uint32_t)(target - s->c->lo + 1);
		s->addr = next;
		return S_NEXT;
	}
	if (target <= s->addr) {
		bool again = false;

		for (unsigned int i = 0; i < s->n_back && !again; i++)
			again = s->back[i] == here;
		if (again) {
			/* a loop: out through the furthest branch not taken yet */
			unsigned int best = s->n_exits;

			for (unsigned int i = 0; i < s->n_exits; i++)
				if (s->exits[i] && (best == s->n_exits ||
						    s->exits[i] > s->exits[best]))
					best = i;
			if (best == s->n_exits)
				return S_FAIL;
			target = s->c->lo + s->exits[best] - 1;
			s->exits[best] = 0;
			s->n_back = 0;
		} else if (s->n_back < sizeof(s->back) / sizeof(s->back[0])) {
			s->back[s->n_back++] = here;
		} else {
			return S_FAIL;
		}
	}
	if (target < s->c->lo || target >= s->c->hi)
		return S_FAIL;
	s->addr = target;
	return S_NEXT;
}

/* br, blr, ret and their pointer-authenticating forms (op2 = 11111). */
static enum sim_step branch_reg(struct a64frame_work *s, uint32_t w, uint64_t next)
{
	switch (w >> 21 & 0xf) {
	case 0: /* br */
	case 8: /* braa, brab */
		/* after an epilogue reloaded x30 (from the stack: a frame was there), a tail call,
		 * whose callee returns to x30; elsewhere maybe a switch inside the frame: the
		 * backward reading tells (a64frame__analyze) */
		if (s->lr.kind == A64FRAME_V_MEM)
			return ret(s, s->lr);
		s->tail_br = s->lr.kind == A64FRAME_V_REG && ret(s, s->lr) == S_DONE;
		return S_FAIL;
	case 1: /* blr */
	case 9: /* blraa, blrab */
		s->lr.kind = A64FRAME_V_NONE;
		s->addr = next;
		return S_NEXT;
	case 2: /* ret; retaa, retab */
		if (w == 0xd65f03c0 || (w & 0xfffffbff) == 0xd65f0bff)
			return ret(s, s->lr);
		return S_FAIL; /* a return through another register */
	}
	return S_FAIL; /* eret, drps */
}

/* b, bl, b.cond, cbz, cbnz, tbz, tbnz, br/blr/ret (is_branch) */
static enum sim_step branches(struct a64frame_work *s, uint32_t w)
{
	uint64_t next = s->addr + 4;

	if ((w & 0x7c000000) == 0x14000000) { /* b, bl */
		if (w & 0x80000000) {
			s->lr.kind = A64FRAME_V_NONE;
			s->addr = next;
			return S_NEXT;
		}
		return branch(s, s->addr + (uint64_t)(sext(w & 0x3ffffff, 26) * 4), false, next);
	}
	if ((w & 0xff000010) == 0x54000000) /* b.cond (al, nv: always) */
		return branch(s, s->addr + (uint64_t)(sext(w >> 5 & 0x7ffff, 19) * 4),
			      (w & 0xf) < 0xe, next);
	if ((w & 0x7e000000) == 0x34000000) /* cbz, cbnz */
		return branch(s, s->addr + (uint64_t)(sext(w >> 5 & 0x7ffff, 19) * 4), true, next);
	if ((w & 0x7e000000) == 0x36000000) /* tbz, tbnz */
		return branch(s, s->addr + (uint64_t)(sext(w >> 5 & 0x3fff, 14) * 4), true, next);
	return branch_reg(s, w, next);
}

/* ---- loads and stores ------------------------------------------------------------------ */

/*
 * The address of an access through rn + imm in mode (0: offset, 1: post-index, 3: pre-index),
 * as an offset from the start's sp when rn is sp; writeback applied. False: not through sp.
 */
static bool access_at(struct a64frame_work *s, unsigned int rn, int64_t imm, unsigned int mode,
		      int64_t *off, enum sim_step *st)
{
	*st = S_NEXT;
	if (rn != REG_SP) {
		if (mode == 1 || mode == 3)
			clobber(s, rn); /* writeback to x29 or x30 */
		return false;
	}
	if (mode == 3)
		*st = sp_add(s, imm);
	*off = mode == 0 ? s->d + imm : s->d;
	if (mode == 1)
		*st = sp_add(s, imm);
	return true;
}

/* stp, ldp (and their SIMD, 32-bit and no-allocate forms) */
static enum sim_step ld_st_pair(struct a64frame_work *s, uint32_t w)
{
	unsigned int opc = w >> 30, mode = w >> 23 & 3, rt = w & 31, rt2 = w >> 10 & 31;
	bool simd = w >> 26 & 1, load = w >> 22 & 1, x64 = !simd && opc == 2;
	unsigned int scale = simd ? 4u << opc : opc == 2 ? 8 : opc == 1 && !load ? 16 : 4;
	int64_t off = 0, imm = sext(w >> 15 & 0x7f, 7) * scale;
	enum sim_step st;
	bool sp_based = access_at(s, w >> 5 & 31, imm, mode == 2 ? 0 : mode, &off, &st);

	if (st != S_NEXT)
		return st;
	if (load && !simd) {
		load_reg(s, rt, sp_based && x64, off);
		load_reg(s, rt2, sp_based && x64, off + 8);
	} else if (!load && sp_based) {
		for (unsigned int k = 0; k < 2 * scale; k += 8) /* words of the pair */
			store_word(s, off + k, !x64 ? 0 : k ? rt2 : rt);
	}
	return S_NEXT;
}

/* ldr, str of one register: unsigned offset, pre/post-index, unscaled (mode as access_at) */
static enum sim_step ld_st_one(struct a64frame_work *s, uint32_t w, int64_t imm, unsigned int mode)
{
	unsigned int size = w >> 30, opc = w >> 22 & 3, rt = w & 31;
	bool simd = w >> 26 & 1, load = simd ? opc & 1 : opc != 0;
	bool x64 = !simd && size == 3 && opc < 2;
	int64_t off = 0;
	enum sim_step st;
	bool sp_based;

	if (!simd && size == 3 && opc == 2)
		return S_NEXT; /* prfm */
	sp_based = access_at(s, w >> 5 & 31, imm, mode, &off, &st);
	if (st != S_NEXT)
		return st;
	if (load && !simd)
		load_reg(s, rt, sp_based && x64, off);
	else if (!load && sp_based)
		store_word(s, off & ~7ll, x64 && !(off & 7) ? rt : 0);
	return S_NEXT;
}

static enum sim_step ld_st(struct a64frame_work *s, uint32_t w)
{
	unsigned int rt = w & 31, shift = w >> 30;

	if ((w & 0x3a000000) == 0x28000000)
		return ld_st_pair(s, w);
	if ((w & 0x3b000000) == 0x39000000) { /* unsigned offset */
		if ((w & 0x04800000) == 0x04800000)
			shift = 4; /* 128-bit SIMD */
		return ld_st_one(s, w, (int64_t)(w >> 10 & 0xfff) << shift, 0);
	}
	if ((w & 0x3b200000) == 0x38000000) { /* unscaled, post-index, unprivileged, pre-index */
		unsigned int mode = w >> 10 & 3;

		return ld_st_one(s, w, sext(w >> 12 & 0x1ff, 9), mode == 2 ? 0 : mode);
	}
	if (!(w >> 26 & 1) && (rt == REG_LR || rt == REG_FP))
		clobber(s, rt); /* other loads (register offset, literal, atomics) */
	return S_NEXT;
}

/* ---- data processing ------------------------------------------------------------------- */

/* add/sub (immediate): sp and x29 as the reading models them */
static enum sim_step add_sub_imm(struct a64frame_work *s, uint32_t w)
{
	unsigned int rd = w & 31, rn = w >> 5 & 31;
	bool sf = w >> 31, flags = w >> 29 & 1;
	int64_t imm = (int64_t)(w >> 10 & 0xfff) << (w >> 22 & 1 ? 12 : 0);
	struct a64frame_val fp = {A64FRAME_V_NONE, 0};

	if (w >> 30 & 1)
		imm = -imm;
	if (flags || !sf) {
		if (rd == REG_SP && !flags)
			return S_FAIL; /* wsp */
		clobber(s, rd);
		return S_NEXT;
	}
	if (rn == REG_SP || (rn == REG_FP && s->fp.kind == A64FRAME_V_SP)) {
		int64_t v = (rn == REG_SP ? s->d : s->fp.off) + imm;

		if (v <= (1 << 26) && v >= -(1 << 26))
			fp = (struct a64frame_val){A64FRAME_V_SP, (int32_t)v};
	}
	if (rd == REG_SP) {
		if (fp.kind != A64FRAME_V_SP)
			return S_FAIL; /* sp from elsewhere */
		return sp_add(s, fp.off - s->d);
	}
	clobber(s, rd);
	if (rd == REG_FP)
		s->fp = fp;
	return S_NEXT;
}

/* movz, movn, movk (64-bit): constants the reading follows. */
static void move_wide(struct a64frame_work *s, uint32_t w)
{
	unsigned int rd = w & 31, opc = w >> 29 & 3, shift = 16 * (w >> 21 & 3);
	uint64_t imm = (uint64_t)(w >> 5 & 0xffff) << shift;
	int64_t v = 0, old = 0;
	bool known = constant(s, rd, &old);

	if (rd == 31)
		return; /* xzr */
	if (opc == 2)
		v = (int64_t)imm;
	else if (opc == 0)
		v = (int64_t)~imm;
	else if (opc == 3 && known)
		v = (int64_t)(((uint64_t)old & ~(0xffffull << shift)) | imm);
	if (opc == 1 || (opc == 3 && !known)) {
		clobber(s, rd);
		return;
	}
	if (!(w >> 31))
		v = (int64_t)(uint32_t)v;
	clobber(s, rd);
	if (s->n_k < sizeof(s->k_reg)) {
		s->k_reg[s->n_k] = (uint8_t)rd;
		s->k_val[s->n_k++] = v;
	}
}

/* add/sub sp, sp, xN (extended register): a large frame's size if xN holds a constant. */
static enum sim_step add_sub_sp_reg(struct a64frame_work *s, uint32_t w)
{
	unsigned int rn = w >> 5 & 31, rm = w >> 16 & 31, amount = w >> 10 & 7;
	int64_t v;

	if (rn != REG_SP || !constant(s, rm, &v) || amount > 4 || !(w >> 31) || v > (1 << 24) ||
	    v < -(1 << 24))
		return S_FAIL; /* alloca, or sp from elsewhere */
	v *= 1 << amount;
	return sp_add(s, w >> 30 & 1 ? -v : v);
}

static enum sim_step data_proc(struct a64frame_work *s, uint32_t w)
{
	unsigned int rd = w & 31;

	if ((w & 0x1f800000) == 0x11000000)
		return add_sub_imm(s, w);
	if ((w & 0x1f800000) == 0x12000000 && rd == REG_SP && (w >> 29 & 3) != 3)
		return S_FAIL; /* and/orr/eor sp, ...: realignment */
	if ((w & 0x1f800000) == 0x12800000) {
		move_wide(s, w);
		return S_NEXT;
	}
	if ((w & 0x1f200000) == 0x0b200000 && rd == REG_SP && !(w >> 29 & 1))
		return add_sub_sp_reg(s, w);
	clobber(s, rd);
	return S_NEXT;
}

/* Everything but branches; S_NEXT moves on. */
static enum sim_step effect(struct a64frame_work *s, uint32_t w)
{
	if ((w & 0xffe0001f) == 0xd4200000 || (w & 0xffe0001f) == 0xd4400000 || !(w >> 16))
		return S_FAIL; /* brk, hlt, udf */
	if ((w & 0x0a000000) == 0x08000000)
		return ld_st(s, w);
	if ((w & 0x1c000000) == 0x10000000 || (w & 0x0e000000) == 0x0a000000)
		return data_proc(s, w);
	return S_NEXT; /* hints (paciasp, autiasp, bti), system, SIMD and floating point */
}

static enum sim_step step(struct a64frame_work *s)
{
	uint32_t w;

	if (!read32(s->c, s->addr, &w))
		return S_FAIL;
	if (is_branch(w))
		return branches(s, w);
	s->addr += 4;
	return effect(s, w);
}

/* true: found; *tail: not found, but f holds the frame if a br at its end is a tail call */
static bool forward(const struct a64frame_code *c, uint64_t pc, bool exact, unsigned int budget,
		    struct a64frame *f, bool *tail, struct a64frame_work *s)
{
	sim_init(s, c, pc, exact, false, f);
	s->budget = budget;
	while (s->n < s->budget) {
		enum sim_step st;

		s->n++;
		st = step(s);
		if (st == S_DONE) {
			f->insns += s->n;
			return true;
		}
		if (st == S_FAIL)
			break;
	}
	f->insns += s->n;
	*tail = s->tail_br;
	return false;
}

/* ---- backward: the prologue before pc -------------------------------------------------- */

/* stp ..., x30, [sp, #n](!) or str x30, [sp, #n] / [sp, #-n]!: x30 saved to the stack */
static bool saves_lr(uint32_t w)
{
	return ((w & 0xff4003e0) == 0xa90003e0 && ((w & 31) == REG_LR || (w >> 10 & 31) == REG_LR)) ||
	       (w & 0xffc003ff) == 0xf90003fe || (w & 0xffe00fff) == 0xf8000ffe;
}

/* ldp ..., x30, [sp...]; ldr x30, [sp, #n] / [sp], #n: x30 loaded from the stack */
static bool reloads_lr(uint32_t w)
{
	return ((w & 0xfe4003e0) == 0xa84003e0 && ((w & 31) == REG_LR || (w >> 10 & 31) == REG_LR)) ||
	       (w & 0xffc003ff) == 0xf94003fe || (w & 0xffe00fff) == 0xf84007fe;
}

/*
 * An instruction a prologue may hold before its save of x30: sub sp, stores, paciasp, bti,
 * and what compilers schedule among them (the stack protector's adrp and ldr, argument
 * moves): anything but a branch (the previous function ends with one), a reload of x30, or
 * an undefined instruction (padding).
 */
static bool prologue_like(uint32_t w)
{
	return !is_branch(w) && !reloads_lr(w) && (w >> 16) && (w & 0xff000000) != 0xd4000000;
}

/*
 * What the instructions from a function's start (its prologue) do up to pc, or up to their
 * first branch (until_branch: the prologue's end). False where sp is set in a way not modelled.
 */
static bool from_start(const struct a64frame_code *c, uint64_t start, uint64_t pc,
		       unsigned int budget, bool until_branch, struct a64frame_work *s)
{
	uint32_t w;

	sim_init(s, c, start, false, true, s->f);
	s->f->how = A64FRAME_BACKWARD;
	while (s->addr < pc && s->f->insns < budget) {
		s->f->insns++;
		if (!read32(c, s->addr, &w) || (until_branch && is_branch(w)))
			return read32(c, s->addr, &w);
		s->addr += 4;
		if (effect(s, w) != S_NEXT)
			return false;
	}
	return s->addr >= pc;
}

/* The frame at pc after the prologue from start saved x30 (where its store says). */
static bool prologue_frame(const struct a64frame_code *c, uint64_t start, uint64_t pc,
			   unsigned int budget, struct a64frame *f, struct a64frame_work *s)
{
	int64_t ra = 1, fp = 1;

	s->f = f;
	if (!from_start(c, start, pc, budget, true, s))
		return false;
	for (unsigned int i = 0; i < s->n_slot; i++) {
		if (s->slot[i].reg == REG_LR && s->slot[i].v.kind == A64FRAME_V_REG)
			ra = s->slot[i].off;
		if (s->slot[i].reg == REG_FP && s->slot[i].v.kind == A64FRAME_V_REG)
			fp = s->slot[i].off;
	}
	if (s->d >= 0 || ra > -8 || ra < s->d)
		return false; /* x30 not saved yet, or its word not inside the frame */
	f->cfa = (uint32_t)-s->d;
	f->ra_off = (uint32_t)(ra - s->d);
	f->fp_saved = fp <= -8 && fp >= s->d;
	f->fp_off = f->fp_saved ? (uint32_t)(fp - s->d) : 0;
	return true;
}

/* The start of the prologue-like run of instructions that ends right before a. */
static uint64_t prologue_start(const struct a64frame_code *c, uint64_t a)
{
	uint32_t w;

	for (int k = 0; k < 8 && a >= c->lo + 4 && read32(c, a - 4, &w) && prologue_like(w); k++)
		a -= 4;
	return a;
}

/*
 * An interrupted pc in a prologue before its save of x30 (a few prologue instructions ahead
 * of it): x30 still holds the return address, sp is what the prologue's start to pc did.
 */
static bool before_save(const struct a64frame_code *c, uint64_t pc, unsigned int budget,
			struct a64frame *f, struct a64frame_work *s)
{
	uint64_t a = pc;
	uint32_t w = 0;
	int k;

	for (k = 0; k < 8 && read32(c, a, &w) && !saves_lr(w) && prologue_like(w); k++)
		a += 4;
	f->insns += (unsigned int)k + 1;
	s->f = f;
	if (k == 8 || !saves_lr(w) || !from_start(c, prologue_start(c, pc), pc, budget, false, s) ||
	    s->d > 0)
		return false;
	f->cfa = (uint32_t)-s->d;
	f->ra_in_lr = true;
	return true;
}

/*
 * The last instruction of a function: ret, b or br followed by the padding before the next one
 * (nop, or udf #0). The backward reading stops there: past it is another function's prologue.
 */
static bool function_end(const struct a64frame_code *c, uint64_t a, uint32_t w)
{
	uint32_t next;

	return ((w & 0xfffffc1f) == 0xd65f0000 || (w & 0xfffffbff) == 0xd65f0bff ||
		(w & 0xfc000000) == 0x14000000 || (w & 0xfffffc1f) == 0xd61f0000) &&
	       read32(c, a + 4, &next) && (next == 0xd503201f || next == 0);
}

/* *epilogue: the scan stopped at an epilogue's reload of x30 with no branch between it and pc
 * (the frame is gone). */
static bool backward(const struct a64frame_code *c, uint64_t pc, bool exact,
		     unsigned int budget, struct a64frame *f, bool *epilogue,
		     struct a64frame_work *s)
{
	uint64_t a = pc;
	uint32_t w = 0;
	bool found = false, straight = true;

	*epilogue = false;
	if (pc & 3)
		return false;
	if (exact && before_save(c, pc, budget, f, s))
		return true;
	while (!found && f->insns < budget && a >= c->lo + 4) {
		a -= 4;
		f->insns++;
		if (!read32(c, a, &w) || function_end(c, a, w))
			return false;
		/* an interrupted pc after an epilogue: the frame may be gone (a return address
		 * is where its function had a frame to call from: past early exits) */
		if (exact && reloads_lr(w)) {
			*epilogue = straight; /* and straight on to pc: a tail call's */
			return false;
		}
		straight &= !is_branch(w);
		found = saves_lr(w);
	}
	if (!found)
		return false;
	/* up to pc or the prologue's end: the scan's distance, as much again at most */
	return prologue_frame(c, prologue_start(c, a), pc, 2 * budget, f, s);
}

/* The reading's state where the caller gave no room for it. */
static bool analyze_here(const struct a64frame_code *c, uint64_t pc, bool exact,
			 unsigned int budget, struct a64frame *f, bool prologue)
{
	struct a64frame_work s;

	return prologue ? a64frame__prologue(c, pc, exact, budget, f, &s)
			: a64frame__analyze(c, pc, exact, budget, f, &s);
}

bool a64frame__analyze(const struct a64frame_code *c, uint64_t pc, bool exact,
		       unsigned int budget, struct a64frame *f, struct a64frame_work *work)
{
	uint32_t tail_cfa, tail_fp; /* the frame if a br at the path's end is a tail call */
	unsigned int spent;
	bool maybe_tail, epilogue = false, tail_fp_saved;

	if (!work)
		return analyze_here(c, pc, exact, budget, f, false);
	memset(f, 0, sizeof(*f));
	if (forward(c, pc, exact, budget, f, &maybe_tail, work)) {
		f->how = A64FRAME_FORWARD;
		return true;
	}
	spent = f->insns;
	tail_cfa = f->cfa;
	tail_fp = f->fp_off;
	tail_fp_saved = f->fp_saved;
	/* the backward reading has a budget of its own, as large */
	memset(f, 0, sizeof(*f));
	if (backward(c, pc, exact, budget, f, &epilogue, work)) {
		f->how = A64FRAME_BACKWARD;
		f->insns += spent;
		return true;
	}
	if (maybe_tail && epilogue) { /* an epilogue nearer before pc than any prologue */
		*f = (struct a64frame){.how = A64FRAME_FORWARD, .cfa = tail_cfa, .ra_in_lr = true,
				       .fp_saved = tail_fp_saved, .fp_off = tail_fp,
				       .insns = spent + f->insns};
		return true;
	}
	f->how = A64FRAME_NONE;
	f->insns += spent;
	return false;
}

bool a64frame__prologue(const struct a64frame_code *c, uint64_t pc, bool exact,
			unsigned int budget, struct a64frame *f, struct a64frame_work *work)
{
	bool epilogue;

	if (!work)
		return analyze_here(c, pc, exact, budget, f, true);
	memset(f, 0, sizeof(*f));
	if (backward(c, pc, exact, budget, f, &epilogue, work))
		return true;
	f->how = A64FRAME_NONE;
	return false;
}

bool a64frame__after_call(const struct a64frame_code *c, uint64_t ra)
{
	uint32_t w;

	return ra >= 4 && read32(c, ra - 4, &w) &&
	       ((w & 0xfc000000) == 0x94000000 || (w & 0xfffffc1f) == 0xd63f0000 ||
		(w & 0xfefff800) == 0xd63f0800);
}
