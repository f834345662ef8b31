// SPDX-License-Identifier: MIT
/*
 * Unit tests of elf/armframe.c: hand-assembled Thumb-2 and ARM functions whose frames were
 * worked out by hand (a leaf, a non-leaf at its prologue, body and epilogue, a shrink-wrapped
 * early exit, a loop left through its exit, a tail call, a PLT stub, a switch, alloca, the
 * call instruction before a return address, the budget), then real files: at every call site
 * of the Debian armhf libraries' functions that have .ARM.exidx opcodes, the frame read from
 * the code must be the frame the tables give (skipped where the files are absent).
 */
#include <elf.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "elf/armframe.h"
#include "elf/ehabi.h"

#define BASE 0x10000u

static uint8_t code[0x400] __attribute__((aligned(4)));
static unsigned int at; /* next free byte of code */

static uint32_t t16(uint16_t hw)
{
	uint32_t a = BASE + at;

	memcpy(code + at, &hw, 2);
	at += 2;
	return a;
}

static uint32_t t32(uint16_t hw1, uint16_t hw2)
{
	uint32_t a = t16(hw1);

	t16(hw2);
	return a;
}

static uint32_t a32(uint32_t w)
{
	uint32_t a = BASE + at;

	memcpy(code + at, &w, 4);
	at += 4;
	return a;
}

static const struct armframe_code cd = {code, BASE, BASE + sizeof(code)};

static void start(void)
{
	memset(code, 0xff, sizeof(code)); /* 0xffff: a 32-bit prefix of nothing known */
	at = 0;
}

static void expect(uint32_t pc, bool exact, bool ok, uint32_t cfa, bool lr, uint32_t ra_off)
{
	struct armframe f;

	assert_int_equal(armframe__analyze(&cd, pc, exact, 256, &f), ok);
	if (!ok)
		return;
	assert_int_equal(f.cfa, cfa);
	assert_int_equal(f.ra_in_lr, lr);
	if (!lr)
		assert_int_equal(f.ra_off, ra_off);
}

static void thumb_functions(void **state)
{
	uint32_t leaf, push, sub, call, ra, epi, pop;
	struct armframe f;

	(void)state;
	start(); /* leaf: movs r0, #1; bx lr */
	leaf = t16(0x2001);
	t16(0x4770);
	expect(leaf | 1, true, true, 0, true, 0);
	expect(leaf | 1, false, false, 0, false, 0); /* a return address cannot be in lr */

	/* push {r4, r5, lr}; sub sp, #8; bl; add sp, #8; pop {r4, r5, pc} */
	push = t16(0xb530);
	sub = t16(0xb082);
	call = t32(0xf000, 0xf800);
	ra = BASE + at;
	epi = t16(0xb002);
	pop = t16(0xbd30);
	expect(push | 1, true, true, 0, true, 0);   /* nothing pushed yet */
	expect(sub | 1, true, true, 12, false, 8);  /* pushed, not yet sub */
	expect(call | 1, true, true, 20, false, 16); /* the body */
	expect(ra | 1, false, true, 20, false, 16);  /* a return address in the body */
	expect(epi | 1, true, true, 20, false, 16);
	expect(pop | 1, true, true, 12, false, 8);
	assert_true(armframe__analyze(&cd, ra | 1, false, 256, &f));
	assert_int_equal(f.saved_mask, 1u << 4 | 1u << 5); /* r4, r5 right below the pc */
	assert_int_equal(f.saved_off, 8);
	assert_true(armframe__after_call(&cd, ra | 1));
	assert_false(armframe__after_call(&cd, pop | 1));

	/* shrink-wrapped: cbz r0, .ret; push {r4, lr}; bl; pop {r4, pc}; .ret: bx lr */
	start();
	leaf = t16(0xb118); /* cbz r0, .ret */
	push = t16(0xb510);
	call = t32(0xf000, 0xf800);
	t16(0xbd10);
	t16(0x4770);
	expect(leaf | 1, true, true, 0, true, 0); /* lr: the reading pushes and pops it again */
	expect(push | 1, true, true, 0, true, 0);
	expect((call + 4) | 1, false, true, 8, false, 4);
}

/*
 * What the interpreter walkers lean on: libgcc's __aeabi_ldivmod (lr reloaded from its slot
 * before bx lr), and a function larger than the readings' budget (an interpreter's loop, its
 * pc behind a computed goto) whose edges are known: its frame read from its prologue.
 */
static void thumb_known_functions(void **state)
{
	uint32_t push, pc, next, ra;
	struct armframe f;

	(void)state;
	/* sub.w ip, sp, #8; strd ip, lr, [sp, #-16]!; bl; ldr.w lr, [sp, #4];
	 * ldrd r2, r3, [sp, #8]; add sp, #16; bx lr */
	start();
	t32(0xf1ad, 0x0c08);
	t32(0xe96d, 0xce04);
	t32(0xf000, 0xf800);
	ra = t32(0xf8dd, 0xe004);
	t32(0xe9dd, 0x2302);
	t16(0xb004);
	t16(0x4770);
	expect(ra | 1, false, true, 16, false, 4);

	/* stmdb sp!, {r4-r11, lr}; sub sp, #140; 300 nops; pc: bx r3 (a computed goto); then
	 * the next function: push {r4, lr} */
	start();
	push = t32(0xe92d, 0x4ff0);
	t16(0xb0a3);
	for (int i = 0; i < 300; i++)
		t16(0xbf00);
	pc = t16(0x4718);
	next = t16(0xb510);
	assert_false(armframe__analyze(&cd, pc | 1, false, 256, &f)); /* beyond the budget */
	assert_true(armframe__body(&cd, push | 1, pc | 1, &f));
	assert_int_equal(f.cfa, 36 + 140);
	assert_int_equal(f.ra_off, 140 + 32);
	assert_int_equal(f.saved_mask, 0x0ff0);
	assert_int_equal(f.saved_off, 140);
	assert_false(armframe__body(&cd, push | 1, (push + 4) | 1, &f)); /* in the prologue */
	assert_false(armframe__body(&cd, push | 1, pc, &f));		  /* not Thumb */
	assert_int_equal(armframe__push_before(&cd, pc | 1, 4096), push | 1);
	assert_int_equal(armframe__push_before(&cd, pc | 1, 64), 0); /* too far for the budget */
	assert_int_equal(armframe__push_after(&cd, (push + 6) | 1, 4096), next | 1);
	assert_int_equal(armframe__push_after(&cd, (push + 6) | 1, 100), 0);
}

static void thumb_paths(void **state)
{
	uint32_t pc, loop;

	(void)state;
	/* a loop with its exit before the back edge: push {r4, lr}; .l: bl; cmp r0, #0;
	 * beq .x; b .l; .x: pop {r4, pc} */
	start();
	t16(0xb510);
	loop = t32(0xf000, 0xf800);
	pc = BASE + at;
	t16(0x2800);
	t16(0xd000);		       /* beq +4: over the b */
	t16(0xe000 | (((loop - (BASE + at + 4)) >> 1) & 0x7ff)); /* b .l */
	t16(0xbd10);
	expect(pc | 1, false, true, 8, false, 4);

	/* a tail call: sub sp, #8; add sp, #8; b.w f; ...; f: bx lr */
	start();
	t16(0xb082);
	pc = t16(0xb002);
	t32(0xf000, 0xb800 | 2); /* b.w +4 + 4 */
	t16(0xbf00);
	t16(0xbf00);
	t16(0x4770);
	expect(pc | 1, true, true, 8, true, 0);

	/* a PLT stub (Thumb entry): bx pc; nop; add ip, pc, #0; add ip, ip, #N; ldr pc, [ip, #x]! */
	start();
	pc = t16(0x4778);
	t16(0xe7fd);
	a32(0xe28fc600);
	a32(0xe28ccaee);
	a32(0xe5bcf09c);
	expect(pc | 1, true, true, 0, true, 0);

	/* a switch: push {r4, lr}; tbb [pc, r0]; table {2, x}; case 0: pop {r4, pc} */
	start();
	t16(0xb510);
	pc = t32(0xe8df, 0xf000);
	t16(0x0002); /* entries 2 (case 0 at the table + 4) and 0 */
	t16(0xbf00);
	t16(0xbd10);
	expect(pc | 1, true, true, 8, false, 4);

	/* alloca: push {r4, r7, lr}; add r7, sp, #0; sub sp, #16; bl; mov sp, r7; pop {r4, r7, pc}:
	 * the forward reading refuses mov sp, r7; the prologue says the body's frame */
	start();
	t16(0xb590);
	t16(0xaf00);
	t16(0xb084);
	pc = t32(0xf000, 0xf800) + 4;
	t16(0x46bd);
	t16(0xbd90);
	{
		struct armframe f;

		assert_true(armframe__analyze(&cd, pc | 1, false, 256, &f));
		assert_int_equal(f.how, ARMFRAME_BACKWARD);
		assert_int_equal(f.cfa, 28);
		assert_int_equal(f.ra_off, 24);
	}

	/* the budget: 300 nops, then bx lr: not found with 256, found with 512 */
	start();
	pc = BASE;
	for (int i = 0; i < 300; i++)
		t16(0xbf00);
	t16(0x4770);
	{
		struct armframe f;

		assert_false(armframe__analyze(&cd, pc | 1, true, 256, &f));
		assert_true(f.insns <= 2 * 256 + 1);
		assert_true(armframe__analyze(&cd, pc | 1, true, 512, &f));
	}
	/* reads stay in the code: a pc at its last halfword, a 32-bit prefix there */
	{
		struct armframe f;

		memset(code, 0xff, sizeof(code));
		assert_false(armframe__analyze(&cd, (BASE + sizeof(code) - 2) | 1, true, 256, &f));
		assert_false(armframe__analyze(&cd, BASE + sizeof(code), true, 256, &f));
	}
}

static void arm_functions(void **state)
{
	uint32_t pc, ra;

	(void)state;
	/* push {r4, lr}; sub sp, sp, #16; bl; add sp, sp, #16; pop {r4, pc} */
	start();
	a32(0xe92d4010);
	pc = a32(0xe24dd010);
	a32(0xeb000000);
	ra = BASE + at;
	a32(0xe28dd010);
	a32(0xe8bd8010);
	expect(pc, true, true, 8, false, 4);
	expect(ra, false, true, 24, false, 20);
	assert_true(armframe__after_call(&cd, ra));
	assert_false(armframe__after_call(&cd, ra + 4));

	/* memcpy's computed jump: cmp; add pc, pc, r3; (table) ...; bx lr */
	start();
	pc = a32(0xe3520040);
	a32(0xe08ff003);
	a32(0xe1a00000);
	a32(0xe12fff1e);
	expect(pc, true, true, 0, true, 0);
}

/* ---- real files: the frame read from the code against the tables' ------------------------ */

struct file {
	uint8_t *data;
	size_t len;
	struct ehabi_table t;
};

static bool load(const char *path, struct file *f)
{
	FILE *fp = fopen(path, "rb");
	Elf32_Ehdr eh;
	uint32_t exidx = 0, exidx_len = 0;

	memset(f, 0, sizeof(*f));
	if (!fp)
		return false;
	fseek(fp, 0, SEEK_END);
	f->len = (size_t)ftell(fp);
	rewind(fp);
	f->data = malloc(f->len);
	if (!f->data || fread(f->data, 1, f->len, fp) != f->len) {
		fclose(fp);
		return false;
	}
	fclose(fp);
	memcpy(&eh, f->data, sizeof(eh));
	if (memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_ident[EI_CLASS] != ELFCLASS32)
		return false;
	for (unsigned int pass = 0; pass < 2; pass++) {
		for (unsigned int i = 0; i < eh.e_phnum; i++) {
			Elf32_Phdr ph;

			memcpy(&ph, f->data + eh.e_phoff + i * eh.e_phentsize, sizeof(ph));
			if (pass == 0 && ph.p_type == PT_ARM_EXIDX) {
				exidx = ph.p_vaddr;
				exidx_len = ph.p_memsz;
			} else if (pass == 1 && ph.p_type == PT_LOAD && (ph.p_flags & PF_X) &&
				   exidx >= ph.p_vaddr && exidx < ph.p_vaddr + ph.p_filesz) {
				f->t = (struct ehabi_table){f->data + ph.p_offset, ph.p_vaddr,
							    ph.p_vaddr + ph.p_filesz, exidx,
							    exidx_len / 8};
			}
		}
	}
	return f->t.n > 0;
}

/* The tables' frame at a return address: opcodes run on a stack whose words hold their
 * own addresses, so the popped pc says where the return address was. */
static bool rd_self(void *ctx, uint32_t addr, uint32_t *val)
{
	(void)ctx;
	*val = addr;
	return true;
}

struct tally {
	unsigned int sites, found, agree;
};

/* Every bl/blx of one Thumb function [a, end) (decoded from its start; functions that start
 * with a push of lr only, surely Thumb): the frame read at its return address vs the tables'. */
static void one_function(const struct file *f, const struct ehabi_entry *e, uint32_t end,
			 struct tally *t)
{
	const struct armframe_code c = {f->t.mem, f->t.lo, f->t.hi};
	uint32_t a = e->start;
	uint16_t hw1, hw2;

	memcpy(&hw1, f->t.mem + (a - f->t.lo), 2);
	memcpy(&hw2, f->t.mem + (a - f->t.lo) + 2, 2);
	if ((hw1 & 0xff00) != 0xb500 && !(hw1 == 0xe92d && (hw2 & 0x4000)))
		return;
	while (a + 4 <= end) {
		memcpy(&hw1, f->t.mem + (a - f->t.lo), 2);
		memcpy(&hw2, f->t.mem + (a - f->t.lo) + 2, 2);
		if ((hw1 >> 11) < 0x1d) {
			a += 2;
			continue;
		}
		a += 4;
		if ((hw1 & 0xf800) != 0xf000 || (hw2 & 0xc000) != 0xc000 || a >= end)
			continue;
		uint32_t r[16] = {0}, sp = 0x40000000u;
		struct armframe fr;
		bool ra;

		r[13] = sp;
		r[7] = r[11] = 0x10000000u; /* vsp = r7 (alloca): not comparable, left out */
		r[14] = 0x11111111u;
		if (ehabi__execute(e, r, rd_self, NULL, &ra) != EHABI_STEP_OK || !ra ||
		    r[13] < sp || r[13] - sp > 0x10000)
			continue;
		t->sites++;
		if (!armframe__analyze(&c, a | 1, false, 384, &fr))
			continue;
		t->found++;
		if (fr.cfa == r[13] - sp && sp + fr.ra_off == (r[15] & ~1u))
			t->agree++;
	}
}

static void debian_armhf_against_tables(void **state)
{
	/* C (found >= 95 %, right >= 99 %), C++ (>= 85 %, >= 97.5 %: after a call to a
	 * noreturn function, _Unwind_Resume in cleanups, a path runs into what follows it) */
	static const struct {
		const char *path;
		unsigned int found, right; /* per mille */
	} files_[] = {
	    {"/usr/arm-linux-gnueabihf/lib/libc.so.6", 950, 990},
	    {"/usr/arm-linux-gnueabihf/lib/libstdc++.so.6", 850, 975},
	    {"build/sysroot-armhf/usr/lib/arm-linux-gnueabihf/libmbedcrypto.so.7", 950, 990},
	};
	unsigned int files = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(files_) / sizeof(files_[0]); i++) {
		struct tally t = {0};
		struct file f;

		if (!load(files_[i].path, &f)) {
			free(f.data);
			continue;
		}
		for (uint32_t k = 0; k + 1 < f.t.n; k++) {
			struct ehabi_entry e, next;

			ehabi__entry_at(&f.t, k, &e);
			ehabi__entry_at(&f.t, k + 1, &next);
			if (e.kind == EHABI_OPS && next.start > e.start &&
			    next.start - e.start < 0x10000)
				one_function(&f, &e, next.start, &t);
		}
		print_message("%s: %u call sites with tables, %u frames read from the code, "
			      "%u the tables' frame\n", files_[i].path, t.sites, t.found, t.agree);
		if (t.sites > 100) {
			files++;
			assert_true(t.found * 1000 >= t.sites * files_[i].found);
			assert_true(t.agree * 1000 >= t.found * files_[i].right);
		}
		free(f.data);
	}
	if (!files)
		skip(); /* no armhf files here */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(thumb_functions),
	    cmocka_unit_test(thumb_paths),
	    cmocka_unit_test(thumb_known_functions),
	    cmocka_unit_test(arm_functions),
	    cmocka_unit_test(debian_armhf_against_tables),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
