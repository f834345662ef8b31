// SPDX-License-Identifier: MIT
/*
 * agent/lib/luaarm.c — luaV_execute's bounds on armv7, where the module has no unwind tables
 * (luaframes.h: luaframes__code_bounds). Debian's armhf lua5.4 has one .ARM.exidx entry and no
 * .eh_frame_hdr, and luaV_execute has no symbol: its dispatch table gives code inside it, the
 * code gives its edges. Debian 12's lua5.4 5.4.4-3 armhf: the table's targets span
 * 0x119c2-0x132a4, the push before them is luaV_execute's first instruction (0x1192c), the next
 * push (0x14d2e) is 6 bytes into the function after it (whose literal loads come first): a
 * sample there counts one activation too many, and its sample stays native (mismatch).
 */
#include "agent/lib/luaframes.h"
#include "elf/armframe.h"

#define BACK_BUDGET 4096     /* instructions read back to the prologue */
#define FORWARD_BUDGET 65536 /* forward to the next function: luaV_execute is ~13 KiB */

bool luaframes__code_bounds(uintptr_t x_lo, uintptr_t x_hi, uintptr_t pc_lo, uintptr_t pc_hi,
			    uintptr_t *lo, uintptr_t *hi)
{
	const struct armframe_code c = {.mem = (const uint8_t *)x_lo, .lo = (uint32_t)x_lo,
					.hi = (uint32_t)x_hi};
	uint32_t start = armframe__push_before(&c, (uint32_t)pc_lo | 1, BACK_BUDGET);
	uint32_t end = armframe__push_after(&c, (uint32_t)pc_hi | 1, FORWARD_BUDGET);

	if (!start || !end || end <= pc_hi)
		return false;
	*lo = start & ~1u;
	*hi = end & ~1u;
	return true;
}
