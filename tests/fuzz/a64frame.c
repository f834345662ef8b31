// SPDX-License-Identifier: MIT
/*
 * tests/fuzz/a64frame.c — any bytes as a module's AArch64 code: every pc the first bytes
 * choose (aligned or not, interrupted or a return address) is analysed with a small and a large
 * budget, and the backward reading alone. Every code read must stay inside the code (ASan sees
 * the rest), the instructions read stay within the budgets (forward: budget; backward: twice
 * it), and a frame found keeps the return address and the saved x29 inside the caller's frame.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "elf/a64frame.h"

static void check(const struct a64frame *f, bool ok, unsigned int budget)
{
	if (f->insns > 3 * budget)
		abort();
	if (!ok)
		return;
	if ((!f->ra_in_lr && f->ra_off + 8 > f->cfa) || (f->fp_saved && f->fp_off + 8 > f->cfa))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct a64frame_work *work = malloc(sizeof(*work)); /* the caller's room, as ASan sees it */
	struct a64frame_code c;
	struct a64frame f;
	uint8_t *copy;

	if (size < 4) {
		free(work);
		return 0;
	}
	copy = malloc(size); /* exactly size bytes: any overread is ASan's */
	memcpy(copy, data, size);
	c = (struct a64frame_code){copy, 0x400000, 0x400000 + (uint64_t)size};
	for (uint32_t k = 0; k < 16; k++) {
		uint64_t pc = c.lo + (k * 0x9E3779B1u + data[0]) % (uint32_t)(size + 4);
		unsigned int budget = k & 8 ? 1024 : 16 + data[1];
		bool exact = k & 2, ok;

		if (!(k & 1))
			pc &= ~3ull;
		ok = a64frame__analyze(&c, pc, exact, budget, &f, k & 4 ? work : NULL);
		check(&f, ok, budget);
		if (ok && f.ra_in_lr && !exact)
			abort(); /* a return address's frame cannot return through x30 */
		check(&f, a64frame__prologue(&c, pc, exact, budget, &f, k & 4 ? NULL : work), budget);
		(void)a64frame__after_call(&c, pc);
	}
	free(copy);
	free(work);
	return 0;
}
