// SPDX-License-Identifier: MIT
/* agent/core/lua51name.c — Lua 5.1 frames' names: see agent/core/luaname.h. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "agent/core/luaname.h"

/* Lua 5.1.5 (lobject.h), LP64 : ILP32 (tests/offsets/lua51.c, compiled with gcc and with
 * arm-linux-gnueabihf-gcc against Debian's 5.1.5-9 sources): the library reads its own
 * process, so the build's pointer size picks. */
#define LP64 (sizeof(void *) == 8)
#define P_TT (LP64 ? 8 : 4)
#define P_CODE (LP64 ? 24 : 12)
#define P_LINEINFO (LP64 ? 40 : 20)
#define P_SOURCE (LP64 ? 64 : 32)
#define P_SIZECODE (LP64 ? 80 : 44)
#define P_SIZELINEINFO (LP64 ? 84 : 48)
#define P_LINEDEFINED (LP64 ? 96 : 60)
#define P_SIZE (LP64 ? 104 : 64)
#define TS_TT (LP64 ? 8 : 4)
#define TS_LEN (LP64 ? 16 : 12)
#define TS_CONTENTS (LP64 ? 24 : 16) /* a TString is padded to L_Umaxalign: the bytes follow it */
#define LUA_TSTRING 4
#define LUA_TPROTO 9

/* framename__peek: process_vm_readv, or this process's own memory where it is missing
 * (qemu-user) */
static int peek(uint32_t pid, uint64_t addr, void *buf, size_t len)
{
	return framename__peek(pid, addr, buf, len);
}

static int read_source(uint32_t pid, uint64_t addr, char *out, size_t max)
{
	unsigned char h[TS_CONTENTS];
	char raw[FRAMENAME_MAX];
	uint64_t len;
	size_t n;

	if (peek(pid, addr, h, sizeof(h)))
		return -EFAULT;
	if (h[TS_TT] != LUA_TSTRING)
		return -EILSEQ;
	len = luafield__word(h, TS_LEN);
	n = len < sizeof(raw) - 1 ? (size_t)len : sizeof(raw) - 1;
	if (!n || peek(pid, addr + TS_CONTENTS, raw, n))
		return -EFAULT;
	raw[n] = 0;
	return luaname__chunkid(raw, n, len, out, max);
}

/* lineinfo[pc]: 5.1 keeps each instruction's absolute line. 0: unknown. */
static int64_t read_line(uint32_t pid, const unsigned char *p, unsigned int pc)
{
	int32_t line;

	if ((int32_t)pc >= luafield__int32(p, P_SIZELINEINFO) ||
	    peek(pid, luafield__word(p, P_LINEINFO) + 4 * (uint64_t)pc, &line, sizeof(line)))
		return 0;
	return line > 0 ? line : 0;
}

int lua51name__read(uint32_t pid, uint64_t v, struct framename *out, struct luaname_stats *st)
{
	uint64_t proto = (v & LUAFRAME_PROTO_MASK) << 3;
	unsigned int pc = (unsigned int)(v >> 45) & LUAFRAME_PC_NONE;
	unsigned char p[P_SIZE];
	char file[FRAMENAME_MAX];
	int err;

	if (peek(pid, proto, p, sizeof(p))) {
		st->unreadable++;
		return -EFAULT;
	}
	if (p[P_TT] != LUA_TPROTO || luafield__int32(p, P_SIZECODE) <= 0 ||
	    (pc != LUAFRAME_PC_NONE && (int32_t)pc >= luafield__int32(p, P_SIZECODE))) {
		st->not_proto++;
		return -EINVAL;
	}
	err = read_source(pid, luafield__word(p, P_SOURCE), file, sizeof(file));
	if (err) {
		st->bad_string++;
		return err;
	}
	luaname__set(out, file, luafield__int32(p, P_LINEDEFINED),
		     pc == LUAFRAME_PC_NONE ? 0 : read_line(pid, p, pc));
	st->resolved++;
	return 0;
}
