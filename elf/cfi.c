// SPDX-License-Identifier: MIT
/*
 * elf/cfi.c — see cfi.h. Async-signal-safe: reads only the memory of the table it is given.
 */
#include <stdlib.h>
#include <string.h>

#include "elf/cfi.h"

struct cursor {
	const uint8_t *p, *end;
	bool bad;
};

static uint8_t cur_u8(struct cursor *c)
{
	if (c->p >= c->end) {
		c->bad = true;
		return 0;
	}
	return *c->p++;
}

static uint64_t cur_uleb(struct cursor *c)
{
	uint64_t v = 0;
	unsigned int shift = 0;
	uint8_t b;

	do {
		b = cur_u8(c);
		if (shift < 64)
			v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
	} while ((b & 0x80) && !c->bad);
	return v;
}

static int64_t cur_sleb(struct cursor *c)
{
	int64_t v = 0;
	unsigned int shift = 0;
	uint8_t b;

	do {
		b = cur_u8(c);
		if (shift < 64)
			v |= (int64_t)((uint64_t)(b & 0x7f) << shift);
		shift += 7;
	} while ((b & 0x80) && !c->bad);
	if (shift < 64 && (b & 0x40))
		v = (int64_t)((uint64_t)v | ~(uint64_t)0 << shift);
	return v;
}

/* Skips n bytes, or marks the cursor bad when they are not all there. */
static void cur_skip(struct cursor *c, uint64_t n)
{
	if (n > (uint64_t)(c->end - c->p)) {
		c->bad = true;
		c->p = c->end;
		return;
	}
	c->p += n;
}

/* v * align without signed overflow (hostile tables: wraps instead of undefined). */
static int64_t scaled(uint64_t v, int64_t align)
{
	return (int64_t)(v * (uint64_t)align);
}

static uint64_t cur_fixed(struct cursor *c, unsigned int n)
{
	uint64_t v = 0;

	if ((size_t)(c->end - c->p) < n) {
		c->bad = true;
		return 0;
	}
	memcpy(&v, c->p, n); /* little-endian targets only */
	c->p += n;
	return v;
}

/* A DW_EH_PE-encoded pointer; datarel is the base for DW_EH_PE_datarel. */
static uintptr_t cur_encoded(struct cursor *c, uint8_t enc, uintptr_t datarel)
{
	uintptr_t at = (uintptr_t)c->p, v;

	if (enc == 0xff)
		return 0;
	switch (enc & 0x0f) {
	case 0x00:
		v = (uintptr_t)cur_fixed(c, sizeof(uintptr_t));
		break;
	case 0x01:
		v = (uintptr_t)cur_uleb(c);
		break;
	case 0x02:
		v = (uintptr_t)cur_fixed(c, 2);
		break;
	case 0x03:
		v = (uintptr_t)cur_fixed(c, 4);
		break;
	case 0x04:
		v = (uintptr_t)cur_fixed(c, 8);
		break;
	case 0x09:
		v = (uintptr_t)cur_sleb(c);
		break;
	case 0x0a:
		v = (uintptr_t)(int16_t)cur_fixed(c, 2);
		break;
	case 0x0b:
		v = (uintptr_t)(int32_t)cur_fixed(c, 4);
		break;
	case 0x0c:
		v = (uintptr_t)cur_fixed(c, 8);
		break;
	default:
		c->bad = true;
		return 0;
	}
	switch (enc & 0x70) {
	case 0x00:
		break;
	case 0x10:
		v += at;
		break;
	case 0x30:
		v += datarel;
		break;
	default:
		c->bad = true;
		return 0;
	}
	if (enc & 0x80)
		c->bad = true; /* indirect: never used for pc ranges */
	return v;
}

struct cie_info {
	uint64_t code_align;
	int64_t data_align;
	uint8_t fde_enc;
	const uint8_t *insns, *insns_end;
};

static bool parse_cie(const uint8_t *cie, const struct cfi_table *m, struct cie_info *ci)
{
	struct cursor c = {cie, (const uint8_t *)m->hi, false};
	uint32_t len = (uint32_t)cur_fixed(&c, 4);
	const char *aug;

	if (len == 0 || len == 0xffffffffu || len > (size_t)(c.end - c.p))
		return false;
	c.end = c.p + len;
	if (cur_fixed(&c, 4) != 0)
		return false;
	uint8_t version = cur_u8(&c);

	aug = (const char *)c.p;
	while (cur_u8(&c) && !c.bad)
		;
	if (c.bad)
		return false; /* no terminating NUL inside the CIE */
	ci->code_align = cur_uleb(&c);
	ci->data_align = cur_sleb(&c);
	if (version == 1)
		cur_u8(&c);
	else
		cur_uleb(&c);
	ci->fde_enc = 0;
	if (aug[0] == 'z') {
		uint64_t alen = cur_uleb(&c);
		struct cursor aug_end = c;

		cur_skip(&aug_end, alen);

		for (const char *a = aug + 1; *a && !c.bad; a++) {
			if (*a == 'R') {
				ci->fde_enc = cur_u8(&c);
			} else if (*a == 'P') {
				uint8_t e = cur_u8(&c);

				cur_encoded(&c, e & 0x7f, 0);
			} else if (*a == 'L') {
				cur_u8(&c);
			} else if (*a != 'S' && *a != 'B') {
				break;
			}
		}
		c.p = aug_end.p;
		c.bad |= aug_end.bad;
	} else if (aug[0]) {
		return false;
	}
	ci->insns = c.p;
	ci->insns_end = c.end;
	return !c.bad && c.p <= c.end;
}

/*
 * binutils' x86_64 .plt CFA: DW_OP_breg7 (rsp) 8; DW_OP_breg16 (rip) 0; DW_OP_lit15; DW_OP_and;
 * DW_OP_litN; DW_OP_ge; DW_OP_lit3; DW_OP_shl; DW_OP_plus — rsp + 8, + 8 once (rip & 15) >= N
 * (N = 11 for .plt, 10 in some IBT layouts). Any other expression: false.
 */
static bool plt_expression(struct cursor *c, struct cfi_rules *r)
{
	static const uint8_t head[] = {0x77, 0x08, 0x80, 0x00, 0x3f, 0x1a};
	static const uint8_t tail[] = {0x2a, 0x33, 0x24, 0x22};
	uint64_t len = cur_uleb(c);
	const uint8_t *e = c->p;

	cur_skip(c, len);
	if (c->bad || len != sizeof(head) + 1 + sizeof(tail) || CFI_REG_SP != 7 ||
	    memcmp(e, head, sizeof(head)) || e[6] < 0x30 || e[6] > 0x4f ||
	    memcmp(e + 7, tail, sizeof(tail)))
		return false;
	r->cfa_reg = CFI_CFA_PLT;
	r->cfa_off = 8;
	r->plt_min = (uint8_t)(e[6] - 0x30);
	return true;
}

/* Whether loc moved past pc; row (NULL or [lo, hi)) narrows to the row holding pc. */
static bool passed(uintptr_t loc, uintptr_t pc, uintptr_t *row)
{
	if (loc > pc) {
		if (row)
			row[1] = loc;
		return true;
	}
	if (row)
		row[0] = loc;
	return false;
}

/* cfi__rows' side of run_cfa(): each row as the location advances past it. */
struct cfa_emit {
	cfi_row_fn fn;
	void *ctx;
	uintptr_t row_at, end; /* the current row starts at row_at; the FDE ends at end */
	bool stopped;	       /* fn asked to stop */
};

/* The rules r held from em->row_at to loc: one row (false: fn asked to stop). */
static bool emit_row(struct cfa_emit *em, uintptr_t loc, const struct cfi_rules *r)
{
	if (loc <= em->row_at || em->row_at >= em->end)
		return true;
	if (!em->fn(em->ctx, em->row_at, r)) {
		em->stopped = true;
		return false;
	}
	em->row_at = loc;
	return true;
}

/*
 * Runs CFA instructions until the location passes pc; row (NULL or [lo, hi)) narrows to the row
 * holding pc. With em, every row on the way goes to em->fn (one pass: a function's rows cost
 * its instructions once). Returns false on anything unsupported (or when em->fn asked to stop).
 */
static bool run_cfa(const uint8_t *p, const uint8_t *end, const struct cie_info *ci, uintptr_t loc,
		    uintptr_t pc, struct cfi_rules *r, const struct cfi_rules *init, uintptr_t *row,
		    struct cfa_emit *em)
{
	struct cfi_rules stack[4];
	unsigned int depth = 0;
	struct cursor c = {p, end, false};

	while (c.p < c.end && !c.bad) {
		uint8_t op = cur_u8(&c), lo = op & 0x3f;
		uint64_t reg;
		int64_t off;

		switch (op >> 6) {
		case 1: /* advance_loc */
			loc += lo * ci->code_align;
			if (em && !emit_row(em, loc, r))
				return false;
			if (passed(loc, pc, row))
				return true;
			continue;
		case 2: /* offset */
			off = scaled(cur_uleb(&c), ci->data_align);
			if (lo == CFI_REG_FP) {
				r->fp_saved = true;
				r->fp_off = off;
			}
			if (lo == CFI_REG_RA) {
				r->ra_saved = true;
				r->ra_undefined = false;
				r->ra_off = off;
			}
			continue;
		case 3: /* restore */
			if (init && lo == CFI_REG_FP) {
				r->fp_saved = init->fp_saved;
				r->fp_off = init->fp_off;
			}
			if (init && lo == CFI_REG_RA) {
				r->ra_saved = init->ra_saved;
				r->ra_undefined = init->ra_undefined;
				r->ra_off = init->ra_off;
			}
			continue;
		}
		switch (op) {
		case 0x00:
			break;
		case 0x02: /* advance_loc1, advance_loc2, advance_loc4 */
		case 0x03:
		case 0x04:
			loc += cur_fixed(&c, 1u << (op - 0x02)) * ci->code_align;
			if (em && !emit_row(em, loc, r))
				return false;
			if (passed(loc, pc, row))
				return true;
			break;
		case 0x05: /* offset_extended */
		case 0x11: /* offset_extended_sf */
			reg = cur_uleb(&c);
			off = scaled(op == 0x05 ? cur_uleb(&c) : (uint64_t)cur_sleb(&c),
				     ci->data_align);
			if (reg == CFI_REG_FP) {
				r->fp_saved = true;
				r->fp_off = off;
			}
			if (reg == CFI_REG_RA) {
				r->ra_saved = true;
				r->ra_undefined = false;
				r->ra_off = off;
			}
			break;
		case 0x06:
		case 0x07:
		case 0x08: /* restore_extended, undefined, same_value */
			reg = cur_uleb(&c);
			if (reg == CFI_REG_FP)
				r->fp_saved = op == 0x06 && init && init->fp_saved;
			if (reg == CFI_REG_RA) {
				r->ra_saved = op == 0x06 && init && init->ra_saved;
				r->ra_undefined =
				    op == 0x07 || (op == 0x06 && init && init->ra_undefined);
			}
			break;
		case 0x09: /* register: a saved value in another register, untracked */
			reg = cur_uleb(&c);
			cur_uleb(&c);
			if (reg == CFI_REG_FP || reg == CFI_REG_RA)
				return false;
			break;
		case 0x0a:
			if (depth == 4)
				return false;
			stack[depth++] = *r;
			break;
		case 0x0b:
			if (depth == 0)
				return false;
			*r = stack[--depth];
			break;
		case 0x0c:
			r->cfa_reg = (unsigned int)cur_uleb(&c);
			r->cfa_off = (int64_t)cur_uleb(&c);
			break;
		case 0x0d:
			r->cfa_reg = (unsigned int)cur_uleb(&c);
			break;
		case 0x0e:
			r->cfa_off = (int64_t)cur_uleb(&c);
			break;
		case 0x12:
			r->cfa_reg = (unsigned int)cur_uleb(&c);
			r->cfa_off = scaled((uint64_t)cur_sleb(&c), ci->data_align);
			break;
		case 0x13:
			r->cfa_off = scaled((uint64_t)cur_sleb(&c), ci->data_align);
			break;
		case 0x10:
		case 0x16: /* expression, val_expression */
			reg = cur_uleb(&c);
			cur_skip(&c, cur_uleb(&c));
			if (reg == CFI_REG_FP || reg == CFI_REG_RA)
				return false;
			break;
		case 0x14:
		case 0x15: /* val_offset(_sf) */
			reg = cur_uleb(&c);
			if (op == 0x14)
				cur_uleb(&c);
			else
				cur_sleb(&c);
			if (reg == CFI_REG_FP || reg == CFI_REG_RA)
				return false;
			break;
		case 0x2e:
			cur_uleb(&c);
			break; /* GNU_args_size */
		case 0x2d:
			/*
			 * AArch64 negate_ra_state: the return address is PAC-signed from here on.
			 * The in-process walker strips it (agent/lib/unwind.c); the BPF walker does
			 * not, so the rows it is given (em) stop here as before.
			 */
			if (em)
				return false;
			break;
		case 0x0f: /* def_cfa_expression: only the PLT's */
			if (!plt_expression(&c, r))
				return false;
			break;
		default:
			return false; /* the rest: give up */
		}
	}
	return !c.bad;
}

/* Finds pc's FDE through .eh_frame_hdr's sorted table and computes the rules at pc. */
/* Entry i of the search table (any alignment: the table may come from a hostile file). */
static int32_t table_entry(const uint8_t *table, size_t i)
{
	int32_t v;

	memcpy(&v, table + 4 * i, sizeof(v));
	return v;
}

/*
 * An FDE's CIE and initial location: the cursor is left at the FDE's address range. The CIE
 * pointer is relative to its own field.
 */
static bool fde_open(const struct cfi_table *m, uintptr_t fde, struct cursor *c,
		     struct cie_info *ci, uintptr_t *begin)
{
	uint32_t len;
	uintptr_t cie;

	if (fde < m->lo || fde >= m->hi || m->hi - fde < 16)
		return false;
	*c = (struct cursor){(const uint8_t *)fde, (const uint8_t *)m->hi, false};
	len = (uint32_t)cur_fixed(c, 4);
	if (len == 0 || len == 0xffffffffu || len > (size_t)(c->end - c->p))
		return false;
	c->end = c->p + len;
	cie = (uintptr_t)c->p;
	cie -= (uint32_t)cur_fixed(c, 4);
	if (cie < m->lo || cie >= m->hi || !parse_cie((const uint8_t *)cie, m, ci))
		return false;
	*begin = cur_encoded(c, ci->fde_enc, 0);
	return !c->bad;
}

/* The rules at pc by the FDE at fde: false unless it covers pc. row: see cfi__rules_row. */
static bool rules_in_fde(const struct cfi_table *m, uintptr_t fde, uintptr_t pc,
			 struct cfi_rules *r, uintptr_t *row)
{
	struct cursor c;
	struct cie_info ci;
	uintptr_t begin, range;

	if (!fde_open(m, fde, &c, &ci, &begin))
		return false;
	range = cur_encoded(&c, ci.fde_enc & 0x0f, 0);
	if (c.bad || pc < begin || pc >= begin + range)
		return false;
	cur_skip(&c, cur_uleb(&c)); /* 'z' augmentation data (the CIEs here all have it) */
	if (c.bad || c.p > c.end)
		return false;

	struct cfi_rules init = {.cfa_reg = CFI_REG_SP};

	if (!run_cfa(ci.insns, ci.insns_end, &ci, begin, UINTPTR_MAX, &init, NULL, NULL, NULL))
		return false;
	*r = init;
	row[0] = begin;
	row[1] = begin + range;
	return run_cfa(c.p, c.end, &ci, begin, pc, r, &init, row, NULL);
}

bool cfi__rules_at(const struct cfi_table *m, uintptr_t pc, struct cfi_rules *r)
{
	uintptr_t row[2];

	return cfi__rules_row(m, pc, r, row);
}

bool cfi__rules_row(const struct cfi_table *m, uintptr_t pc, struct cfi_rules *r, uintptr_t row[2])
{
	const uint8_t *hdr = m->eh_hdr;
	struct cursor c;

	if (!hdr || (uintptr_t)hdr < m->lo || (uintptr_t)hdr + 8 > m->hi || hdr[0] != 1 ||
	    hdr[2] != 0x03 || hdr[3] != 0x3b)
		return false;
	c = (struct cursor){hdr + 4, (const uint8_t *)m->hi, false};
	cur_encoded(&c, hdr[1], (uintptr_t)hdr);
	uint32_t count = (uint32_t)cur_fixed(&c, 4);
	const uint8_t *table = c.p;

	if (c.bad || count == 0 || (m->hi - (uintptr_t)table) / 8 < count)
		return false;
	uint32_t lo = 0, hi = count;

	while (hi - lo > 1) { /* last entry whose initial location <= pc */
		uint32_t mid = lo + (hi - lo) / 2;

		if ((uintptr_t)hdr + (uintptr_t)(intptr_t)table_entry(table, 2 * (size_t)mid) <= pc)
			lo = mid;
		else
			hi = mid;
	}
	return rules_in_fde(
	    m, (uintptr_t)hdr + (uintptr_t)(intptr_t)table_entry(table, 2 * (size_t)lo + 1), pc, r,
	    row);
}

static int fde_cmp(const void *a, const void *b)
{
	const struct cfi_fde *x = a, *y = b;

	return (x->pc > y->pc) - (x->pc < y->pc);
}

size_t cfi__index(const struct cfi_table *m, const uint8_t *eh_frame, size_t len,
		  struct cfi_fde *out, size_t max)
{
	uintptr_t p = (uintptr_t)eh_frame, end = p + len, begin;
	struct cie_info ci;
	struct cursor c;
	size_t n = 0;

	if (p < m->lo || p > m->hi || len > m->hi - p)
		return 0;
	while (end - p >= 8 && n < max) {
		uint32_t l, id;

		memcpy(&l, (const void *)p, 4);
		memcpy(&id, (const void *)(p + 4), 4);
		if (l == 0 || l == 0xffffffffu || l > end - p - 4)
			break; /* the terminator, 64-bit DWARF (never in .eh_frame), or garbage */
		if (id != 0 && fde_open(m, p, &c, &ci, &begin))
			out[n++] = (struct cfi_fde){.pc = begin, .fde = p};
		p += 4 + l;
	}
	qsort(out, n, sizeof(*out), fde_cmp);
	return n;
}

bool cfi__rules_indexed(const struct cfi_table *m, const struct cfi_fde *idx, size_t n,
			uintptr_t pc, struct cfi_rules *r)
{
	size_t lo = 0, hi = n;

	if (n == 0 || pc < idx[0].pc)
		return false;
	while (hi - lo > 1) { /* last entry whose initial location <= pc */
		size_t mid = lo + (hi - lo) / 2;

		if (idx[mid].pc <= pc)
			lo = mid;
		else
			hi = mid;
	}
	uintptr_t row[2];

	return rules_in_fde(m, idx[lo].fde, pc, r, row);
}

/*
 * The rows of the FDE at fde (see cfi__rows); *end gets the end of its range (0: unreadable).
 * false: fn asked to stop.
 */
static bool fde_rows(const struct cfi_table *m, uintptr_t fde, uintptr_t *end, cfi_row_fn fn,
		     void *ctx)
{
	struct cursor c;
	struct cie_info ci;
	uintptr_t begin, range;
	struct cfi_rules init = {.cfa_reg = CFI_REG_SP}, r;
	struct cfa_emit em = {.fn = fn, .ctx = ctx};
	bool ok;

	*end = 0;
	if (!fde_open(m, fde, &c, &ci, &begin))
		return true;
	range = cur_encoded(&c, ci.fde_enc & 0x0f, 0);
	cur_skip(&c, cur_uleb(&c));
	if (c.bad || c.p > c.end || range == 0 || begin + range < begin)
		return true;
	*end = begin + range;
	if (!run_cfa(ci.insns, ci.insns_end, &ci, begin, UINTPTR_MAX, &init, NULL, NULL, NULL))
		return fn(ctx, begin, NULL);
	em.row_at = begin;
	em.end = *end;
	r = init;
	ok = run_cfa(c.p, c.end, &ci, begin, UINTPTR_MAX, &r, &init, NULL, &em);
	if (em.stopped)
		return false;
	/* the last rules hold to the FDE's end; unsupported ones: no rules from there */
	return em.row_at >= em.end || fn(ctx, em.row_at, ok ? &r : NULL);
}

/* The FDE address and initial location of entry i of .eh_frame_hdr's table (or idx). */
struct fde_list {
	const uint8_t *hdr, *table;
	const struct cfi_fde *idx;
	size_t n;
};

static uintptr_t fde_at(const struct fde_list *l, size_t i, uintptr_t *pc)
{
	if (l->idx) {
		*pc = l->idx[i].pc;
		return l->idx[i].fde;
	}
	*pc = (uintptr_t)l->hdr + (uintptr_t)(intptr_t)table_entry(l->table, 2 * i);
	return (uintptr_t)l->hdr + (uintptr_t)(intptr_t)table_entry(l->table, 2 * i + 1);
}

static bool hdr_list(const struct cfi_table *m, struct fde_list *l)
{
	const uint8_t *hdr = m->eh_hdr;
	struct cursor c;

	if (!hdr || (uintptr_t)hdr < m->lo || (uintptr_t)hdr + 8 > m->hi || hdr[0] != 1 ||
	    hdr[2] != 0x03 || hdr[3] != 0x3b)
		return false;
	c = (struct cursor){hdr + 4, (const uint8_t *)m->hi, false};
	cur_encoded(&c, hdr[1], (uintptr_t)hdr);
	l->n = (uint32_t)cur_fixed(&c, 4);
	l->hdr = hdr;
	l->table = c.p;
	return !c.bad && (m->hi - (uintptr_t)l->table) / 8 >= l->n;
}

long cfi__rows(const struct cfi_table *m, const struct cfi_fde *idx, size_t n, cfi_row_fn fn,
	       void *ctx)
{
	struct fde_list l = {.idx = idx, .n = n};
	uintptr_t prev_end = 0, pc, end;
	size_t i;

	if (!idx && !hdr_list(m, &l))
		return -1;
	for (i = 0; i < l.n; i++) {
		uintptr_t fde = fde_at(&l, i, &pc);

		if (prev_end && pc > prev_end && !fn(ctx, prev_end, NULL))
			return (long)i;
		if (!fde_rows(m, fde, &end, fn, ctx))
			return (long)i + 1;
		if (end)
			prev_end = end;
	}
	if (prev_end)
		fn(ctx, prev_end, NULL);
	return (long)i;
}

#define PACK_OK 0x1ull
#define PACK_CFA_FP 0x2ull
#define PACK_FP 0x4ull
#define PACK_RA 0x8ull
#define PACK_UNDEF_RA 0x100ull
#define PACK_PLT 0x200ull
#define PACK_PLT_SHIFT 10 /* 5 bits: DW_OP_lit0..31 */

static bool fits16(int64_t v)
{
	return v >= INT16_MIN && v <= INT16_MAX;
}

bool cfi__pack(const struct cfi_rules *r, uint64_t *packed)
{
	if (!fits16(r->cfa_off) || !fits16(r->fp_off) || !fits16(r->ra_off) ||
	    (r->cfa_reg != CFI_REG_SP && r->cfa_reg != CFI_REG_FP && r->cfa_reg != CFI_CFA_PLT)) {
		*packed = CFI_PACKED_NONE;
		return false;
	}
	*packed = PACK_OK | (r->cfa_reg == CFI_REG_FP ? PACK_CFA_FP : 0) |
		  (r->fp_saved ? PACK_FP : 0) | (r->ra_saved ? PACK_RA : 0) |
		  (r->ra_undefined ? PACK_UNDEF_RA : 0) |
		  (r->cfa_reg == CFI_CFA_PLT ? PACK_PLT | (uint64_t)(r->plt_min & 31) << PACK_PLT_SHIFT
					     : 0) |
		  (uint64_t)(uint16_t)r->cfa_off << 16 | (uint64_t)(uint16_t)r->fp_off << 32 |
		  (uint64_t)(uint16_t)r->ra_off << 48;
	return true;
}

bool cfi__unpack(uint64_t packed, struct cfi_rules *r)
{
	if (!(packed & PACK_OK))
		return false;
	*r = (struct cfi_rules){
	    .cfa_reg = packed & PACK_PLT      ? CFI_CFA_PLT
		       : packed & PACK_CFA_FP ? CFI_REG_FP
					      : CFI_REG_SP,
	    .ra_undefined = packed & PACK_UNDEF_RA,
	    .plt_min = (uint8_t)(packed >> PACK_PLT_SHIFT & 31),
	    .cfa_off = (int16_t)(packed >> 16),
	    .fp_saved = packed & PACK_FP,
	    .fp_off = (int16_t)(packed >> 32),
	    .ra_saved = packed & PACK_RA,
	    .ra_off = (int16_t)(packed >> 48),
	};
	return true;
}
