// SPDX-License-Identifier: MIT
/*
 * tests/fuzz/ehabi.c — any bytes as a module's ARM EHABI tables: .ARM.exidx at an offset and
 * of a length the first bytes choose, .ARM.extab wherever its prel31 words lead; every entry
 * found is decoded and its opcodes run on registers and a stack that are themselves input.
 * Every table read must stay inside the table and every stack read go through the reader
 * (ASan sees the rest); no entry may hold more opcodes than its buffer.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "elf/ehabi.h"

struct stack {
	const uint8_t *p;
	size_t len;
};

static bool rd(void *ctx, uint32_t addr, uint32_t *val)
{
	const struct stack *s = ctx;

	if (addr < 0x1000 || addr - 0x1000 > s->len || s->len - (addr - 0x1000) < 4)
		return false;
	memcpy(val, s->p + (addr - 0x1000), 4);
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ehabi_table t;
	struct ehabi_entry e;
	struct stack st = {data, size};
	uint8_t *copy;

	if (size < 8)
		return 0;
	copy = malloc(size); /* exactly size bytes: any overread is ASan's */
	memcpy(copy, data, size);
	t = (struct ehabi_table){.mem = copy, .lo = 0x10000, .hi = 0x10000 + (uint32_t)size};
	t.exidx = t.lo + (uint32_t)((data[0] | data[1] << 8) % size);
	t.n = (uint32_t)(data[2] | data[3] << 8);
	for (uint32_t k = 0; k < 16; k++) {
		uint32_t r[16], pc = t.lo + (k * 0x9E3779B1u + data[4]) % (uint32_t)(size * 2);
		bool ra;

		ehabi__lookup(&t, pc, &e);
		if (e.n_ops > EHABI_MAX_OPS)
			abort();
		for (int i = 0; i < 16; i++)
			r[i] = 0x1000 + 4u * (uint32_t)i;
		ehabi__execute(&e, r, rd, &st, &ra);
	}
	free(copy);
	return 0;
}
