// SPDX-License-Identifier: MIT
/* agent/core/luaname.c — see luaname.h. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>

#include "agent/core/luaname.h"

/*
 * Lua 5.4.0-5.4.8 (lobject.h): offsetof() of Debian's 5.4.4 sources compiled by
 * tests/offsets/lua54.c, LP64 with gcc (x86_64; the same on aarch64), ILP32 with
 * arm-linux-gnueabihf-gcc and run under qemu-arm. size: the bytes read, up to source.
 */
const struct luaproto_layout luaproto_54_lp64 = {
    .tt = 8, .sizecode = 24, .sizelineinfo = 28, .sizeabslineinfo = 40, .linedefined = 44,
    .code = 64, .lineinfo = 88, .abslineinfo = 96, .source = 112, .size = 120,
    .str_tt = 8, .str_shrlen = 11, .str_lnglen = 16, .str_contents = 24,
};
const struct luaproto_layout luaproto_54_ilp32 = {
    .tt = 4, .sizecode = 20, .sizelineinfo = 24, .sizeabslineinfo = 36, .linedefined = 40,
    .code = 52, .lineinfo = 64, .abslineinfo = 68, .source = 76, .size = 80,
    .str_tt = 4, .str_shrlen = 7, .str_lnglen = 12, .str_contents = 16,
};

#define LUA_VPROTO 10
#define LUA_VSHRSTR 4
#define LUA_VLNGSTR 20
#define MAXIWTHABS 128 /* ldebug.c: an absolute line at least every 128 instructions */

static struct framename_text texts[CONFIG_LUANAME_CACHE];
static struct framename_entry fns[CONFIG_LUANAME_FUNCS];
static struct framename_entry lines[CONFIG_LUANAME_LINES];
static struct framename_cache cache = FRAMENAME_CACHE_LINES(texts, fns, lines);
static struct luaname_stats stats; /* under cache.lock */

static int peek(uint32_t pid, uint64_t addr, void *buf, size_t len)
{
	return framename__peek(pid, addr, buf, len);
}

int luaname__chunkid(const char *raw, size_t n, uint64_t len, char *out, size_t max)
{
	if (!n)
		return -EFAULT;
	if (raw[0] == '@' || raw[0] == '=') {
		if (len >= max || n < len)
			return -ENAMETOOLONG;
		for (size_t i = 1; i < n; i++)
			if (raw[i] < 0x20 || raw[i] > 0x7e)
				return -EILSEQ;
		memcpy(out, raw + 1, n - 1);
		out[n - 1] = 0;
		return 0;
	}
	n = strcspn(raw, "\r\n");
	snprintf(out, max, "[string \"%.*s%s\"]", (int)(n < 40 ? n : 40), raw,
		 n < 40 && n == len ? "" : "...");
	for (size_t i = 0; out[i]; i++)
		if ((unsigned char)out[i] < 0x20 || (unsigned char)out[i] > 0x7e)
			out[i] = '?';
	return 0;
}

void luaname__set(struct framename *out, const char file[FRAMENAME_MAX], int64_t start_line,
		  int64_t line)
{
	out->start_line = start_line;
	out->line = line;
	memcpy(out->file, file, sizeof(out->file));
	if (start_line)
		snprintf(out->name, sizeof(out->name), "function <%.100s:%lld>", file,
			 (long long)start_line);
	else
		snprintf(out->name, sizeof(out->name), "main chunk <%.100s>", file);
}

/* The chunk name at addr (a 5.4 TString), as luaname__chunkid() shows it. */
static int read_source(uint32_t pid, uint64_t addr, char *out, size_t max)
{
	const struct luaproto_layout *l = luaproto__54();
	unsigned char h[32];
	char raw[FRAMENAME_MAX];
	uint64_t len;
	size_t n;

	if (peek(pid, addr, h, l->str_contents))
		return -EFAULT;
	if (h[l->str_tt] == LUA_VSHRSTR)
		len = h[l->str_shrlen];
	else if (h[l->str_tt] == LUA_VLNGSTR)
		len = luafield__word(h, l->str_lnglen);
	else
		return -EILSEQ;
	n = len < sizeof(raw) - 1 ? (size_t)len : sizeof(raw) - 1;
	if (!n || peek(pid, addr + l->str_contents, raw, n))
		return -EFAULT;
	raw[n] = 0;
	return luaname__chunkid(raw, n, len, out, max);
}

/* luaG_getfuncline(): the last absolute line at or before pc, plus the byte deltas after it. */
static int64_t read_line(uint32_t pid, const unsigned char *p, unsigned int pc)
{
	const struct luaproto_layout *l = luaproto__54();
	int32_t nabs = luafield__int32(p, l->sizeabslineinfo);
	int32_t nline = luafield__int32(p, l->sizelineinfo);
	int32_t abs[2 * (LUAFRAME_PC_NONE / MAXIWTHABS + 2)];
	signed char delta[LUAFRAME_PC_NONE + 1];
	int64_t line = luafield__int32(p, l->linedefined);
	int basepc = -1, want;

	if (!luafield__word(p, l->lineinfo) || (int32_t)pc >= nline)
		return 0;
	want = nabs < (int32_t)(pc / MAXIWTHABS + 2) ? nabs : (int32_t)(pc / MAXIWTHABS + 2);
	if (want > 0 && peek(pid, luafield__word(p, l->abslineinfo), abs, (size_t)want * 8))
		return 0;
	for (int i = 0; i < want && abs[2 * i] <= (int32_t)pc; i++) {
		basepc = abs[2 * i];
		line = abs[2 * i + 1];
	}
	if (peek(pid, luafield__word(p, l->lineinfo), delta, pc + 1))
		return 0;
	while (basepc++ < (int)pc)
		line += delta[basepc];
	return line > 0 ? line : 0;
}

static int read_proto(uint32_t pid, uint64_t v, struct framename *out)
{
	const struct luaproto_layout *l = luaproto__54();
	uint64_t proto = (v & LUAFRAME_PROTO_MASK) << 3;
	unsigned int pc = (unsigned int)(v >> 45) & LUAFRAME_PC_NONE;
	unsigned char p[128];
	char file[FRAMENAME_MAX];
	int err;

	if (v >> 56 == LUA51FRAME_TAG)
		return lua51name__read(pid, v, out, &stats);
	if (v >> 56 == LJFRAME_TAG)
		return ljname__read(pid, v, out, &stats);
	if (peek(pid, proto, p, l->size)) {
		stats.unreadable++;
		return -EFAULT;
	}
	if (p[l->tt] != LUA_VPROTO || luafield__int32(p, l->sizecode) <= 0 ||
	    (pc != LUAFRAME_PC_NONE && (int32_t)pc >= luafield__int32(p, l->sizecode))) {
		stats.not_proto++;
		return -EINVAL;
	}
	err = read_source(pid, luafield__word(p, l->source), file, sizeof(file));
	if (err) {
		stats.bad_string++;
		return err;
	}
	luaname__set(out, file, luafield__int32(p, l->linedefined),
		     pc == LUAFRAME_PC_NONE ? 0 : read_line(pid, p, pc));
	stats.resolved++;
	return 0;
}

/* The function of word v: its Proto (5.4, 5.1, LuaJIT alike), without the pc. */
static uint64_t function_of(uint64_t v)
{
	return v & ~((uint64_t)LUAFRAME_PC_NONE << 45);
}

int luaname__resolve(uint32_t pid, uint64_t v, struct framename *out)
{
	return framename__resolve(&cache, pid, v, function_of(v), read_proto, out);
}

void luaname__warm(uint32_t pid, const uint64_t *frames, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++)
		if (luaframe__is(frames[i]))
			framename__pin(&cache, pid, frames[i], function_of(frames[i]), read_proto);
}

void luaname__forget(uint32_t pid)
{
	framename__forget(&cache, pid);
}

void luaname__stats(struct luaname_stats *st)
{
	pthread_mutex_lock(&cache.lock);
	*st = stats;
	pthread_mutex_unlock(&cache.lock);
	framename__counters(&cache, &st->names);
}
