// SPDX-License-Identifier: MIT
/*
 * pprof/merge.c — N profiles into one, with the semantics of `pprof -proto a b ...`
 * (google/pprof profile/merge.go, described in /work/shared/notes/pprof-format.md):
 *
 *  - sample types: those present (by name) in every input, in the first input's order; units of
 *    a kept type and the period type must agree;
 *  - header: earliest non-zero time_nanos, summed duration, maximum period, de-duplicated
 *    comments, drop/keep frames from the first input, first non-empty default type and doc url;
 *  - mappings unified by (size rounded up to 4 KiB, file offset, build id, else file name) with
 *    addresses rebased onto the first mapping seen; locations by (address relative to the
 *    mapping, mapping, lines, is_folded); functions by (name, system name, file, start line);
 *  - samples summed when the merged stack and all labels are identical; zero samples dropped.
 *
 * Memory: the merged tables and one entry per unique (stack, labels) — not the inputs. Inputs
 * are only read during pprof_merger__add(). Because the set of common sample types is known only
 * after the last input, values are kept for all of the first input's types and the columns that
 * some later input lacks are dropped at finish (summing is per column, so this is the same).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pprof/internal.h"

struct mloc {
	uint64_t mapping_id, address;
	uint32_t line_off, n_lines;
	bool is_folded;
};

struct msample {
	uint32_t id_off, n_ids, label_off, n_labels;
};

struct mapinfo {
	uint64_t id;    /* merged mapping id; 0 = not mapped yet */
	int64_t offset; /* merged start - input start */
};

struct pprof_merger {
	size_t n_inputs;
	struct pp_strtab strs;

	/* header, in merged string indexes */
	struct pprof_value_type *types;
	bool *kept;
	size_t n_types;
	struct pprof_value_type period_type;
	int64_t period, time_nanos, duration_nanos, drop_frames, keep_frames;
	int64_t default_sample_type, doc_url;
	int64_t *comments;
	size_t n_comments, cap_comments;

	struct pprof_mapping *maps;
	size_t n_maps, cap_maps;
	struct pp_htab map_ht;
	struct pprof_function *funcs;
	size_t n_funcs, cap_funcs;
	struct pp_htab func_ht;
	struct mloc *locs;
	size_t n_locs, cap_locs;
	struct pprof_line *lines;
	size_t n_lines, cap_lines;
	struct pp_htab loc_ht;

	struct msample *samples;
	size_t n_samples, cap_samples;
	uint64_t *ids;
	size_t n_ids, cap_ids;
	struct pprof_label *labels;
	size_t n_labels, cap_labels;
	int64_t *values; /* n_types per sample */
	size_t cap_values;
	struct pp_htab sample_ht;

	/* per input: input index -> merged (0 / -1 = not yet) */
	int64_t *str_map;
	size_t cap_str_map;
	uint64_t *func_map, *loc_map;
	size_t cap_func_map, cap_loc_map;
	struct mapinfo *map_map;
	size_t cap_map_map;
	size_t *col_src; /* merged column -> input column */
	/* scratch for one sample */
	uint64_t *s_ids;
	size_t cap_s_ids;
	struct pprof_label *s_labels;
	size_t cap_s_labels;
	int64_t *s_values;

	const struct pprof_budget *budget; /* NULL: none */
	size_t charged;			   /* bytes taken from it for the tables */
};

struct pprof_merger *pprof_merger__new(void)
{
	struct pprof_merger *m = calloc(1, sizeof(*m));

	if (m && pp_strtab__intern(&m->strs, "", 0) != 0) {
		pprof_merger__free(m);
		return NULL;
	}
	return m;
}

/* Sums wrap around like Go's int64 (pprof's), instead of being undefined in C. */
static int64_t wrap_add(int64_t a, int64_t b)
{
	return (int64_t)((uint64_t)a + (uint64_t)b);
}

/* ---- strings ------------------------------------------------------------------------------ */

static int64_t map_str(struct pprof_merger *m, const struct pprof_profile *p, int64_t i)
{
	int64_t r;

	if (i <= 0 || (uint64_t)i >= p->n_strings)
		return 0;
	if (m->str_map[i] >= 0)
		return m->str_map[i];
	r = pp_strtab__intern(&m->strs, p->strings[i], strlen(p->strings[i]));
	if (r >= 0)
		m->str_map[i] = r;
	return r;
}

static const char *mstr(const struct pprof_merger *m, int64_t i)
{
	return pp_strtab__get(&m->strs, i);
}

/* ---- header ------------------------------------------------------------------------------- */

static void types_list(const struct pprof_profile *p, char *buf, size_t len)
{
	size_t i, o = 0;

	buf[0] = '\0';
	for (i = 0; i < p->n_sample_type && o + 1 < len; i++)
		o += snprintf(buf + o, len - o, "%s%s", i ? "," : "",
			      pprof_str(p, p->sample_type[i].type));
}

/* Which of our columns the input has (col_src), and whether any column survives. */
static int match_types(struct pprof_merger *m, const struct pprof_profile *p, bool *kept,
		       char *err, size_t errlen)
{
	size_t j, i, n_kept = 0;

	for (j = 0; j < m->n_types; j++) {
		const char *t = mstr(m, m->types[j].type);

		kept[j] = false;
		if (!m->kept[j])
			continue;
		for (i = 0; i < p->n_sample_type; i++)
			if (!strcmp(t, pprof_str(p, p->sample_type[i].type)))
				break;
		if (i == p->n_sample_type)
			continue;
		if (strcmp(mstr(m, m->types[j].unit), pprof_str(p, p->sample_type[i].unit))) {
			pp_err(err, errlen, "sample type %s is in %s in one profile and in %s in another",
			       t, mstr(m, m->types[j].unit), pprof_str(p, p->sample_type[i].unit));
			return -EINVAL;
		}
		kept[j] = true;
		m->col_src[j] = i;
		n_kept++;
	}
	if (!n_kept) {
		char a[128], b[128];

		types_list(p, b, sizeof(b));
		a[0] = '\0';
		for (j = 0; j < m->n_types; j++)
			snprintf(a + strlen(a), sizeof(a) - strlen(a), "%s%s", j ? "," : "",
				 mstr(m, m->types[j].type));
		pp_err(err, errlen, "%s profiles cannot be combined with %s profiles "
		       "(no common sample type)", a, b);
		return -EINVAL;
	}
	if (strcmp(mstr(m, m->period_type.type), pprof_str(p, p->period_type.type)) ||
	    strcmp(mstr(m, m->period_type.unit), pprof_str(p, p->period_type.unit))) {
		pp_err(err, errlen, "incompatible period types %s/%s and %s/%s",
		       mstr(m, m->period_type.type), mstr(m, m->period_type.unit),
		       pprof_str(p, p->period_type.type), pprof_str(p, p->period_type.unit));
		return -EINVAL;
	}
	return 0;
}

static int first_header(struct pprof_merger *m, const struct pprof_profile *p)
{
	size_t i;

	m->n_types = p->n_sample_type;
	m->types = calloc(m->n_types + 1, sizeof(*m->types));
	m->kept = calloc(m->n_types + 1, sizeof(*m->kept));
	m->col_src = calloc(m->n_types + 1, sizeof(*m->col_src));
	m->s_values = calloc(m->n_types + 1, sizeof(*m->s_values));
	if (!m->types || !m->kept || !m->col_src || !m->s_values)
		return -ENOMEM;
	for (i = 0; i < m->n_types; i++) {
		m->types[i].type = map_str(m, p, p->sample_type[i].type);
		m->types[i].unit = map_str(m, p, p->sample_type[i].unit);
		m->kept[i] = true;
		m->col_src[i] = i;
		if (m->types[i].type < 0 || m->types[i].unit < 0)
			return -ENOMEM;
	}
	m->period_type.type = map_str(m, p, p->period_type.type);
	m->period_type.unit = map_str(m, p, p->period_type.unit);
	m->drop_frames = map_str(m, p, p->drop_frames);
	m->keep_frames = map_str(m, p, p->keep_frames);
	if (m->period_type.type < 0 || m->period_type.unit < 0 || m->drop_frames < 0 ||
	    m->keep_frames < 0)
		return -ENOMEM;
	return 0;
}

static int merge_header(struct pprof_merger *m, const struct pprof_profile *p)
{
	size_t i, j;

	if (p->time_nanos && (!m->time_nanos || p->time_nanos < m->time_nanos))
		m->time_nanos = p->time_nanos;
	m->duration_nanos = wrap_add(m->duration_nanos, p->duration_nanos);
	if (p->period > m->period)
		m->period = p->period;
	if (!m->default_sample_type)
		m->default_sample_type = map_str(m, p, p->default_sample_type);
	if (!m->doc_url)
		m->doc_url = map_str(m, p, p->doc_url);
	for (i = 0; i < p->n_comments; i++) {
		int64_t c = map_str(m, p, p->comments[i]);

		if (c < 0)
			return c;
		for (j = 0; j < m->n_comments && m->comments[j] != c; j++)
			;
		if (j < m->n_comments)
			continue;
		if (pp_grow(&m->comments, &m->cap_comments, m->n_comments, 1, sizeof(c)))
			return -ENOMEM;
		m->comments[m->n_comments++] = c;
	}
	return m->default_sample_type < 0 || m->doc_url < 0 ? -ENOMEM : 0;
}

int pprof_merger__add_comment(struct pprof_merger *m, const char *comment)
{
	int64_t c = pp_strtab__intern(&m->strs, comment, strlen(comment));

	if (c < 0)
		return (int)c;
	if (pp_grow(&m->comments, &m->cap_comments, m->n_comments, 1, sizeof(c)))
		return -ENOMEM;
	m->comments[m->n_comments++] = c;
	return 0;
}

/* ---- tables ------------------------------------------------------------------------------- */

static int map_mapping(struct pprof_merger *m, const struct pprof_profile *p, uint64_t id,
		       struct mapinfo *out)
{
	const struct pprof_mapping *src = &p->mappings[id - 1];
	struct mapinfo *mi = &m->map_map[id - 1];
	uint64_t size = src->memory_limit - src->memory_start;
	struct pprof_mapping nm = *src;
	int64_t key_file;
	uint64_t h;
	size_t pos;

	if (mi->id) {
		*out = *mi;
		return 0;
	}
	size = (size + 0xfff) & ~(uint64_t)0xfff;
	nm.filename = map_str(m, p, src->filename);
	nm.build_id = map_str(m, p, src->build_id);
	if (nm.filename < 0 || nm.build_id < 0)
		return -ENOMEM;
	key_file = nm.build_id ? nm.build_id : nm.filename;
	h = pp_mix(pp_mix(size, src->file_offset), key_file);
	if (pp_htab__reserve(&m->map_ht, 1))
		return -ENOMEM;
	for (pos = pp_htab__pos(&m->map_ht, h); m->map_ht.e[pos].slot;
	     pos = (pos + 1) & (m->map_ht.cap - 1)) {
		const struct pprof_mapping *e = &m->maps[m->map_ht.e[pos].slot - 1];
		uint64_t esize = ((e->memory_limit - e->memory_start) + 0xfff) & ~(uint64_t)0xfff;

		if (m->map_ht.e[pos].hash == (uint32_t)h && esize == size &&
		    e->file_offset == src->file_offset &&
		    (e->build_id ? e->build_id : e->filename) == key_file) {
			mi->id = e->id;
			mi->offset = (int64_t)(e->memory_start - src->memory_start);
			*out = *mi;
			return 0;
		}
	}
	if (pp_grow(&m->maps, &m->cap_maps, m->n_maps, 1, sizeof(nm)))
		return -ENOMEM;
	nm.id = m->n_maps + 1;
	m->maps[m->n_maps] = nm;
	pp_htab__set(&m->map_ht, pos, h, m->n_maps++);
	mi->id = nm.id;
	mi->offset = 0;
	*out = *mi;
	return 0;
}

static int64_t map_function(struct pprof_merger *m, const struct pprof_profile *p, uint64_t id)
{
	const struct pprof_function *src = &p->functions[id - 1];
	struct pprof_function f = { .start_line = src->start_line };
	uint64_t h;
	size_t pos;

	if (m->func_map[id - 1])
		return m->func_map[id - 1];
	f.name = map_str(m, p, src->name);
	f.system_name = map_str(m, p, src->system_name);
	f.filename = map_str(m, p, src->filename);
	if (f.name < 0 || f.system_name < 0 || f.filename < 0)
		return -ENOMEM;
	h = pp_mix(pp_mix(pp_mix(f.name, f.system_name), f.filename), f.start_line);
	if (pp_htab__reserve(&m->func_ht, 1))
		return -ENOMEM;
	for (pos = pp_htab__pos(&m->func_ht, h); m->func_ht.e[pos].slot;
	     pos = (pos + 1) & (m->func_ht.cap - 1)) {
		const struct pprof_function *e = &m->funcs[m->func_ht.e[pos].slot - 1];

		if (m->func_ht.e[pos].hash == (uint32_t)h && e->name == f.name &&
		    e->system_name == f.system_name && e->filename == f.filename &&
		    e->start_line == f.start_line)
			return m->func_map[id - 1] = e->id;
	}
	if (pp_grow(&m->funcs, &m->cap_funcs, m->n_funcs, 1, sizeof(f)))
		return -ENOMEM;
	f.id = m->n_funcs + 1;
	m->funcs[m->n_funcs] = f;
	pp_htab__set(&m->func_ht, pos, h, m->n_funcs++);
	return m->func_map[id - 1] = f.id;
}

static bool mloc_eq(const struct pprof_merger *m, const struct mloc *a, const struct mloc *b,
		    const struct pprof_line *b_lines)
{
	if (a->mapping_id != b->mapping_id || a->address != b->address ||
	    a->n_lines != b->n_lines || a->is_folded != b->is_folded)
		return false;
	return !memcmp(m->lines + a->line_off, b_lines, a->n_lines * sizeof(*b_lines));
}

/* Merged id of input location id, or -errno. */
static int64_t map_location(struct pprof_merger *m, const struct pprof_profile *p, uint64_t id)
{
	const struct pprof_location *src = &p->locations[id - 1];
	struct mloc l = { .address = src->address, .is_folded = src->is_folded };
	struct pprof_line *lines;
	uint64_t h;
	size_t pos, i;

	if (m->loc_map[id - 1])
		return m->loc_map[id - 1];
	if (src->mapping_id) {
		struct mapinfo mi;

		if (map_mapping(m, p, src->mapping_id, &mi))
			return -ENOMEM;
		l.mapping_id = mi.id;
		l.address = src->address + mi.offset;
	}
	/* The new lines go at the end of the pool; they stay there only if the location is new. */
	if (pp_grow(&m->lines, &m->cap_lines, m->n_lines, src->n_lines, sizeof(*lines)))
		return -ENOMEM;
	lines = m->lines + m->n_lines;
	h = pp_mix(pp_mix(l.mapping_id, l.address), l.is_folded);
	for (i = 0; i < src->n_lines; i++) {
		int64_t f = src->lines[i].function_id ? map_function(m, p, src->lines[i].function_id)
						       : 0;

		if (f < 0)
			return f;
		lines[i] = (struct pprof_line){ f, src->lines[i].line, src->lines[i].column };
		h = pp_mix(pp_mix(pp_mix(h, f), lines[i].line), lines[i].column);
	}
	l.n_lines = src->n_lines;
	if (pp_htab__reserve(&m->loc_ht, 1))
		return -ENOMEM;
	for (pos = pp_htab__pos(&m->loc_ht, h); m->loc_ht.e[pos].slot;
	     pos = (pos + 1) & (m->loc_ht.cap - 1)) {
		uint32_t e = m->loc_ht.e[pos].slot - 1;

		if (m->loc_ht.e[pos].hash == (uint32_t)h && mloc_eq(m, &m->locs[e], &l, lines))
			return m->loc_map[id - 1] = e + 1;
	}
	if (pp_grow(&m->locs, &m->cap_locs, m->n_locs, 1, sizeof(l)))
		return -ENOMEM;
	l.line_off = m->n_lines;
	m->n_lines += l.n_lines;
	m->locs[m->n_locs] = l;
	pp_htab__set(&m->loc_ht, pos, h, m->n_locs++);
	return m->loc_map[id - 1] = m->n_locs;
}

/* ---- samples ------------------------------------------------------------------------------ */

static int label_cmp(const void *a, const void *b)
{
	const struct pprof_label *x = a, *y = b;

	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	if (x->str != y->str)
		return x->str < y->str ? -1 : 1;
	if (x->num != y->num)
		return x->num < y->num ? -1 : 1;
	return x->num_unit < y->num_unit ? -1 : x->num_unit > y->num_unit;
}

/*
 * One step of the stack hash (FxHash's): cheaper than pp_mix per frame; its weak low bits are
 * mixed once per stack by the pp_mix that follows.
 */
static inline uint64_t stack_step(uint64_t h, uint64_t v)
{
	return (((h << 5) | (h >> 59)) ^ v) * 0x517cc1b727220a95ULL;
}

/* stack_hash: stack_step() over n_ids and then each id, as merge_sample() computes it. */
static int add_sample(struct pprof_merger *m, uint64_t stack_hash, const uint64_t *ids,
		      size_t n_ids, const struct pprof_label *labels, size_t n_labels,
		      const int64_t *values)
{
	uint64_t h = pp_mix(stack_hash, n_labels);
	struct msample *s;
	size_t i, pos;

	for (i = 0; i < n_labels; i++)
		h = pp_mix(pp_mix(pp_mix(pp_mix(h, labels[i].key), labels[i].str), labels[i].num),
			   labels[i].num_unit);
	if (pp_htab__reserve(&m->sample_ht, 1))
		return -ENOMEM;
	for (pos = pp_htab__pos(&m->sample_ht, h); m->sample_ht.e[pos].slot;
	     pos = (pos + 1) & (m->sample_ht.cap - 1)) {
		uint32_t e = m->sample_ht.e[pos].slot - 1;

		s = &m->samples[e];
		if (m->sample_ht.e[pos].hash != (uint32_t)h || s->n_ids != n_ids ||
		    s->n_labels != n_labels ||
		    memcmp(m->ids + s->id_off, ids, n_ids * sizeof(*ids)) ||
		    memcmp(m->labels + s->label_off, labels, n_labels * sizeof(*labels)))
			continue;
		for (i = 0; i < m->n_types; i++)
			m->values[e * m->n_types + i] = wrap_add(m->values[e * m->n_types + i],
								 values[i]);
		return 0;
	}
	if (m->n_ids + n_ids > UINT32_MAX || m->n_labels + n_labels > UINT32_MAX ||
	    pp_grow(&m->samples, &m->cap_samples, m->n_samples, 1, sizeof(*s)) ||
	    pp_grow(&m->ids, &m->cap_ids, m->n_ids, n_ids, sizeof(*ids)) ||
	    pp_grow(&m->labels, &m->cap_labels, m->n_labels, n_labels, sizeof(*labels)) ||
	    pp_grow(&m->values, &m->cap_values, m->n_samples * m->n_types, m->n_types,
		    sizeof(*values)))
		return -ENOMEM;
	s = &m->samples[m->n_samples];
	*s = (struct msample){ m->n_ids, n_ids, m->n_labels, n_labels };
	memcpy(m->ids + m->n_ids, ids, n_ids * sizeof(*ids));
	memcpy(m->labels + m->n_labels, labels, n_labels * sizeof(*labels));
	memcpy(m->values + m->n_samples * m->n_types, values, m->n_types * sizeof(*values));
	m->n_ids += n_ids;
	m->n_labels += n_labels;
	pp_htab__set(&m->sample_ht, pos, h, m->n_samples++);
	return 0;
}

static int merge_sample(struct pprof_merger *m, const struct pprof_profile *p,
			const struct pprof_sample *s)
{
	bool zero = true;
	uint64_t h;
	size_t i;

	for (i = 0; i < m->n_types; i++) {
		m->s_values[i] = m->kept[i] ? s->values[m->col_src[i]] : 0;
		zero = zero && !m->s_values[i];
	}
	if (zero)
		return 0; /* pprof drops zero samples before mapping their locations */
	if (pp_grow(&m->s_ids, &m->cap_s_ids, 0, s->n_locations, sizeof(*m->s_ids)) ||
	    pp_grow(&m->s_labels, &m->cap_s_labels, 0, s->n_labels, sizeof(*m->s_labels)))
		return -ENOMEM;
	for (i = 0, h = s->n_locations; i < s->n_locations; i++) {
		/* Cached after the first sample that used it: the common case, kept inline. */
		uint64_t id = m->loc_map[s->location_ids[i] - 1];

		if (!id) {
			int64_t r = map_location(m, p, s->location_ids[i]);

			if (r < 0)
				return r;
			id = r;
		}
		m->s_ids[i] = id;
		h = stack_step(h, id);
	}
	for (i = 0; i < s->n_labels; i++) {
		struct pprof_label *l = &m->s_labels[i];

		memset(l, 0, sizeof(*l)); /* padding-free, but compared with memcmp: be sure */
		l->key = map_str(m, p, s->labels[i].key);
		l->str = map_str(m, p, s->labels[i].str);
		l->num = s->labels[i].num;
		l->num_unit = map_str(m, p, s->labels[i].num_unit);
		if (l->key < 0 || l->str < 0 || l->num_unit < 0)
			return -ENOMEM;
	}
	if (s->n_labels > 1) /* most samples have none: skip qsort's setup cost */
		qsort(m->s_labels, s->n_labels, sizeof(*m->s_labels), label_cmp);
	return add_sample(m, h, m->s_ids, s->n_locations, m->s_labels, s->n_labels, m->s_values);
}

/* ---- memory: what the tables hold, and what adding an input may make them hold -------------- */

static size_t htab_mem(const struct pp_htab *t)
{
	return t->cap * sizeof(*t->e);
}

size_t pprof_merger__mem(const struct pprof_merger *m)
{
	size_t n = sizeof(*m) + m->strs.data_cap + m->strs.cap * 2 * sizeof(uint32_t);

	n += htab_mem(&m->strs.ht) + htab_mem(&m->map_ht) + htab_mem(&m->func_ht) +
	     htab_mem(&m->loc_ht) + htab_mem(&m->sample_ht);
	n += (m->types ? m->n_types + 1 : 0) *
	     (sizeof(*m->types) + sizeof(*m->kept) + sizeof(*m->col_src) + sizeof(*m->s_values));
	n += m->cap_comments * sizeof(*m->comments) + m->cap_maps * sizeof(*m->maps) +
	     m->cap_funcs * sizeof(*m->funcs) + m->cap_locs * sizeof(*m->locs) +
	     m->cap_lines * sizeof(*m->lines) + m->cap_samples * sizeof(*m->samples) +
	     m->cap_ids * sizeof(*m->ids) + m->cap_labels * sizeof(*m->labels) +
	     m->cap_values * sizeof(*m->values);
	n += m->cap_str_map * sizeof(*m->str_map) + m->cap_func_map * sizeof(*m->func_map) +
	     m->cap_loc_map * sizeof(*m->loc_map) + m->cap_map_map * sizeof(*m->map_map) +
	     m->cap_s_ids * sizeof(*m->s_ids) + m->cap_s_labels * sizeof(*m->s_labels);
	return n;
}

/*
 * A growable array's bytes once it holds n + more (pp_grow_slow's doubling); *moved gets the
 * larger of itself and the old array's bytes when it must grow (realloc may hold both).
 */
static size_t grown(size_t cap, size_t n, size_t more, size_t sz, size_t *moved)
{
	size_t c = cap ? cap : 8;

	if (n + more <= cap)
		return cap * sz;
	while (c < n + more)
		c = c > SIZE_MAX / 4 / sz ? SIZE_MAX / 4 / sz : c * 2;
	if (cap * sz > *moved)
		*moved = cap * sz;
	return c * sz;
}

/* A hash table's bytes once it holds n + more at load <= 1/2 (pp_htab__grow). */
static size_t htab_grown(const struct pp_htab *t, size_t more, size_t *moved)
{
	size_t c = t->cap ? t->cap : 16;

	while ((t->n + more) * 2 > c && c < SIZE_MAX / 4 / sizeof(*t->e))
		c *= 2;
	if (c != t->cap && htab_mem(t) > *moved)
		*moved = htab_mem(t);
	return c * sizeof(*t->e);
}

/* The most m's tables can hold after adding p: every entry of p new. */
static size_t add_bound(const struct pprof_merger *m, const struct pprof_profile *p)
{
	size_t ids = 0, labels = 0, lines = 0, bytes = 0, max_ids = 0, max_labels = 0, moved = 0;
	size_t nt = m->types ? m->n_types : p->n_sample_type, n;

	for (size_t i = 0; i < p->n_samples; i++) {
		ids += p->samples[i].n_locations;
		labels += p->samples[i].n_labels;
		if (p->samples[i].n_locations > max_ids)
			max_ids = p->samples[i].n_locations;
		if (p->samples[i].n_labels > max_labels)
			max_labels = p->samples[i].n_labels;
	}
	for (size_t i = 0; i < p->n_locations; i++)
		lines += p->locations[i].n_lines;
	for (size_t i = 0; i < p->n_strings; i++)
		bytes += strlen(p->strings[i]) + 1;
	n = sizeof(*m) + (nt + 1) * (sizeof(*m->types) + sizeof(*m->kept) + sizeof(*m->col_src) +
				    sizeof(*m->s_values) + sizeof(bool));
	n += grown(m->strs.data_cap, m->strs.data_len, bytes, 1, &moved) +
	     grown(m->strs.cap, m->strs.n, p->n_strings, 2 * sizeof(uint32_t), &moved) +
	     htab_grown(&m->strs.ht, p->n_strings, &moved);
	n += grown(m->cap_comments, m->n_comments, p->n_comments + 1, sizeof(*m->comments), &moved);
	n += grown(m->cap_maps, m->n_maps, p->n_mappings, sizeof(*m->maps), &moved) +
	     htab_grown(&m->map_ht, p->n_mappings, &moved);
	n += grown(m->cap_funcs, m->n_funcs, p->n_functions, sizeof(*m->funcs), &moved) +
	     htab_grown(&m->func_ht, p->n_functions, &moved);
	n += grown(m->cap_locs, m->n_locs, p->n_locations, sizeof(*m->locs), &moved) +
	     grown(m->cap_lines, m->n_lines, lines, sizeof(*m->lines), &moved) +
	     htab_grown(&m->loc_ht, p->n_locations, &moved);
	n += grown(m->cap_samples, m->n_samples, p->n_samples, sizeof(*m->samples), &moved) +
	     grown(m->cap_ids, m->n_ids, ids, sizeof(*m->ids), &moved) +
	     grown(m->cap_labels, m->n_labels, labels, sizeof(*m->labels), &moved) +
	     grown(m->cap_values, m->n_samples * nt, p->n_samples * nt, sizeof(*m->values),
		   &moved) +
	     htab_grown(&m->sample_ht, p->n_samples, &moved);
	n += grown(m->cap_str_map, 0, p->n_strings, sizeof(*m->str_map), &moved) +
	     grown(m->cap_func_map, 0, p->n_functions, sizeof(*m->func_map), &moved) +
	     grown(m->cap_loc_map, 0, p->n_locations, sizeof(*m->loc_map), &moved) +
	     grown(m->cap_map_map, 0, p->n_mappings, sizeof(*m->map_map), &moved) +
	     grown(m->cap_s_ids, 0, max_ids, sizeof(*m->s_ids), &moved) +
	     grown(m->cap_s_labels, 0, max_labels, sizeof(*m->s_labels), &moved);
	return n + moved;
}

/* The most the merged profile and finish's id maps can take, with every sample kept. */
static size_t finish_bound(const struct pprof_merger *m)
{
	return sizeof(struct pprof_profile) + sizeof(struct pprof_blocks) +
	       (m->n_samples + 1) * (sizeof(struct pprof_sample) + m->n_types * sizeof(int64_t)) +
	       (m->n_ids + 1) * sizeof(uint64_t) + (m->n_labels + 1) * sizeof(struct pprof_label) +
	       (m->n_locs + 1) * (sizeof(struct pprof_location) + sizeof(uint64_t)) +
	       (m->n_lines + 1) * sizeof(struct pprof_line) +
	       (m->n_funcs + 1) * (sizeof(struct pprof_function) + sizeof(uint64_t)) +
	       (m->n_maps + 1) * (sizeof(struct pprof_mapping) + sizeof(uint64_t)) +
	       (m->strs.n + 1) * sizeof(char *) + (m->n_comments + 1) * sizeof(int64_t) +
	       (m->n_types + 1) * (sizeof(struct pprof_value_type) + sizeof(size_t));
}

const struct pprof_budget *pp_merger_budget(const struct pprof_merger *m)
{
	return m->budget;
}

void pprof_merger__set_budget(struct pprof_merger *m, const struct pprof_budget *b)
{
	if (m->budget && m->charged)
		m->budget->give(m->budget->ctx, m->charged);
	m->budget = b;
	m->charged = 0;
	if (b) {
		char err[160];

		if (!b->take(b->ctx, pprof_merger__mem(m), err, sizeof(err)))
			m->charged = pprof_merger__mem(m); /* a new merger's few bytes */
	}
}

/* Asks the budget for what adding p may cost, past the deadline stops first. */
static int budget_before_add(struct pprof_merger *m, const struct pprof_profile *p, char *err,
			     size_t errlen)
{
	size_t need;
	int e;

	if (!m->budget)
		return 0;
	e = pprof_budget__check(m->budget, err, errlen);
	if (e)
		return e;
	need = add_bound(m, p);
	if (need <= m->charged)
		return 0;
	e = m->budget->take(m->budget->ctx, need - m->charged, err, errlen);
	if (!e)
		m->charged = need;
	return e;
}

/* Gives back what the tables did not take, beyond keep bytes handed on (the merged profile). */
static void budget_settle_to(struct pprof_merger *m, size_t keep)
{
	size_t now;

	if (!m->budget)
		return;
	now = pprof_merger__mem(m) + keep;
	if (now < m->charged) {
		m->budget->give(m->budget->ctx, m->charged - now);
		m->charged = now;
	}
	m->charged = m->charged > keep ? m->charged - keep : 0;
}

static void budget_settle(struct pprof_merger *m)
{
	budget_settle_to(m, 0);
}

/* ---- add ---------------------------------------------------------------------------------- */

static int reset_maps(struct pprof_merger *m, const struct pprof_profile *p)
{
	if (pp_grow(&m->str_map, &m->cap_str_map, 0, p->n_strings, sizeof(*m->str_map)) ||
	    pp_grow(&m->func_map, &m->cap_func_map, 0, p->n_functions, sizeof(*m->func_map)) ||
	    pp_grow(&m->loc_map, &m->cap_loc_map, 0, p->n_locations, sizeof(*m->loc_map)) ||
	    pp_grow(&m->map_map, &m->cap_map_map, 0, p->n_mappings, sizeof(*m->map_map)))
		return -ENOMEM;
	memset(m->str_map, 0xff, p->n_strings * sizeof(*m->str_map));
	if (p->n_strings)
		m->str_map[0] = 0;
	memset(m->func_map, 0, p->n_functions * sizeof(*m->func_map));
	memset(m->loc_map, 0, p->n_locations * sizeof(*m->loc_map));
	memset(m->map_map, 0, p->n_mappings * sizeof(*m->map_map));
	return 0;
}

int pprof_merger__add(struct pprof_merger *m, const struct pprof_profile *p, char *err,
		      size_t errlen)
{
	bool *kept = NULL;
	size_t i;
	int ret;

	ret = budget_before_add(m, p, err, errlen);
	if (ret)
		return ret; /* nothing changed */
	ret = reset_maps(m, p);
	if (ret)
		goto out;
	if (!m->n_inputs) {
		ret = first_header(m, p);
	} else {
		kept = calloc(m->n_types + 1, sizeof(*kept));
		ret = kept ? match_types(m, p, kept, err, errlen) : -ENOMEM;
		if (ret)
			goto out; /* nothing changed: the merger stays usable */
		memcpy(m->kept, kept, m->n_types * sizeof(*kept));
	}
	if (!ret)
		ret = merge_header(m, p);
	if (!ret && !m->n_maps && p->n_mappings) {
		struct mapinfo mi;

		/* mapping[0] is the main binary by convention: map it first. */
		ret = map_mapping(m, p, 1, &mi);
	}
	for (i = 0; !ret && i < p->n_samples; i++) {
		ret = merge_sample(m, p, &p->samples[i]);
		if (!ret && m->budget && (i + 1) % PPROF_BUDGET_CHECK_SAMPLES == 0)
			ret = pprof_budget__check(m->budget, err, errlen);
	}
	m->n_inputs++;
out:
	budget_settle(m);
	free(kept);
	if (ret == -ENOMEM)
		pp_err(err, errlen, "out of memory");
	return ret;
}

/* ---- finish ------------------------------------------------------------------------------- */

struct out_ctx {
	size_t *col;     /* output column -> merged column */
	size_t n_cols;
	uint64_t *loc_new, *func_new, *map_new; /* merged id -> output id (0 = unused) */
};

static bool sample_is_zero(const struct pprof_merger *m, const struct out_ctx *o, size_t i)
{
	size_t c;

	for (c = 0; c < o->n_cols; c++)
		if (m->values[i * m->n_types + o->col[c]])
			return false;
	return true;
}

/* Marks what non-zero samples reference and numbers it in merged order (ids from 1). */
static void number_used(struct pprof_merger *m, struct out_ctx *o, size_t *nl, size_t *nf,
			size_t *nm, size_t *n_lines)
{
	size_t i, j, k;

	if (m->n_maps)
		o->map_new[0] = 1; /* the main binary stays first */
	for (i = 0; i < m->n_samples; i++) {
		if (sample_is_zero(m, o, i))
			continue;
		for (j = 0; j < m->samples[i].n_ids; j++)
			o->loc_new[m->ids[m->samples[i].id_off + j] - 1] = 1;
	}
	*nl = *nf = *nm = *n_lines = 0;
	for (i = 0; i < m->n_locs; i++) {
		const struct mloc *l = &m->locs[i];

		if (!o->loc_new[i])
			continue;
		o->loc_new[i] = ++*nl;
		*n_lines += l->n_lines;
		if (l->mapping_id)
			o->map_new[l->mapping_id - 1] = 1;
		for (k = 0; k < l->n_lines; k++)
			if (m->lines[l->line_off + k].function_id)
				o->func_new[m->lines[l->line_off + k].function_id - 1] = 1;
	}
	for (i = 0; i < m->n_funcs; i++)
		if (o->func_new[i])
			o->func_new[i] = ++*nf;
	for (i = 0; i < m->n_maps; i++)
		if (o->map_new[i])
			o->map_new[i] = ++*nm;
}

static int build_tables(struct pprof_merger *m, struct out_ctx *o, struct pprof_profile *p)
{
	size_t nl, nf, nm, n_lines, i, k, line_pos = 0;

	number_used(m, o, &nl, &nf, &nm, &n_lines);
	p->locations = calloc(nl + 1, sizeof(*p->locations));
	p->functions = calloc(nf + 1, sizeof(*p->functions));
	p->mappings = calloc(nm + 1, sizeof(*p->mappings));
	p->blocks->lines = calloc(n_lines + 1, sizeof(*p->blocks->lines));
	if (!p->locations || !p->functions || !p->mappings || !p->blocks->lines)
		return -ENOMEM;
	for (i = 0; i < m->n_maps; i++) {
		if (!o->map_new[i])
			continue;
		p->mappings[p->n_mappings] = m->maps[i];
		p->mappings[p->n_mappings++].id = o->map_new[i];
	}
	for (i = 0; i < m->n_funcs; i++) {
		if (!o->func_new[i])
			continue;
		p->functions[p->n_functions] = m->funcs[i];
		p->functions[p->n_functions++].id = o->func_new[i];
	}
	for (i = 0; i < m->n_locs; i++) {
		const struct mloc *ml = &m->locs[i];
		struct pprof_location *l;

		if (!o->loc_new[i])
			continue;
		l = &p->locations[p->n_locations++];
		l->id = o->loc_new[i];
		l->mapping_id = ml->mapping_id ? o->map_new[ml->mapping_id - 1] : 0;
		l->address = ml->address;
		l->is_folded = ml->is_folded;
		l->lines = p->blocks->lines + line_pos;
		l->n_lines = ml->n_lines;
		for (k = 0; k < ml->n_lines; k++) {
			struct pprof_line ln = m->lines[ml->line_off + k];

			ln.function_id = ln.function_id ? o->func_new[ln.function_id - 1] : 0;
			l->lines[k] = ln;
		}
		line_pos += ml->n_lines;
	}
	return 0;
}

static int build_samples(struct pprof_merger *m, struct out_ctx *o, struct pprof_profile *p)
{
	struct pprof_blocks *bl = p->blocks;
	size_t i, j, n_ids = 0, n_labels = 0, n = 0;

	for (i = 0; i < m->n_samples; i++) {
		if (sample_is_zero(m, o, i))
			continue;
		n++;
		n_ids += m->samples[i].n_ids;
		n_labels += m->samples[i].n_labels;
	}
	p->samples = calloc(n + 1, sizeof(*p->samples));
	bl->ids = malloc((n_ids + 1) * sizeof(*bl->ids));
	bl->labels = malloc((n_labels + 1) * sizeof(*bl->labels));
	bl->values = malloc((n * o->n_cols + 1) * sizeof(*bl->values));
	if (!p->samples || !bl->ids || !bl->labels || !bl->values)
		return -ENOMEM;
	n_ids = n_labels = 0;
	for (i = 0; i < m->n_samples; i++) {
		const struct msample *ms = &m->samples[i];
		struct pprof_sample *s;

		if (sample_is_zero(m, o, i))
			continue;
		s = &p->samples[p->n_samples];
		s->location_ids = bl->ids + n_ids;
		s->n_locations = ms->n_ids;
		for (j = 0; j < ms->n_ids; j++)
			s->location_ids[j] = o->loc_new[m->ids[ms->id_off + j] - 1];
		s->labels = bl->labels + n_labels;
		s->n_labels = ms->n_labels;
		memcpy(s->labels, m->labels + ms->label_off, ms->n_labels * sizeof(*s->labels));
		s->values = bl->values + p->n_samples * o->n_cols;
		for (j = 0; j < o->n_cols; j++)
			s->values[j] = m->values[i * m->n_types + o->col[j]];
		n_ids += ms->n_ids;
		n_labels += ms->n_labels;
		p->n_samples++;
	}
	return 0;
}

static int build_header(struct pprof_merger *m, struct out_ctx *o, struct pprof_profile *p)
{
	size_t i;

	p->sample_type = calloc(o->n_cols + 1, sizeof(*p->sample_type));
	p->comments = calloc(m->n_comments + 1, sizeof(*p->comments));
	p->strings = calloc(m->strs.n + 1, sizeof(*p->strings));
	if (!p->sample_type || !p->comments || !p->strings)
		return -ENOMEM;
	for (i = 0; i < o->n_cols; i++)
		p->sample_type[i] = m->types[o->col[i]];
	p->n_sample_type = o->n_cols;
	if (m->n_comments)
		memcpy(p->comments, m->comments, m->n_comments * sizeof(*p->comments));
	p->n_comments = m->n_comments;
	p->period_type = m->period_type;
	p->period = m->period;
	p->time_nanos = m->time_nanos;
	p->duration_nanos = m->duration_nanos;
	p->drop_frames = m->drop_frames;
	p->keep_frames = m->keep_frames;
	p->default_sample_type = m->default_sample_type;
	p->doc_url = m->doc_url;
	/* The string table moves over whole: its bytes become the profile's string block. */
	for (i = 0; i < m->strs.n; i++)
		p->strings[i] = m->strs.data + m->strs.off[i];
	p->n_strings = m->strs.n;
	p->blocks->strdata = m->strs.data;
	m->strs.data = NULL;
	return 0;
}

int pprof_merger__finish(struct pprof_merger *m, struct pprof_profile **out, char *err,
			 size_t errlen)
{
	struct pprof_profile *p = NULL;
	struct out_ctx o = { 0 };
	size_t i, out_bound = finish_bound(m);
	int ret = -ENOMEM;

	*out = NULL;
	if (m->budget) {
		ret = m->budget->take(m->budget->ctx, out_bound, err, errlen);
		if (ret)
			return ret;
		m->charged += out_bound;
	}
	ret = -ENOMEM;
	p = calloc(1, sizeof(*p));
	if (!p || !(p->blocks = calloc(1, sizeof(*p->blocks))))
		goto out;
	if (!m->n_inputs) {
		pp_err(err, errlen, "no profiles to merge");
		ret = -EINVAL;
		goto out;
	}
	o.col = calloc(m->n_types + 1, sizeof(*o.col));
	o.loc_new = calloc(m->n_locs + 1, sizeof(*o.loc_new));
	o.func_new = calloc(m->n_funcs + 1, sizeof(*o.func_new));
	o.map_new = calloc(m->n_maps + 1, sizeof(*o.map_new));
	if (!o.col || !o.loc_new || !o.func_new || !o.map_new)
		goto out;
	for (i = 0; i < m->n_types; i++)
		if (m->kept[i])
			o.col[o.n_cols++] = i;
	ret = build_tables(m, &o, p);
	if (!ret)
		ret = build_samples(m, &o, p);
	if (!ret && m->strs.data)
		ret = build_header(m, &o, p);
	else if (!ret)
		ret = -EBUSY; /* finished twice */
out:
	free(o.col);
	free(o.loc_new);
	free(o.func_new);
	free(o.map_new);
	if (ret) {
		if (ret == -ENOMEM)
			pp_err(err, errlen, "out of memory");
		if (p && !p->blocks) {
			free(p);
			p = NULL;
		}
		pprof_profile__free(p);
		budget_settle(m);
		return ret;
	}
	/* the merged profile's share goes to the caller with it */
	budget_settle_to(m, pprof_profile__mem(p));
	*out = p;
	return 0;
}

void pprof_merger__free(struct pprof_merger *m)
{
	if (!m)
		return;
	if (m->budget && m->charged)
		m->budget->give(m->budget->ctx, m->charged);
	pp_strtab__free(&m->strs);
	free(m->types);
	free(m->kept);
	free(m->comments);
	free(m->maps);
	pp_htab__free(&m->map_ht);
	free(m->funcs);
	pp_htab__free(&m->func_ht);
	free(m->locs);
	free(m->lines);
	pp_htab__free(&m->loc_ht);
	free(m->samples);
	free(m->ids);
	free(m->labels);
	free(m->values);
	pp_htab__free(&m->sample_ht);
	free(m->str_map);
	free(m->func_map);
	free(m->loc_map);
	free(m->map_map);
	free(m->col_src);
	free(m->s_ids);
	free(m->s_labels);
	free(m->s_values);
	free(m);
}
