// SPDX-License-Identifier: MIT
/*
 * Unit tests of elf/dwcfi.c: a hand-built .debug_frame whose rules were worked out by hand (a
 * Thumb-2 prologue `push {r4, r7, lr}; sub sp, #8; add r7, sp, #0`, a frame whose CFA moves to
 * r7, remember/restore state, an FDE whose start carries the Thumb bit, the outermost frame),
 * the steps they give over a copied stack, and what is refused: malformed lengths, an
 * augmented CIE, expressions on core registers, unbounded instruction runs.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "elf/dwcfi.h"

static uint8_t sec[16384];
static size_t len;

static void put8(uint8_t v)
{
	sec[len++] = v;
}

static void put32(uint32_t v)
{
	for (int i = 0; i < 4; i++)
		put8((uint8_t)(v >> (8 * i)));
}

static void bytes(const uint8_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		put8(b[i]);
}

/* An entry: its length word then body (n bytes). Returns its offset. */
static uint32_t entry(const uint8_t *body, size_t n)
{
	uint32_t at = (uint32_t)len;

	put32((uint32_t)n);
	bytes(body, n);
	return at;
}

/* gcc's ARM CIE: version 1, no augmentation, code 2, data -4, ra r14, CFA = r13 + 0. */
static uint32_t cie(void)
{
	static const uint8_t b[] = {0xff, 0xff, 0xff, 0xff, 1, 0, 2, 0x7c, 14, 0x0c, 13, 0};

	return entry(b, sizeof(b));
}

static void fde(uint32_t cie_off, uint32_t lo, uint32_t range, const uint8_t *insns, size_t n)
{
	uint8_t b[256];

	memcpy(b, &cie_off, 4);
	memcpy(b + 4, &lo, 4);
	memcpy(b + 8, &range, 4);
	memcpy(b + 12, insns, n);
	entry(b, 12 + n);
}

static const uint8_t prologue[] = {
    0x41,	     /* advance 1 (2 bytes): after push {r4, r7, lr} */
    0x0e, 12,	     /* def_cfa_offset 12 */
    0x84, 3,	     /* r4 at cfa-12 */
    0x87, 2,	     /* r7 at cfa-8 */
    0x8e, 1,	     /* r14 at cfa-4 */
    0x41,	     /* advance 2 bytes: after sub sp, #8 */
    0x0e, 20,	     /* def_cfa_offset 20 */
    0x41,	     /* advance 2 bytes: after add r7, sp, #0 */
    0x0d, 7,	     /* def_cfa_register r7 */
    0x0a,	     /* remember_state */
    0x44,	     /* advance 8 bytes: the epilogue */
    0x0d, 13,	     /* def_cfa_register sp */
    0x0e, 0, 0xc4, /* def_cfa_offset 0; restore r4 */
    0x41, 0x0b,    /* advance 2 bytes; restore_state */
};

static struct dwcfi t;

static int setup(void **state)
{
	static const uint8_t outer[] = {0x07, 14}; /* undefined r14 */
	uint32_t c;
	char err[128];

	(void)state;
	len = 0;
	c = cie();
	fde(c, 0x1000, 0x40, prologue, sizeof(prologue));
	fde(c, 0x2001, 0x10, outer, sizeof(outer)); /* a Thumb function's start, bit 0 set */
	return dwcfi__open(&t, sec, len, 16, err, sizeof(err));
}

static int teardown(void **state)
{
	(void)state;
	dwcfi__close(&t);
	return 0;
}

static void test_rows(void **state)
{
	struct dwcfi_row r;

	(void)state;
	assert_int_equal(t.n_fdes, 2);
	assert_int_equal(dwcfi__row_at(&t, 0x1000, &r), 0);
	assert_int_equal(r.cfa_reg, 13);
	assert_int_equal(r.cfa_off, 0);
	assert_int_equal(r.reg[14].how, DWCFI_SAME);
	assert_int_equal(dwcfi__row_at(&t, 0x1003, &r), 0);
	assert_int_equal(r.cfa_off, 12);
	assert_int_equal(r.reg[4].how, DWCFI_OFFSET);
	assert_int_equal(r.reg[4].off, -12);
	assert_int_equal(r.reg[14].off, -4);
	assert_int_equal(dwcfi__row_at(&t, 0x1004, &r), 0);
	assert_int_equal(r.cfa_off, 20);
	assert_int_equal(dwcfi__row_at(&t, 0x1006, &r), 0);
	assert_int_equal(r.cfa_reg, 7);
	assert_int_equal(dwcfi__row_at(&t, 0x100e, &r), 0); /* the epilogue */
	assert_int_equal(r.cfa_reg, 13);
	assert_int_equal(r.cfa_off, 0);
	assert_int_equal(r.reg[4].how, DWCFI_SAME); /* restored to the CIE's */
	assert_int_equal(dwcfi__row_at(&t, 0x1010, &r), 0); /* after restore_state */
	assert_int_equal(r.cfa_reg, 7);
	assert_int_equal(r.cfa_off, 20);
	assert_int_equal(r.reg[4].how, DWCFI_OFFSET);
	assert_int_equal(dwcfi__row_at(&t, 0x103f, &r), 0);
	assert_int_equal(dwcfi__row_at(&t, 0x1040, &r), -ENOENT);
	assert_int_equal(dwcfi__row_at(&t, 0xfff, &r), -ENOENT);
	assert_int_equal(dwcfi__row_at(&t, 0x2000, &r), 0); /* the Thumb bit was dropped */
	assert_int_equal(r.reg[14].how, DWCFI_UNDEF);
}

/* The copied stack: words at [SP, SP + 4 * n) */
#define SP 0x7000u
static uint32_t stack[16];
static unsigned int stack_words;

static bool read_stack(void *ctx, uint32_t addr, uint32_t *val)
{
	(void)ctx;
	if (addr < SP || (addr - SP) / 4 >= stack_words || (addr & 3))
		return false;
	*val = stack[(addr - SP) / 4];
	return true;
}

static void test_step(void **state)
{
	struct dwcfi_regs regs = {.known = 0xffff};
	struct dwcfi_row r;

	(void)state;
	/* at 0x1006 (CFA = r7 + 20): sp = r7 = SP; saved r4, r7, lr at CFA-12, -8, -4 */
	memset(stack, 0, sizeof(stack));
	stack_words = 5;
	stack[2] = 0x44;   /* r4 */
	stack[3] = 0x7777; /* r7 */
	stack[4] = 0x2005; /* lr: into the Thumb function at 0x2000 */
	regs.r[7] = regs.r[13] = SP;
	regs.r[5] = 0x55;
	regs.r[15] = 0x1007;
	assert_int_equal(dwcfi__row_at(&t, 0x1006, &r), 0);
	assert_int_equal(dwcfi__step(&r, &regs, read_stack, NULL), DWCFI_STEPPED);
	assert_int_equal(regs.r[13], SP + 20);
	assert_int_equal(regs.r[15], 0x2005);
	assert_int_equal(regs.r[4], 0x44);
	assert_int_equal(regs.r[7], 0x7777);
	assert_int_equal(regs.r[5], 0x55); /* unsaved: the same */
	assert_int_equal(dwcfi__row_at(&t, (regs.r[15] & ~1u) - 1, &r), 0);
	assert_int_equal(dwcfi__step(&r, &regs, read_stack, NULL), DWCFI_OUTERMOST);

	/* the saved lr beyond the copy */
	regs = (struct dwcfi_regs){.known = 0xffff};
	regs.r[7] = regs.r[13] = SP;
	stack_words = 4;
	assert_int_equal(dwcfi__row_at(&t, 0x1006, &r), 0);
	assert_int_equal(dwcfi__step(&r, &regs, read_stack, NULL), DWCFI_LEFT_COPY);
	/* the CFA's register unknown */
	regs.known = 0xffff & ~(1u << 7);
	assert_int_equal(dwcfi__step(&r, &regs, read_stack, NULL), DWCFI_UNKNOWN_REG);
}

/* One FDE with insns over the gcc CIE: what dwcfi__row_at() says at 0x1000 + at. */
static int row_with(const uint8_t *insns, size_t n, uint32_t at)
{
	struct dwcfi u;
	struct dwcfi_row r;
	char err[128];
	int ret;

	len = 0;
	fde(cie(), 0x1000, 0x100, insns, n);
	ret = dwcfi__open(&u, sec, len, 16, err, sizeof(err));
	if (!ret)
		ret = dwcfi__row_at(&u, 0x1000 + at, &r);
	dwcfi__close(&u);
	return ret;
}

static void test_refused(void **state)
{
	static const uint8_t expr_r4[] = {0x10, 4, 1, 0x30};  /* expression on r4 */
	static const uint8_t expr_d8[] = {0x10, 0x80, 2, 1, 0x30, 0x41}; /* on d8 (256): skipped */
	static const uint8_t cfa_expr[] = {0x0f, 1, 0x30};
	static const uint8_t pop_empty[] = {0x0b};
	static const uint8_t bad_reg[] = {0x0c, 16, 0};
	static const uint8_t nops[DWCFI_MAX_INSNS + 2] = {0};
	uint8_t deep[DWCFI_MAX_STATES + 1];
	struct dwcfi u;
	char err[128];

	(void)state;
	memset(deep, 0x0a, sizeof(deep));
	assert_int_equal(row_with(expr_r4, sizeof(expr_r4), 0), -EINVAL);
	assert_int_equal(row_with(expr_d8, sizeof(expr_d8), 4), 0);
	assert_int_equal(row_with(cfa_expr, sizeof(cfa_expr), 0), -EINVAL);
	assert_int_equal(row_with(pop_empty, sizeof(pop_empty), 0), -EINVAL);
	assert_int_equal(row_with(bad_reg, sizeof(bad_reg), 0), -EINVAL);
	assert_int_equal(row_with(deep, sizeof(deep), 0), -EINVAL);
	assert_int_equal(row_with(nops, 200, 0), 0);
	len = 0; /* an FDE longer than any section allows: refused, not read past */
	fde(cie(), 0x1000, 0x100, nops, sizeof(nops) > 240 ? 240 : sizeof(nops));
	assert_int_equal(dwcfi__open(&u, sec, len, 16, err, sizeof(err)), 0);
	dwcfi__close(&u);
	/* an entry's length beyond the section */
	len = 0;
	put32(1000);
	put32(0xffffffffu);
	assert_int_equal(dwcfi__open(&u, sec, len, 16, err, sizeof(err)), -EINVAL);
	/* more FDEs than allowed */
	len = 0;
	{
		uint32_t c = cie();

		for (uint32_t i = 0; i < 3; i++)
			fde(c, 0x1000 * (i + 1), 0x10, nops, 1);
	}
	assert_int_equal(dwcfi__open(&u, sec, len, 2, err, sizeof(err)), -E2BIG);
	/* an augmented CIE (as .eh_frame's "zR"): refused at lookup */
	len = 0;
	{
		static const uint8_t aug[] = {0xff, 0xff, 0xff, 0xff, 1, 'z', 'R', 0, 2, 0x7c, 14, 1,
					      0x1b};
		uint32_t c = entry(aug, sizeof(aug));
		struct dwcfi_row r;

		fde(c, 0x1000, 0x10, nops, 1);
		assert_int_equal(dwcfi__open(&u, sec, len, 16, err, sizeof(err)), 0);
		assert_int_equal(dwcfi__row_at(&u, 0x1000, &r), -EINVAL);
		dwcfi__close(&u);
	}
}

/* The instruction bound: a run of more than DWCFI_MAX_INSNS is refused, not run to its end. */
static void test_bound(void **state)
{
	struct dwcfi u;
	struct dwcfi_row r;
	char err[128];
	static uint8_t big[DWCFI_MAX_INSNS + 64];
	size_t n = 0;

	(void)state;
	len = 0;
	uint32_t c = cie();
	/* the FDE by hand: its instructions do not fit fde()'s buffer */
	put32(12 + DWCFI_MAX_INSNS + 2);
	put32(c);
	put32(0x1000);
	put32(0x100);
	memset(big, 0, sizeof(big));
	while (n < DWCFI_MAX_INSNS + 2)
		put8(big[n++]);
	assert_int_equal(dwcfi__open(&u, sec, len, 16, err, sizeof(err)), 0);
	assert_int_equal(dwcfi__row_at(&u, 0x1000, &r), -EINVAL);
	dwcfi__close(&u);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_rows, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_step, setup, teardown),
	    cmocka_unit_test(test_refused),
	    cmocka_unit_test(test_bound),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
