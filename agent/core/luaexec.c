// SPDX-License-Identifier: MIT
/* agent/core/luaexec.c — see luaexec.h. */
#include <string.h>

#include "agent/core/luaexec.h"

const struct lua54_layout lua54_lp64 = {
    .state = {.tt = 8, .g = 24, .errorjmp = 88, .mainthread = 264, .thread = LUA54_VTHREAD,
	      .align_mask = 7, .align_rem = 0},
    .ci = 32, .base_ci = 96, .head = 96,
    .ci_func = 0, .ci_previous = 16, .ci_savedpc = 32, .ci_callstatus = 62, .ci_size = 64,
    .cl_tt = 8, .cl_p = 24, .cl_size = 32,
};
/* ILP32: lua_State is 4-aligned (no 8-byte field), so a state sits LUA_EXTRASPACE (a pointer)
 * into its 8-aligned block: 4 mod 8, which halves the stack words a scan tries */
const struct lua54_layout lua54_ilp32 = {
    .state = {.tt = 4, .g = 16, .errorjmp = 48, .mainthread = 164, .thread = LUA54_VTHREAD,
	      .align_mask = 7, .align_rem = 4},
    .ci = 20, .base_ci = 52, .head = 52,
    .ci_func = 0, .ci_previous = 8, .ci_savedpc = 16, .ci_callstatus = 34, .ci_size = 36,
    .cl_tt = 4, .cl_p = 12, .cl_size = 16,
};

#define WORD_MASK (sizeof(uintptr_t) - 1) /* a pointer's alignment */
#define STATE_HEAD 64 /* bytes of a candidate's header read: up to l_G and its word */

bool luaexec__function_bounds(const uint8_t *hdr, size_t len, uintptr_t at, uintptr_t pc,
			      uintptr_t *lo, uintptr_t *hi)
{
	int32_t count, lo_i = 0, hi_i, entry[2];
	const uint8_t *table = hdr + 12;

	if (len < 12 || hdr[0] != 1 || (hdr[1] & 0x0f) != 0x0b || hdr[2] != 0x03 ||
	    hdr[3] != 0x3b)
		return false;
	memcpy(&count, hdr + 8, sizeof(count));
	if (count < 2 || (size_t)count > (len - 12) / 8)
		return false;
	hi_i = count;
	while (hi_i - lo_i > 1) { /* the last entry starting at or before pc */
		int32_t mid = lo_i + (hi_i - lo_i) / 2;

		memcpy(entry, table + 8 * (size_t)mid, sizeof(entry));
		if (at + (uintptr_t)(intptr_t)entry[0] <= pc)
			lo_i = mid;
		else
			hi_i = mid;
	}
	if (lo_i + 1 >= count)
		return false;
	memcpy(entry, table + 8 * (size_t)lo_i, sizeof(entry));
	*lo = at + (uintptr_t)(intptr_t)entry[0];
	memcpy(entry, table + 8 * (size_t)(lo_i + 1), sizeof(entry));
	*hi = at + (uintptr_t)(intptr_t)entry[0];
	return *lo <= pc && pc < *hi;
}

/*
 * A run of exactly LUA54_NUM_OPCODES words at w all pointing into one function of [x_lo,
 * x_hi), the next word not (arm64's lua5.4 has another table of code pointers right after
 * it). Not all one word (a GOT's unresolved entries all point at the PLT).
 */
static bool is_disptab(const uintptr_t *w, uintptr_t x_lo, uintptr_t x_hi,
		       luaexec_bounds_fn bounds, void *ctx, uintptr_t *lo, uintptr_t *hi)
{
	uintptr_t min = UINTPTR_MAX, max = 0;

	for (int i = 0; i < LUA54_NUM_OPCODES; i++) {
		if (w[i] < x_lo || w[i] >= x_hi)
			return false;
		min = w[i] < min ? w[i] : min;
		max = w[i] > max ? w[i] : max;
	}
	if (min == max || !bounds(ctx, min, max, lo, hi))
		return false;
	return max < *hi && (w[LUA54_NUM_OPCODES] < *lo || w[LUA54_NUM_OPCODES] >= *hi);
}

int luaexec__find(const uintptr_t *w, size_t n, uintptr_t x_lo, uintptr_t x_hi,
		  luaexec_bounds_fn bounds, void *ctx, uintptr_t *lo, uintptr_t *hi)
{
	uintptr_t l, h;
	int found = 0;

	for (size_t k = 0; k + LUA54_NUM_OPCODES < n; k++) {
		if (!is_disptab(w + k, x_lo, x_hi, bounds, ctx, &l, &h) ||
		    (k && w[k - 1] >= l && w[k - 1] < h))
			continue;
		if (found) /* two tables: not sure which is the VM's */
			return -1;
		found = 1;
		*lo = l;
		*hi = h;
	}
	return found;
}

bool luaexec__is_state(const struct luaframes_layout *l, uintptr_t w, luaexec_read_fn read,
		       void *ctx, uintptr_t *main_out)
{
	unsigned char h[STATE_HEAD], m[STATE_HEAD];
	unsigned int len = l->g + sizeof(uintptr_t);
	uintptr_t g, main;

	if (len > STATE_HEAD || !read(ctx, w, h, len) || h[l->tt] != l->thread)
		return false;
	memcpy(&g, h + l->g, sizeof(g));
	if (!g || (g & WORD_MASK) || !read(ctx, g + l->mainthread, &main, sizeof(main)))
		return false;
	*main_out = main;
	if (main == w)
		return true;
	if ((main & l->align_mask) != l->align_rem || !read(ctx, main, m, len) ||
	    m[l->tt] != l->thread)
		return false;
	return !memcmp(m + l->g, h + l->g, sizeof(g)); /* the same universe */
}
