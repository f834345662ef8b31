// SPDX-License-Identifier: MIT
/*
 * Unit tests of elf/ehabi.c: hand-built .ARM.exidx/.ARM.extab tables whose effect was worked
 * out by hand (inline personality 0, personality 1 in .ARM.extab, a generic personality's
 * data, CANTUNWIND, refuse-to-unwind, vsp = r7, pop r0-r3, VFP pops skipped, the uleb128 vsp
 * add, a binary search that ignores the Thumb bit), then real files: every compact entry of
 * Debian armhf libraries decoded and compared with `readelf -u` (skipped where absent).
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

#include "elf/ehabi.h"

/* ---- hand-built tables ---------------------------------------------------------------------- */

#define BASE 0x10000u /* target address of mem[0] */
#define EXIDX 0x100u  /* offsets in mem */
#define EXTAB 0x200u
#define CODE 0x1000u /* functions at BASE + CODE + 0x100 * i */

static uint8_t mem[0x400] __attribute__((aligned(4)));

static void put(uint32_t off, uint32_t v)
{
	memcpy(mem + off, &v, 4);
}

static uint32_t prel31_to(uint32_t from_off, uint32_t target)
{
	return (target - (BASE + from_off)) & 0x7fffffffu;
}

/* exidx entry i: function i, second word w (or, with extab != 0, a prel31 to extab) */
static void entry(unsigned int i, uint32_t w, uint32_t extab)
{
	uint32_t a = EXIDX + 8 * i;

	put(a, prel31_to(a, BASE + CODE + 0x100 * i));
	put(a + 4, extab ? prel31_to(a + 4, BASE + extab) : w);
}

static struct ehabi_table table(uint32_t n)
{
	return (struct ehabi_table){mem, BASE, BASE + sizeof(mem), BASE + EXIDX, n};
}

/* the stack: target addresses 0x8000.. */
static uint32_t stack[64];

static bool rd(void *ctx, uint32_t addr, uint32_t *val)
{
	if (addr < 0x8000 || addr >= 0x8000 + sizeof(stack) || (addr & 3))
		return false;
	*val = stack[(addr - 0x8000) / 4];
	return true;
}

static void regs(uint32_t r[16])
{
	for (int i = 0; i < 16; i++)
		r[i] = 0xdead0000u + (uint32_t)i;
	r[13] = 0x8000;
	for (int i = 0; i < 64; i++)
		stack[i] = 0x5000u + 4u * (uint32_t)i; /* the word at 0x8000 + 4i */
}

static void build(void)
{
	memset(mem, 0, sizeof(mem));
	entry(0, 0x80a8b0b0u, 0); /* pop {r4, r14}; finish */
	entry(1, 0, EXTAB);	  /* pr1: vsp = r7; pop {r7, r14}; vsp += 8 */
	put(EXTAB, 0x81019784u);
	put(EXTAB + 4, 0x0801b0b0u);
	entry(2, 1, 0); /* CANTUNWIND */
	entry(3, 0, EXTAB + 0x10); /* pr1: VPUSH d0-d1; pop r0-r3; FSTMFDX d8; pop {r4, r14} */
	put(EXTAB + 0x10, 0x8101c901u);
	put(EXTAB + 0x14, 0xb10fb8a8u);
	entry(4, 0, EXTAB + 0x20); /* generic personality, then GCC's data: pop {r4, r14} */
	put(EXTAB + 0x20, prel31_to(EXTAB + 0x20, BASE + 0x2000));
	put(EXTAB + 0x24, 0x00a8b0b0u);
	entry(5, 0x808000b0u, 0); /* refuse to unwind */
	entry(6, 0x80b28101u, 0); /* vsp += 0x204 + (129 << 2) */
	entry(7, 0x80018fffu, 0); /* vsp += 8; pop r4-r15: a frame whose pc was saved */
}

static void run(unsigned int i, uint32_t r[16], enum ehabi_result want, bool *ra)
{
	struct ehabi_table t = table(8);
	struct ehabi_entry e;

	regs(r);
	r[7] = 0x8010;
	ehabi__lookup(&t, BASE + CODE + 0x100 * i + 0x11, &e); /* a Thumb pc inside function i */
	assert_int_equal(e.start, BASE + CODE + 0x100 * i);
	assert_int_equal(ehabi__execute(&e, r, rd, NULL, ra), want);
}

static void hand_built_entries(void **state)
{
	uint32_t r[16];
	bool ra;

	build();
	run(0, r, EHABI_STEP_OK, &ra);
	assert_true(ra);
	assert_int_equal(r[4], 0x5000);
	assert_int_equal(r[15], 0x5004);
	assert_int_equal(r[13], 0x8008);

	run(1, r, EHABI_STEP_OK, &ra); /* vsp = r7 = 0x8010 */
	assert_int_equal(r[7], 0x5010);
	assert_int_equal(r[15], 0x5014);
	assert_int_equal(r[13], 0x8020);

	run(2, r, EHABI_STEP_STOP, &ra);

	run(3, r, EHABI_STEP_OK, &ra); /* 16 bytes of d0-d1, r0-r3, 8 + 4 of d8, r4, r14 */
	assert_int_equal(r[0], 0x5010);
	assert_int_equal(r[3], 0x501c);
	assert_int_equal(r[4], 0x502c);
	assert_int_equal(r[15], 0x5030);
	assert_int_equal(r[13], 0x8034);

	run(4, r, EHABI_STEP_OK, &ra);
	assert_int_equal(r[15], 0x5004);
	assert_int_equal(r[13], 0x8008);

	run(5, r, EHABI_STEP_STOP, &ra);

	run(6, r, EHABI_STEP_OK, &ra); /* no pop: pc = lr, from the link register */
	assert_false(ra);
	assert_int_equal(r[13], 0x8000 + 0x204 + (129 << 2));
	assert_int_equal(r[15], 0xdead000eu);

	run(7, r, EHABI_STEP_OK, &ra); /* pops r4..r15 from 0x8008: pc is the last word */
	assert_true(ra);
	assert_int_equal(r[4], 0x5008);
	assert_int_equal(r[15], 0x5008 + 4 * 11);
	assert_int_equal(r[13], 0x5008 + 4 * 9); /* sp popped: it is the new sp */
}

static void lookups(void **state)
{
	struct ehabi_table t;
	struct ehabi_entry e;

	build();
	t = table(8);
	assert_int_equal(ehabi__find(&t, BASE + CODE - 2), -1); /* before the first function */
	assert_int_equal(ehabi__find(&t, BASE + CODE), 0);
	assert_int_equal(ehabi__find(&t, BASE + CODE + 0xff), 0);
	assert_int_equal(ehabi__find(&t, BASE + CODE + 0x101), 1); /* Thumb bit */
	assert_int_equal(ehabi__find(&t, BASE + CODE + 0x7ff0), 7); /* the last runs on */
	ehabi__lookup(&t, BASE + CODE - 2, &e);
	assert_int_equal(e.kind, EHABI_NONE);
	/* an entry pointing outside the table's memory reads nothing */
	put(EXIDX + 4, 0x00100000u);
	ehabi__lookup(&t, BASE + CODE, &e);
	assert_int_equal(e.kind, EHABI_NONE);
	/* a table longer than its memory is refused */
	t.n = 1000;
	assert_int_equal(ehabi__find(&t, BASE + CODE), -1);
}

/* ---- real files: Debian armhf libraries against readelf -u ---------------------------------- */

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
			} else if (pass == 1 && ph.p_type == PT_LOAD && exidx >= ph.p_vaddr &&
				   exidx < ph.p_vaddr + ph.p_filesz) {
				f->t = (struct ehabi_table){f->data + ph.p_offset, ph.p_vaddr,
							    ph.p_vaddr + ph.p_filesz, exidx,
							    exidx_len / 8};
			}
		}
	}
	return f->t.n > 0;
}

/* Compares every compact entry's opcodes with readelf's; returns the entries compared. */
static unsigned int compare_with_readelf(const char *path, struct file *f, unsigned int *bad)
{
	char cmd[512], line[512];
	unsigned int compared = 0;
	struct ehabi_entry e = {0};
	uint8_t ops[EHABI_MAX_OPS];
	unsigned int n = 0;
	bool open = false, compact = false;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "readelf -u '%s' 2>/dev/null", path);
	p = popen(cmd, "r");
	if (!p)
		return 0;
	for (;;) {
		char *ok = fgets(line, sizeof(line), p);
		unsigned long start;
		char rest[400];

		if (!ok || (line[0] == '0' && line[1] == 'x')) {
			if (open && compact) { /* the previous entry is complete */
				compared++;
				if (e.kind != EHABI_OPS || e.n_ops != n || memcmp(e.ops, ops, n)) {
					if (*bad < 5)
						print_message("%s: entry at 0x%x differs\n", path,
							      e.start);
					(*bad)++;
				}
			}
			open = compact = false;
			if (!ok)
				break;
		}
		if (line[0] == '0' && strchr(line, ':')) {
			start = strtoul(line, NULL, 16);
			snprintf(rest, sizeof(rest), "%s", strchr(line, ':') + 1);
			int32_t i = ehabi__find(&f->t, (uint32_t)start);

			open = true;
			n = 0;
			memset(&e, 0, sizeof(e));
			if (i >= 0)
				ehabi__entry_at(&f->t, (uint32_t)i, &e);
			if (i < 0 || e.start != (uint32_t)start) {
				(*bad)++;
				open = false;
			} else if (strstr(rest, "[cantunwind]")) {
				compared++;
				*bad += e.kind != EHABI_CANTUNWIND;
				open = false;
			}
			continue;
		}
		if (strstr(line, "Compact model index"))
			compact = true;
		if (open && compact && line[0] == ' ' && strstr(line, "  0x")) {
			const char *s = line;
			unsigned int b;
			int used;

			while (*s == ' ')
				s++;
			while (sscanf(s, "0x%2x%n", &b, &used) == 1 && n < EHABI_MAX_OPS) {
				ops[n++] = (uint8_t)b;
				s += used;
				while (*s == ' ')
					s++;
			}
		}
	}
	pclose(p);
	return compared;
}

static void debian_armhf_libraries(void **state)
{
	static const char *paths[] = {
	    "/usr/arm-linux-gnueabihf/lib/libc.so.6",
	    "/usr/arm-linux-gnueabihf/lib/libstdc++.so.6",
	    "build/sysroot-armhf/usr/lib/arm-linux-gnueabihf/libmbedcrypto.so.7",
	    "build/sysroot-armhf/usr/lib/arm-linux-gnueabihf/libzstd.so.1",
	};
	unsigned int files = 0;

	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		struct file f;
		unsigned int bad = 0, n;

		if (!load(paths[i], &f)) {
			free(f.data);
			continue;
		}
		n = compare_with_readelf(paths[i], &f, &bad);
		print_message("%s: %u entries, %u compared with readelf -u, %u differ\n", paths[i],
			      f.t.n, n, bad);
		if (n) {
			files++;
			assert_int_equal(bad, 0);
			assert_true(n * 2 > f.t.n / 4); /* most entries are compact or cantunwind */
		}
		free(f.data);
	}
	if (!files)
		skip(); /* no armhf files or no readelf here */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(hand_built_entries),
	    cmocka_unit_test(lookups),
	    cmocka_unit_test(debian_armhf_libraries),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
