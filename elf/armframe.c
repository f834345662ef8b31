// SPDX-License-Identifier: MIT
/*
 * elf/armframe.c — see armframe.h. Encodings from the ARM Architecture Reference Manual
 * (ARMv7-A/R): A8.8 (push, pop, ldm, stm, ldr, str, add/sub sp, b, bl, blx, bx, cbz, it, tbb,
 * vpush, vpop), A6.3 (Thumb-2 32-bit encodings), A5 (ARM encodings).
 */
#include <string.h>

#include "elf/armframe.h"

/* A value the reading knows: the interrupted lr, the word at sp + off (the frame at pc), or
 * nothing usable. */
enum val_kind { V_NONE, V_LR, V_MEM };

struct val {
	enum val_kind kind;
	int32_t off;
};

/* One forward reading. sp now = sp at pc + d. */
struct sim {
	const struct armframe_code *c;
	uint32_t addr;
	bool thumb, exact;
	int32_t d;
	struct val lr;	    /* what lr holds now */
	int32_t slot_off;   /* a word pushed by the reading that held lr's value... */
	struct val slot;    /* ...that value (kind V_NONE: none pushed) */
	uint32_t exits[12]; /* conditional branch targets not taken yet (0: taken) */
	unsigned int n_exits;
	uint32_t back[8];   /* unconditional back edges taken (their sources): loops */
	unsigned int n_back;
	unsigned int it;    /* instructions of an IT block still to skip */
	unsigned int n, budget;
	struct armframe *f;
};

enum sim_step { S_NEXT, S_DONE, S_FAIL };

static bool read16(const struct armframe_code *c, uint32_t a, uint16_t *v)
{
	if (a < c->lo || a > c->hi - 2 || (a & 1))
		return false;
	memcpy(v, c->mem + (a - c->lo), 2);
	return true;
}

static bool read32(const struct armframe_code *c, uint32_t a, uint32_t *v)
{
	if (a < c->lo || a > c->hi - 4 || (a & 3))
		return false;
	memcpy(v, c->mem + (a - c->lo), 4);
	return true;
}

static int32_t sext(uint32_t v, unsigned int bits)
{
	uint32_t m = 1u << (bits - 1);

	return (int32_t)((v ^ m) - m);
}

static bool thumb32(uint16_t hw)
{
	return (hw >> 11) >= 0x1d;
}

/* Thumb-2 modified immediate (ThumbExpandImm) of i:imm3:imm8; 0 for the replicated forms. */
static uint32_t thumb_imm(uint16_t hw1, uint16_t hw2)
{
	uint32_t v = (uint32_t)(hw1 >> 10 & 1) << 11 | (uint32_t)(hw2 >> 12 & 7) << 8 | (hw2 & 0xff);
	uint32_t rot = v >> 7, imm = 0x80 | (v & 0x7f);

	if ((v >> 10) == 0)
		return (v >> 8) == 0 ? (v & 0xff) : 0; /* replicated patterns: not a frame size */
	return imm >> rot | imm << (32 - rot);
}

static uint32_t arm_imm(uint32_t w)
{
	uint32_t imm = w & 0xff, rot = 2 * (w >> 8 & 0xf);

	return rot ? imm >> rot | imm << (32 - rot) : imm;
}

/* The value read from the stack word at sp + off (off relative to sp at pc). */
static struct val stack_word(const struct sim *s, int32_t off)
{
	if (s->slot.kind != V_NONE && off == s->slot_off)
		return s->slot;
	if (off >= 0)
		return (struct val){V_MEM, off};
	return (struct val){V_NONE, 0};
}

/* A return to v with sp now at d: the frame is found when v is a usable return address. */
static enum sim_step ret(struct sim *s, struct val v)
{
	if (s->d < 0 || v.kind == V_NONE || (v.kind == V_LR && !s->exact) ||
	    (v.kind == V_MEM && v.off >= s->d))
		return S_FAIL; /* a return address is below the caller's sp */
	s->f->cfa = (uint32_t)s->d;
	s->f->ra_in_lr = v.kind == V_LR;
	s->f->ra_off = v.kind == V_MEM ? (uint32_t)v.off : 0;
	if (s->f->ra_in_lr || s->f->saved_off + 4u * (unsigned int)__builtin_popcount(
							s->f->saved_mask) != s->f->ra_off)
		s->f->saved_mask = 0; /* not where the return address was: not known */
	return S_DONE;
}

/* push {list}: lr's value is kept in its slot (the reading may pop it again). */
static enum sim_step push(struct sim *s, uint32_t list)
{
	if (list & (1u << 13 | 1u << 15))
		return S_FAIL;
	s->d -= 4 * __builtin_popcount(list);
	if (list & (1u << 14)) {
		s->slot_off = s->d + 4 * __builtin_popcount(list & 0x3fff);
		s->slot = s->lr;
	}
	return S_NEXT;
}

/* pop {list}: pc in it is a return, lr in it is lr's new value. */
static enum sim_step pop(struct sim *s, uint32_t list)
{
	int32_t base = s->d;

	if (list & (1u << 13))
		return S_FAIL;
	s->d += 4 * __builtin_popcount(list);
	s->f->saved_mask = (uint16_t)(list & 0x0ff0);
	s->f->saved_off = base >= 0 ? (uint32_t)(base + 4 * __builtin_popcount(list & 0xf)) : 0;
	if (base < 0)
		s->f->saved_mask = 0; /* pushed by the reading: the registers as they are now */
	if (list & (1u << 15))
		return ret(s, stack_word(s, base + 4 * __builtin_popcount(list & 0x7fff)));
	if (list & (1u << 14))
		s->lr = stack_word(s, base + 4 * __builtin_popcount(list & 0x3fff));
	return S_NEXT;
}

/*
 * A branch to target: conditional ones fall through (the furthest forward target is kept as
 * a loop's exit). Unconditional ones are followed, backward ones too (blocks are laid out in
 * any order) until one is taken a second time: a loop, left through the exit instead.
 */
static enum sim_step branch(struct sim *s, uint32_t target, bool cond, uint32_t next)
{
	if (cond) {
		if (s->n_exits < sizeof(s->exits) / sizeof(s->exits[0]))
			s->exits[s->n_exits++] = target;
		s->addr = next;
		return S_NEXT;
	}
	if (target <= s->addr) {
		bool again = false;

		for (unsigned int i = 0; i < s->n_back && !again; i++)
			again = s->back[i] == s->addr;
		if (again) {
			/* a loop: out through the furthest branch not taken yet */
			unsigned int best = s->n_exits;

			for (unsigned int i = 0; i < s->n_exits; i++)
				if (s->exits[i] && (best == s->n_exits ||
						    s->exits[i] > s->exits[best]))
					best = i;
			if (best == s->n_exits)
				return S_FAIL;
			target = s->exits[best];
			s->exits[best] = 0;
			s->n_back = 0;
		} else if (s->n_back < sizeof(s->back) / sizeof(s->back[0])) {
			s->back[s->n_back++] = s->addr;
		} else {
			return S_FAIL;
		}
	}
	if (target < s->c->lo || target >= s->c->hi)
		return S_FAIL;
	s->addr = target;
	return S_NEXT;
}

/* sp += v where the encoding adds (add sp) or subtracts (sub sp) an immediate. */
static enum sim_step sp_add(struct sim *s, int64_t v)
{
	if (v > (1 << 20) || v < -(1 << 20))
		return S_FAIL;
	s->d += (int32_t)v;
	return S_NEXT;
}

/* 16-bit special data processing and branch-exchange (0100 01..): returns, calls, writes to
 * sp and pc. */
static enum sim_step t16_hireg(struct sim *s, uint16_t hw, uint32_t next)
{
	if (hw == 0x4770 || hw == 0x46f7) /* bx lr; mov pc, lr */
		return ret(s, s->lr);
	if (hw == 0x4778) { /* bx pc: into the ARM code that follows (PLT stubs) */
		s->thumb = false;
		s->addr = (s->addr + 4) & ~3u;
		return S_NEXT;
	}
	if ((hw & 0xff87) == 0x4700) /* bx rm: a tail call through a register (ip: a PLT stub's
				      * or a veneer's), whose callee returns to our lr */
		return s->d >= 0 ? ret(s, s->lr) : S_FAIL;
	if ((hw & 0xff87) == 0x4780) { /* blx rm */
		s->lr.kind = V_NONE;
		s->addr = next;
		return S_NEXT;
	}
	if ((hw & 0xff87) == 0x4687 || (hw & 0xff87) == 0x4487 || (hw & 0xff87) == 0x4685 ||
	    (hw & 0xff87) == 0x4485)
		return S_FAIL; /* mov/add pc, mov/add sp */
	s->addr = next;
	return S_NEXT;
}

/* 16-bit miscellaneous (1011 ....): push, pop, add/sub sp, cbz/cbnz, it, bkpt. */
static enum sim_step t16_misc(struct sim *s, uint16_t hw, uint32_t next)
{
	if ((hw & 0xfe00) == 0xb400) /* push {r0-r7[, lr]} */
		return s->addr = next, push(s, (hw & 0xff) | (uint32_t)(hw & 0x100) << 6);
	if ((hw & 0xfe00) == 0xbc00) /* pop {r0-r7[, pc]} */
		return s->addr = next, pop(s, (hw & 0xff) | (uint32_t)(hw & 0x100) << 7);
	if ((hw & 0xff00) == 0xb000) /* add/sub sp, #imm7 * 4 */
		return s->addr = next, sp_add(s, (hw & 0x80 ? -4 : 4) * (int64_t)(hw & 0x7f));
	if ((hw & 0xf500) == 0xb100) /* cbz, cbnz */
		return branch(s, next + 2 + ((hw >> 3 & 0x1f) << 1 | (hw >> 9 & 1) << 6), true, next);
	if ((hw & 0xff00) == 0xbe00)
		return S_FAIL; /* bkpt */
	if ((hw & 0xff00) == 0xbf00 && (hw & 0xf)) /* it: the block is skipped (not taken) */
		s->it = 4 - (unsigned int)__builtin_ctz(hw & 0xf);
	s->addr = next;
	return S_NEXT;
}

static enum sim_step t16(struct sim *s, uint16_t hw)
{
	uint32_t next = s->addr + 2;

	switch (hw >> 12) {
	case 0x4:
		if ((hw & 0x0c00) == 0x0400)
			return t16_hireg(s, hw, next);
		break;
	case 0xb:
		return t16_misc(s, hw, next);
	case 0xd:
		if ((hw & 0x0f00) == 0x0e00)
			return S_FAIL; /* udf */
		if ((hw & 0x0f00) != 0x0f00) /* b<cond> (0xdf: svc) */
			return branch(s, next + 2 + (uint32_t)(sext(hw & 0xff, 8) * 2), true, next);
		break;
	case 0xe: /* b (0xe800 and up: 32-bit, not here) */
		return branch(s, next + 2 + (uint32_t)(sext(hw & 0x7ff, 11) * 2), false, next);
	}
	s->addr = next;
	return S_NEXT;
}

/* 32-bit Thumb branches and calls (hw1 = 11110..., hw2 = 1...) */
static enum sim_step t32_branch(struct sim *s, uint16_t hw1, uint16_t hw2)
{
	uint32_t next = s->addr + 4, sgn = hw1 >> 10 & 1, j1 = hw2 >> 13 & 1, j2 = hw2 >> 11 & 1;
	uint32_t cond = hw1 >> 6 & 0xf, off;

	if ((hw2 & 0xd000) == 0xd000 || (hw2 & 0xd000) == 0xc000) { /* bl, blx */
		s->lr.kind = V_NONE;
		s->addr = next;
		return S_NEXT;
	}
	if ((hw2 & 0xd000) == 0x9000) { /* b.w */
		off = sgn << 24 | (~(j1 ^ sgn) & 1) << 23 | (~(j2 ^ sgn) & 1) << 22 |
		      (uint32_t)(hw1 & 0x3ff) << 12 | (uint32_t)(hw2 & 0x7ff) << 1;
		return branch(s, next + (uint32_t)sext(off, 25), false, next);
	}
	if ((hw2 & 0xd000) == 0x8000 && cond < 0xe) { /* b<cond>.w */
		off = sgn << 20 | j2 << 19 | j1 << 18 | (uint32_t)(hw1 & 0x3f) << 12 |
		      (uint32_t)(hw2 & 0x7ff) << 1;
		return branch(s, next + (uint32_t)sext(off, 21), true, next);
	}
	if ((hw1 & 0xfff0) == 0xf7f0 && (hw2 & 0xf000) == 0xa000)
		return S_FAIL; /* udf.w */
	s->addr = next; /* hints, msr/mrs, barriers */
	return S_NEXT;
}

/* 32-bit Thumb instructions writing sp, pc or lr that the reading models or refuses. */
static enum sim_step t32(struct sim *s, uint16_t hw1, uint16_t hw2)
{
	uint32_t rd = hw2 >> 8 & 0xf, rt = hw2 >> 12;
	/* a word load (ldr.w; byte and halfword loads to pc are pld/pli hints) */
	bool ldr = (hw1 & 0xfef0) == 0xf850 || (hw1 & 0xfff0) == 0xf8d0;

	if ((hw1 & 0xf800) == 0xf000 && (hw2 & 0x8000))
		return t32_branch(s, hw1, hw2);
	s->addr += 4;
	if (hw1 == 0xe92d) /* push.w (stmdb sp!) */
		return push(s, hw2);
	if (hw1 == 0xe8bd) /* pop.w (ldmia sp!) */
		return pop(s, hw2);
	if (hw1 == 0xf84d && (hw2 & 0x0fff) == 0x0d04) /* str rt, [sp, #-4]! */
		return push(s, 1u << rt);
	if (hw1 == 0xf85d && (hw2 & 0x0fff) == 0x0b04) /* ldr rt, [sp], #4 */
		return pop(s, 1u << rt);
	if ((hw1 & 0xffbf) == 0xed2d && (hw2 & 0x0e00) == 0x0a00) /* vpush */
		return sp_add(s, -4 * (int64_t)(hw2 & 0xff));
	if ((hw1 & 0xffbf) == 0xecbd && (hw2 & 0x0e00) == 0x0a00) /* vpop */
		return sp_add(s, 4 * (int64_t)(hw2 & 0xff));
	if ((hw1 & 0xfbef) == 0xf1ad && rd == 13 && !(hw2 & 0x8000)) /* sub.w sp, sp, #imm */
		return sp_add(s, -(int64_t)thumb_imm(hw1, hw2));
	if ((hw1 & 0xfbef) == 0xf10d && rd == 13 && !(hw2 & 0x8000)) /* add.w sp, sp, #imm */
		return sp_add(s, thumb_imm(hw1, hw2));
	if ((hw1 & 0xfbff) == 0xf2ad && rd == 13) /* subw sp, sp, #imm12 */
		return sp_add(s, -(int64_t)((hw1 >> 10 & 1) << 11 | (hw2 >> 12 & 7) << 8 | (hw2 & 0xff)));
	if ((hw1 & 0xfbff) == 0xf20d && rd == 13) /* addw sp, sp, #imm12 */
		return sp_add(s, (hw1 >> 10 & 1) << 11 | (hw2 >> 12 & 7) << 8 | (hw2 & 0xff));
	if (hw1 == 0xe8df && (hw2 & 0xffe0) == 0xf000) { /* tbb/tbh [pc, rm]: a switch */
		uint16_t e;

		/* any case is a path: the first entry's (the table follows the instruction) */
		if (!read16(s->c, s->addr, &e))
			return S_FAIL;
		if (!(hw2 & 0x10))
			e &= 0xff;
		return branch(s, s->addr + 2u * e, false, s->addr);
	}
	if ((hw1 & 0xfff0) == 0xe8d0 && (hw2 & 0xffe0) == 0xf000)
		return S_FAIL; /* tbb/tbh through another register: not read */
	if (hw1 == 0xf8dc && (hw2 & 0xf000) == 0xf000) /* ldr.w pc, [ip, #imm]: a PLT stub's */
		return ret(s, s->lr);
	if ((((hw1 & 0xf800) == 0xf000 || (hw1 & 0xfe00) == 0xea00) && rd == 13) ||
	    (ldr && (rt == 13 || rt == 15)) ||
	    ((hw1 & 0xfe0f) == 0xf80d && (hw2 & 0x0900) == 0x0900) ||
	    ((hw1 & 0xfe2f) == 0xe82d) || ((hw1 & 0xfe50) == 0xe810 && (hw2 & 0x8000)) ||
	    ((hw1 & 0xfe6f) == 0xe86d))
		return S_FAIL; /* sp or pc set otherwise: alloca, jumps, other stack writebacks */
	if (hw1 == 0xf8dd && rt == 14) { /* ldr.w lr, [sp, #imm12]: lr reloaded from its slot */
		/* libgcc's __aeabi_ldivmod (strd ip, lr, [sp, #-16]! ... ldr.w lr, [sp, #4];
		 * add sp, #16; bx lr): 64-bit division on armv7, e.g. every Lua integer % */
		s->lr = stack_word(s, s->d + (int32_t)(hw2 & 0xfff));
		return S_NEXT;
	}
	if ((ldr && rt == 14) ||
	    (((hw1 & 0xf800) == 0xf000 || (hw1 & 0xfe00) == 0xea00) && rd == 14))
		s->lr.kind = V_NONE; /* lr used as a scratch register */
	return S_NEXT;
}

static enum sim_step thumb_step(struct sim *s)
{
	uint16_t hw1, hw2 = 0;

	if (!read16(s->c, s->addr, &hw1) || (thumb32(hw1) && !read16(s->c, s->addr + 2, &hw2)))
		return S_FAIL;
	if (s->it) { /* a conditional instruction of an IT block: not taken */
		s->it--;
		s->addr += thumb32(hw1) ? 4 : 2;
		return S_NEXT;
	}
	return thumb32(hw1) ? t32(s, hw1, hw2) : t16(s, hw1);
}

static enum sim_step arm_step(struct sim *s)
{
	uint32_t w, cond, rd, next = s->addr + 4;

	if (!read32(s->c, s->addr, &w))
		return S_FAIL;
	cond = w >> 28;
	rd = w >> 12 & 0xf;
	if ((w & 0x0e000000) == 0x0a000000 && cond != 0xf) { /* b, bl */
		uint32_t target = next + 4 + (uint32_t)(sext(w & 0xffffff, 24) * 4);

		if (w & 0x01000000) {
			if (cond == 0xe)
				s->lr.kind = V_NONE;
			s->addr = next;
			return S_NEXT;
		}
		return branch(s, target, cond != 0xe, next);
	}
	s->addr = next;
	if (cond == 0xf) {
		if ((w & 0xfe000000) == 0xfa000000) /* blx imm */
			s->lr.kind = V_NONE;
		return S_NEXT;
	}
	if (cond != 0xe)
		return S_NEXT; /* conditional: not taken */
	if ((w & 0xffff0000) == 0xe92d0000) /* push */
		return push(s, w & 0xffff);
	if ((w & 0xffff0000) == 0xe8bd0000) /* pop */
		return pop(s, w & 0xffff);
	if ((w & 0xffff0fff) == 0xe52d0004) /* str rt, [sp, #-4]! */
		return push(s, 1u << rd);
	if ((w & 0xffff0fff) == 0xe49d0004) /* ldr rt, [sp], #4 */
		return pop(s, 1u << rd);
	if ((w & 0xfffff000) == 0xe24dd000) /* sub sp, sp, #imm */
		return sp_add(s, -(int64_t)arm_imm(w));
	if ((w & 0xfffff000) == 0xe28dd000) /* add sp, sp, #imm */
		return sp_add(s, arm_imm(w));
	if ((w & 0xffbf0e00) == 0xed2d0a00) /* vpush */
		return sp_add(s, -4 * (int64_t)(w & 0xff));
	if ((w & 0xffbf0e00) == 0xecbd0a00) /* vpop */
		return sp_add(s, 4 * (int64_t)(w & 0xff));
	if (w == 0xe12fff1e || w == 0xe1a0f00e) /* bx lr; mov pc, lr */
		return ret(s, s->lr);
	/* ldr pc, [ip, #imm](!); bx ip: the jump of a PLT stub or a veneer, which sets ip just
	 * before it: a tail call, whose callee returns to our lr */
	if ((w & 0xffdff000) == 0xe59cf000 || w == 0xe12fff1c)
		return ret(s, s->lr);
	if ((w & 0x0ffffff0) == 0x012fff30) { /* blx rm */
		s->lr.kind = V_NONE;
		return S_NEXT;
	}
	if ((w & 0x0ffffff0) == 0x012fff10 && s->d >= 0)
		return ret(s, s->lr); /* bx rm: a tail call through a register */
	if ((w & 0x0feff010) == 0x008ff000) /* add pc, pc, rm: into a table of code (memcpy) */
		return branch(s, next + 4, false, next);
	if ((w & 0xfff000f0) == 0xe7f000f0)
		return S_FAIL; /* udf */
	if (((w & 0x0c000000) == 0 && (rd == 13 || rd == 15) && (w & 0x01900000) != 0x01100000) ||
	    ((w & 0x0c100000) == 0x04100000 && (rd == 13 || rd == 15)) ||
	    ((w & 0x0c0f0000) == 0x040d0000 && ((w & 0x00200000) || !(w & 0x01000000))) ||
	    ((w & 0x0e2f0000) == 0x082d0000) || ((w & 0x0e108000) == 0x08108000))
		return S_FAIL; /* sp or pc set otherwise */
	if (((w & 0x0c000000) == 0 || (w & 0x0c100000) == 0x04100000) && rd == 14)
		s->lr.kind = V_NONE;
	return S_NEXT;
}

static bool forward(const struct armframe_code *c, uint32_t pc, bool exact, unsigned int budget,
		    struct armframe *f)
{
	struct sim s = {.c = c, .addr = pc & ~1u, .thumb = pc & 1, .exact = exact,
			.lr = {exact ? V_LR : V_NONE, 0}, .budget = budget, .f = f};

	while (s.n < s.budget) {
		enum sim_step st;

		s.n++;
		st = s.thumb ? thumb_step(&s) : arm_step(&s);
		if (st == S_DONE) {
			f->insns += s.n;
			return true;
		}
		if (st == S_FAIL)
			break;
	}
	f->insns += s.n;
	return false;
}

/* A function's body begins at most this far past its push of lr: prologue_extra() reads up to
 * 8 instructions after it. */
#define BODY_AFTER_PUSH 34

/* ---- backward: the prologue before pc ---------------------------------------------------- */

/* A push that saves lr at a (Thumb: push, push.w, str lr, [sp, #-4]!): its register list. */
static uint32_t saves_lr(const struct armframe_code *c, uint32_t a, bool thumb)
{
	uint16_t hw1, hw2;
	uint32_t w;

	if (!thumb)
		return !read32(c, a, &w) ? 0
		       : (w & 0xffff4000) == 0xe92d4000 && !(w & 0xa000) ? (w & 0xffff)
		       : w == 0xe52de004			   ? 1u << 14
								   : 0;
	if (!read16(c, a, &hw1))
		return 0;
	if ((hw1 & 0xff00) == 0xb500)
		return (hw1 & 0xff) | 1u << 14;
	if (!read16(c, a + 2, &hw2))
		return 0;
	if (hw1 == 0xe92d && (hw2 & 0x4000) && !(hw2 & 0xa000))
		return hw2;
	return hw1 == 0xf84d && hw2 == 0xed04 ? 1u << 14 : 0;
}

/* Decoding Thumb forward from a lands on pc exactly (a is on an instruction boundary). */
static bool lands_on(const struct armframe_code *c, uint32_t a, uint32_t pc,
		     unsigned int budget, unsigned int *n)
{
	uint16_t hw;

	while (a < pc) {
		if (++*n > budget || !read16(c, a, &hw))
			return false;
		a += thumb32(hw) ? 4 : 2;
	}
	return a == pc;
}

/*
 * a starts a Thumb instruction, not the second half of one: decoding from two points some
 * way before it (Thumb decoding falls into step within a few instructions) lands on it.
 */
static bool boundary(const struct armframe_code *c, uint32_t a, unsigned int budget,
		     unsigned int *n)
{
	for (uint32_t back = 64; back <= 66; back += 2) {
		uint32_t from = a - c->lo > back ? a - back : c->lo;

		if (!lands_on(c, from, a, budget, n))
			return false;
	}
	return true;
}

/* What the prologue after the push at a does to sp before pc: sub sp, vpush (a few). */
static int64_t prologue_extra(const struct armframe_code *c, uint32_t a, uint32_t pc, bool thumb)
{
	int64_t extra = 0;

	for (int k = 0; k < 8 && a < pc; k++) {
		uint16_t hw1, hw2 = 0;
		uint32_t w;

		if (!thumb) {
			if (!read32(c, a, &w))
				break;
			if ((w & 0xfffff000) == 0xe24dd000)
				extra += arm_imm(w);
			else if ((w & 0xffbf0e00) == 0xed2d0a00)
				extra += 4 * (w & 0xff);
			else if ((w & 0x0e000000) == 0x0a000000)
				break;
			a += 4;
			continue;
		}
		if (!read16(c, a, &hw1) || (thumb32(hw1) && !read16(c, a + 2, &hw2)))
			break;
		if ((hw1 & 0xff80) == 0xb080)
			extra += 4 * (hw1 & 0x7f);
		else if ((hw1 & 0xffbf) == 0xed2d && (hw2 & 0x0e00) == 0x0a00)
			extra += 4 * (hw2 & 0xff);
		else if ((hw1 & 0xfbef) == 0xf1ad && (hw2 >> 8 & 0xf) == 13 && !(hw2 & 0x8000))
			extra += thumb_imm(hw1, hw2);
		else if ((hw1 & 0xfbff) == 0xf2ad && (hw2 >> 8 & 0xf) == 13)
			extra += (hw1 >> 10 & 1) << 11 | (hw2 >> 12 & 7) << 8 | (hw2 & 0xff);
		else if ((hw1 & 0xf000) == 0xd000 || (hw1 & 0xf800) == 0xe000 ||
			 (thumb32(hw1) && (hw1 & 0xf800) == 0xf000 && (hw2 & 0x8000)))
			break; /* the prologue ends at the first branch */
		a += thumb32(hw1) ? 4 : 2;
	}
	return extra;
}

/* The frame at pc of the function whose push of lr (list) is at a: the push, then the sub sp
 * and vpush between it and pc. */
static bool frame_after_push(const struct armframe_code *c, uint32_t a, uint32_t list,
			     uint32_t pc, bool thumb, struct armframe *f)
{
	uint32_t size = 4 * (uint32_t)__builtin_popcount(list), pushed = 4;
	uint16_t hw;
	int64_t extra;

	if (thumb && read16(c, a, &hw) && !thumb32(hw))
		pushed = 2;
	extra = prologue_extra(c, a + pushed, pc & ~1u, thumb);
	if (extra > (1 << 20))
		return false;
	f->cfa = size + (uint32_t)extra;
	f->ra_off = (uint32_t)extra + 4 * (uint32_t)__builtin_popcount(list & 0x3fff);
	f->ra_in_lr = false;
	f->saved_mask = (uint16_t)(list & 0x0ff0);
	f->saved_off = (uint32_t)extra + 4 * (uint32_t)__builtin_popcount(list & 0xf);
	return true;
}

static bool backward(const struct armframe_code *c, uint32_t pc, bool exact,
		     unsigned int budget, struct armframe *f)
{
	bool thumb = pc & 1;
	uint32_t step = thumb ? 2 : 4, a = pc & ~1u, list = 0;

	while (f->insns < budget && a >= c->lo + step) {
		a -= step;
		f->insns++;
		list = saves_lr(c, a, thumb);
		if (list && (!thumb || (boundary(c, a, budget, &f->insns) &&
					lands_on(c, a, pc & ~1u, budget, &f->insns))))
			break;
		list = 0;
	}
	if (!list || (exact && a == (pc & ~1u)))
		return false; /* none, or pc is the push itself: nothing saved yet (forward's case) */
	return frame_after_push(c, a, list, pc, thumb, f);
}

bool armframe__analyze(const struct armframe_code *c, uint32_t pc, bool exact,
		       unsigned int budget, struct armframe *f)
{
	memset(f, 0, sizeof(*f));
	if (forward(c, pc, exact, budget, f)) {
		f->how = ARMFRAME_FORWARD;
		return true;
	}
	unsigned int spent = f->insns;

	/* the backward reading has a budget of its own, as large */
	if (armframe__prologue(c, pc, exact, budget, f)) {
		f->insns += spent;
		return true;
	}
	f->insns += spent;
	return false;
}

bool armframe__prologue(const struct armframe_code *c, uint32_t pc, bool exact,
			unsigned int budget, struct armframe *f)
{
	memset(f, 0, sizeof(*f));
	if (!backward(c, pc, exact, budget, f))
		return false;
	f->how = ARMFRAME_BACKWARD;
	if (f->saved_off + 4u * (unsigned int)__builtin_popcount(f->saved_mask) != f->ra_off)
		f->saved_mask = 0;
	return true;
}

uint32_t armframe__push_before(const struct armframe_code *c, uint32_t pc, unsigned int budget)
{
	uint32_t a = pc & ~1u;
	unsigned int n = 0;

	while (n < budget && a >= c->lo + 2) {
		a -= 2;
		n++;
		if (saves_lr(c, a, true) && boundary(c, a, budget, &n) &&
		    lands_on(c, a, pc & ~1u, budget, &n))
			return a | 1;
	}
	return 0;
}

bool armframe__body(const struct armframe_code *c, uint32_t start, uint32_t pc,
		    struct armframe *f)
{
	uint32_t a = armframe__push_after(c, start, 8) & ~1u;

	memset(f, 0, sizeof(*f));
	if (!a || (pc & ~1u) < a + BODY_AFTER_PUSH || !(pc & 1) ||
	    !frame_after_push(c, a, saves_lr(c, a, true), c->hi, true, f))
		return false;
	f->how = ARMFRAME_BACKWARD;
	f->insns = 16;
	return true;
}

uint32_t armframe__push_after(const struct armframe_code *c, uint32_t pc, unsigned int budget)
{
	uint32_t a = pc & ~1u;
	uint16_t hw;

	for (unsigned int n = 0; n < budget && read16(c, a, &hw); n++) {
		if (saves_lr(c, a, true))
			return a | 1;
		a += thumb32(hw) ? 4 : 2;
	}
	return 0;
}

bool armframe__after_call(const struct armframe_code *c, uint32_t ra)
{
	uint16_t hw1, hw2;
	uint32_t w, a = ra & ~1u;

	if (!(ra & 1))
		return read32(c, a - 4, &w) &&
		       (((w & 0x0f000000) == 0x0b000000 && (w >> 28) != 0xf) ||
			(w & 0xfe000000) == 0xfa000000 || (w & 0x0ffffff0) == 0x012fff30);
	if (read16(c, a - 2, &hw2) && (hw2 & 0xff87) == 0x4780)
		return true; /* blx rm */
	return read16(c, a - 4, &hw1) && read16(c, a - 2, &hw2) && (hw1 & 0xf800) == 0xf000 &&
	       ((hw2 & 0xd000) == 0xd000 || (hw2 & 0xd001) == 0xc000);
}
