/* SPDX-License-Identifier: MIT */
/*
 * bpf/leaf.h — the leaf frame of system-wide (BPF) samples, by the unwind rules of the
 * sampled process's files.
 *
 * The kernel walks user stacks by frame pointers: the first entry is the interrupted pc, the
 * next ones come from the chain that starts at the frame pointer register. Where the leaf
 * function has not linked its own frame into that chain — a function built without frame
 * pointers (most of Debian's libc: memcpy, strlen, the system-call wrappers), or any function
 * in its prologue or epilogue — the chain starts at the caller's frame, so the walk goes from
 * the leaf straight to the caller's caller: the leaf's caller is lost. perf -g loses it too.
 *
 * The BPF program also sends the user stack pointer, the link register (aarch64) and the
 * first CONFIG_BPF_LEAF_WORDS words of the user stack (PROFILE_OFFCPU_WORDS for an off-CPU
 * record). Here the .eh_frame rules at the leaf pc say where the leaf's return address is:
 * among those words, or in the link register. If it is not the second frame the kernel found,
 * it is the missing caller and is put back, and so are its callers, frame by frame by their
 * rules, as far as the words reach or until the walk meets the kernel's frames.
 *
 * Bounded: CONFIG_BPF_LEAF_TABLES files' tables mapped (least recently used unmapped first),
 * CONFIG_BPF_LEAF_RULES rules cached by pc, CONFIG_BPF_LEAF_INDEX_FDES FDEs indexed for a file
 * without .eh_frame_hdr (a static program). Every outcome is counted.
 */
#ifndef EDGEPROF_AGENT_LEAF_H
#define EDGEPROF_AGENT_LEAF_H

#include <stdbool.h>
#include <stdint.h>

#include "agent/core/procmaps.h"
#include "agent/core/sample.h"

struct leaf_stats {
	uint64_t fixed;	      /* the leaf's caller was missing and was put back */
	uint64_t callers;     /* ... and callers of that caller too, from the same words */
	uint64_t linked;      /* the leaf's frame was in the chain: nothing to do */
	uint64_t no_context;  /* no user registers (a system call on aarch64, a failed read) */
	uint64_t no_table;    /* the leaf's file has no usable .eh_frame (or is not readable) */
	uint64_t no_rule;     /* no FDE for the pc, or rules this reader does not follow */
	uint64_t deep;	      /* the return address lies beyond the words copied */
	uint64_t implausible; /* the word found is in no executable mapping: left as it was */
	uint64_t tables_mapped, tables_evicted, rule_hits, rule_misses;
	uint64_t fdes_indexed; /* FDEs sorted for files without .eh_frame_hdr (static programs) */
	/* samples with a copy of the user stack (a process not walked by tables in the kernel) */
	uint64_t copies;       /* walked here */
	uint64_t copies_whole; /* ... to the outermost frame */
	uint64_t copies_cut;   /* ... cut short (beyond the copy; no rule where the kernel's walk
				* got no further), kept */
	uint64_t copies_left;  /* ... left as the kernel walked them (no rule, and it got further) */
};

struct leaf;

/* Bounds: files mapped, rules cached, FDEs indexed per file without .eh_frame_hdr. */
struct leaf *leaf__new(unsigned int max_tables, unsigned int max_rules, unsigned int max_fdes);
/*
 * Drops the mapped tables' pages from the agent's RSS (they stay in the page cache, shared, and
 * come back as minor faults): at each round's end, so the unwind tables of the programs
 * sampled in a round (a compiler's are megabytes) are not charged to the agent for good.
 */
void leaf__trim(struct leaf *l);
void leaf__free(struct leaf *l); /* NULL-safe */

/*
 * When s (a sample with s->user) lost its leaf's caller, writes the completed stack into
 * frames (room for s->n_kernel + max(s->n_user + 1, max_user)) and *out (s with those
 * frames), and returns true. The user stack keeps at most max_user frames (the last one goes,
 * flagged truncated). Where s->user holds a copy of the stack (->stack), the whole user stack
 * is walked by the rules from the leaf's registers instead, as the BPF program walks a listed
 * process: unless it meets code without rules before the kernel's frame-pointer walk ends.
 */
bool leaf__fix(struct leaf *l, struct proctab *t, const struct agent_sample *s,
	       unsigned int max_user, uint64_t *frames, struct agent_sample *out);

void leaf__stats(const struct leaf *l, struct leaf_stats *st);

#endif /* EDGEPROF_AGENT_LEAF_H */
