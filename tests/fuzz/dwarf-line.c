// SPDX-License-Identifier: MIT
/*
 * tests/fuzz/dwarf-line.c — any bytes as a .debug_line section (and as the string sections its
 * DWARF 5 entries point into): parsed within a small bound, then looked up. Every refusal must
 * say why; every answer must be a real file name and a non-zero line.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store/symbols/dwarf-line.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dwarf_line_sections s = { .line = data, .line_len = size, .line_str = data,
					 .line_str_len = size, .str = data, .str_len = size };
	struct dwarf_lines *l = NULL;
	char err[256] = "";
	int ret = dwarf_lines__parse(&s, 1 << 20, &l, err, sizeof(err));

	if (ret) {
		if (l || !err[0])
			abort();
		return 0;
	}
	for (uint64_t a = 0; a < 64; a++) {
		const char *file = NULL;
		uint32_t line = 0;

		if (dwarf_lines__lookup(l, a * 0x40, &file, &line) && (!file || !line))
			abort();
	}
	if (dwarf_lines__bytes(l) > 1 << 20)
		abort();
	dwarf_lines__free(l);
	return 0;
}
