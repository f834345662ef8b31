/* SPDX-License-Identifier: MIT */
/*
 * pprof/view/tree.h — the folded-stack tree (a call tree: one node per distinct path from the
 * root) behind `folded`, `flame` and `diff`, free of I/O apart from ftree__folded() writing to a
 * FILE * the caller chose (open_memstream() for a buffer).
 *
 * Each node carries two value slots so that a differential graph holds a base (slot 0) and a
 * new profile (slot 1) in one tree; ordinary graphs use slot 0. Names are interned: stacks from
 * different profiles meet in the same nodes.
 *
 * Bounded: at most max_nodes nodes. A stack that needs more is cut at the deepest node it
 * reached, its value lands there as self value and is counted in dropped_value/dropped_stacks.
 * Memory: about 80 bytes per node plus the unique names.
 */
#ifndef EDGEPROF_TOOLS_TREE_H
#define EDGEPROF_TOOLS_TREE_H

#include <stdint.h>
#include <stdio.h>

#include "pprof/view/stacks.h"

#define FTREE_NONE UINT32_MAX
#define FTREE_DEFAULT_MAX_NODES 2000000u

struct ftree_node {
	const char *name;   /* interned; the root is "all" */
	const char *module; /* colour key (see stacks.h) */
	uint8_t runtime;    /* enum stack_runtime of the frame that made the node */
	uint32_t parent, first_child, next_sibling, depth;
	int64_t self[2], total[2];
};

struct ftree {
	struct ftree_node *nodes; /* nodes[0] is the root */
	size_t n, cap, max;
	uint32_t *slots; /* child index: hash of (parent, name) -> node, open addressing */
	size_t n_slots;
	char **strings; /* interned names, open addressing */
	size_t n_strings, strings_cap;
	int64_t dropped_value[2];
	size_t dropped_stacks;
};

/* max_nodes 0 = FTREE_DEFAULT_MAX_NODES. */
struct ftree *ftree__new(size_t max_nodes);
void ftree__free(struct ftree *t);

/* Adds value to the stack frames[0..n) (root first) in slot 0 or 1: 0 or -ENOMEM. */
int ftree__add(struct ftree *t, const struct stack_frame *const *frames, size_t n, int64_t value,
	       int slot);

/* Adds every sample of p (value index vi) through s: 0 or -ENOMEM. */
int ftree__add_profile(struct ftree *t, struct stacks *s, const struct pprof_profile *p, int vi,
		       int slot);

/* Orders every node's children by name (flame graph convention; folded output order). */
int ftree__sort(struct ftree *t);

/*
 * Writes one "root;...;leaf value" line per node with self value in slot, root first, in tree
 * order. ';' inside a name becomes ':' so that the line still splits right. 0 or -EIO.
 */
int ftree__folded(const struct ftree *t, int slot, FILE *out);

#endif /* EDGEPROF_TOOLS_TREE_H */
