// SPDX-License-Identifier: MIT
/*
 * tests/offsets/py313.c — prints the CPython 3.13 offsets agent/core/pyname.c keeps in its
 * per-ABI table (the code object, str and bytes fields the name writer reads), and the ones the
 * in-process walker takes from the interpreter's own _Py_DebugOffsets (to compare with what a
 * run prints), from the interpreter's own headers (internal ones included: Py_BUILD_CORE). Not
 * part of the build: run it when a table is added or checked.
 *
 *   armhf (trixie's 3.13.5, through tools/setup.sh's private apt set-up, build/apt-trixie):
 *     apt-get -o Dir::Etc::SourceList=build/apt-trixie/sources-armhf.list \
 *       -o Dir::Etc::SourceParts=/dev/null -o Dir::State::Lists=build/apt-trixie/lists \
 *       -o Dir::Cache=build/apt-trixie/cache -o APT::Architectures::=armhf \
 *       download libpython3.13-dev:armhf python3.13-dev:armhf
 *     for f in *.deb; do dpkg -x $f d; done
 *     arm-linux-gnueabihf-gcc -I d/usr/include -I d/usr/include/arm-linux-gnueabihf/python3.13 \
 *       -I d/usr/include/python3.13 -o py313-ilp32 tests/offsets/py313.c
 *     qemu-arm -L /usr/arm-linux-gnueabihf ./py313-ilp32
 *   LP64: the same with :amd64 (or :arm64) and gcc (aarch64-linux-gnu-gcc, qemu-aarch64).
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
	/* pyname.c's row */
	P(PyCodeObject, co_firstlineno); P(PyCodeObject, co_filename); P(PyCodeObject, co_name);
	P(PyCodeObject, co_qualname); P(PyCodeObject, co_linetable);
	P(PyCodeObject, co_code_adaptive);
	P(PyASCIIObject, length); P(PyASCIIObject, state); S(PyASCIIObject);
	P(PyBytesObject, ob_base.ob_size); P(PyBytesObject, ob_sval);
	P(PyObject, ob_type); P(PyTypeObject, tp_name); P(PyTypeObject, tp_basicsize);
	/* what _Py_DebugOffsets gives the walker */
	P(_PyRuntimeState, interpreters.head); P(PyInterpreterState, next);
	P(PyInterpreterState, threads.head); P(PyThreadState, next);
	P(PyThreadState, current_frame); P(PyThreadState, thread_id);
	P(PyThreadState, native_thread_id); P(PyThreadState, datastack_chunk);
	P(PyThreadState, datastack_limit); S(PyThreadState);
	P(_PyInterpreterFrame, f_executable); P(_PyInterpreterFrame, previous);
	P(_PyInterpreterFrame, instr_ptr); P(_PyInterpreterFrame, owner);
	S(_PyInterpreterFrame); S(_Py_DebugOffsets);
	P(_PyStackChunk, previous); P(_PyStackChunk, size);
	return 0;
}
