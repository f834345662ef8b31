/* SPDX-License-Identifier: MIT */
/*
 * agent/core/pydebug.h — CPython 3.13's own offsets (_Py_DebugOffsets), for both samplers.
 *
 * From 3.13 the interpreter describes its structures to out-of-process readers: _PyRuntime
 * starts with _Py_DebugOffsets (Include/internal/pycore_runtime.h): the cookie "xdebugpy",
 * the version (PY_VERSION_HEX), free_threaded, then groups of u64 offsets, each led by the
 * size of the structure it describes. The caller copies PYDEBUG_BYTES from &_PyRuntime (its
 * own, or a target's through /proc/PID/mem) and pydebug__parse() checks and keeps what the
 * frame walkers and the names need. The table's own layout is stable within one minor only
 * (the header says so; 3.14 adds groups): the parser knows 3.13's, and refuses others.
 * Checked: every offset lies inside its structure (with room for the field read there), each
 * size is below a bound the walkers can read, and the code-object and string offsets match
 * the writer's table (agent/core/pyname.h): a mismatch refuses the interpreter (it is then
 * profiled natively) instead of naming frames from the wrong fields.
 */
#ifndef EDGEPROF_AGENT_PYDEBUG_H
#define EDGEPROF_AGENT_PYDEBUG_H

#include <stddef.h>
#include <stdint.h>

#define PYDEBUG_BYTES 584 /* 3.13's _Py_DebugOffsets: 8 + 72 u64 */

struct pydebug_offsets {
	unsigned int minor;
	uint16_t rt_interpreters_head;		   /* in _PyRuntimeState */
	uint16_t interp_next, interp_threads_head; /* in PyInterpreterState */
	uint16_t tstate_next, tstate_current_frame, tstate_thread_id, tstate_datastack_chunk;
	uint16_t tstate_native_thread_id; /* the kernel's tid (the BPF walker's key) */
	uint16_t f_size, f_previous, f_executable, f_instr_ptr, f_owner; /* _PyInterpreterFrame */
	uint16_t code_firstlineno, code_filename, code_name, code_qualname, code_linetable;
	uint16_t code_adaptive;			     /* co_code_adaptive: the bytecode */
	uint16_t str_length, str_state, str_ascii_data; /* PyASCIIObject */
	uint16_t bytes_size, bytes_data;		     /* PyBytesObject */
};

/*
 * head: the first len bytes of _PyRuntime. 0 and *out filled, or -ENOENT (no cookie: not
 * 3.13+, or not _PyRuntime), -EPROTO (a version or build whose table this parser does not
 * know: not 3.13, or free-threaded), -EINVAL (an offset or size out of bounds, or not the
 * writer's code-object layout).
 */
int pydebug__parse(const void *head, size_t len, struct pydebug_offsets *out);

#endif /* EDGEPROF_AGENT_PYDEBUG_H */
