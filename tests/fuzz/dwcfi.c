// SPDX-License-Identifier: MIT
/*
 * tests/fuzz/dwcfi.c — any bytes as a .debug_frame: indexed, then the rules at pcs the input
 * chooses, each stepped over registers and a stack that are the input too. Every read must stay
 * inside the section (ASan sees the rest) and every run end within the instruction bound.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "elf/dwcfi.h"

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
	struct stack st = {data, size};
	struct dwcfi t;
	char err[128];
	uint8_t *copy;

	if (size < 4)
		return 0;
	copy = malloc(size); /* exactly size bytes: any overread is ASan's */
	memcpy(copy, data, size);
	if (!dwcfi__open(&t, copy, size, 4096, err, sizeof(err))) {
		for (size_t i = 0; i < t.n_fdes && i < 64; i++) {
			struct dwcfi_row r;
			struct dwcfi_regs regs = {.known = 0xffff};
			uint32_t pc = t.fdes[i].lo + (uint32_t)(size - i) % 64;

			for (unsigned int k = 0; k < DWCFI_REGS; k++)
				regs.r[k] = 0x1000 + 4 * k;
			if (!dwcfi__row_at(&t, pc, &r))
				dwcfi__step(&r, &regs, rd, &st);
		}
		dwcfi__close(&t);
	}
	free(copy);
	return 0;
}
