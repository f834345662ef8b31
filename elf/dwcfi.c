// SPDX-License-Identifier: MIT
/* elf/dwcfi.c — .debug_frame rules of every register, and one unwinding step; see dwcfi.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "elf/dwcfi.h"

#define CIE_ID_DEBUG_FRAME 0xffffffffu

struct cur {
	const uint8_t *p, *end;
	bool bad;
};

static uint8_t u8(struct cur *c)
{
	if (c->p >= c->end) {
		c->bad = true;
		return 0;
	}
	return *c->p++;
}

static uint32_t u32(struct cur *c)
{
	uint32_t v;

	if (c->end - c->p < 4) {
		c->bad = true;
		c->p = c->end;
		return 0;
	}
	v = c->p[0] | (uint32_t)c->p[1] << 8 | (uint32_t)c->p[2] << 16 | (uint32_t)c->p[3] << 24;
	c->p += 4;
	return v;
}

/* A LEB128's value bits (7 a byte, low first); *shift: the bits it had, *last: its last byte. */
static uint64_t leb(struct cur *c, unsigned int *shift, uint8_t *last)
{
	uint64_t v = 0;
	uint8_t b;

	*shift = 0;
	do {
		b = u8(c);
		if (*shift < 64)
			v |= (uint64_t)(b & 0x7f) << *shift;
		*shift += 7;
	} while ((b & 0x80) && !c->bad);
	*last = b;
	return v;
}

static uint64_t uleb(struct cur *c)
{
	unsigned int shift;
	uint8_t last;

	return leb(c, &shift, &last);
}

static int64_t sleb(struct cur *c)
{
	unsigned int shift;
	uint8_t last;
	uint64_t v = leb(c, &shift, &last);

	if (shift < 64 && (last & 0x40)) /* the sign bit: extended */
		v |= ~(uint64_t)0 << shift;
	return (int64_t)v;
}

/* An entry's bounds: *body is after its length word, *next the entry after it. */
static bool entry_at(const struct dwcfi *t, size_t off, struct cur *body, size_t *next)
{
	struct cur c = {t->sec + off, t->sec + t->len, false};
	uint32_t len = u32(&c);

	if (c.bad || len == 0xffffffffu || len > (size_t)(c.end - c.p)) /* no 64-bit DWARF */
		return false;
	*body = (struct cur){c.p, c.p + len, false};
	*next = (size_t)(c.p + len - t->sec);
	return true;
}

struct cie {
	uint64_t code_align;
	int64_t data_align;
	uint8_t ra_reg;
	struct cur insns;
};

/* The CIE at off: version 1, 3 or 4, no augmentation, 4-byte addresses. */
static bool cie_at(const struct dwcfi *t, uint32_t off, struct cie *ci)
{
	struct cur c;
	size_t next;
	uint64_t ra;

	if (off >= t->len || !entry_at(t, off, &c, &next) || u32(&c) != CIE_ID_DEBUG_FRAME)
		return false;
	uint8_t version = u8(&c);

	if (version != 1 && version != 3 && version != 4)
		return false;
	if (u8(&c) != 0)
		return false; /* augmentation: gcc writes none in .debug_frame */
	if (version == 4 && (u8(&c) != 4 || u8(&c) != 0))
		return false; /* address size 4, no segment selector */
	ci->code_align = uleb(&c);
	ci->data_align = sleb(&c);
	ra = version == 1 ? u8(&c) : uleb(&c);
	if (c.bad || ra >= DWCFI_REGS || !ci->code_align)
		return false;
	ci->ra_reg = (uint8_t)ra;
	ci->insns = c;
	return true;
}

static int by_lo(const void *a, const void *b)
{
	const struct dwcfi_fde *x = a, *y = b;

	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

int dwcfi__open(struct dwcfi *t, const uint8_t *sec, size_t len, size_t max_fdes, char *err,
		size_t errlen)
{
	size_t off = 0, cap = 0, next;
	struct cur c;

	*t = (struct dwcfi){.sec = sec, .len = len};
	while (off + 4 <= len) {
		if (!entry_at(t, off, &c, &next)) {
			snprintf(err, errlen, ".debug_frame: bad entry length at 0x%zx", off);
			goto bad;
		}
		uint32_t id = u32(&c), lo = u32(&c), range = u32(&c);

		if (c.bad && id != CIE_ID_DEBUG_FRAME) {
			snprintf(err, errlen, ".debug_frame: FDE at 0x%zx too short", off);
			goto bad;
		}
		if (id != CIE_ID_DEBUG_FRAME && range) {
			if (t->n_fdes == max_fdes) {
				snprintf(err, errlen, ".debug_frame: more than %zu FDEs", max_fdes);
				dwcfi__close(t);
				return -E2BIG;
			}
			if (t->n_fdes == cap) {
				size_t ncap = cap ? 2 * cap : 256;
				void *n = realloc(t->fdes, ncap * sizeof(*t->fdes));

				if (!n) {
					dwcfi__close(t);
					return -ENOMEM;
				}
				t->fdes = n;
				cap = ncap;
			}
			lo &= ~1u; /* a Thumb function's start may carry its mode bit */
			t->fdes[t->n_fdes++] = (struct dwcfi_fde){
			    .lo = lo, .hi = lo + range < lo ? UINT32_MAX : lo + range,
			    .off = (uint32_t)off};
		}
		off = next;
	}
	if (t->n_fdes)
		qsort(t->fdes, t->n_fdes, sizeof(*t->fdes), by_lo);
	return 0;
bad:
	dwcfi__close(t);
	return -EINVAL;
}

void dwcfi__close(struct dwcfi *t)
{
	if (!t)
		return;
	free(t->fdes);
	t->fdes = NULL;
	t->n_fdes = 0;
}

static const struct dwcfi_fde *fde_for(const struct dwcfi *t, uint32_t pc)
{
	size_t lo = 0, hi = t->n_fdes;

	while (lo < hi) { /* the last FDE starting at or below pc */
		size_t mid = lo + (hi - lo) / 2;

		if (t->fdes[mid].lo <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo && pc < t->fdes[lo - 1].hi ? &t->fdes[lo - 1] : NULL;
}

/* What the CFA instructions run to the row holding pc keep of themselves. */
struct run {
	const struct cie *ci;
	uint32_t loc, pc;
	const struct dwcfi_row *init; /* the CIE's row, for DW_CFA_restore */
	struct dwcfi_row stack[DWCFI_MAX_STATES];
	unsigned int depth, insns;
};

static void set_rule(struct dwcfi_row *r, uint64_t reg, enum dwcfi_how how, int64_t off,
		     uint64_t other)
{
	if (reg >= DWCFI_REGS)
		return; /* VFP and the rest: not needed for the chain */
	r->reg[reg] = (struct dwcfi_rule){.how = (uint8_t)how,
					  .reg = (uint8_t)(other < DWCFI_REGS ? other : 0),
					  .off = (int32_t)off};
	if (how == DWCFI_REGISTER && other >= DWCFI_REGS)
		r->reg[reg].how = DWCFI_UNDEF;
}

static void restore(struct run *x, struct dwcfi_row *r, uint64_t reg)
{
	if (reg < DWCFI_REGS)
		r->reg[reg] = x->init ? x->init->reg[reg] : (struct dwcfi_rule){0};
}

/* Advances the location: true once it moved past the pc (the row holding pc is done). */
static bool advance(struct run *x, uint64_t delta)
{
	uint64_t loc = x->loc + delta * x->ci->code_align;

	if (loc > x->pc)
		return true;
	x->loc = (uint32_t)loc;
	return false;
}

/* v times the data alignment without signed overflow (hostile tables wrap, never UB). */
static int64_t scaled(uint64_t v, int64_t align)
{
	return (int64_t)(v * (uint64_t)align);
}

/* Skips a DWARF expression block (its length first): 0 or -EINVAL. */
static int skip_block(struct cur *c)
{
	uint64_t n = uleb(c);

	if (c->bad || n > (uint64_t)(c->end - c->p))
		return -EINVAL;
	c->p += n;
	return 0;
}

/* One instruction: 1 when the row holding pc is complete, 0 to go on, -EINVAL. */
static int run_one(struct run *x, struct cur *c, struct dwcfi_row *r)
{
	uint8_t op = u8(c), lo = op & 0x3f;
	int64_t da = x->ci->data_align;
	uint64_t reg;

	switch (op >> 6) {
	case 1: /* advance_loc */
		return advance(x, lo);
	case 2: /* offset */
		set_rule(r, lo, DWCFI_OFFSET, scaled(uleb(c), da), 0);
		return 0;
	case 3: /* restore */
		restore(x, r, lo);
		return 0;
	}
	switch (op) {
	case 0x00: /* nop */
		return 0;
	case 0x02: /* advance_loc1 */
		return advance(x, u8(c));
	case 0x03: { /* advance_loc2 */
		uint64_t d = u8(c);

		return advance(x, d | (uint64_t)u8(c) << 8);
	}
	case 0x04: /* advance_loc4 */
		return advance(x, u32(c));
	case 0x05: /* offset_extended */
		reg = uleb(c);
		set_rule(r, reg, DWCFI_OFFSET, scaled(uleb(c), da), 0);
		return 0;
	case 0x11: /* offset_extended_sf */
		reg = uleb(c);
		set_rule(r, reg, DWCFI_OFFSET, scaled((uint64_t)sleb(c), da), 0);
		return 0;
	case 0x06: /* restore_extended */
		restore(x, r, uleb(c));
		return 0;
	case 0x07: /* undefined */
		set_rule(r, uleb(c), DWCFI_UNDEF, 0, 0);
		return 0;
	case 0x08: /* same_value */
		set_rule(r, uleb(c), DWCFI_SAME, 0, 0);
		return 0;
	case 0x09: /* register */
		reg = uleb(c);
		set_rule(r, reg, DWCFI_REGISTER, 0, uleb(c));
		return 0;
	case 0x0a: /* remember_state */
		if (x->depth == DWCFI_MAX_STATES)
			return -EINVAL;
		x->stack[x->depth++] = *r;
		return 0;
	case 0x0b: /* restore_state */
		if (!x->depth)
			return -EINVAL;
		*r = x->stack[--x->depth];
		return 0;
	case 0x0c: /* def_cfa */
		reg = uleb(c);
		r->cfa_reg = (uint8_t)reg;
		r->cfa_off = (int32_t)uleb(c);
		return reg < DWCFI_REGS ? 0 : -EINVAL;
	case 0x12: /* def_cfa_sf */
		reg = uleb(c);
		r->cfa_reg = (uint8_t)reg;
		r->cfa_off = (int32_t)(scaled((uint64_t)sleb(c), da));
		return reg < DWCFI_REGS ? 0 : -EINVAL;
	case 0x0d: /* def_cfa_register */
		reg = uleb(c);
		r->cfa_reg = (uint8_t)reg;
		return reg < DWCFI_REGS ? 0 : -EINVAL;
	case 0x0e: /* def_cfa_offset */
		r->cfa_off = (int32_t)uleb(c);
		return 0;
	case 0x13: /* def_cfa_offset_sf */
		r->cfa_off = (int32_t)(scaled((uint64_t)sleb(c), da));
		return 0;
	case 0x14: /* val_offset */
		reg = uleb(c);
		set_rule(r, reg, DWCFI_VAL_OFFSET, scaled(uleb(c), da), 0);
		return 0;
	case 0x15: /* val_offset_sf */
		reg = uleb(c);
		set_rule(r, reg, DWCFI_VAL_OFFSET, scaled((uint64_t)sleb(c), da), 0);
		return 0;
	case 0x10: /* expression */
	case 0x16: /* val_expression */
		reg = uleb(c);
		return reg < DWCFI_REGS ? -EINVAL : skip_block(c);
	case 0x2e: /* GNU_args_size */
		uleb(c);
		return 0;
	default: /* def_cfa_expression and anything else: not followed */
		return -EINVAL;
	}
}

/* Runs instructions from c until the row holding x->pc is complete (or they end): 0, -EINVAL. */
static int run(struct run *x, struct cur c, struct dwcfi_row *r)
{
	while (c.p < c.end) {
		int ret;

		if (++x->insns > DWCFI_MAX_INSNS)
			return -EINVAL;
		ret = run_one(x, &c, r);
		if (ret < 0 || c.bad)
			return -EINVAL;
		if (ret)
			return 0;
	}
	return 0;
}

int dwcfi__row_at(const struct dwcfi *t, uint32_t pc, struct dwcfi_row *row)
{
	const struct dwcfi_fde *f = fde_for(t, pc);
	struct dwcfi_row init;
	struct cie ci;
	struct cur c;
	size_t next;

	if (!f)
		return -ENOENT;
	if (!entry_at(t, f->off, &c, &next) || !cie_at(t, u32(&c), &ci))
		return -EINVAL;
	c.p += 8; /* initial location, address range */
	if (c.p > c.end)
		return -EINVAL;
	/* registers the CIE does not name keep their values: callee-saved by the ABI */
	struct run x = {.ci = &ci, .loc = f->lo, .pc = UINT32_MAX};

	memset(&init, 0, sizeof(init));
	init.ra_reg = ci.ra_reg;
	if (run(&x, ci.insns, &init))
		return -EINVAL;
	*row = init;
	x = (struct run){.ci = &ci, .loc = f->lo, .pc = pc, .init = &init};
	return run(&x, c, row);
}

/* The value a rule gives a register of the caller: false when it cannot be known. */
static bool caller_value(const struct dwcfi_rule *rule, unsigned int i, const struct dwcfi_regs *in,
			 uint32_t cfa, dwcfi_read_fn read, void *ctx, uint32_t *v, bool *left)
{
	switch (rule->how) {
	case DWCFI_SAME:
		*v = in->r[i];
		return in->known >> i & 1;
	case DWCFI_OFFSET:
		if (read(ctx, cfa + (uint32_t)rule->off, v))
			return true;
		*left = true;
		return false;
	case DWCFI_VAL_OFFSET:
		*v = cfa + (uint32_t)rule->off;
		return true;
	case DWCFI_REGISTER:
		*v = in->r[rule->reg];
		return in->known >> rule->reg & 1;
	default:
		return false;
	}
}

enum dwcfi_step dwcfi__step(const struct dwcfi_row *row, struct dwcfi_regs *regs,
			    dwcfi_read_fn read, void *ctx)
{
	struct dwcfi_regs out = {{0}, 0};
	uint32_t cfa;
	bool left = false;

	if (row->cfa_reg >= DWCFI_REGS || !(regs->known >> row->cfa_reg & 1))
		return DWCFI_UNKNOWN_REG;
	if (row->reg[row->ra_reg].how == DWCFI_UNDEF)
		return DWCFI_OUTERMOST;
	cfa = regs->r[row->cfa_reg] + (uint32_t)row->cfa_off;
	for (unsigned int i = 0; i < DWCFI_REGS; i++) {
		uint32_t v;

		if (i == DWCFI_ARM_SP || i == DWCFI_ARM_PC)
			continue;
		if (caller_value(&row->reg[i], i, regs, cfa, read, ctx, &v, &left)) {
			out.r[i] = v;
			out.known |= 1u << i;
		} else if (i == row->ra_reg) {
			return left ? DWCFI_LEFT_COPY : DWCFI_UNKNOWN_REG;
		}
	}
	/* other registers saved beyond the copy stay unknown: fatal only if a caller needs one */
	out.r[DWCFI_ARM_SP] = cfa; /* the CFA is the caller's sp at the call */
	out.r[DWCFI_ARM_PC] = out.r[row->ra_reg];
	out.known |= 1u << DWCFI_ARM_SP | 1u << DWCFI_ARM_PC;
	*regs = out;
	return DWCFI_STEPPED;
}
