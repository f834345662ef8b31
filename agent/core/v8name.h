/* SPDX-License-Identifier: MIT */
/*
 * agent/core/v8name.h — V8 JavaScript frames in a sample, and their names (CONFIG_BPF_V8).
 *
 * The BPF sampler's splice (bpf/v8.h) puts a JavaScript frame into a sample's user frames as a
 * tagged word: 0xA8 in bits 63..56 (never a user address: x86_64 and arm64 user space is
 * below 2^48), the index of its V8 layout (v8name__layout()) in bits 55..54, the frame's
 * SharedFunctionInfo (untagged) / 8 in bits 44..0.
 *
 * The profile writer names it from the process's memory (process_vm_readv) after checking the
 * object is a SharedFunctionInfo (its Map's instance type): the function's name from
 * name_or_scope_info (a String, or a ScopeInfo whose first String after its context locals is
 * the name, as the OpenTelemetry profiler reads it: ScopeInfo's layout has no postmortem
 * symbols), "<anonymous>" when it has none; the file from script_or_debug_info, a Script,
 * and its name (a String; none when the function is being debugged: a DebugInfo). Strings:
 * sequential one- and two-byte (non-ASCII shown as '?'), cons and thin ones, FRAMENAME_MAX
 * bytes at most. The function's first line: its start position (the ScopeInfo's first two
 * increasing Smis after the name, OTel's heuristic again) in its script's line_ends, or, where
 * V8 has not made them (it does when it first needs a line), counted in the script's one-byte
 * source (1 MiB of it at most; else 0, unknown: counted as not in lines). Not the frame's
 * current line: that needs the bytecode's or the code's source position table (left out).
 *
 * Names are cached by (pid, word) in CONFIG_V8NAME_CACHE slots (agent/core/framename.h),
 * filled while the process runs (v8name__warm, at the sample's drain): V8's collector moves
 * objects (a compaction of old space moves SharedFunctionInfos), so an address names the
 * object the sample saw only for a while. A name is read once, milliseconds after the
 * sample; an SFI moved later keeps its name under its old address, and another SFI moved to
 * that address would be shown under the first one's name until the pid's names are
 * forgotten (exec) or the slot is evicted (counted nowhere: compaction of code-space
 * metadata is rare in a steady service, and not measured here).
 */
#ifndef EDGEPROF_AGENT_V8NAME_H
#define EDGEPROF_AGENT_V8NAME_H

#include <stdbool.h>
#include <stdint.h>

#include "agent/core/framename.h"

#define V8FRAME_TAG 0xA9ull /* after Python's 0xA5 and Lua's 0xA6-0xA8 (output.c asserts they differ) */
#define V8FRAME_SFI_MASK ((1ull << 45) - 1)
#define V8NAME_LAYOUTS 4

static inline uint64_t v8frame__tag(unsigned int layout, uint64_t sfi)
{
	return V8FRAME_TAG << 56 | (uint64_t)(layout & 3) << 54 | (sfi >> 3 & V8FRAME_SFI_MASK);
}

static inline bool v8frame__is(uint64_t v)
{
	return v >> 56 == V8FRAME_TAG;
}

/* What the writer reads, from one V8 build's v8dbg_* symbols (bpf/v8.c). */
struct v8name_layout {
	uint16_t type_sfi, type_scope_info, type_script, first_nonstring_type;
	uint16_t off_map, off_instance_type;	     /* HeapObject::map, Map::instance_type */
	uint16_t sfi_name_or_scope_info, sfi_script; /* in SharedFunctionInfo */
	uint16_t script_name;			     /* in Script */
	uint16_t string_length, seq_one_chars, seq_two_chars;
	uint16_t cons_first, cons_second, thin_actual;
	uint16_t repr_mask, encoding_mask, seq_tag, cons_tag, thin_tag, one_byte_tag;
	uint16_t scope_first_vars, scope_ncontext_locals;    /* ScopeInfo slot indexes */
	uint16_t type_fixed_array, fixed_length, fixed_data; /* FixedArray: Script::line_ends */
	uint16_t script_source, script_line_ends;
};

struct v8name_stats {
	struct framename_counters names; /* the cache's */
	uint64_t resolved, unreadable, not_sfi, bad_layout, no_name, no_file, lines;
};

#ifdef CONFIG_BPF_V8
/* The index of layout l among the known ones (an equal one's), or -ENOSPC. */
int v8name__layout(const struct v8name_layout *l);
/* Forgets the names read for pid (it exec'd). */
void v8name__forget(uint32_t pid);
/* Names the tagged frame v of pid: 0, or -errno (the frame stays unnamed). */
int v8name__resolve(uint32_t pid, uint64_t v, struct framename *out);
/* Names the tagged frames among frames[0..n) now, while their objects are where they were. */
void v8name__warm(uint32_t pid, const uint64_t *frames, unsigned int n);
void v8name__stats(struct v8name_stats *st);
#endif /* CONFIG_BPF_V8 */

#endif /* EDGEPROF_AGENT_V8NAME_H */
