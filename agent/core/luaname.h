/* SPDX-License-Identifier: MIT */
/*
 * agent/core/luaname.h — Lua frames in a sample, and their names (CONFIG_LUAFRAMES).
 *
 * libedgeprof.so's handler (agent/lib/luaframes.c) puts a Lua 5.4 frame into a sample's user
 * frames as a tagged word: 0xA6 in bits 63..56 (never a user address: x86_64 and arm64 user
 * space is below 2^48, armv7's below 2^32), the frame's instruction index (pcRel of its savedpc; LUAFRAME_PC_NONE
 * when it does not fit) in bits 55..45, its Proto address / 8 in bits 44..0.
 *
 * The profile writer names it from the process's memory (process_vm_readv) after checking the
 * object is a Proto (its header's type byte) and the pc inside its code: the function is shown
 * as Lua's own tracebacks show a function they have no name for, "function <file:line>" (the
 * chunk name and linedefined; "main chunk <file>" for a chunk), with the file and the current
 * line from the Proto's lineinfo (luaG_getfuncline). Global/field/method names, which Lua
 * derives from the caller's calling instruction, are not given (a name is right or absent).
 * Names are cached by (pid, Proto) in CONFIG_LUANAME_CACHE slots, lines by (pid, word) in
 * CONFIG_LUANAME_LINES entries (agent/core/framename.h), filled while the process runs (luaname__warm): lua_close() frees the Protos before a standalone profile is
 * written. A Proto freed and its address reused by another function's Proto with the same pc
 * in range would keep the first one's name (chunks loaded again and again: load() in a loop).
 */
#ifndef EDGEPROF_AGENT_LUANAME_H
#define EDGEPROF_AGENT_LUANAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "agent/core/framename.h"

#define LUAFRAME_TAG 0xA6ull
#define LUA51FRAME_TAG 0xA7ull /* a Lua 5.1 Proto (agent/core/lua51name.c) */
#define LJFRAME_TAG 0xA8ull    /* a LuaJIT 2.1 GCproto (agent/core/ljname.c) */
#define LUAFRAME_PC_BITS 11
#define LUAFRAME_PC_NONE ((1u << LUAFRAME_PC_BITS) - 1)
#define LUAFRAME_PROTO_MASK ((1ull << 45) - 1)

static inline uint64_t luaframe__tag(uintptr_t proto, unsigned int pc)
{
	if (pc > LUAFRAME_PC_NONE)
		pc = LUAFRAME_PC_NONE;
	return LUAFRAME_TAG << 56 | (uint64_t)pc << 45 | ((uint64_t)proto >> 3 & LUAFRAME_PROTO_MASK);
}

static inline bool luaframe__is(uint64_t v)
{
	return v >> 56 == LUAFRAME_TAG || v >> 56 == LUA51FRAME_TAG || v >> 56 == LJFRAME_TAG;
}

/* The profile's mapping for a Lua frame: which runtime's. */
static inline const char *luaframe__runtime(uint64_t v)
{
	return v >> 56 == LUA51FRAME_TAG ? "[lua5.1]" : v >> 56 == LJFRAME_TAG ? "[luajit]" : "[lua5.4]";
}

/*
 * Lua 5.1 frames (CONFIG_LUA51FRAMES): agent/lib/lua51frames.c tags them as above with
 * LUA51FRAME_TAG, so the writer knows which layout the Proto has; agent/core/lua51name.c names
 * them for luaname__resolve(): the Proto's type byte (LUA_TPROTO) and the pc inside its code
 * checked, "function <file:linedefined>" or "main chunk <file>", the current line from
 * lineinfo[pc] (5.1 keeps absolute lines).
 */
static inline uint64_t lua51frame__tag(uintptr_t proto, unsigned int pc)
{
	return (luaframe__tag(proto, pc) & ((1ull << 56) - 1)) | LUA51FRAME_TAG << 56;
}

/*
 * LuaJIT 2.1 frames (CONFIG_LJFRAMES): agent/lib/ljframes.c tags a GCproto with the position of
 * the instruction its frame is at (lj_debug.c's debug_framepc: the return PC's, less one);
 * agent/core/ljname.c names it "function <chunk:firstline>" or "main chunk <chunk>", the line
 * from the proto's lineinfo (lj_debug_line). Proto 0: the label of a sample in a JIT trace,
 * "[LuaJIT trace]" (agent/lib/ljframes.h: what such a sample shows).
 */
static inline uint64_t ljframe__tag(uintptr_t proto, unsigned int pos)
{
	return (luaframe__tag(proto, pos) & ((1ull << 56) - 1)) | LJFRAME_TAG << 56;
}

/* Lua 5.4's Proto and TString fields the handler and the writer read (lobject.h), one table
 * per ABI (luaname.c): the library reads its own process, so the build's pointer size picks. */
struct luaproto_layout {
	uint16_t tt, sizecode, sizelineinfo, sizeabslineinfo, linedefined;
	uint16_t code, lineinfo, abslineinfo, source, size;
	uint16_t str_tt, str_shrlen, str_lnglen, str_contents;
};

extern const struct luaproto_layout luaproto_54_lp64, luaproto_54_ilp32;

static inline const struct luaproto_layout *luaproto__54(void)
{
	return sizeof(void *) == 8 ? &luaproto_54_lp64 : &luaproto_54_ilp32;
}

/* The pointer-sized field (a pointer, size_t) at off of a Lua object's bytes b as read (copied:
 * b need not be aligned). ILP32: 4 bytes, the rest of an 8-byte Value may be stale. */
static inline uintptr_t luafield__word(const unsigned char *b, unsigned int off)
{
	uintptr_t v;

	memcpy(&v, b + off, sizeof(v));
	return v;
}

static inline int32_t luafield__int32(const unsigned char *b, unsigned int off)
{
	int32_t v;

	memcpy(&v, b + off, sizeof(v));
	return v;
}

struct luaname_stats {
	struct framename_counters names; /* the cache's */
	uint64_t resolved, unreadable, not_proto, bad_string;
};

/* A chunk name of len bytes (raw holds its first n) as Lua's messages show it (luaO_chunkid):
 * "@file" -> file, "=name" -> name, source text -> [string "its first line"]. 0 or -errno. */
int luaname__chunkid(const char *raw, size_t n, uint64_t len, char *out, size_t max);
/* out's name, file and lines for a Proto of file (as luaname__chunkid() shows it) defined at
 * start_line (0: a main chunk), at line (0: unknown); both versions' readers. */
void luaname__set(struct framename *out, const char file[FRAMENAME_MAX], int64_t start_line,
		  int64_t line);

#ifdef CONFIG_LUAFRAMES
/* Names the tagged frame v of pid: 0, or -errno (the frame stays unnamed). */
int luaname__resolve(uint32_t pid, uint64_t v, struct framename *out);
/* Names the tagged frames among frames[0..n) now, while their Protos live. */
void luaname__warm(uint32_t pid, const uint64_t *frames, unsigned int n);
/* Forgets the names read for pid (it exec'd: its Protos are others now). */
void luaname__forget(uint32_t pid);
void luaname__stats(struct luaname_stats *st);
#endif

#ifdef CONFIG_LUA51FRAMES
/* Names the Lua 5.1 frame v of pid (luaname__resolve's reader; its counters in st). */
int lua51name__read(uint32_t pid, uint64_t v, struct framename *out, struct luaname_stats *st);
#else
static inline int lua51name__read(uint32_t pid, uint64_t v, struct framename *out,
				  struct luaname_stats *st)
{
	return -95; /* -EOPNOTSUPP */
}
#endif

#ifdef CONFIG_LJFRAMES
/* Names the LuaJIT frame v of pid (luaname__resolve's reader; its counters in st). */
int ljname__read(uint32_t pid, uint64_t v, struct framename *out, struct luaname_stats *st);
#else
static inline int ljname__read(uint32_t pid, uint64_t v, struct framename *out,
			       struct luaname_stats *st)
{
	return -95; /* -EOPNOTSUPP */
}
#endif

#ifndef CONFIG_LUAFRAMES
static inline int luaname__resolve(uint32_t pid, uint64_t v, struct framename *out)
{
	return -95; /* -EOPNOTSUPP */
}
static inline void luaname__warm(uint32_t pid, const uint64_t *frames, unsigned int n)
{
}
static inline void luaname__forget(uint32_t pid)
{
}
static inline void luaname__stats(struct luaname_stats *st)
{
	*st = (struct luaname_stats){0};
}
#endif

#endif /* EDGEPROF_AGENT_LUANAME_H */
