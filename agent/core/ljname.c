// SPDX-License-Identifier: MIT
/* agent/core/ljname.c — LuaJIT 2.1 frames' names: see agent/core/luaname.h. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "agent/core/luaname.h"

/* LuaJIT 2.1.0-beta3 GC64 (lj_obj.h; offsetof() by tests/offsets/luajit.c). */
#define PT_GCT 9
#define PT_SIZEBC 12
#define PT_CHUNKNAME 64
#define PT_FIRSTLINE 72
#define PT_NUMLINE 76
#define PT_LINEINFO 80
#define PT_HEAD 88
#define STR_GCT 9
#define STR_LEN 20
#define STR_SIZE 24 /* the bytes follow the header */
#define GCT_PROTO 7 /* ~LJ_TPROTO */
#define GCT_STR 4   /* ~LJ_TSTR */

static int read_chunkname(uint32_t pid, uint64_t addr, char *out, size_t max)
{
	unsigned char h[STR_SIZE];
	char raw[FRAMENAME_MAX];
	uint32_t len;
	size_t n;

	if (framename__peek(pid, addr, h, sizeof(h)))
		return -EFAULT;
	if (h[STR_GCT] != GCT_STR)
		return -EILSEQ;
	len = (uint32_t)luafield__int32(h, STR_LEN);
	n = len < sizeof(raw) - 1 ? len : sizeof(raw) - 1;
	if (!n || framename__peek(pid, addr + STR_SIZE, raw, n))
		return -EFAULT;
	raw[n] = 0;
	return luaname__chunkid(raw, n, len, out, max);
}

/* lj_debug_line(): the first line plus the delta kept for the instruction before pos (bytes,
 * halfwords or words by the function's number of lines). 0: unknown. */
static int64_t read_line(uint32_t pid, const unsigned char *p, unsigned int pos)
{
	int64_t first = luafield__int32(p, PT_FIRSTLINE);
	uint32_t numline = (uint32_t)luafield__int32(p, PT_NUMLINE);
	uint64_t info = luafield__word(p, PT_LINEINFO);
	unsigned int width = numline < 256 ? 1 : numline < 65536 ? 2 : 4;
	uint32_t delta = 0;

	if (!info || pos > (uint32_t)luafield__int32(p, PT_SIZEBC))
		return 0;
	if (pos == (uint32_t)luafield__int32(p, PT_SIZEBC))
		return first + numline;
	if (pos == 0)
		return first;
	if (framename__peek(pid, info + (uint64_t)(pos - 1) * width, &delta, width))
		return 0;
	return first + delta; /* little-endian: the low bytes */
}

int ljname__read(uint32_t pid, uint64_t v, struct framename *out, struct luaname_stats *st)
{
	uint64_t proto = (v & LUAFRAME_PROTO_MASK) << 3;
	unsigned int pos = (unsigned int)(v >> 45) & LUAFRAME_PC_NONE;
	unsigned char p[PT_HEAD];
	char file[FRAMENAME_MAX];
	int err;

	if (!proto) { /* the label of a sample in a JIT trace */
		memset(out, 0, sizeof(*out));
		snprintf(out->name, sizeof(out->name), "[LuaJIT trace]");
		st->resolved++;
		return 0;
	}
	if (framename__peek(pid, proto, p, sizeof(p))) {
		st->unreadable++;
		return -EFAULT;
	}
	if (p[PT_GCT] != GCT_PROTO || luafield__int32(p, PT_SIZEBC) <= 0 ||
	    (pos != LUAFRAME_PC_NONE && pos > (uint32_t)luafield__int32(p, PT_SIZEBC))) {
		st->not_proto++;
		return -EINVAL;
	}
	err = read_chunkname(pid, luafield__word(p, PT_CHUNKNAME), file, sizeof(file));
	if (err) {
		st->bad_string++;
		return err;
	}
	luaname__set(out, file, luafield__int32(p, PT_FIRSTLINE),
		     pos == LUAFRAME_PC_NONE ? 0 : read_line(pid, p, pos));
	st->resolved++;
	return 0;
}
