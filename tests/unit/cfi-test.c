// SPDX-License-Identifier: MIT
/*
 * Unit tests of elf/cfi.c's rows (cfi__rows, what the BPF sampler loads: bpf/cfitab.c) on this
 * test's own executable: rows come in pc order; at every row's pc the rules are what the
 * per-pc lookup (cfi__rules_at, the SIGPROF unwinder's and the leaf repair's) says; a row
 * without rules is where the lookup finds none or rules it cannot follow; the program's
 * entry (_start: its return address is undefined) gives an outermost row.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "elf/cfi.h"
#include "elf/elf.h"

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
	       a->ra_undefined == b->ra_undefined;
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
	    cmocka_unit_test(rows_match_lookup),
	    cmocka_unit_test(rows_stop_when_asked),
	    cmocka_unit_test(rows_of_garbage_fail),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
