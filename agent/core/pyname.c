// SPDX-License-Identifier: MIT
/* agent/core/pyname.c — see pyname.h. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>

#include "agent/core/pyname.h"


/*
 * CPython 3.11 (Include/cpython/code.h, unicodeobject.h; checked with ctypes on Debian 12's
 * python3.11 3.11.2 x86_64, the same on aarch64). Other versions: not in the table, so their
 * processes are sampled natively (agent/lib/pyframes.c counts them).
 */
static const struct pycode_layout layouts[] = {
    {.minor = 11, .firstlineno = 72, .filename = 112, .name = 120, .qualname = 128,
     .str_length = 16, .str_state = 32, .str_ascii_data = 48},
};

const struct pycode_layout *pycode__layout(unsigned int minor)
{
	if (sizeof(void *) != 8)
		return NULL; /* ILP32 offsets not verified on a target yet */
	for (size_t i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++)
		if (layouts[i].minor == minor)
			return &layouts[i];
	return NULL;
}

static struct framename_slot slots[CONFIG_PYNAME_CACHE];
static struct framename_cache cache = FRAMENAME_CACHE(slots);
static struct pyname_stats stats; /* under cache.lock */

static int peek(uint32_t pid, uint64_t addr, void *buf, size_t len)
{
	return framename__peek(pid, addr, buf, len);
}

static uint64_t word(const unsigned char *b, unsigned int off)
{
	uint64_t v;

	memcpy(&v, b + off, sizeof(v));
	return v;
}

/* A compact ASCII str at addr into out (printable bytes only): 0 or -errno. */
static int read_str(uint32_t pid, const struct pycode_layout *l, uint64_t addr, char *out,
		    size_t max)
{
	unsigned char h[64];
	uint64_t len;
	uint32_t state;

	if (!addr || peek(pid, addr, h, l->str_ascii_data))
		return -EFAULT;
	len = word(h, l->str_length);
	memcpy(&state, h + l->str_state, sizeof(state));
	if (!(state & 0x20) || !(state & 0x40) || len >= max) /* compact, ascii */
		return -EILSEQ;
	if (peek(pid, addr + l->str_ascii_data, out, (size_t)len))
		return -EFAULT;
	out[len] = 0;
	for (size_t i = 0; i < len; i++)
		if (out[i] < 0x20 || out[i] > 0x7e)
			return -EILSEQ;
	return 0;
}

/* Is the object at code a code object: its type's tp_name (3rd word after the header) "code"? */
static int is_code(uint32_t pid, const unsigned char *obj)
{
	uint64_t type = word(obj, 8), tp_name;
	char name[8];

	if (peek(pid, type + 24, &tp_name, sizeof(tp_name)) || peek(pid, tp_name, name, 5))
		return -EFAULT;
	return memcmp(name, "code", 5) ? -EINVAL : 0;
}

static int read_code(uint32_t pid, uint64_t v, struct framename *out)
{
	const struct pycode_layout *l = pycode__layout((unsigned int)(v >> 48 & 0xff));
	uint64_t code = v & 0xffffffffffffull;
	unsigned char obj[136];
	int32_t line;
	int err;

	if (!l) {
		stats.unknown_version++;
		return -EPROTO;
	}
	code = (code + 7) & ~7ull; /* a return address's frame was stepped back one byte */
	if (peek(pid, code, obj, sizeof(obj))) {
		stats.unreadable++;
		return -EFAULT;
	}
	err = is_code(pid, obj);
	if (err) {
		stats.not_code++;
		return err;
	}
	memcpy(&line, obj + l->firstlineno, sizeof(line));
	out->start_line = line;
	out->line = 0;
	err = read_str(pid, l, word(obj, l->qualname), out->name, sizeof(out->name));
	if (err)
		err = read_str(pid, l, word(obj, l->name), out->name, sizeof(out->name));
	if (!err && read_str(pid, l, word(obj, l->filename), out->file, sizeof(out->file)))
		out->file[0] = 0;
	if (err)
		stats.bad_string++;
	else
		stats.resolved++;
	return err;
}

int pyname__resolve(uint32_t pid, uint64_t v, struct framename *out)
{
	uint64_t code = ((v & 0xffffffffffffull) + 7) & ~7ull;

	v = (v & ~0xffffffffffffull) | code;
	return framename__resolve(&cache, pid, v, code >> 4, read_code, out);
}

void pyname__warm(uint32_t pid, const uint64_t *frames, unsigned int n)
{
	struct framename tmp;

	for (unsigned int i = 0; i < n; i++)
		if (pyframe__is(frames[i]))
			pyname__resolve(pid, frames[i], &tmp);
}

void pyname__forget(uint32_t pid)
{
	framename__forget(&cache, pid);
}

void pyname__stats(struct pyname_stats *st)
{
	pthread_mutex_lock(&cache.lock);
	*st = stats;
	st->cached = cache.cached;
	pthread_mutex_unlock(&cache.lock);
}
