// SPDX-License-Identifier: MIT
/*
 * Unit tests of elf/cfi.c on hand-built tables: an .eh_frame_hdr search table, one CIE and
 * FDEs whose rules were worked out by hand — a frame with the return address saved, the
 * outermost frame (DW_CFA_undefined on the return address: _start) and, on x86_64, a PLT
 * stub's def_cfa_expression; and the rows ([lo, hi)) that share one rule. Then cfi__rows (what
 * the BPF sampler loads: bpf/cfitab.c) on this test's own executable: rows come in pc order;
 * at every row's pc the rules are what the per-pc lookup (cfi__rules_at, the SIGPROF
 * unwinder's and the leaf repair's) says; a row without rules is where the lookup finds none
 * or rules it cannot follow; the program's entry (_start) gives an outermost row.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "elf/cfi.h"
#include "elf/elf.h"

/* table layout in buf: header at 0, CIE at 64, FDEs from 128, every 64 bytes */
#define HDR 0
#define CIE 64
#define FDE(i) (128 + 64 * (i))

static uint8_t buf[512] __attribute__((aligned(8)));
static uintptr_t code; /* the pcs the FDEs describe: never read */

static void put32(size_t at, uint32_t v)
{
	memcpy(buf + at, &v, 4);
}

/* An FDE for [begin, begin + len) with instructions ins. */
static void put_fde(int i, uintptr_t begin, uint32_t len, const uint8_t *ins, size_t n)
{
	size_t at = FDE(i);

	memset(buf + at, 0, 64);
	put32(at, 60);				      /* length: the rest of the 64 bytes */
	put32(at + 4, (uint32_t)(at + 4 - CIE));      /* CIE pointer: back from this field */
	put32(at + 8, (uint32_t)(begin - (uintptr_t)(buf + at + 8))); /* pcrel sdata4 */
	put32(at + 12, len);
	buf[at + 16] = 0; /* augmentation data length */
	memcpy(buf + at + 17, ins, n);
	/* the header's search table entry i: (initial location, FDE), both from the header */
	put32(HDR + 12 + 8 * (size_t)i, (uint32_t)(begin - (uintptr_t)buf));
	put32(HDR + 16 + 8 * (size_t)i, (uint32_t)(uintptr_t)(FDE(i) - HDR));
}

static void build(unsigned int n_fde)
{
	/* CIE: "zR", code align 1, data align -8, RA column, pcrel|sdata4 FDE pointers; initial
	 * rule CFA = SP + word, RA at CFA - word (x86_64's; aarch64 gets the same by hand) */
	static const uint8_t cie[] = {
	    60, 0, 0, 0, 0, 0, 0, 0, 1, 'z', 'R', 0, 1, 0x78, CFI_REG_RA, 1, 0x1b,
	    0x0c, CFI_REG_SP, sizeof(uintptr_t), 0x80 | CFI_REG_RA, 1,
	};

	memset(buf, 0, sizeof(buf));
	code = (uintptr_t)buf + 0x10000;
	buf[HDR] = 1;
	buf[HDR + 1] = 0x1b; /* eh_frame_ptr: pcrel sdata4 */
	buf[HDR + 2] = 0x03; /* fde_count: udata4 */
	buf[HDR + 3] = 0x3b; /* table: datarel sdata4 */
	put32(HDR + 4, (uint32_t)(CIE - (HDR + 4)));
	put32(HDR + 8, n_fde);
	memcpy(buf + CIE, cie, sizeof(cie));
}

static struct cfi_table table(void)
{
	return (struct cfi_table){(uintptr_t)buf, (uintptr_t)buf + sizeof(buf), buf + HDR};
}

static void saved_return_address_and_rows(void **state)
{
	/* push: advance 1, CFA = SP + 16; advance 4, CFA = SP + 32 */
	static const uint8_t ins[] = {0x41, 0x0e, 16, 0x44, 0x0e, 32};
	struct cfi_table t;
	struct cfi_rules r;
	uintptr_t row[2];

	build(1);
	put_fde(0, code, 0x40, ins, sizeof(ins));
	t = table();
	assert_true(cfi__rules_row(&t, code, &r, row));
	assert_int_equal(r.cfa_reg, CFI_REG_SP);
	assert_int_equal(r.cfa_off, sizeof(uintptr_t));
	assert_true(r.ra_saved);
	assert_int_equal(r.ra_off, -8);
	assert_false(r.ra_undefined);
	assert_int_equal(row[0], code);
	assert_int_equal(row[1], code + 1);
	assert_true(cfi__rules_row(&t, code + 3, &r, row));
	assert_int_equal(r.cfa_off, 16);
	assert_int_equal(row[0], code + 1);
	assert_int_equal(row[1], code + 5);
	assert_true(cfi__rules_row(&t, code + 0x3f, &r, row));
	assert_int_equal(r.cfa_off, 32);
	assert_int_equal(row[0], code + 5);
	assert_int_equal(row[1], code + 0x40); /* to the FDE's end */
	assert_false(cfi__rules_at(&t, code + 0x40, &r));
}

static void outermost_frame(void **state)
{
	static const uint8_t ins[] = {0x07, CFI_REG_RA}; /* DW_CFA_undefined RA */
	struct cfi_table t;
	struct cfi_rules r;
	uint64_t packed;

	build(1);
	put_fde(0, code, 0x20, ins, sizeof(ins));
	t = table();
	assert_true(cfi__rules_at(&t, code + 4, &r));
	assert_true(r.ra_undefined);
	assert_false(r.ra_saved);
	/* it survives the caches' packing */
	assert_true(cfi__pack(&r, &packed));
	memset(&r, 0, sizeof(r));
	assert_true(cfi__unpack(packed, &r));
	assert_true(r.ra_undefined);
}

static void plt_expression(void **state)
{
#if defined(__x86_64__)
	/* binutils' .plt: CFA = rsp + 16 in PLT0, then rsp + 8, + 8 when (rip & 15) >= 11 */
	static const uint8_t ins[] = {0x0e, 16, 0x46, 0x0f, 11, 0x77, 8, 0x80, 0, 0x3f,
				      0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22};
	static const uint8_t other[] = {0x0f, 3, 0x77, 8, 0x06}; /* rsp + 8, deref: not a PLT */
	struct cfi_table t;
	struct cfi_rules r;
	uint64_t packed;

	build(2);
	put_fde(0, code, 0x40, ins, sizeof(ins));
	put_fde(1, code + 0x40, 0x10, other, sizeof(other));
	t = table();
	assert_true(cfi__rules_at(&t, code + 2, &r));
	assert_int_equal(r.cfa_reg, CFI_REG_SP);
	assert_int_equal(r.cfa_off, 16);
	assert_true(cfi__rules_at(&t, code + 0x1b, &r));
	assert_int_equal(r.cfa_reg, CFI_CFA_PLT);
	assert_int_equal(r.cfa_off, 8);
	assert_int_equal(r.plt_min, 11);
	assert_true(r.ra_saved);
	assert_true(cfi__pack(&r, &packed));
	memset(&r, 0, sizeof(r));
	assert_true(cfi__unpack(packed, &r));
	assert_int_equal(r.cfa_reg, CFI_CFA_PLT);
	assert_int_equal(r.plt_min, 11);
	assert_false(cfi__rules_at(&t, code + 0x41, &r));
#else
	skip();
#endif
}

/* the rows of an FDE, counted: with rules and without */
static bool count_rows(void *ctx, uintptr_t pc, const struct cfi_rules *r)
{
	size_t *n = ctx;

	(void)pc;
	n[r ? 0 : 1]++;
	return true;
}

/*
 * AArch64's negate_ra_state (-mbranch-protection: Debian 13's arm64 python3.13): the lookup
 * (the SIGPROF walker's, which strips the signature) keeps the rules; the rows (the BPF
 * walker's, which does not) have none there, as before it was known.
 */
static void signed_return_address(void **state)
{
	static const uint8_t ins[] = {0x2d, 0x41, 0x0e, 16}; /* negate; advance 1, CFA = SP + 16 */
	struct cfi_table t;
	struct cfi_rules r;
	size_t rows[2] = {0, 0};

	(void)state;
	build(1);
	put_fde(0, code, 0x20, ins, sizeof(ins));
	t = table();
	assert_true(cfi__rules_at(&t, code + 4, &r));
	assert_int_equal(r.cfa_off, 16);
	assert_true(r.ra_saved);
	cfi__rows(&t, NULL, 0, count_rows, rows);
	assert_int_equal(rows[0], 0);
	assert_true(rows[1] >= 1);
}

/* ---- rows of a real file ----------------------------------------------------------------- */

struct check {
	const struct cfi_table *t;
	uintptr_t last;
	size_t rows, with_rules, outermost, mismatches;
};

static bool same(const struct cfi_rules *a, const struct cfi_rules *b)
{
	return a->cfa_reg == b->cfa_reg && a->cfa_off == b->cfa_off &&
	       a->fp_saved == b->fp_saved && (!a->fp_saved || a->fp_off == b->fp_off) &&
	       a->ra_saved == b->ra_saved && (!a->ra_saved || a->ra_off == b->ra_off) &&
	       a->ra_undefined == b->ra_undefined &&
	       (a->cfa_reg != CFI_CFA_PLT || a->plt_min == b->plt_min);
}

static bool check_row(void *ctx, uintptr_t pc, const struct cfi_rules *r)
{
	struct check *c = ctx;
	struct cfi_rules at;

	assert_true(c->rows == 0 || pc >= c->last);
	c->last = pc;
	c->rows++;
	if (!r)
		return true; /* a gap: the pc may still start the next FDE, checked there */
	c->with_rules++;
	c->outermost += r->ra_undefined;
	if (!cfi__rules_at(c->t, pc, &at) || !same(&at, r))
		c->mismatches++;
	return true;
}

static void rows_match_lookup(void **state)
{
	struct elf_eh_frame eh;
	struct cfi_table t;
	struct check c = {.t = &t};
	long fdes;

	(void)state;
	if (elf__map_eh_frame("/proc/self/exe", &eh) || !eh.hdr_vaddr) {
		/* armhf code has no DWARF CFI (EHABI instead), and a static link no header */
		skip();
	}
	t = (struct cfi_table){(uintptr_t)eh.seg, (uintptr_t)eh.seg + eh.seg_len,
			       eh.seg + (eh.hdr_vaddr - eh.seg_vaddr)};
	fdes = cfi__rows(&t, NULL, 0, check_row, &c);
	print_message("fdes %ld rows %zu with rules %zu outermost %zu mismatches %zu\n", fdes,
		      c.rows, c.with_rules, c.outermost, c.mismatches);
	assert_true(fdes > 10);
	assert_true(c.with_rules > (size_t)fdes);
	assert_int_equal(c.mismatches, 0);
	assert_true(c.outermost >= 1); /* _start */
	elf__unmap_eh_frame(&eh);
}

static bool stop_at_three(void *ctx, uintptr_t pc, const struct cfi_rules *r)
{
	(void)pc;
	(void)r;
	return ++*(int *)ctx < 3;
}

static void rows_stop_when_asked(void **state)
{
	struct elf_eh_frame eh;
	struct cfi_table t;
	int n = 0;

	(void)state;
	if (elf__map_eh_frame("/proc/self/exe", &eh) || !eh.hdr_vaddr)
		skip();
	t = (struct cfi_table){(uintptr_t)eh.seg, (uintptr_t)eh.seg + eh.seg_len,
			       eh.seg + (eh.hdr_vaddr - eh.seg_vaddr)};
	cfi__rows(&t, NULL, 0, stop_at_three, &n);
	assert_int_equal(n, 3);
	elf__unmap_eh_frame(&eh);
}

static void rows_of_garbage_fail(void **state)
{
	static const uint8_t junk[64] = {1, 0x1b, 0x03, 0x3b, 0xff, 0xff, 0xff, 0x7f, 0xff, 0xff};
	struct cfi_table t = {(uintptr_t)junk, (uintptr_t)junk + sizeof(junk), junk};
	int n = 0;

	(void)state;
	assert_true(cfi__rows(&t, NULL, 0, stop_at_three, &n) <= 0);
	assert_int_equal(n, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(saved_return_address_and_rows),
	    cmocka_unit_test(outermost_frame),
	    cmocka_unit_test(plt_expression),
	    cmocka_unit_test(signed_return_address),
	    cmocka_unit_test(rows_match_lookup),
	    cmocka_unit_test(rows_stop_when_asked),
	    cmocka_unit_test(rows_of_garbage_fail),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
