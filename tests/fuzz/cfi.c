// SPDX-License-Identifier: MIT
/*
 * tests/fuzz/cfi.c — any bytes as a module's unwind table: .eh_frame_hdr at an offset the
 * first bytes choose, .eh_frame wherever its pointers lead; then as a bare .eh_frame indexed
 * and looked up without a header (a static program's). Every read must stay inside the
 * table (ASan sees the rest); a rule found must round-trip through the cache packing. The
 * rows of the whole table (cfi__rows, what the BPF sampler loads) come in pc order.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "elf/cfi.h"

static bool row_in_order(void *ctx, uintptr_t pc, const struct cfi_rules *r)
{
	uintptr_t *last = ctx;

	(void)r;
	if (pc < *last && *last != UINTPTR_MAX)
		return true; /* overlapping FDEs may step back: the reader drops those rows */
	*last = pc;
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uintptr_t last = UINTPTR_MAX;
	struct cfi_rules r, back;
	struct cfi_table t;
	uint64_t packed;
	uint8_t *copy;

	if (size < 4)
		return 0;
	copy = malloc(size); /* exactly size bytes: any overread is ASan's */
	memcpy(copy, data, size);
	t = (struct cfi_table){.lo = (uintptr_t)copy,
			       .hi = (uintptr_t)copy + size,
			       .eh_hdr = copy + (data[0] | data[1] << 8) % size};
	for (uint64_t k = 0; k < 16; k++) {
		uintptr_t pc = t.lo + (k * 0x9E3779B1u + data[2]) % (size * 2);

		if (!cfi__rules_at(&t, pc, &r))
			continue;
		if (cfi__pack(&r, &packed) &&
		    (!cfi__unpack(packed, &back) || back.cfa_reg != r.cfa_reg ||
		     back.cfa_off != r.cfa_off || back.ra_saved != r.ra_saved ||
		     (r.ra_saved && back.ra_off != r.ra_off)))
			abort();
	}
	cfi__rows(&t, NULL, 0, row_in_order, &last);
	/* the same bytes as a bare .eh_frame (a static program's), through a sorted index */
	struct cfi_fde idx[64];
	size_t n = cfi__index(&t, copy, size, idx, 64);

	for (size_t i = 1; i < n; i++)
		if (idx[i - 1].pc > idx[i].pc)
			abort();
	for (uint64_t k = 0; k < 16 && n; k++)
		cfi__rules_indexed(&t, idx, n, idx[k % n].pc + k, &r);
	cfi__rows(&t, idx, n, row_in_order, &last);
	free(copy);
	return 0;
}
