// SPDX-License-Identifier: MIT
/* agent/core/pyname.c — see pyname.h. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>

#include "agent/core/pyline.h"
#include "agent/core/pyname.h"


/*
 * CPython 3.11 (Include/cpython/code.h, unicodeobject.h, bytesobject.h), per ABI (ptr: the
 * pointer size; the reader's own, as its target's: libedgeprof.so reads its own process, the
 * BPF agent the host's): offsetof() compiled by tests/offsets/py311.c against Debian 12's
 * python3.11-dev headers, LP64 with gcc (x86_64; checked with ctypes on 3.11.2 x86_64 and
 * aarch64), ILP32 with arm-linux-gnueabihf-gcc (armhf pyconfig.h) run under qemu-arm. 3.13
 * LP64 (the same headers of 3.13.5) and ILP32 (tests/offsets/py313.c against Debian 13's armhf
 * libpython3.13-dev, run under qemu-arm; the same numbers as the armhf python3.13's own
 * _Py_DebugOffsets). The samplers check a 3.13 row against the interpreter's _Py_DebugOffsets
 * before they splice its frames (agent/core/pydebug.h). Other versions: not in the table, so
 * their processes are sampled natively (agent/lib/pyframes.c counts them).
 */
static const struct pycode_layout layouts[] = {
    {.minor = 11, .ptr = 8, .firstlineno = 72, .filename = 112, .name = 120, .qualname = 128,
     .linetable = 136, .code_adaptive = 184, .str_length = 16, .str_state = 32,
     .str_ascii_data = 48, .bytes_size = 16, .bytes_data = 32},
    {.minor = 11, .ptr = 4, .firstlineno = 48, .filename = 80, .name = 84, .qualname = 88,
     .linetable = 92, .code_adaptive = 116, .str_length = 8, .str_state = 16,
     .str_ascii_data = 24, .bytes_size = 8, .bytes_data = 16},
    {.minor = 13, .ptr = 8, .firstlineno = 68, .filename = 112, .name = 120, .qualname = 128,
     .linetable = 136, .code_adaptive = 200, .str_length = 16, .str_state = 32,
     .str_ascii_data = 40, .bytes_size = 16, .bytes_data = 32},
    {.minor = 13, .ptr = 4, .firstlineno = 44, .filename = 80, .name = 84, .qualname = 88,
     .linetable = 92, .code_adaptive = 124, .str_length = 8, .str_state = 16,
     .str_ascii_data = 20, .bytes_size = 8, .bytes_data = 16},
};

/* PyObject's ob_type; PyTypeObject's tp_name, tp_basicsize right after it (object.h): the
 * object header's words, after ob_refcnt (and ob_size in a type object) */
#define OB_TYPE sizeof(uintptr_t)
#define TP_NAME (3 * sizeof(uintptr_t))

const struct pycode_layout *pycode__layout(unsigned int minor)
{
	for (size_t i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++)
		if (layouts[i].minor == minor && layouts[i].ptr == sizeof(void *))
			return &layouts[i];
	return NULL;
}

/* The version whose bytecode starts at basicsize (PyCode_Type.tp_basicsize), or NULL. */
static const struct pycode_layout *layout_of_size(uint64_t basicsize)
{
	for (size_t i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++)
		if (layouts[i].code_adaptive == basicsize && layouts[i].ptr == sizeof(void *))
			return pycode__layout(layouts[i].minor);
	return NULL;
}

static struct framename_text texts[CONFIG_PYNAME_CACHE];
static struct framename_entry fns[CONFIG_PYNAME_FUNCS];
static struct framename_entry lines[CONFIG_PYNAME_LINES];
/* A location table read (under the cache's lock): its first CONFIG_PYLINE_TABLE_BYTES. */
static uint8_t table[CONFIG_PYLINE_TABLE_BYTES];
static struct framename_cache cache = FRAMENAME_CACHE_LINES(texts, fns, lines);
static struct pyname_stats stats; /* under cache.lock */

static int peek(uint32_t pid, uint64_t addr, void *buf, size_t len)
{
	return framename__peek(pid, addr, buf, len);
}

/* A pointer-sized field (a pointer, Py_ssize_t) of an object's bytes b as read. */
static uintptr_t word(const unsigned char *b, unsigned int off)
{
	uintptr_t v;

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

/*
 * The layout of the code object obj (its header read): its type's tp_name (3rd word after the
 * header) is "code" and its tp_basicsize (4th) a version's we know. NULL: *err says why.
 */
static const struct pycode_layout *code_layout(uint32_t pid, const unsigned char *obj, int *err)
{
	uintptr_t type = word(obj, OB_TYPE), head[2];
	const struct pycode_layout *l;
	char name[8];

	if (peek(pid, type + TP_NAME, head, sizeof(head)) || peek(pid, head[0], name, 5)) {
		*err = -EFAULT;
		stats.not_code++;
		return NULL;
	}
	if (memcmp(name, "code", 5)) {
		*err = -EINVAL;
		stats.not_code++;
		return NULL;
	}
	l = layout_of_size(head[1]);
	if (!l) {
		*err = -EPROTO;
		stats.unknown_version++;
	}
	return l;
}

/* Is the object at addr a bytes object: its type's tp_name "bytes"? */
static bool is_bytes(uint32_t pid, uint64_t addr)
{
	uintptr_t type, tp_name;
	char name[8];

	return !peek(pid, addr + OB_TYPE, &type, sizeof(type)) &&
	       !peek(pid, type + TP_NAME, &tp_name, sizeof(tp_name)) && !peek(pid, tp_name, name, 6) &&
	       !memcmp(name, "bytes", 6);
}

/*
 * The line of unit1 (pyname.h) in the code object obj: its first line when the unit is not
 * known, or its table cannot be read (counted).
 */
static int64_t unit_line(uint32_t pid, const struct pycode_layout *l, const unsigned char *obj,
			 unsigned int unit1, int32_t first)
{
	uintptr_t lt = word(obj, l->linetable), size = 0;
	int32_t line;
	size_t len;
	int err;

	if (!unit1)
		return first; /* not started: CPython's own answer */
	if (unit1 == PYFRAME_UNIT_FAR) {
		stats.line_far++;
		return first;
	}
	if (!lt || !is_bytes(pid, lt) || peek(pid, lt + l->bytes_size, &size, sizeof(size))) {
		stats.line_bad++;
		return first;
	}
	len = size < sizeof(table) ? (size_t)size : sizeof(table);
	if (peek(pid, lt + l->bytes_data, table, len)) {
		stats.line_bad++;
		return first;
	}
	err = pyline__decode(table, len, first, unit1 - 1, &line);
	if (!err)
		stats.lines++;
	else if (err == -ENOENT)
		stats.line_none++;
	else if (err == -ERANGE && size > len)
		stats.line_cut++;
	else
		stats.line_bad++; /* malformed, or ended before the unit's entry */
	return line;
}

static int read_code(uint32_t pid, uint64_t v, struct framename *out)
{
	const struct pycode_layout *l;
	uint64_t code = pyframe__code(v);
	unsigned char obj[192];
	int32_t first;
	int err = 0;

	if (peek(pid, code, obj, sizeof(obj))) {
		stats.unreadable++;
		return -EFAULT;
	}
	l = code_layout(pid, obj, &err);
	if (!l)
		return err;
	memcpy(&first, obj + l->firstlineno, sizeof(first));
	out->start_line = first;
	err = read_str(pid, l, word(obj, l->qualname), out->name, sizeof(out->name));
	if (err)
		err = read_str(pid, l, word(obj, l->name), out->name, sizeof(out->name));
	if (!err && read_str(pid, l, word(obj, l->filename), out->file, sizeof(out->file)))
		out->file[0] = 0;
	if (err) {
		stats.bad_string++;
		return err;
	}
	stats.resolved++;
	out->line = unit_line(pid, l, obj, pyframe__unit1(v), first);
	return 0;
}

/* The function of word v: its code object, without the unit. */
static uint64_t function_of(uint64_t v)
{
	return v & ~((uint64_t)PYFRAME_UNIT_FAR << 45);
}

int pyname__resolve(uint32_t pid, uint64_t v, struct framename *out)
{
	return framename__resolve(&cache, pid, v, function_of(v), read_code, out);
}

void pyname__warm(uint32_t pid, const uint64_t *frames, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++)
		if (pyframe__is(frames[i]))
			framename__pin(&cache, pid, frames[i], function_of(frames[i]), read_code);
}

void pyname__forget(uint32_t pid)
{
	framename__forget(&cache, pid);
}

void pyname__stats(struct pyname_stats *st)
{
	pthread_mutex_lock(&cache.lock);
	*st = stats;
	pthread_mutex_unlock(&cache.lock);
	framename__counters(&cache, &st->names);
}
