// SPDX-License-Identifier: MIT
/*
 * pprof/symbolize.c — rebuilds a profile through the builder, adding function names where the
 * resolver has them. Rebuilding (rather than patching the decoded arrays in place) keeps the
 * builder's dedup and validation: two addresses that resolve to the same function share one
 * Function, and the result is a profile the reader accepted.
 */
#include <errno.h>
#include <stdlib.h>

#include "pprof/symbolize.h"

struct sym_ctx {
	const struct pprof_profile *p;
	struct pprof_builder *b;
	pprof_resolve_fn resolve;
	void *rctx;
	uint64_t *map_ids, *loc_ids; /* old id - 1 -> new id */
	bool *resolved_map;	     /* some location of mapping i got a name */
	bool *lines_map;	     /* ... got a file:line */
	size_t n_resolved;
};

static const char *s_(const struct sym_ctx *c, int64_t idx)
{
	return pprof_str(c->p, idx);
}

static int copy_header(struct sym_ctx *c)
{
	const struct pprof_profile *p = c->p;
	int err = 0;

	for (size_t i = 0; i < p->n_sample_type && !err; i++)
		err = pprof_builder__add_sample_type(c->b, s_(c, p->sample_type[i].type),
						     s_(c, p->sample_type[i].unit));
	if (!err && (p->period_type.type || p->period))
		err = pprof_builder__set_period(c->b, s_(c, p->period_type.type),
						s_(c, p->period_type.unit), p->period);
	pprof_builder__set_time(c->b, p->time_nanos, p->duration_nanos);
	for (size_t i = 0; i < p->n_comments && !err; i++)
		err = pprof_builder__add_comment(c->b, s_(c, p->comments[i]));
	if (!err && p->drop_frames)
		err = pprof_builder__set_drop_frames(c->b, s_(c, p->drop_frames));
	if (!err && p->default_sample_type)
		err = pprof_builder__set_default_sample_type(c->b, s_(c, p->default_sample_type));
	return err;
}

/* Resolves what can be, so the mappings know their has_functions before they are written. */
static int resolve_locations(struct sym_ctx *c, struct pprof_resolved *names)
{
	const struct pprof_profile *p = c->p;

	for (size_t i = 0; i < p->n_locations; i++) {
		const struct pprof_location *l = &p->locations[i];
		const struct pprof_mapping *m;

		if (l->n_lines || !l->mapping_id || l->mapping_id > p->n_mappings)
			continue;
		m = &p->mappings[l->mapping_id - 1];
		if (m->has_functions)
			continue;
		if (!c->resolve(c->rctx, p, m, l->address, &names[i]) || !names[i].function) {
			names[i] = (struct pprof_resolved){ 0 };
			continue;
		}
		c->resolved_map[l->mapping_id - 1] = true;
		if (names[i].filename && names[i].line > 0)
			c->lines_map[l->mapping_id - 1] = true;
		c->n_resolved++;
	}
	return 0;
}

static int copy_mappings(struct sym_ctx *c)
{
	const struct pprof_profile *p = c->p;

	for (size_t i = 0; i < p->n_mappings; i++) {
		const struct pprof_mapping *m = &p->mappings[i];
		struct pprof_mapping_desc d = {
			.memory_start = m->memory_start, .memory_limit = m->memory_limit,
			.file_offset = m->file_offset, .filename = s_(c, m->filename),
			.build_id = m->build_id ? s_(c, m->build_id) : NULL,
			.has_functions = m->has_functions || c->resolved_map[i],
			.has_filenames = m->has_filenames || c->lines_map[i],
			.has_line_numbers = m->has_line_numbers || c->lines_map[i],
		};

		c->map_ids[i] = pprof_builder__mapping(c->b, &d);
		if (!c->map_ids[i])
			return -ENOSPC;
	}
	return 0;
}

/* The one line of a resolved location. */
static void resolved_line(struct sym_ctx *c, const struct pprof_resolved *r,
			  struct pprof_line_desc *line)
{
	const char *file = r->filename && r->line > 0 ? r->filename : "";

	line->function_id = pprof_builder__function(c->b, r->function, r->function, file, 0);
	line->line = *file ? r->line : 0;
}

static int copy_locations(struct sym_ctx *c, const struct pprof_resolved *names)
{
	const struct pprof_profile *p = c->p;
	struct pprof_line_desc *lines = NULL;
	size_t cap = 0;
	int err = 0;

	for (size_t i = 0; i < p->n_locations && !err; i++) {
		const struct pprof_location *l = &p->locations[i];
		bool named = names[i].function;
		size_t n = named ? 1 : l->n_lines;

		if (n > cap) {
			struct pprof_line_desc *nl = realloc(lines, n * sizeof(*lines));

			if (!nl) {
				err = -ENOMEM;
				break;
			}
			lines = nl;
			cap = n;
		}
		if (named)
			resolved_line(c, &names[i], &lines[0]);
		for (size_t k = 0; !named && k < n; k++) {
			const struct pprof_function *f = &p->functions[l->lines[k].function_id - 1];

			lines[k].function_id = pprof_builder__function(c->b, s_(c, f->name),
								       s_(c, f->system_name),
								       s_(c, f->filename),
								       f->start_line);
			lines[k].line = l->lines[k].line;
		}
		for (size_t k = 0; k < n; k++)
			if (!lines[k].function_id)
				err = -ENOSPC;
		if (err)
			break;
		c->loc_ids[i] = pprof_builder__location(c->b, l->mapping_id ?
							c->map_ids[l->mapping_id - 1] : 0,
							l->address, lines, n);
		if (!c->loc_ids[i])
			err = -ENOSPC;
	}
	free(lines);
	return err;
}

static int copy_samples(struct sym_ctx *c)
{
	const struct pprof_profile *p = c->p;
	uint64_t *ids = NULL;
	struct pprof_label_desc *labels = NULL;
	size_t ids_cap = 0, labels_cap = 0;
	int err = 0;

	for (size_t i = 0; i < p->n_samples && !err; i++) {
		const struct pprof_sample *s = &p->samples[i];

		if (s->n_locations > ids_cap || s->n_labels > labels_cap) {
			ids_cap = s->n_locations > ids_cap ? s->n_locations : ids_cap;
			labels_cap = s->n_labels > labels_cap ? s->n_labels : labels_cap;
			free(ids);
			free(labels);
			ids = malloc((ids_cap + 1) * sizeof(*ids));
			labels = malloc((labels_cap + 1) * sizeof(*labels));
			if (!ids || !labels) {
				err = -ENOMEM;
				break;
			}
		}
		for (size_t k = 0; k < s->n_locations; k++)
			ids[k] = c->loc_ids[s->location_ids[k] - 1];
		for (size_t k = 0; k < s->n_labels; k++) {
			const struct pprof_label *lb = &s->labels[k];

			labels[k] = (struct pprof_label_desc){
				.key = s_(c, lb->key), .str = lb->str ? s_(c, lb->str) : NULL,
				.num = lb->num, .num_unit = lb->num_unit ? s_(c, lb->num_unit) : NULL,
			};
		}
		err = pprof_builder__add_sample(c->b, ids, s->n_locations, s->values, labels,
						s->n_labels);
	}
	free(ids);
	free(labels);
	return err;
}

int pprof_symbolize(const struct pprof_profile *p, pprof_resolve_fn resolve, void *ctx,
		    struct pprof_profile **out, size_t *n_resolved)
{
	struct pprof_builder_opts opts = { .gzip_level = -1 };
	struct pprof_buf buf = { 0 };
	struct sym_ctx c = { .p = p, .resolve = resolve, .rctx = ctx };
	struct pprof_resolved *names = calloc(p->n_locations + 1, sizeof(*names));
	char err_msg[256];
	int err;

	*out = NULL;
	c.map_ids = calloc(p->n_mappings + 1, sizeof(*c.map_ids));
	c.loc_ids = calloc(p->n_locations + 1, sizeof(*c.loc_ids));
	c.resolved_map = calloc(p->n_mappings + 1, sizeof(*c.resolved_map));
	c.lines_map = calloc(p->n_mappings + 1, sizeof(*c.lines_map));
	c.b = pprof_builder__new(&opts, pprof_buf_write, &buf);
	err = names && c.map_ids && c.loc_ids && c.resolved_map && c.lines_map && c.b ? 0
										       : -ENOMEM;
	if (!err)
		err = copy_header(&c);
	if (!err)
		err = resolve_locations(&c, names);
	if (!err)
		err = copy_mappings(&c);
	if (!err)
		err = copy_locations(&c, names);
	if (!err)
		err = copy_samples(&c);
	if (!err)
		err = pprof_builder__finish(c.b);
	if (!err)
		err = pprof_read(buf.data, buf.len, NULL, out, err_msg, sizeof(err_msg));
	if (n_resolved)
		*n_resolved = c.n_resolved;
	pprof_builder__free(c.b);
	free(buf.data);
	free(names);
	free(c.map_ids);
	free(c.loc_ids);
	free(c.resolved_map);
	free(c.lines_map);
	return err;
}
