// SPDX-License-Identifier: MIT
/*
 * pprof/builder.c — streaming pprof encoder.
 *
 * Samples are encoded into the deflate stream the moment they are added; mappings, locations,
 * functions and strings are deduplicated in hash tables and written at finish. See pprof.h for
 * the memory bound.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pprof/internal.h"
#include "pprof/profile.pb.h"

#define DEFAULT_MAX_TABLE 1000000

struct bloc {
	uint64_t mapping_id, address;
	uint32_t line_off, n_lines;
};

struct pprof_builder {
	struct pprof_builder_opts opts;
	struct pp_out *out;
	int err;         /* sticky: the first error of the stream */
	bool finished, samples_started;

	struct pp_strtab strs;

	struct pprof_function *funcs;
	size_t n_funcs, cap_funcs;
	struct pp_htab func_ht;

	struct pprof_mapping *maps;
	size_t n_maps, cap_maps;
	struct pp_htab map_ht;

	struct bloc *locs;
	size_t n_locs, cap_locs;
	struct pprof_line *lines;
	size_t n_lines, cap_lines;
	struct pp_htab loc_ht;

	struct pprof_value_type *types;
	size_t n_types, cap_types;
	int64_t *comments;
	size_t n_comments, cap_comments;
	struct pprof_value_type period_type;
	int64_t period, time_nanos, duration_nanos, drop_frames, default_sample_type;

	struct pprof_label *labels; /* scratch for add_sample */
	size_t cap_labels;
};

static size_t opt_or(size_t v)
{
	return v ? v : DEFAULT_MAX_TABLE;
}

struct pprof_builder *pprof_builder__new(const struct pprof_builder_opts *opts,
					 pprof_write_fn write, void *ctx)
{
	struct pprof_builder *b = calloc(1, sizeof(*b));

	if (!b)
		return NULL;
	if (opts)
		b->opts = *opts;
	b->opts.max_strings = opt_or(b->opts.max_strings);
	b->opts.max_functions = opt_or(b->opts.max_functions);
	b->opts.max_locations = opt_or(b->opts.max_locations);
	b->opts.max_mappings = opt_or(b->opts.max_mappings);
	b->strs.max = b->opts.max_strings;
	b->out = malloc(sizeof(*b->out));
	if (!b->out || !write || pp_out__init(b->out, b->opts.gzip_level, write, ctx)) {
		free(b->out);
		b->out = NULL;
		pprof_builder__free(b);
		return NULL;
	}
	if (pp_strtab__intern(&b->strs, "", 0) != 0) {
		pprof_builder__free(b);
		return NULL;
	}
	return b;
}

int64_t pprof_builder__string(struct pprof_builder *b, const char *s)
{
	if (!s)
		return 0;
	return pp_strtab__intern(&b->strs, s, strlen(s));
}

/* Interns s into *idx; returns 0 or -errno (and records it). */
static int intern(struct pprof_builder *b, const char *s, int64_t *idx)
{
	int64_t i = pprof_builder__string(b, s);

	if (i < 0)
		return i;
	*idx = i;
	return 0;
}

int pprof_builder__add_sample_type(struct pprof_builder *b, const char *type, const char *unit)
{
	struct pprof_value_type vt;
	int err;

	if (b->samples_started || b->finished)
		return -EBUSY;
	err = intern(b, type, &vt.type);
	if (!err)
		err = intern(b, unit, &vt.unit);
	if (!err)
		err = pp_grow(&b->types, &b->cap_types, b->n_types, 1, sizeof(vt));
	if (err)
		return err;
	b->types[b->n_types++] = vt;
	return 0;
}

int pprof_builder__set_period(struct pprof_builder *b, const char *type, const char *unit,
			      int64_t period)
{
	int err = intern(b, type, &b->period_type.type);

	if (!err)
		err = intern(b, unit, &b->period_type.unit);
	b->period = period;
	return err;
}

void pprof_builder__set_time(struct pprof_builder *b, int64_t time_nanos, int64_t duration_nanos)
{
	b->time_nanos = time_nanos;
	b->duration_nanos = duration_nanos;
}

int pprof_builder__add_comment(struct pprof_builder *b, const char *comment)
{
	int64_t idx = 0;
	int err = intern(b, comment, &idx);

	if (!err)
		err = pp_grow(&b->comments, &b->cap_comments, b->n_comments, 1, sizeof(idx));
	if (!err)
		b->comments[b->n_comments++] = idx;
	return err;
}

int pprof_builder__set_drop_frames(struct pprof_builder *b, const char *regex)
{
	return intern(b, regex, &b->drop_frames);
}

int pprof_builder__set_default_sample_type(struct pprof_builder *b, const char *type)
{
	return intern(b, type, &b->default_sample_type);
}

/* ---- tables ------------------------------------------------------------------------------- */

static bool mapping_eq(const struct pprof_mapping *a, const struct pprof_mapping *m)
{
	return a->memory_start == m->memory_start && a->memory_limit == m->memory_limit &&
	       a->file_offset == m->file_offset && a->filename == m->filename &&
	       a->build_id == m->build_id && a->has_functions == m->has_functions &&
	       a->has_filenames == m->has_filenames && a->has_line_numbers == m->has_line_numbers;
}

uint64_t pprof_builder__mapping(struct pprof_builder *b, const struct pprof_mapping_desc *d)
{
	struct pprof_mapping m = {
		.memory_start = d->memory_start,
		.memory_limit = d->memory_limit,
		.file_offset = d->file_offset,
		.has_functions = d->has_functions,
		.has_filenames = d->has_filenames,
		.has_line_numbers = d->has_line_numbers,
	};
	uint64_t h;
	size_t pos;

	if (intern(b, d->filename, &m.filename) || intern(b, d->build_id, &m.build_id))
		return 0;
	h = pp_mix(pp_mix(pp_mix(m.memory_start, m.memory_limit), m.file_offset),
		   (uint64_t)m.filename << 32 ^ (uint64_t)m.build_id);
	if (pp_htab__reserve(&b->map_ht, 1))
		return 0;
	for (pos = pp_htab__pos(&b->map_ht, h); b->map_ht.e[pos].slot;
	     pos = (pos + 1) & (b->map_ht.cap - 1)) {
		uint32_t i = b->map_ht.e[pos].slot - 1;

		if (b->map_ht.e[pos].hash == (uint32_t)h && mapping_eq(&b->maps[i], &m))
			return i + 1;
	}
	if (b->n_maps >= b->opts.max_mappings ||
	    pp_grow(&b->maps, &b->cap_maps, b->n_maps, 1, sizeof(m)))
		return 0;
	m.id = b->n_maps + 1;
	b->maps[b->n_maps] = m;
	pp_htab__set(&b->map_ht, pos, h, b->n_maps);
	return ++b->n_maps;
}

uint64_t pprof_builder__function(struct pprof_builder *b, const char *name,
				 const char *system_name, const char *filename, int64_t start_line)
{
	struct pprof_function f = { .start_line = start_line };
	uint64_t h;
	size_t pos;

	if (intern(b, name, &f.name) || intern(b, system_name, &f.system_name) ||
	    intern(b, filename, &f.filename))
		return 0;
	h = pp_mix(pp_mix(pp_mix(f.name, f.system_name), f.filename), f.start_line);
	if (pp_htab__reserve(&b->func_ht, 1))
		return 0;
	for (pos = pp_htab__pos(&b->func_ht, h); b->func_ht.e[pos].slot;
	     pos = (pos + 1) & (b->func_ht.cap - 1)) {
		const struct pprof_function *e = &b->funcs[b->func_ht.e[pos].slot - 1];

		if (b->func_ht.e[pos].hash == (uint32_t)h && e->name == f.name &&
		    e->system_name == f.system_name && e->filename == f.filename &&
		    e->start_line == f.start_line)
			return e->id;
	}
	if (b->n_funcs >= b->opts.max_functions ||
	    pp_grow(&b->funcs, &b->cap_funcs, b->n_funcs, 1, sizeof(f)))
		return 0;
	f.id = b->n_funcs + 1;
	b->funcs[b->n_funcs] = f;
	pp_htab__set(&b->func_ht, pos, h, b->n_funcs);
	return ++b->n_funcs;
}

static bool location_eq(const struct pprof_builder *b, const struct bloc *l, uint64_t mapping_id,
			uint64_t address, const struct pprof_line_desc *lines, size_t n_lines)
{
	size_t i;

	if (l->mapping_id != mapping_id || l->address != address || l->n_lines != n_lines)
		return false;
	for (i = 0; i < n_lines; i++) {
		const struct pprof_line *e = &b->lines[l->line_off + i];

		if (e->function_id != lines[i].function_id || e->line != lines[i].line)
			return false;
	}
	return true;
}

uint64_t pprof_builder__location(struct pprof_builder *b, uint64_t mapping_id, uint64_t address,
				 const struct pprof_line_desc *lines, size_t n_lines)
{
	uint64_t h = pp_mix(pp_mix(mapping_id, address), n_lines);
	struct bloc *l;
	size_t pos, i;

	if (mapping_id > b->n_maps || n_lines > UINT32_MAX)
		return 0;
	for (i = 0; i < n_lines; i++) {
		if (lines[i].function_id > b->n_funcs)
			return 0;
		h = pp_mix(pp_mix(h, lines[i].function_id), lines[i].line);
	}
	if (pp_htab__reserve(&b->loc_ht, 1))
		return 0;
	for (pos = pp_htab__pos(&b->loc_ht, h); b->loc_ht.e[pos].slot;
	     pos = (pos + 1) & (b->loc_ht.cap - 1)) {
		uint32_t idx = b->loc_ht.e[pos].slot - 1;

		if (b->loc_ht.e[pos].hash == (uint32_t)h &&
		    location_eq(b, &b->locs[idx], mapping_id, address, lines, n_lines))
			return idx + 1;
	}
	if (b->n_locs >= b->opts.max_locations || b->n_lines + n_lines > UINT32_MAX ||
	    pp_grow(&b->locs, &b->cap_locs, b->n_locs, 1, sizeof(*l)) ||
	    pp_grow(&b->lines, &b->cap_lines, b->n_lines, n_lines, sizeof(*b->lines)))
		return 0;
	l = &b->locs[b->n_locs];
	*l = (struct bloc){ mapping_id, address, b->n_lines, n_lines };
	for (i = 0; i < n_lines; i++)
		b->lines[b->n_lines++] = (struct pprof_line){ lines[i].function_id, lines[i].line, 0 };
	pp_htab__set(&b->loc_ht, pos, h, b->n_locs);
	return ++b->n_locs;
}

/* ---- samples ------------------------------------------------------------------------------ */

static int intern_labels(struct pprof_builder *b, const struct pprof_label_desc *labels,
			 size_t n_labels)
{
	size_t i;
	int err;

	err = pp_grow(&b->labels, &b->cap_labels, 0, n_labels, sizeof(*b->labels));
	for (i = 0; !err && i < n_labels; i++) {
		struct pprof_label *l = &b->labels[i];

		memset(l, 0, sizeof(*l));
		err = intern(b, labels[i].key, &l->key);
		if (err)
			break;
		if (labels[i].str) {
			err = intern(b, labels[i].str, &l->str);
		} else {
			l->num = labels[i].num;
			err = intern(b, labels[i].num_unit, &l->num_unit);
		}
	}
	return err;
}

int pprof_builder__add_sample(struct pprof_builder *b, const uint64_t *location_ids, size_t n_locs,
			      const int64_t *values, const struct pprof_label_desc *labels,
			      size_t n_labels)
{
	size_t i;
	int err;

	if (b->finished)
		return -EBUSY;
	if (b->err)
		return b->err;
	for (i = 0; i < n_locs; i++)
		if (!location_ids[i] || location_ids[i] > b->n_locs)
			return -EINVAL;
	err = intern_labels(b, labels, n_labels);
	if (err)
		return err;
	b->samples_started = true;
	if (!pp_enc_sample(&b->out->os, location_ids, n_locs, values, b->n_types, b->labels,
			   n_labels))
		b->err = b->out->err ? b->out->err : -EIO;
	return b->err;
}

/* ---- finish ------------------------------------------------------------------------------- */

static bool write_tables(struct pprof_builder *b)
{
	pb_ostream_t *os = &b->out->os;
	size_t i;

	for (i = 0; i < b->n_maps; i++)
		if (!pp_enc_mapping(os, &b->maps[i]))
			return false;
	for (i = 0; i < b->n_locs; i++) {
		struct pprof_location l = {
			.id = i + 1,
			.mapping_id = b->locs[i].mapping_id,
			.address = b->locs[i].address,
			.lines = b->lines + b->locs[i].line_off,
			.n_lines = b->locs[i].n_lines,
		};

		if (!pp_enc_location(os, &l))
			return false;
	}
	for (i = 0; i < b->n_funcs; i++)
		if (!pp_enc_function(os, &b->funcs[i]))
			return false;
	for (i = 0; i < b->strs.n; i++)
		if (!pp_enc_string(os, pp_strtab__get(&b->strs, i), b->strs.len[i]))
			return false;
	return true;
}

static bool write_header(struct pprof_builder *b)
{
	pb_ostream_t *os = &b->out->os;
	size_t i;

	for (i = 0; i < b->n_types; i++)
		if (!pp_enc_value_type(os, perftools_profiles_Profile_sample_type_tag, &b->types[i]))
			return false;
	if ((b->period_type.type || b->period_type.unit) &&
	    !pp_enc_value_type(os, perftools_profiles_Profile_period_type_tag, &b->period_type))
		return false;
	return pp_enc_varint_field(os, perftools_profiles_Profile_drop_frames_tag, b->drop_frames) &&
	       pp_enc_varint_field(os, perftools_profiles_Profile_time_nanos_tag, b->time_nanos) &&
	       pp_enc_varint_field(os, perftools_profiles_Profile_duration_nanos_tag,
				   b->duration_nanos) &&
	       pp_enc_varint_field(os, perftools_profiles_Profile_period_tag, b->period) &&
	       pp_enc_packed_i64(os, perftools_profiles_Profile_comment_tag, b->comments,
				 b->n_comments) &&
	       pp_enc_varint_field(os, perftools_profiles_Profile_default_sample_type_tag,
				   b->default_sample_type);
}

int pprof_builder__finish(struct pprof_builder *b)
{
	if (b->finished)
		return -EBUSY;
	b->finished = true;
	if (b->err)
		return b->err;
	if (!write_header(b) || !write_tables(b))
		b->err = b->out->err ? b->out->err : -EIO;
	else
		b->err = pp_out__finish(b->out);
	return b->err;
}

void pprof_builder__free(struct pprof_builder *b)
{
	if (!b)
		return;
	if (b->out)
		pp_out__release(b->out);
	free(b->out);
	pp_strtab__free(&b->strs);
	free(b->funcs);
	pp_htab__free(&b->func_ht);
	free(b->maps);
	pp_htab__free(&b->map_ht);
	free(b->locs);
	free(b->lines);
	pp_htab__free(&b->loc_ht);
	free(b->types);
	free(b->comments);
	free(b->labels);
	free(b);
}
