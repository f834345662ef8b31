// SPDX-License-Identifier: MIT
/*
 * tests/fuzz/armframe.c — any bytes as a module's code: every pc the first bytes choose (ARM
 * or Thumb, interrupted or a return address) is analysed with a small and a large budget.
 * Every code read must stay inside the code (ASan sees the rest), the instructions read stay
 * within the budget (twice it: the backward reading has one of its own), and a frame found
 * keeps the return address inside the caller's frame.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "elf/armframe.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct armframe_code c;
	struct armframe f;
	uint8_t *copy;

	if (size < 4)
		return 0;
	copy = malloc(size); /* exactly size bytes: any overread is ASan's */
	memcpy(copy, data, size);
	c = (struct armframe_code){copy, 0x10000, 0x10000 + (uint32_t)size};
	for (uint32_t k = 0; k < 16; k++) {
		uint32_t pc = c.lo + (k * 0x9E3779B1u + data[0]) % (uint32_t)size;
		unsigned int budget = k & 8 ? 1024 : 16 + data[1];

		if (armframe__analyze(&c, pc, k & 2, budget, &f) &&
		    ((!f.ra_in_lr && f.ra_off >= f.cfa && f.how == ARMFRAME_FORWARD) ||
		     (f.ra_in_lr && !(k & 2))))
			abort();
		if (f.insns > 2 * budget + 1)
			abort();
		(void)armframe__after_call(&c, pc);
	}
	free(copy);
	return 0;
}
