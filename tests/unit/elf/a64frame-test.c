// SPDX-License-Identifier: MIT
/*
 * Unit tests of elf/a64frame.c: hand-assembled AArch64 functions whose frames were worked out
 * by hand (a leaf, a non-leaf at its prologue, body and epilogue, sub sp frames, a shrink-wrapped
 * early exit, a loop left through its exit, tail calls by b and br, pointer authentication, an
 * endless loop read backward, alloca, the call instruction before a return address, the budget,
 * reads at the code's end), then real files built with tables: at every call site and at every
 * 4th instruction of the functions that have .eh_frame rows, the frame read from the code must
 * be the frame the tables give, in Debian's arm64 libc and libstdc++, the sysroot's mbedcrypto
 * and this test itself (our own C at -O2: -fno-asynchronous-unwind-tables changes the tables,
 * not the code, so this is the frame a stripped build without tables gets). The comparison
 * needs elf/cfi.c built for aarch64: it runs in the gateway-arm64 suite (qemu-aarch64).
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

#include "elf/a64frame.h"
#include "elf/cfi.h"

#define BASE 0x400000u

static uint8_t code[0x800] __attribute__((aligned(4)));
static unsigned int at; /* next free byte of code */

static uint64_t emit(uint32_t w)
{
	uint64_t a = BASE + at;

	memcpy(code + at, &w, 4);
	at += 4;
	return a;
}

static uint64_t here(void)
{
	return BASE + at;
}

/* b/bl (op 0x14000000/0x94000000) from here to target */
static uint64_t emit_b(uint32_t op, uint64_t target)
{
	return emit(op | (uint32_t)(((int64_t)target - (int64_t)here()) / 4 & 0x3ffffff));
}

/* cbz w0 (0x34000000) / b.cond (0x54000000 | cond) from here to target */
static uint64_t emit_b19(uint32_t op, uint64_t target)
{
	return emit(op | (uint32_t)((((int64_t)target - (int64_t)here()) / 4 & 0x7ffff) << 5));
}

static const struct a64frame_code cd = {code, BASE, BASE + sizeof(code)};

#define RET 0xd65f03c0u
#define BL0 0x94000000u
#define NOP 0xd503201fu
#define STP_FP_LR_PRE(n) (0xa9800000u | (uint32_t)((-(n) / 8) & 0x7f) << 15 | 0x7bfd)
#define LDP_FP_LR_POST(n) (0xa8c00000u | (uint32_t)(((n) / 8) & 0x7f) << 15 | 0x7bfd)

static void start(void)
{
	memset(code, 0, sizeof(code)); /* udf #0 */
	at = 0;
}

static void expect(uint64_t pc, bool exact, bool ok, uint32_t cfa, bool lr, uint32_t ra_off)
{
	struct a64frame f;

	assert_int_equal(a64frame__analyze(&cd, pc, exact, 256, &f, NULL), ok);
	if (!ok)
		return;
	assert_int_equal(f.cfa, cfa);
	assert_int_equal(f.ra_in_lr, lr);
	if (!lr)
		assert_int_equal(f.ra_off, ra_off);
}

static void frames(void **state)
{
	uint64_t leaf, push, mov, call, ra, epi, ret;
	struct a64frame f;

	(void)state;
	start(); /* leaf: mov x0, #1; ret */
	leaf = emit(0xd2800020);
	emit(RET);
	expect(leaf, true, true, 0, true, 0);
	expect(leaf, false, false, 0, false, 0); /* a return address cannot be in x30 */

	/* stp x29, x30, [sp, #-32]!; mov x29, sp; str x19, [sp, #16]; bl; ldr x19, [sp, #16];
	 * ldp x29, x30, [sp], #32; ret */
	push = emit(STP_FP_LR_PRE(32));
	mov = emit(0x910003fd);
	emit(0xf9000bf3);
	call = emit(BL0);
	ra = emit(0xf9400bf3);
	epi = emit(LDP_FP_LR_POST(32));
	ret = emit(RET);
	expect(push, true, true, 0, true, 0); /* nothing stored yet */
	expect(mov, true, true, 32, false, 8);
	expect(call, true, true, 32, false, 8);
	expect(ra, false, true, 32, false, 8);
	expect(epi, true, true, 32, false, 8);
	expect(ret, true, true, 0, true, 0);
	assert_true(a64frame__analyze(&cd, ra, false, 256, &f, NULL));
	assert_int_equal(f.how, A64FRAME_FORWARD);
	assert_true(f.fp_saved); /* x29 at the frame's bottom */
	assert_int_equal(f.fp_off, 0);
	assert_true(a64frame__after_call(&cd, ra));
	assert_false(a64frame__after_call(&cd, ra + 4));
	assert_false(a64frame__after_call(&cd, ra + 1));

	/* no frame pointer: sub sp, sp, #64; str x30, [sp, #56]; bl; ldr x30, [sp, #56];
	 * add sp, sp, #64; ret */
	start();
	push = emit(0xd10103ff);
	emit(0xf9001ffe);
	emit(BL0);
	ra = here();
	emit(0xf9401ffe);
	emit(0x910103ff);
	emit(RET);
	expect(push, true, true, 0, true, 0);
	expect(ra, false, true, 64, false, 56);
	assert_true(a64frame__analyze(&cd, ra, false, 256, &f, NULL));
	assert_false(f.fp_saved);

	/* str x30, [sp, #-16]!; bl; ldr x30, [sp], #16; ret */
	start();
	emit(0xf81f0ffe);
	emit(BL0);
	ra = emit(0xf84107fe);
	emit(RET);
	expect(ra, false, true, 16, false, 0);
}

static void paths(void **state)
{
	uint64_t pc, loop, exit_b, ra;

	(void)state;
	/* shrink-wrapped: cbz x0, .ret; stp x29, x30, [sp, #-16]!; bl; ldp; .ret: ret */
	start();
	pc = emit(0); /* patched below */
	emit(STP_FP_LR_PRE(16));
	emit(BL0);
	ra = emit(LDP_FP_LR_POST(16));
	exit_b = here();
	emit(RET);
	at = 0;
	emit_b19(0xb4000000, exit_b);
	at = (unsigned int)(exit_b + 4 - BASE);
	expect(pc, true, true, 0, true, 0); /* x30 stored and loaded again by the path */
	expect(ra, false, true, 16, false, 8);

	/* a loop whose exit comes before the back edge: stp; .l: bl; cbz w0, .x; b .l; .x: ldp;
	 * ret */
	start();
	emit(STP_FP_LR_PRE(32));
	loop = emit(BL0);
	ra = here();
	emit_b19(0x34000000, here() + 8);
	emit_b(0x14000000, loop);
	emit(LDP_FP_LR_POST(32));
	emit(RET);
	expect(ra, false, true, 32, false, 8);

	/* tail calls: ldp x29, x30, [sp], #16; b f ... f: ret; and ldp; br x16 */
	start();
	pc = emit(LDP_FP_LR_POST(16));
	emit_b(0x14000000, here() + 12);
	emit(NOP);
	emit(NOP);
	emit(RET);
	expect(pc, true, true, 16, false, 8);
	start();
	pc = emit(LDP_FP_LR_POST(16));
	emit(0xd61f0200);
	expect(pc, true, true, 16, false, 8);
	/* br in a frame not torn down: a switch, not a return */
	start();
	pc = emit(0xd61f0200);
	expect(pc, true, false, 0, false, 0);

	/* pointer authentication: paciasp; stp; bl; ldp; autiasp; retaa */
	start();
	emit(0xd503233f);
	emit(STP_FP_LR_PRE(16));
	emit(BL0);
	ra = emit(LDP_FP_LR_POST(16));
	emit(0xd50323bf);
	emit(0xd65f0bff);
	expect(ra, false, true, 16, false, 8);
}

static void backward_and_bounds(void **state)
{
	uint64_t pc, loop;
	struct a64frame f;

	(void)state;
	/* an endless loop: sub sp, sp, #48; stp x29, x30, [sp, #32]; .l: bl; b .l */
	start();
	emit(0xd100c3ff);
	emit(0xa9027bfd);
	loop = emit(BL0);
	pc = here();
	emit_b(0x14000000, loop);
	assert_true(a64frame__analyze(&cd, pc, false, 256, &f, NULL));
	assert_int_equal(f.how, A64FRAME_BACKWARD);
	assert_int_equal(f.cfa, 48);
	assert_int_equal(f.ra_off, 40);
	assert_true(f.fp_saved);
	assert_int_equal(f.fp_off, 32);

	/* alloca: stp; mov x29, sp; sub sp, sp, x0; bl; mov sp, x29; ldp; ret: sp is not known
	 * from sp at the call (x29 is, from before it): no frame rather than a wrong one */
	start();
	emit(STP_FP_LR_PRE(32));
	emit(0x910003fd);
	emit(0xcb2063ff);
	emit(BL0);
	pc = emit(0x910003bf);
	emit(LDP_FP_LR_POST(32));
	emit(RET);
	expect(pc, false, false, 0, false, 0);
	/* mov x29, sp on the path, then mov sp, x29: followed */
	start();
	pc = emit(0x910003fd);
	emit(0xd10103ff);
	emit(0x910003bf);
	emit(RET);
	expect(pc, true, true, 0, true, 0);

	/* the budget: 300 nops, then ret: not found with 256, found with 512 */
	start();
	pc = BASE;
	for (int i = 0; i < 300; i++)
		emit(NOP);
	emit(RET);
	assert_false(a64frame__analyze(&cd, pc, true, 256, &f, NULL));
	assert_true(f.insns <= 3 * 256);
	assert_true(a64frame__analyze(&cd, pc, true, 512, &f, NULL));

	/* reads stay in the code: a pc at its last word (nops to the end), at its end, unaligned */
	memset(code, 0x1f, sizeof(code));
	for (unsigned int i = 0; i < sizeof(code); i += 4)
		memcpy(code + i, &(uint32_t){NOP}, 4);
	assert_false(a64frame__analyze(&cd, BASE + sizeof(code) - 4, true, 256, &f, NULL));
	assert_false(a64frame__analyze(&cd, BASE + sizeof(code), true, 256, &f, NULL));
	assert_false(a64frame__analyze(&cd, BASE + 2, true, 256, &f, NULL));
	assert_false(a64frame__after_call(&cd, BASE));
}

/* ---- real files: the frame read from the code against the tables' ------------------------ */

#if defined(__aarch64__)
struct file {
	uint8_t *data;
	struct a64frame_code c;
	struct cfi_table t;
};

/* The file's load segments laid out as the loader maps them (by vaddr): its code, and the
 * tables wherever they are (in the code's segment, or one of their own: -z separate-code). */
static bool load(const char *path, struct file *f)
{
	FILE *fp = fopen(path, "rb");
	const Elf64_Ehdr *eh;
	const Elf64_Phdr *ph;
	uint64_t hdr = 0, end = 0, text = 0, text_len = 0;
	uint8_t *file;
	long n;

	memset(f, 0, sizeof(*f));
	if (!fp)
		return false;
	fseek(fp, 0, SEEK_END);
	n = ftell(fp);
	rewind(fp);
	file = malloc((size_t)n);
	if (!file || n < (long)sizeof(*eh) || fread(file, 1, (size_t)n, fp) != (size_t)n) {
		fclose(fp);
		free(file);
		return false;
	}
	fclose(fp);
	eh = (const Elf64_Ehdr *)file;
	ph = (const Elf64_Phdr *)(file + eh->e_phoff);
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh->e_machine != EM_AARCH64)
		goto out;
	for (unsigned int i = 0; i < eh->e_phnum; i++) {
		if (ph[i].p_type == PT_GNU_EH_FRAME)
			hdr = ph[i].p_vaddr;
		if (ph[i].p_type == PT_LOAD && ph[i].p_vaddr + ph[i].p_filesz > end)
			end = ph[i].p_vaddr + ph[i].p_filesz;
		if (ph[i].p_type == PT_LOAD && (ph[i].p_flags & PF_X) && !text_len) {
			text = ph[i].p_vaddr;
			text_len = ph[i].p_filesz;
		}
	}
	if (!hdr || !text_len || hdr >= end || !(f->data = calloc(1, (size_t)end)))
		goto out;
	for (unsigned int i = 0; i < eh->e_phnum; i++)
		if (ph[i].p_type == PT_LOAD)
			memcpy(f->data + ph[i].p_vaddr, file + ph[i].p_offset, ph[i].p_filesz);
	/* pcs are the bytes' addresses in memory, as the table's pc-relative pointers say */
	f->c = (struct a64frame_code){f->data + text, (uintptr_t)f->data + text,
				      (uintptr_t)f->data + text + text_len};
	f->t = (struct cfi_table){(uintptr_t)f->data, (uintptr_t)f->data + end, f->data + hdr};
out:
	free(file);
	return f->data != NULL;
}

struct tally {
	unsigned int sites, found, agree;
};

/* The frame at pc read from the code vs the tables' rules (sp-based CFA only). */
static void compare(const struct file *f, uint64_t pc, bool exact, struct tally *t)
{
	static struct a64frame_work work; /* as the unwinder gives it: a thread's room */
	struct cfi_rules r;
	struct a64frame fr;
	bool same;

	if (!cfi__rules_at(&f->t, exact ? pc : pc - 1, &r) || r.cfa_reg != CFI_REG_SP ||
	    r.ra_undefined || r.cfa_off < 0 || (!r.ra_saved && !exact))
		return;
	t->sites++;
	if (!a64frame__analyze(&f->c, pc, exact, 384, &fr, &work))
		return;
	t->found++;
	/* the same frame; or, at an interrupted pc past the prologue's stores and before any
	 * call, the same values where the reading found them still in x30 and x29 (the path to
	 * the return loads them from the words the stores wrote) */
	same = fr.cfa == r.cfa_off &&
	       ((fr.ra_in_lr && (!r.ra_saved || exact)) ||
		(!fr.ra_in_lr && r.ra_saved && fr.ra_off == r.cfa_off + r.ra_off)) &&
	       (!r.fp_saved || (fr.fp_saved && fr.fp_off == r.cfa_off + r.fp_off) ||
		(fr.ra_in_lr && !fr.fp_saved));
	t->agree += same;
	if (!same && getenv("A64FRAME_SHOW"))
		print_message("  %s %#llx: code cfa %u ra %s%u fp %d/%u; tables cfa %lld ra %d/%lld "
			      "fp %d/%lld (%s)\n", exact ? "pc" : "ra",
			      (unsigned long long)(pc - f->c.lo + (uintptr_t)(f->c.mem - f->data)),
			      fr.cfa, fr.ra_in_lr ? "lr " : "", fr.ra_off, fr.fp_saved, fr.fp_off,
			      (long long)r.cfa_off, r.ra_saved, (long long)r.ra_off, r.fp_saved,
			      (long long)r.fp_off, fr.how == A64FRAME_FORWARD ? "fwd" : "back");
}

static void one_file(const char *path, unsigned int found_pm, unsigned int right_pm,
		     unsigned int *files)
{
	struct tally ret = {0}, any = {0};
	struct file f;

	if (!load(path, &f)) {
		free(f.data);
		return;
	}
	for (uint64_t a = f.c.lo; a + 4 <= f.c.hi; a += 4) {
		uint32_t w;

		memcpy(&w, f.c.mem + (a - f.c.lo), 4);
		if ((w & 0xfc000000) == 0x94000000 || (w & 0xfffffc1f) == 0xd63f0000)
			compare(&f, a + 4, false, &ret); /* a return address */
		if (!(a & 15))
			compare(&f, a, true, &any); /* an interrupted pc */
	}
	print_message("%s: %u return addresses with tables, %u read from the code, %u the "
		      "tables' frame; %u interrupted pcs, %u read, %u the tables'\n", path,
		      ret.sites, ret.found, ret.agree, any.sites, any.found, any.agree);
	if (ret.sites > 100) {
		++*files;
		assert_true(ret.found * 1000 >= ret.sites * found_pm);
		assert_true(ret.agree * 1000 >= ret.found * right_pm);
		assert_true(any.found * 1000 >= any.sites * (found_pm - 100));
		assert_true(any.agree * 1000 >= any.found * (right_pm - 20));
	}
	free(f.data);
}

static void against_tables(void **state)
{
	/* per mille of return addresses found and right (interrupted pcs: 100 and 20 less) */
	static const struct {
		const char *path;
		unsigned int found, right;
	} files_[] = {
	    {"/usr/aarch64-linux-gnu/lib/libc.so.6", 900, 990},
	    {"/usr/aarch64-linux-gnu/lib/libstdc++.so.6", 850, 975},
	    {"build/sysroot-arm64/usr/lib/aarch64-linux-gnu/libmbedcrypto.so.7", 900, 990},
	};
	unsigned int files = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(files_) / sizeof(files_[0]); i++)
		one_file(files_[i].path, files_[i].found, files_[i].right, &files);
	if (!files)
		skip(); /* no arm64 files here */
}
#else
static void against_tables(void **state)
{
	(void)state;
	print_message("the tables' rules are read by elf/cfi.c built for aarch64: "
		      "the gateway-arm64 suite runs this\n");
	skip();
}
#endif /* __aarch64__ */

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(frames),
	    cmocka_unit_test(paths),
	    cmocka_unit_test(backward_and_bounds),
	    cmocka_unit_test(against_tables),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
