// SPDX-License-Identifier: MIT
/*
 * tests/fuzz/cfi.c — any bytes as a module's unwind table: .eh_frame_hdr at an offset the
 * first bytes choose, .eh_frame wherever its pointers lead. Every read must stay inside the
 * table (ASan sees the rest); a rule found must round-trip through the cache packing.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/cfi.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
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
	free(copy);
	return 0;
}
