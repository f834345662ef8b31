// SPDX-License-Identifier: MIT
/*
 * tests/offsets/py311.c — prints the CPython 3.11 offsets agent/lib/pyframes.c and
 * agent/core/pyname.c keep in their per-ABI tables, from the interpreter's own headers
 * (internal ones included: Py_BUILD_CORE). Not part of the build: run it when a table is added
 * or checked.
 *
 *   LP64: gcc -I /usr/include/python3.11 -I /usr/include/x86_64-linux-gnu/python3.11 \
 *           -o py311-lp64 tests/offsets/py311.c && ./py311-lp64           (python3.11-dev)
 *   armhf: apt-get download libpython3.11-dev:armhf && dpkg -x libpython3.11-dev_*.deb d
 *          arm-linux-gnueabihf-gcc -I d/usr/include -I d/usr/include/arm-linux-gnueabihf/python3.11 \
 *           -I d/usr/include/python3.11 -o py311-ilp32 tests/offsets/py311.c
 *          qemu-arm -L /usr/arm-linux-gnueabihf ./py311-ilp32
 * _PyRuntimeState's autoTSSkey depends on the libc's pthread_mutex_t: the target's headers.
 */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <stddef.h>
#include <stdio.h>
#include "internal/pycore_frame.h"
#include "internal/pycore_runtime.h"
#define P(s, f) printf("%-40s %zu\n", #s "." #f, offsetof(s, f))
#define S(s) printf("%-40s %zu\n", "sizeof " #s, sizeof(s))
int main(void)
{
	P(_PyRuntimeState, gilstate.autoTSSkey); P(_PyRuntimeState, gilstate.autoTSSkey._key);
	P(PyThreadState, cframe); P(_PyCFrame, current_frame);
	P(_PyInterpreterFrame, f_code); P(_PyInterpreterFrame, previous); P(_PyInterpreterFrame, prev_instr);
	P(_PyInterpreterFrame, is_entry); S(_PyInterpreterFrame); P(_PyInterpreterFrame, localsplus);
	P(PyCodeObject, co_code_adaptive); P(PyThreadState, datastack_chunk); P(PyThreadState, datastack_limit);
	P(PyThreadState, thread_id);
	P(PyCodeObject, co_firstlineno); P(PyCodeObject, co_filename); P(PyCodeObject, co_name);
	P(PyCodeObject, co_qualname); P(PyCodeObject, co_linetable);
	P(PyASCIIObject, length); P(PyASCIIObject, state); S(PyASCIIObject);
	P(PyBytesObject, ob_base.ob_size); P(PyBytesObject, ob_sval);
	P(PyObject, ob_type); P(PyTypeObject, tp_name); P(PyTypeObject, tp_basicsize);
	P(_PyStackChunk, previous); P(_PyStackChunk, size);
	return 0;
}
