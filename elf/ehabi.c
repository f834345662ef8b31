// SPDX-License-Identifier: MIT
/*
 * elf/ehabi.c — see ehabi.h. The opcode table is the ARM EHABI's ("Exception Handling ABI for
 * the ARM Architecture", §10.3), cross-checked against Linux arch/arm/kernel/unwind.c and
 * libgcc's unwind-arm-common.inc.
 */
#include <string.h>

#include "elf/ehabi.h"

#define EXIDX_CANTUNWIND 1u

/* The word at target address a: false when it is not inside the table's memory. */
static bool word_at(const struct ehabi_table *t, uint32_t a, uint32_t *w)
{
	if (a < t->lo || a > t->hi - 4 || (a & 3))
		return false;
	memcpy(w, t->mem + (a - t->lo), 4); /* little-endian targets only */
	return true;
}

/* A prel31 field at address a: its target. */
static uint32_t prel31(uint32_t a, uint32_t w)
{
	uint32_t off = w & 0x7fffffffu;

	if (off & 0x40000000u)
		off |= 0x80000000u; /* sign-extend bit 30 */
	return a + off;
}

int32_t ehabi__find(const struct ehabi_table *t, uint32_t pc)
{
	uint32_t lo = 0, hi = t->n, w;

	pc &= ~1u;
	if (t->n == 0 || t->n > (t->hi - t->lo) / 8 || !word_at(t, t->exidx, &w) ||
	    pc < prel31(t->exidx, w))
		return -1;
	while (hi - lo > 1) { /* the last entry whose function starts at or before pc */
		uint32_t mid = lo + (hi - lo) / 2, a = t->exidx + 8 * mid;

		if (!word_at(t, a, &w))
			return -1;
		if (prel31(a, w) <= pc)
			lo = mid;
		else
			hi = mid;
	}
	return (int32_t)lo;
}

/* Appends the three (or two) low bytes of w, most significant first. */
static void take(struct ehabi_entry *e, uint32_t w, int bytes)
{
	for (int s = 8 * (bytes - 1); s >= 0 && e->n_ops < EHABI_MAX_OPS; s -= 8)
		e->ops[e->n_ops++] = (uint8_t)(w >> s);
}

/*
 * Opcodes at extab address a in the personality 1/2 layout (and in the data after a generic
 * personality, which GCC's personality routines read the same way): bits 23-16 count the
 * words that follow, bits 15-0 hold two opcodes. first3: bits 23-0 are opcodes and bits 31-24
 * the count (the generic layout).
 */
static bool extab_ops(const struct ehabi_table *t, uint32_t a, bool first3, struct ehabi_entry *e)
{
	uint32_t w, more;

	if (!word_at(t, a, &w))
		return false;
	more = first3 ? w >> 24 : (w >> 16) & 0xff;
	if (2 + 4 * more + (first3 ? 1 : 0) > EHABI_MAX_OPS)
		return false;
	take(e, w, first3 ? 3 : 2);
	for (uint32_t i = 1; i <= more; i++) {
		if (!word_at(t, a + 4 * i, &w))
			return false;
		take(e, w, 4);
	}
	return true;
}

void ehabi__entry_at(const struct ehabi_table *t, uint32_t i, struct ehabi_entry *e)
{
	uint32_t a = t->exidx + 8 * i, w0, w1, x, xa;

	memset(e, 0, sizeof(*e));
	if (i >= t->n || !word_at(t, a, &w0) || !word_at(t, a + 4, &w1))
		return;
	e->start = prel31(a, w0);
	if (w1 == EXIDX_CANTUNWIND) {
		e->kind = EHABI_CANTUNWIND;
		return;
	}
	if (w1 & 0x80000000u) { /* inline: personality 0 only */
		if ((w1 >> 24) != 0x80)
			return;
		take(e, w1, 3);
		e->kind = EHABI_OPS;
		return;
	}
	xa = prel31(a + 4, w1);
	if (!word_at(t, xa, &x))
		return;
	if (x & 0x80000000u) { /* compact model in .ARM.extab */
		unsigned int idx = (x >> 24) & 0x0f;

		if ((x >> 28) != 0x8)
			return;
		if (idx == 0)
			take(e, x, 3);
		else if (idx > 2 || !extab_ops(t, xa, false, e))
			return;
	} else if (!extab_ops(t, xa + 4, true, e)) { /* generic: personality, then its data */
		return;
	}
	e->kind = EHABI_OPS;
}

void ehabi__lookup(const struct ehabi_table *t, uint32_t pc, struct ehabi_entry *e)
{
	int32_t i = ehabi__find(t, pc);

	if (i < 0)
		memset(e, 0, sizeof(*e));
	else
		ehabi__entry_at(t, (uint32_t)i, e);
}

/* Pops the registers of mask (bit k = r[first + k]) from vsp, lowest first. */
static bool pop(uint32_t r[16], uint32_t *vsp, uint32_t mask, unsigned int first,
		ehabi_read_fn rd, void *ctx, bool *ra)
{
	for (unsigned int k = 0; mask >> k; k++) {
		if (!(mask >> k & 1))
			continue;
		if (!rd(ctx, *vsp, &r[first + k]))
			return false;
		*vsp += 4;
		if (first + k >= 14)
			*ra = true;
	}
	return true;
}

enum ehabi_result ehabi__execute(const struct ehabi_entry *e, uint32_t r[16], ehabi_read_fn rd,
				 void *ctx, bool *ra_from_stack)
{
	uint32_t vsp = r[13];
	bool pc_popped = false;
	unsigned int i = 0;

	*ra_from_stack = false;
	if (e->kind == EHABI_CANTUNWIND)
		return EHABI_STEP_STOP;
	if (e->kind != EHABI_OPS)
		return EHABI_STEP_BAD;
	while (i < e->n_ops) {
		uint8_t op = e->ops[i++], op2 = i < e->n_ops ? e->ops[i] : 0;

		if ((op & 0xc0) == 0x00) { /* vsp += (x << 2) + 4 */
			vsp += ((uint32_t)(op & 0x3f) << 2) + 4;
		} else if ((op & 0xc0) == 0x40) { /* vsp -= (x << 2) + 4 */
			vsp -= ((uint32_t)(op & 0x3f) << 2) + 4;
		} else if ((op & 0xf0) == 0x80) { /* pop r4-r15 by mask; 0 = refuse */
			uint32_t mask = (uint32_t)(op & 0x0f) << 8 | op2;

			i++;
			if (mask == 0)
				return EHABI_STEP_STOP;
			if (!pop(r, &vsp, mask, 4, rd, ctx, ra_from_stack))
				return EHABI_STEP_BAD;
			if (mask & (1u << 9))
				vsp = r[13]; /* popped sp: it is the new vsp */
			pc_popped |= mask >> 11 & 1;
		} else if ((op & 0xf0) == 0x90) { /* vsp = r[n] */
			if ((op & 0x0f) == 13 || (op & 0x0f) == 15)
				return EHABI_STEP_BAD;
			vsp = r[op & 0x0f];
		} else if ((op & 0xf0) == 0xa0) { /* pop r4-r[4+n], + r14 with bit 3 */
			uint32_t mask = (2u << (op & 7)) - 1;

			if (op & 8)
				mask |= 1u << 10;
			if (!pop(r, &vsp, mask, 4, rd, ctx, ra_from_stack))
				return EHABI_STEP_BAD;
		} else if (op == 0xb0) { /* finish */
			break;
		} else if (op == 0xb1) { /* pop r0-r3 by mask */
			i++;
			if (op2 == 0 || (op2 & 0xf0))
				return EHABI_STEP_BAD;
			if (!pop(r, &vsp, op2, 0, rd, ctx, ra_from_stack))
				return EHABI_STEP_BAD;
		} else if (op == 0xb2) { /* vsp += 0x204 + (uleb128 << 2) */
			uint32_t v = 0;
			unsigned int shift = 0;
			uint8_t b;

			do {
				if (i >= e->n_ops || shift > 28)
					return EHABI_STEP_BAD;
				b = e->ops[i++];
				v |= (uint32_t)(b & 0x7f) << shift;
				shift += 7;
			} while (b & 0x80);
			vsp += 0x204 + (v << 2);
		} else if (op == 0xb3 || op == 0xc8 || op == 0xc9) {
			/* VFP d[s]..d[s+c]: FSTMFDX (b3) has one pad word, VPUSH (c8, c9) none */
			i++;
			vsp += 8 * ((uint32_t)(op2 & 0x0f) + 1) + (op == 0xb3 ? 4 : 0);
		} else if ((op & 0xf8) == 0xb8) { /* VFP d8..d[8+n], FSTMFDX */
			vsp += 8 * ((uint32_t)(op & 7) + 1) + 4;
		} else if ((op & 0xf8) == 0xd0) { /* VFP d8..d[8+n], VPUSH */
			vsp += 8 * ((uint32_t)(op & 7) + 1);
		} else if ((op & 0xf8) == 0xc0 && op != 0xc6 && op != 0xc7) { /* iWMMXt wR10.. */
			vsp += 8 * ((uint32_t)(op & 7) + 1);
		} else if (op == 0xc6) { /* iWMMXt wR[s]..wR[s+c] */
			i++;
			vsp += 8 * ((uint32_t)(op2 & 0x0f) + 1);
		} else if (op == 0xc7) { /* iWMMXt wCGR by mask */
			i++;
			if (op2 == 0 || (op2 & 0xf0))
				return EHABI_STEP_BAD;
			vsp += 4 * (uint32_t)__builtin_popcount(op2);
		} else {
			return EHABI_STEP_BAD; /* spare */
		}
		if (i > e->n_ops)
			return EHABI_STEP_BAD; /* a two-byte opcode cut short */
	}
	r[13] = vsp;
	if (!pc_popped)
		r[15] = r[14];
	return EHABI_STEP_OK;
}
