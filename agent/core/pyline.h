/* SPDX-License-Identifier: MIT */
/*
 * agent/core/pyline.h — the line a CPython 3.11 frame executes, from its code object's
 * location table (co_linetable; CPython's Objects/locations.md, InternalDocs/code_objects.md).
 *
 * The table is a run of entries, one per range of code units. An entry's first byte is
 * 1CCCCLLL: bit 7 set (no other byte of the table has it), the form C, the range's length
 * L + 1 code units. Its line is the previous entry's (co_firstlineno before the first) plus a
 * delta: 0 in the short forms (C 0-9, one more byte), C - 10 in the one-line forms (10-12,
 * two more bytes), a signed varint in the no-column (13) and long (14, then three varints)
 * forms; 15 has no location. Varints are 6-bit chunks, least significant first, bit 6 set
 * on all but the last; a signed one keeps its sign in bit 0.
 *
 * Pure and bounded by the table's length (the caller's buffer): libedgeprof.so's writer and
 * the agent share it. Nothing is trusted: a byte out of place stops the walk.
 */
#ifndef EDGEPROF_AGENT_PYLINE_H
#define EDGEPROF_AGENT_PYLINE_H

#include <stddef.h>
#include <stdint.h>

/*
 * The line of code unit `unit` (from co_code_adaptive's start) in table[0..len), the lines
 * counted from first (co_firstlineno): 0 and *line; else *line = first and
 *   -ENOENT  the unit's entry has no location (form 15),
 *   -ERANGE  the table ends before the unit's entry (or inside one: a cut copy),
 *   -EILSEQ  the table is malformed (a byte out of place, a line out of range).
 */
int pyline__decode(const uint8_t *table, size_t len, int32_t first, uint32_t unit, int32_t *line);

#endif /* EDGEPROF_AGENT_PYLINE_H */
