/* SPDX-License-Identifier: MIT */
/*
 * agent/core/lua51name.h — Lua 5.1 frames in a sample and their names (CONFIG_LUA51FRAMES).
 *
 * agent/lib/lua51frames.c tags a Lua 5.1 frame as luaname.h tags a 5.4 one (pc in bits 55..45,
 * Proto address / 8 in bits 44..0), with its own tag in bits 63..56, so the writer knows which
 * layout the Proto has. luaname.c's cache names it through lua51name__read(): the Proto's type
 * byte (LUA_TPROTO) and the pc inside its code checked, "function <file:linedefined>" or
 * "main chunk <file>", the current line from lineinfo[pc] (5.1 keeps absolute lines).
 */
#ifndef EDGEPROF_AGENT_LUA51NAME_H
#define EDGEPROF_AGENT_LUA51NAME_H

#include <stdint.h>

#include "agent/core/luaname.h"

static inline uint64_t lua51frame__tag(uintptr_t proto, unsigned int pc)
{
	return (luaframe__tag(proto, pc) & ((1ull << 56) - 1)) | LUA51FRAME_TAG << 56;
}

#ifdef CONFIG_LUA51FRAMES
/* Names the Lua 5.1 frame v of pid (luaname.c's reader, its counters in st): 0 or -errno. */
int lua51name__read(uint32_t pid, uint64_t v, struct framename *out, struct luaname_stats *st);
#else
static inline int lua51name__read(uint32_t pid, uint64_t v, struct framename *out,
				  struct luaname_stats *st)
{
	return -95; /* -EOPNOTSUPP */
}
#endif

#endif /* EDGEPROF_AGENT_LUA51NAME_H */
