// SPDX-License-Identifier: MIT
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "port/text.h"
#include "store/api/render.h"
#include "pprof/view/stacks.h"
#include "pprof/view/tree.h"

#define RENDER_DEFAULT_MAX_NODES 200000u

int render_format_parse(const char *s, enum render_format *out)
{
	if (!s || !*s || !strcmp(s, "json"))
		*out = RENDER_JSON;
	else if (!strcmp(s, "flamebearer"))
		*out = RENDER_FLAMEBEARER;
	else if (!strcmp(s, "folded"))
		*out = RENDER_FOLDED;
	else
		return -EINVAL;
	return 0;
}

static void file_put(void *ctx, const char *p, size_t n)
{
	fwrite(p, 1, n, ctx);
}

/* Function names come from devices: invalid UTF-8 becomes U+FFFD (the pprof keeps bytes). */
static void json_str(FILE *f, const char *s)
{
	json_str_write(s, file_put, f);
}

/* Pre-order walk without recursion: stacks can be thousands of frames deep. */
static int tree_preorder(const struct ftree *t, uint32_t *order)
{
	uint32_t *todo = malloc(t->n * sizeof(*todo));
	size_t n_todo = 0, n = 0;

	if (!todo)
		return -ENOMEM;
	todo[n_todo++] = 0;
	while (n_todo) {
		uint32_t i = todo[--n_todo], c, k = 0, m;

		order[n++] = i;
		/* Push children in reverse so that the first child is visited first. */
		for (c = t->nodes[i].first_child; c != FTREE_NONE; c = t->nodes[c].next_sibling)
			k++;
		m = k;
		for (c = t->nodes[i].first_child; c != FTREE_NONE; c = t->nodes[c].next_sibling)
			todo[n_todo + --m] = c;
		n_todo += k;
	}
	free(todo);
	return 0;
}

static const char *value_name(const struct pprof_profile *p, int vi, int64_t *idx_unit)
{
	*idx_unit = p->sample_type[vi].unit;
	return pprof_str(p, p->sample_type[vi].type);
}

/* What the merge left out, from its comment (store/query.c merge__run): 0 when nothing. */
static size_t skipped_profiles(const struct pprof_profile *p)
{
	size_t n;

	for (size_t i = 0; i < p->n_comments; i++)
		if (sscanf(pprof_str(p, p->comments[i]), "edgeprof: %zu profile", &n) == 1)
			return n;
	return 0;
}

static void render_json_tree(FILE *f, const struct pprof_profile *p, int vi,
			     const struct ftree *t, const uint32_t *order, size_t n_profiles)
{
	uint32_t *pos = malloc(t->n * sizeof(*pos));
	int64_t unit;
	const char *type = value_name(p, vi, &unit);

	fprintf(f, "{\"type\":");
	json_str(f, type);
	fprintf(f, ",\"unit\":");
	json_str(f, pprof_str(p, unit));
	fprintf(f, ",\"total\":%" PRId64 ",\"profiles\":%zu,\"skipped\":%zu,\"types\":[",
		t->nodes[0].total[0], n_profiles, skipped_profiles(p));
	for (size_t i = 0; i < p->n_sample_type; i++) { /* [type, unit]: the UI's value picker */
		fputs(i ? ",[" : "[", f);
		json_str(f, pprof_str(p, p->sample_type[i].type));
		fputc(',', f);
		json_str(f, pprof_str(p, p->sample_type[i].unit));
		fputc(']', f);
	}
	fprintf(f, "],\"names\":[");
	/* Names are emitted per node position; the UI dedups nothing, so keep it compact by
	 * writing each node's own name once (names[i] belongs to nodes[i]). */
	for (size_t k = 0; k < t->n; k++) {
		if (k)
			fputc(',', f);
		json_str(f, k ? t->nodes[order[k]].name : "total");
		if (pos)
			pos[order[k]] = (uint32_t)k;
	}
	/* each node's runtime (pprof/view/stacks.h), an index into runtimes: the UI's colours */
	fprintf(f, "],\"runtimes\":[");
	for (int r = 0; r < STACK_RT_N; r++)
		fprintf(f, "%s\"%s\"", r ? "," : "", stacks__runtime_name(r));
	fprintf(f, "],\"nodes\":[");
	for (size_t k = 0; k < t->n && pos; k++) {
		const struct ftree_node *nd = &t->nodes[order[k]];

		fprintf(f, "%s[%zu,%ld,%" PRId64 ",%" PRId64 ",%u]", k ? "," : "", k,
			k ? (long)pos[nd->parent] : -1L, nd->self[0], nd->total[0],
			(unsigned int)nd->runtime);
	}
	fprintf(f, "]}");
	free(pos);
}

static void render_flamebearer(FILE *f, const struct pprof_profile *p, int vi,
			       const struct ftree *t, const uint32_t *order)
{
	uint32_t max_depth = 0;
	int64_t max_self = 0, unit;
	const char *type = value_name(p, vi, &unit);

	for (size_t i = 0; i < t->n; i++) {
		if (t->nodes[i].depth > max_depth)
			max_depth = t->nodes[i].depth;
		if (t->nodes[i].self[0] > max_self)
			max_self = t->nodes[i].self[0];
	}
	fprintf(f, "{\"version\":1,\"flamebearer\":{\"names\":[");
	for (size_t k = 0; k < t->n; k++) {
		if (k)
			fputc(',', f);
		json_str(f, k ? t->nodes[order[k]].name : "total");
	}
	fprintf(f, "],\"levels\":[");
	/* Per level, nodes in pre-order are left to right; x is the running offset. */
	int64_t *x = calloc(t->n, sizeof(*x));
	for (uint32_t d = 0; d <= max_depth && x; d++) {
		int64_t last_end = 0;
		bool first = true;

		fprintf(f, "%s[", d ? "," : "");
		for (size_t k = 0; k < t->n; k++) {
			const struct ftree_node *nd = &t->nodes[order[k]];
			int64_t start;

			if (nd->depth != d)
				continue;
			/* A child starts where its parent started plus its elder siblings. */
			start = d ? x[nd->parent] : 0;
			if (d)
				x[nd->parent] += nd->total[0];
			x[order[k]] = start;
			fprintf(f, "%s%" PRId64 ",%" PRId64 ",%" PRId64 ",%zu", first ? "" : ",",
				start - last_end, nd->total[0], nd->self[0], k);
			last_end = start + nd->total[0];
			first = false;
		}
		fputc(']', f);
	}
	free(x);
	fprintf(f, "],\"numTicks\":%" PRId64 ",\"maxSelf\":%" PRId64 "},", t->nodes[0].total[0],
		max_self);
	fprintf(f, "\"metadata\":{\"format\":\"single\",\"units\":");
	json_str(f, pprof_str(p, unit));
	fprintf(f, ",\"name\":");
	json_str(f, type);
	fprintf(f, "}}");
}

size_t render_mem_bound(const struct pprof_profile *p, size_t max_nodes)
{
	size_t ids = 0, lines = 0, bytes = 0, nodes;

	for (size_t i = 0; i < p->n_samples; i++)
		ids += p->samples[i].n_locations;
	for (size_t i = 0; i < p->n_locations; i++)
		lines += p->locations[i].n_lines ? p->locations[i].n_lines : 1;
	for (size_t i = 0; i < p->n_strings; i++)
		bytes += strlen(p->strings[i]) + 1;
	nodes = ids + 1;
	max_nodes = max_nodes ? max_nodes : RENDER_DEFAULT_MAX_NODES;
	if (nodes > max_nodes)
		nodes = max_nodes;
	/* 2 x the strings: names made here (module bases, "(inline)"), and the tree's copies */
	return sizeof(struct stacks *) + p->n_locations * 4 * sizeof(size_t) +
	       lines * sizeof(struct stack_frame) + 2 * bytes +
	       nodes * (2 * sizeof(struct ftree_node) + 6 * sizeof(uint32_t) + 128) +
	       STACKS_MAX_DEPTH * sizeof(void *);
}

int render_profile(const struct pprof_profile *p, enum render_format fmt, size_t n_profiles,
		   size_t max_nodes, char **out, size_t *out_len, char *err, size_t errlen)
{
	return render_profile_index(p, NULL, fmt, n_profiles, max_nodes, out, out_len, err,
				    errlen);
}

int render_profile_index(const struct pprof_profile *p, const char *index,
			 enum render_format fmt, size_t n_profiles, size_t max_nodes, char **out,
			 size_t *out_len, char *err, size_t errlen)
{
	struct stacks *s = NULL;
	struct ftree *t = NULL;
	uint32_t *order = NULL;
	FILE *f = NULL;
	int vi, ret;

	*out = NULL;
	*out_len = 0;
	vi = stacks__sample_index(p, index, err, errlen);
	if (vi < 0)
		return vi;
	s = stacks__new(p, err, errlen);
	t = ftree__new(max_nodes ? max_nodes : RENDER_DEFAULT_MAX_NODES);
	if (!s || !t) {
		ret = s ? -ENOMEM : -EINVAL;
		goto out;
	}
	ret = ftree__add_profile(t, s, p, vi, 0);
	if (!ret)
		ret = ftree__sort(t);
	if (ret)
		goto out;
	order = malloc(t->n * sizeof(*order));
	f = open_memstream(out, out_len);
	if (!order || !f || tree_preorder(t, order)) {
		ret = -ENOMEM;
		goto out;
	}
	if (fmt == RENDER_FOLDED)
		ret = ftree__folded(t, 0, f);
	else if (fmt == RENDER_FLAMEBEARER)
		render_flamebearer(f, p, vi, t, order);
	else
		render_json_tree(f, p, vi, t, order, n_profiles);
out:
	if (f && fclose(f) && !ret)
		ret = -EIO;
	if (ret) {
		if (!err[0])
			snprintf(err, errlen, "render: %s", strerror(-ret));
		free(*out);
		*out = NULL;
		*out_len = 0;
	}
	free(order);
	ftree__free(t);
	stacks__free(s);
	return ret;
}
