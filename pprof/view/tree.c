// SPDX-License-Identifier: MIT
/* pprof/view/tree.c — the folded-stack tree: interned names, hashed child lookup, bounded. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "pprof/view/tree.h"
#include "port/hash.h"

/* Aligned pointers and sequential parents need every bit mixed. */
static uint64_t hash_edge(uint32_t parent, const char *name)
{
	return hash_mix64((uint64_t)(uintptr_t)name * 0x9e3779b97f4a7c15ull + parent);
}

static int intern_grow(struct ftree *t)
{
	size_t cap = t->strings_cap ? t->strings_cap * 2 : 1024, i, j;
	char **ns = calloc(cap, sizeof(*ns));

	if (!ns)
		return -ENOMEM;
	for (i = 0; i < t->strings_cap; i++) {
		if (!t->strings[i])
			continue;
		for (j = hash_fnv64_str(t->strings[i]) & (cap - 1); ns[j]; j = (j + 1) & (cap - 1))
			;
		ns[j] = t->strings[i];
	}
	free(t->strings);
	t->strings = ns;
	t->strings_cap = cap;
	return 0;
}

/* The tree's own copy of s (one per distinct string), or NULL without memory. */
static const char *intern(struct ftree *t, const char *s)
{
	size_t j;

	if ((t->n_strings + 1) * 2 > t->strings_cap && intern_grow(t))
		return NULL;
	for (j = hash_fnv64_str(s) & (t->strings_cap - 1); t->strings[j];
	     j = (j + 1) & (t->strings_cap - 1))
		if (!strcmp(t->strings[j], s))
			return t->strings[j];
	t->strings[j] = strdup(s);
	if (t->strings[j])
		t->n_strings++;
	return t->strings[j];
}

static int slots_grow(struct ftree *t)
{
	size_t n = t->n_slots ? t->n_slots * 2 : 1024, i, j;
	uint32_t *ns = malloc(n * sizeof(*ns));

	if (!ns)
		return -ENOMEM;
	memset(ns, 0xff, n * sizeof(*ns));
	for (i = 1; i < t->n; i++) {
		for (j = hash_edge(t->nodes[i].parent, t->nodes[i].name) & (n - 1);
		     ns[j] != FTREE_NONE; j = (j + 1) & (n - 1))
			;
		ns[j] = (uint32_t)i;
	}
	free(t->slots);
	t->slots = ns;
	t->n_slots = n;
	return 0;
}

struct ftree *ftree__new(size_t max_nodes)
{
	struct ftree *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->max = max_nodes ? max_nodes : FTREE_DEFAULT_MAX_NODES;
	if (t->max > UINT32_MAX - 1)
		t->max = UINT32_MAX - 1;
	t->cap = 1024;
	t->nodes = calloc(t->cap, sizeof(*t->nodes));
	if (!t->nodes || slots_grow(t)) {
		ftree__free(t);
		return NULL;
	}
	t->nodes[0] = (struct ftree_node){.name = "all",
					  .module = "",
					  .parent = FTREE_NONE,
					  .first_child = FTREE_NONE,
					  .next_sibling = FTREE_NONE};
	t->n = 1;
	return t;
}

void ftree__free(struct ftree *t)
{
	size_t i;

	if (!t)
		return;
	for (i = 0; i < t->strings_cap; i++)
		free(t->strings[i]);
	free(t->strings);
	free(t->slots);
	free(t->nodes);
	free(t);
}

/* The child of parent called name (name interned), created when missing; FTREE_NONE if full. */
static uint32_t child(struct ftree *t, uint32_t parent, const char *name,
		      const struct stack_frame *f, int *err)
{
	struct ftree_node *nn;
	const char *module;
	size_t j;

	for (j = hash_edge(parent, name) & (t->n_slots - 1); t->slots[j] != FTREE_NONE;
	     j = (j + 1) & (t->n_slots - 1)) {
		nn = &t->nodes[t->slots[j]];
		if (nn->parent == parent && nn->name == name)
			return t->slots[j];
	}
	if (t->n >= t->max)
		return FTREE_NONE;
	if (t->n == t->cap) {
		nn = realloc(t->nodes, t->cap * 2 * sizeof(*nn));
		if (!nn)
			goto out_nomem;
		t->nodes = nn;
		t->cap *= 2;
	}
	module = intern(t, f->module ? f->module : "");
	if (!module)
		goto out_nomem;
	t->slots[j] = (uint32_t)t->n;
	nn = &t->nodes[t->n];
	*nn = (struct ftree_node){.name = name,
				  .module = module,
				  .runtime = f->runtime,
				  .parent = parent,
				  .first_child = FTREE_NONE,
				  .next_sibling = t->nodes[parent].first_child,
				  .depth = t->nodes[parent].depth + 1};
	t->nodes[parent].first_child = (uint32_t)t->n;
	t->n++;
	if (t->n * 2 > t->n_slots && slots_grow(t))
		goto out_nomem;
	return (uint32_t)(t->n - 1);
out_nomem:
	*err = -ENOMEM;
	return FTREE_NONE;
}

int ftree__add(struct ftree *t, const struct stack_frame *const *frames, size_t n, int64_t value,
	       int slot)
{
	static const struct stack_frame none = {.name = "[no stack]", .module = ""};
	static const struct stack_frame *const none_stack[1] = {&none};
	uint32_t at = 0, next;
	const char *name;
	size_t i;
	int err = 0;

	if (!n) { /* keeps sums whole: folded lines add up to the profile's total */
		frames = none_stack;
		n = 1;
	}
	t->nodes[0].total[slot] += value;
	for (i = 0; i < n; i++) {
		name = intern(t, frames[i]->name);
		if (!name)
			return -ENOMEM;
		next = child(t, at, name, frames[i], &err);
		if (err)
			return err;
		if (next == FTREE_NONE) {
			t->dropped_value[slot] += value;
			t->dropped_stacks++;
			break;
		}
		at = next;
		t->nodes[at].total[slot] += value;
	}
	t->nodes[at].self[slot] += value;
	return 0;
}

int ftree__add_profile(struct ftree *t, struct stacks *s, const struct pprof_profile *p, int vi,
		       int slot)
{
	const struct stack_frame **frames = malloc(STACKS_MAX_DEPTH * sizeof(*frames));
	struct stacks_unique *u = NULL;
	size_t i, n, n_u = 0;
	int ret;

	if (!frames)
		return -ENOMEM;
	/* whole stacks first: the tree then sees each distinct stack once */
	ret = stacks__unique(p, vi, &u, &n_u);
	for (i = 0; i < n_u && !ret; i++) {
		n = stacks__sample(s, u[i].sample, frames, STACKS_MAX_DEPTH);
		ret = ftree__add(t, frames, n, u[i].value, slot);
	}
	free(u);
	free(frames);
	return ret;
}

static int by_name(const void *a, const void *b, void *arg)
{
	const struct ftree_node *nodes = arg;

	return strcmp(nodes[*(const uint32_t *)a].name, nodes[*(const uint32_t *)b].name);
}

int ftree__sort(struct ftree *t)
{
	uint32_t *kids = malloc(t->n * sizeof(*kids)), c;
	size_t i, k, j;

	if (!kids)
		return -ENOMEM;
	for (i = 0; i < t->n; i++) {
		k = 0;
		for (c = t->nodes[i].first_child; c != FTREE_NONE; c = t->nodes[c].next_sibling)
			kids[k++] = c;
		if (k < 2)
			continue;
		qsort_r(kids, k, sizeof(*kids), by_name, t->nodes);
		t->nodes[i].first_child = kids[0];
		for (j = 0; j + 1 < k; j++)
			t->nodes[kids[j]].next_sibling = kids[j + 1];
		t->nodes[kids[k - 1]].next_sibling = FTREE_NONE;
	}
	free(kids);
	return 0;
}

static void put_name(const char *s, FILE *out)
{
	for (; *s; s++)
		putc(*s == ';' ? ':' : (*s == '\n' ? ' ' : *s), out);
}

static void put_path(const struct ftree *t, uint32_t n, FILE *out)
{
	if (t->nodes[n].parent != 0) {
		put_path(t, t->nodes[n].parent, out);
		putc(';', out);
	}
	put_name(t->nodes[n].name, out);
}

int ftree__folded(const struct ftree *t, int slot, FILE *out)
{
	uint32_t n = t->nodes[0].first_child;

	/* Pre-order walk without a stack: down to a child, else to the next sibling upwards. */
	while (n != FTREE_NONE && n != 0) {
		if (t->nodes[n].self[slot]) {
			put_path(t, n, out); /* depth-recursive, bounded by STACKS_MAX_DEPTH */
			fprintf(out, " %" PRId64 "\n", t->nodes[n].self[slot]);
		}
		if (t->nodes[n].first_child != FTREE_NONE) {
			n = t->nodes[n].first_child;
			continue;
		}
		while (n != 0 && t->nodes[n].next_sibling == FTREE_NONE)
			n = t->nodes[n].parent;
		if (n != 0)
			n = t->nodes[n].next_sibling;
	}
	return ferror(out) ? -EIO : 0;
}
