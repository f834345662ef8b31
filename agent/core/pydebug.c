// SPDX-License-Identifier: MIT
/* agent/core/pydebug.c — see pydebug.h. */
#include <errno.h>
#include <string.h>

#include "agent/core/pydebug.h"
#include "agent/core/pyname.h"

/* 3.13's groups, as u64 words after the cookie (Include/internal/pycore_runtime.h) */
enum {
	W_VERSION = 0, W_FREE_THREADED = 1,
	W_RT = 2,	/* size, finalizing, interpreters_head */
	W_INTERP = 5,	/* size, id, next, threads_head, ... (13 words) */
	W_TSTATE = 18,	/* size, prev, next, interp, current_frame, thread_id, native_thread_id,
			 * datastack_chunk, status */
	W_FRAME = 27,	/* size, previous, executable, instr_ptr, localsplus, owner */
	W_CODE = 33,	/* size, filename, name, qualname, linetable, firstlineno, argcount,
			 * localsplusnames, localspluskinds, co_code_adaptive */
	W_BYTES = 63,	/* size, ob_size, ob_sval */
	W_UNICODE = 66, /* size, state, length, asciiobject_size */
	W_COUNT = 72,
};

#define PTR sizeof(void *)
#define FRAME_READ_MAX 128 /* the walkers read a frame's header in one copy of this */

struct group {
	const uint64_t *w; /* w[0]: the structure's size */
	int err;
};

/* Field i of the group, width bytes wide: inside the structure and below 64 KiB. */
static uint16_t field(struct group *g, unsigned int i, uint64_t width)
{
	uint64_t off = g->w[i];

	if (off > UINT16_MAX || off + width > g->w[0]) {
		g->err = -EINVAL;
		return 0;
	}
	return (uint16_t)off;
}

static int parse_state(const uint64_t *w, struct pydebug_offsets *o)
{
	struct group rt = {w + W_RT, 0}, in = {w + W_INTERP, 0}, ts = {w + W_TSTATE, 0};

	o->rt_interpreters_head = field(&rt, 2, PTR);
	o->interp_next = field(&in, 2, PTR);
	o->interp_threads_head = field(&in, 3, PTR);
	o->tstate_next = field(&ts, 2, PTR);
	o->tstate_current_frame = field(&ts, 4, PTR);
	o->tstate_thread_id = field(&ts, 5, sizeof(unsigned long));
	o->tstate_native_thread_id = field(&ts, 6, sizeof(uint32_t));
	/* datastack_chunk, datastack_top, datastack_limit: three pointers (cpython/pystate.h) */
	o->tstate_datastack_chunk = field(&ts, 7, 3 * PTR);
	return rt.err ? rt.err : in.err ? in.err : ts.err;
}

static int parse_frame(const uint64_t *w, struct pydebug_offsets *o)
{
	struct group f = {w + W_FRAME, 0};

	if (w[W_FRAME] > FRAME_READ_MAX)
		return -EINVAL;
	o->f_size = (uint16_t)w[W_FRAME];
	o->f_previous = field(&f, 1, PTR);
	o->f_executable = field(&f, 2, PTR);
	o->f_instr_ptr = field(&f, 3, PTR);
	o->f_owner = field(&f, 5, 1);
	return f.err;
}

static int parse_objects(const uint64_t *w, struct pydebug_offsets *o)
{
	struct group c = {w + W_CODE, 0}, b = {w + W_BYTES, 0}, u = {w + W_UNICODE, 0};

	o->code_filename = field(&c, 1, PTR);
	o->code_name = field(&c, 2, PTR);
	o->code_qualname = field(&c, 3, PTR);
	o->code_linetable = field(&c, 4, PTR);
	o->code_firstlineno = field(&c, 5, sizeof(int));
	o->code_adaptive = field(&c, 9, 0); /* the bytecode: its array ends the header */
	o->bytes_size = field(&b, 1, PTR);
	o->bytes_data = field(&b, 2, 1);
	o->str_state = field(&u, 1, sizeof(uint32_t));
	o->str_length = field(&u, 2, PTR);
	o->str_ascii_data = (uint16_t)(w[W_UNICODE + 3] <= UINT16_MAX ? w[W_UNICODE + 3] : 0);
	return c.err ? c.err : b.err ? b.err : u.err;
}

/* The writer (pyname.c) names frames from its own table: it must be the interpreter's. */
static bool writer_agrees(const struct pydebug_offsets *o)
{
	const struct pycode_layout *l = pycode__layout(o->minor);

	return l && l->firstlineno == o->code_firstlineno && l->filename == o->code_filename &&
	       l->name == o->code_name && l->qualname == o->code_qualname &&
	       l->linetable == o->code_linetable && l->code_adaptive == o->code_adaptive &&
	       l->str_length == o->str_length && l->str_state == o->str_state &&
	       l->str_ascii_data == o->str_ascii_data && l->bytes_size == o->bytes_size &&
	       l->bytes_data == o->bytes_data;
}

int pydebug__parse(const void *head, size_t len, struct pydebug_offsets *out)
{
	uint64_t w[W_COUNT];
	struct pydebug_offsets o = {0};
	int err;

	if (len < PYDEBUG_BYTES || memcmp(head, "xdebugpy", 8))
		return -ENOENT;
	memcpy(w, (const unsigned char *)head + 8, sizeof(w));
	if (w[W_VERSION] >> 24 != 3 || (w[W_VERSION] >> 16 & 0xff) != 13 || w[W_FREE_THREADED])
		return -EPROTO;
	o.minor = 13;
	err = parse_state(w, &o);
	if (!err)
		err = parse_frame(w, &o);
	if (!err)
		err = parse_objects(w, &o);
	if (!err && !writer_agrees(&o))
		err = -EINVAL;
	if (!err)
		*out = o;
	return err;
}
