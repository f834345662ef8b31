// SPDX-License-Identifier: MIT
/*
 * pprof/writer.c — protobuf encoding of the profile's messages with nanopb, through zlib.
 *
 * Bytes flow: nanopb encoders -> stage[] -> deflate (gzip wrapper) -> zbuf[] -> write(). Each
 * Profile field is written as soon as it is known: protobuf allows fields in any order and
 * repeated fields interleaved, so the builder can stream samples and write tables at the end.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pprof/internal.h"
#include "pprof/profile.pb.h"

static int out__deflate(struct pp_out *o, const unsigned char *in, size_t len, int flush)
{
	int ret;

	o->z.next_in = (unsigned char *)in;
	o->z.avail_in = len;
	do {
		o->z.next_out = o->zbuf;
		o->z.avail_out = sizeof(o->zbuf);
		ret = deflate(&o->z, flush);
		if (ret == Z_STREAM_ERROR)
			return -EIO;
		if (sizeof(o->zbuf) - o->z.avail_out) {
			int err = o->write(o->ctx, o->zbuf, sizeof(o->zbuf) - o->z.avail_out);

			if (err)
				return err;
		}
	} while (o->z.avail_out == 0 || (flush == Z_FINISH && ret != Z_STREAM_END));
	return 0;
}

static int out__flush_stage(struct pp_out *o)
{
	int err;

	if (!o->stage_len)
		return 0;
	err = o->gzip ? out__deflate(o, o->stage, o->stage_len, Z_NO_FLUSH)
		      : o->write(o->ctx, o->stage, o->stage_len);
	o->stage_len = 0;
	return err;
}

static bool out__os_write(pb_ostream_t *os, const pb_byte_t *buf, size_t count)
{
	struct pp_out *o = os->state;

	if (o->err)
		return false;
	while (count) {
		size_t n = sizeof(o->stage) - o->stage_len;

		if (n > count)
			n = count;
		memcpy(o->stage + o->stage_len, buf, n);
		o->stage_len += n;
		buf += n;
		count -= n;
		if (o->stage_len == sizeof(o->stage)) {
			o->err = out__flush_stage(o);
			if (o->err)
				return false;
		}
	}
	return true;
}

int pp_out__init(struct pp_out *o, int gzip_level, pprof_write_fn write, void *ctx)
{
	memset(&o->z, 0, sizeof(o->z));
	o->write = write;
	o->ctx = ctx;
	o->err = 0;
	o->stage_len = 0;
	o->gzip = gzip_level >= 0;
	o->z_ready = false;
	if (o->gzip) {
		int level = gzip_level == 0 ? 6 : gzip_level > 9 ? 9 : gzip_level;

		/* 16 + 15: gzip wrapper, 32 KiB window; memLevel 8: zlib's default (~256 KiB). */
		if (deflateInit2(&o->z, level, Z_DEFLATED, 16 + 15, 8, Z_DEFAULT_STRATEGY) != Z_OK)
			return -ENOMEM;
		o->z_ready = true;
	}
	o->os = (pb_ostream_t){ .callback = out__os_write, .state = o, .max_size = SIZE_MAX };
	return 0;
}

int pp_out__finish(struct pp_out *o)
{
	int err = o->err;

	if (!err)
		err = out__flush_stage(o);
	if (!err && o->gzip)
		err = out__deflate(o, NULL, 0, Z_FINISH);
	o->err = err;
	return err;
}

void pp_out__release(struct pp_out *o)
{
	if (o->z_ready)
		deflateEnd(&o->z);
	o->z_ready = false;
}

/* ---- message encoders --------------------------------------------------------------------- */

static size_t varint_size(uint64_t v)
{
	size_t n = 1;

	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

bool pp_enc_varint_field(pb_ostream_t *os, uint32_t tag, uint64_t v)
{
	if (!v)
		return true; /* proto3: a zero scalar is not written */
	return pb_encode_tag(os, PB_WT_VARINT, tag) && pb_encode_varint(os, v);
}

static bool enc_packed_u64(pb_ostream_t *os, uint32_t tag, const uint64_t *v, size_t n)
{
	size_t i, size = 0;

	if (!n)
		return true;
	for (i = 0; i < n; i++)
		size += varint_size(v[i]);
	if (!pb_encode_tag(os, PB_WT_STRING, tag) || !pb_encode_varint(os, size))
		return false;
	if (!os->callback) /* nanopb's sizing pass: only the length matters */
		return pb_write(os, NULL, size);
	/* Varints are gathered locally: one pb_write per 512 bytes rather than one per byte. */
	for (i = 0; i < n;) {
		pb_byte_t buf[512 + 10];
		size_t len = 0;

		for (; i < n && len < 512; i++) {
			uint64_t x = v[i];

			while (x >= 0x80) {
				buf[len++] = (pb_byte_t)(x | 0x80);
				x >>= 7;
			}
			buf[len++] = (pb_byte_t)x;
		}
		if (!pb_write(os, buf, len))
			return false;
	}
	return true;
}

bool pp_enc_packed_i64(pb_ostream_t *os, uint32_t tag, const int64_t *v, size_t n)
{
	/* int64 (not sint64): a negative value is the 10-byte varint of its two's complement. */
	return enc_packed_u64(os, tag, (const uint64_t *)v, n);
}

/*
 * Almost every sample, location and function is small: it is encoded by hand into a buffer on
 * the stack and handed to the stream in one piece. nanopb's pb_encode_submessage encodes each
 * message twice (once to learn its size) and calls the stream once per field, which made the
 * writer the merge's largest serial cost. A message that does not fit takes the nanopb path,
 * which gives the same bytes (fields in number order, proto3 zeros left out).
 */
#define MSG_MAX 1024

struct msg {
	size_t n;
	bool full;
	uint8_t b[MSG_MAX];
};

static void msg_varint(struct msg *m, uint64_t v)
{
	if (m->n > MSG_MAX - 10) {
		m->full = true;
		return;
	}
	while (v >= 0x80) {
		m->b[m->n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	m->b[m->n++] = (uint8_t)v;
}

static void msg_field(struct msg *m, uint32_t tag, uint64_t v)
{
	if (!v)
		return;
	msg_varint(m, (uint64_t)tag << 3 | PB_WT_VARINT);
	msg_varint(m, v);
}

static void msg_packed(struct msg *m, uint32_t tag, const uint64_t *v, size_t n)
{
	size_t i, size = 0;

	if (!n)
		return;
	for (i = 0; i < n; i++)
		size += varint_size(v[i]);
	if (size > MSG_MAX) {
		m->full = true;
		return;
	}
	msg_varint(m, (uint64_t)tag << 3 | PB_WT_STRING);
	msg_varint(m, size);
	for (i = 0; i < n && !m->full; i++)
		msg_varint(m, v[i]);
}

/*
 * A nested Line or Label: at most 4 varint fields, so under 128 bytes and its length is one
 * byte, reserved here and filled by msg_close().
 */
static size_t msg_open(struct msg *m, uint32_t tag)
{
	msg_varint(m, (uint64_t)tag << 3 | PB_WT_STRING);
	msg_varint(m, 0);
	return m->n - 1;
}

static void msg_close(struct msg *m, size_t len_at)
{
	if (!m->full)
		m->b[len_at] = (uint8_t)(m->n - len_at - 1);
}

/* The message as Profile field tag: tag, length, bytes. */
static bool msg_emit(pb_ostream_t *os, uint32_t tag, const struct msg *m)
{
	return pb_encode_tag(os, PB_WT_STRING, tag) && pb_encode_varint(os, m->n) &&
	       pb_write(os, m->b, m->n);
}

/* Each msg_*() below is false when the message does not fit. */
static bool msg_sample(struct msg *m, const uint64_t *ids, size_t n_ids, const int64_t *values,
		       size_t n_values, const struct pprof_label *labels, size_t n_labels)
{
	size_t i;

	m->n = 0;
	m->full = false;
	msg_packed(m, perftools_profiles_Sample_location_id_tag, ids, n_ids);
	msg_packed(m, perftools_profiles_Sample_value_tag, (const uint64_t *)values, n_values);
	for (i = 0; i < n_labels && !m->full; i++) {
		size_t at = msg_open(m, perftools_profiles_Sample_label_tag);

		msg_field(m, perftools_profiles_Label_key_tag, labels[i].key);
		msg_field(m, perftools_profiles_Label_str_tag, labels[i].str);
		msg_field(m, perftools_profiles_Label_num_tag, labels[i].num);
		msg_field(m, perftools_profiles_Label_num_unit_tag, labels[i].num_unit);
		msg_close(m, at);
	}
	return !m->full;
}

static bool msg_location(struct msg *m, const struct pprof_location *l)
{
	size_t i;

	m->n = 0;
	m->full = false;
	msg_field(m, perftools_profiles_Location_id_tag, l->id);
	msg_field(m, perftools_profiles_Location_mapping_id_tag, l->mapping_id);
	msg_field(m, perftools_profiles_Location_address_tag, l->address);
	for (i = 0; i < l->n_lines && !m->full; i++) {
		size_t at = msg_open(m, perftools_profiles_Location_line_tag);

		msg_field(m, perftools_profiles_Line_function_id_tag, l->lines[i].function_id);
		msg_field(m, perftools_profiles_Line_line_tag, l->lines[i].line);
		msg_field(m, perftools_profiles_Line_column_tag, l->lines[i].column);
		msg_close(m, at);
	}
	msg_field(m, perftools_profiles_Location_is_folded_tag, l->is_folded);
	return !m->full;
}

static bool msg_function(struct msg *m, const struct pprof_function *f)
{
	m->n = 0;
	m->full = false;
	msg_field(m, perftools_profiles_Function_id_tag, f->id);
	msg_field(m, perftools_profiles_Function_name_tag, f->name);
	msg_field(m, perftools_profiles_Function_system_name_tag, f->system_name);
	msg_field(m, perftools_profiles_Function_filename_tag, f->filename);
	msg_field(m, perftools_profiles_Function_start_line_tag, f->start_line);
	return !m->full;
}

bool pp_enc_value_type(pb_ostream_t *os, uint32_t tag, const struct pprof_value_type *vt)
{
	perftools_profiles_ValueType m = { .type = vt->type, .unit = vt->unit };

	return pb_encode_tag(os, PB_WT_STRING, tag) &&
	       pb_encode_submessage(os, perftools_profiles_ValueType_fields, &m);
}

struct sample_arg {
	const uint64_t *ids;
	size_t n_ids;
	const int64_t *values;
	size_t n_values;
	const struct pprof_label *labels;
	size_t n_labels;
};

static bool cb_sample_ids(pb_ostream_t *os, const pb_field_t *field, void *const *arg)
{
	const struct sample_arg *a = *arg;

	return enc_packed_u64(os, field->tag, a->ids, a->n_ids);
}

static bool cb_sample_values(pb_ostream_t *os, const pb_field_t *field, void *const *arg)
{
	const struct sample_arg *a = *arg;

	return pp_enc_packed_i64(os, field->tag, a->values, a->n_values);
}

static bool cb_sample_labels(pb_ostream_t *os, const pb_field_t *field, void *const *arg)
{
	const struct sample_arg *a = *arg;
	size_t i;

	for (i = 0; i < a->n_labels; i++) {
		const struct pprof_label *l = &a->labels[i];
		perftools_profiles_Label m = {
			.key = l->key, .str = l->str, .num = l->num, .num_unit = l->num_unit,
		};

		if (!pb_encode_tag_for_field(os, field) ||
		    !pb_encode_submessage(os, perftools_profiles_Label_fields, &m))
			return false;
	}
	return true;
}

bool pp_enc_sample(pb_ostream_t *os, const uint64_t *loc_ids, size_t n_locs, const int64_t *values,
		   size_t n_values, const struct pprof_label *labels, size_t n_labels)
{
	struct sample_arg a = { loc_ids, n_locs, values, n_values, labels, n_labels };
	struct msg mb;
	perftools_profiles_Sample m = {
		.location_id = { .funcs.encode = cb_sample_ids, .arg = &a },
		.value = { .funcs.encode = cb_sample_values, .arg = &a },
		.label = { .funcs.encode = cb_sample_labels, .arg = &a },
	};

	if (msg_sample(&mb, loc_ids, n_locs, values, n_values, labels, n_labels))
		return msg_emit(os, perftools_profiles_Profile_sample_tag, &mb);
	/* too big for the buffer on the stack */
	return pb_encode_tag(os, PB_WT_STRING, perftools_profiles_Profile_sample_tag) &&
	       pb_encode_submessage(os, perftools_profiles_Sample_fields, &m);
}

bool pp_enc_mapping(pb_ostream_t *os, const struct pprof_mapping *mp)
{
	perftools_profiles_Mapping m = {
		.id = mp->id,
		.memory_start = mp->memory_start,
		.memory_limit = mp->memory_limit,
		.file_offset = mp->file_offset,
		.filename = mp->filename,
		.build_id = mp->build_id,
		.has_functions = mp->has_functions,
		.has_filenames = mp->has_filenames,
		.has_line_numbers = mp->has_line_numbers,
		.has_inline_frames = mp->has_inline_frames,
	};

	return pb_encode_tag(os, PB_WT_STRING, perftools_profiles_Profile_mapping_tag) &&
	       pb_encode_submessage(os, perftools_profiles_Mapping_fields, &m);
}

static bool cb_location_lines(pb_ostream_t *os, const pb_field_t *field, void *const *arg)
{
	const struct pprof_location *l = *arg;
	size_t i;

	for (i = 0; i < l->n_lines; i++) {
		perftools_profiles_Line m = {
			.function_id = l->lines[i].function_id,
			.line = l->lines[i].line,
			.column = l->lines[i].column,
		};

		if (!pb_encode_tag_for_field(os, field) ||
		    !pb_encode_submessage(os, perftools_profiles_Line_fields, &m))
			return false;
	}
	return true;
}

bool pp_enc_location(pb_ostream_t *os, const struct pprof_location *l)
{
	struct msg mb;
	perftools_profiles_Location m = {
		.id = l->id,
		.mapping_id = l->mapping_id,
		.address = l->address,
		.line = { .funcs.encode = cb_location_lines, .arg = (void *)l },
		.is_folded = l->is_folded,
	};

	if (msg_location(&mb, l))
		return msg_emit(os, perftools_profiles_Profile_location_tag, &mb);
	/* too big for the buffer on the stack */
	return pb_encode_tag(os, PB_WT_STRING, perftools_profiles_Profile_location_tag) &&
	       pb_encode_submessage(os, perftools_profiles_Location_fields, &m);
}

bool pp_enc_function(pb_ostream_t *os, const struct pprof_function *f)
{
	struct msg mb;
	perftools_profiles_Function m = {
		.id = f->id,
		.name = f->name,
		.system_name = f->system_name,
		.filename = f->filename,
		.start_line = f->start_line,
	};

	if (msg_function(&mb, f))
		return msg_emit(os, perftools_profiles_Profile_function_tag, &mb);
	/* too big for the buffer on the stack */
	return pb_encode_tag(os, PB_WT_STRING, perftools_profiles_Profile_function_tag) &&
	       pb_encode_submessage(os, perftools_profiles_Function_fields, &m);
}

bool pp_enc_string(pb_ostream_t *os, const char *s, size_t len)
{
	return pb_encode_tag(os, PB_WT_STRING, perftools_profiles_Profile_string_table_tag) &&
	       pb_encode_string(os, (const pb_byte_t *)s, len);
}

/* ---- a whole decoded profile -------------------------------------------------------------- */

static bool write_header(pb_ostream_t *os, const struct pprof_profile *p)
{
	size_t i;

	for (i = 0; i < p->n_sample_type; i++)
		if (!pp_enc_value_type(os, perftools_profiles_Profile_sample_type_tag,
				       &p->sample_type[i]))
			return false;
	if ((p->period_type.type || p->period_type.unit) &&
	    !pp_enc_value_type(os, perftools_profiles_Profile_period_type_tag, &p->period_type))
		return false;
	return pp_enc_varint_field(os, perftools_profiles_Profile_drop_frames_tag, p->drop_frames) &&
	       pp_enc_varint_field(os, perftools_profiles_Profile_keep_frames_tag, p->keep_frames) &&
	       pp_enc_varint_field(os, perftools_profiles_Profile_time_nanos_tag, p->time_nanos) &&
	       pp_enc_varint_field(os, perftools_profiles_Profile_duration_nanos_tag,
				   p->duration_nanos) &&
	       pp_enc_varint_field(os, perftools_profiles_Profile_period_tag, p->period) &&
	       pp_enc_packed_i64(os, perftools_profiles_Profile_comment_tag, p->comments,
				 p->n_comments) &&
	       pp_enc_varint_field(os, perftools_profiles_Profile_default_sample_type_tag,
				   p->default_sample_type) &&
	       pp_enc_varint_field(os, perftools_profiles_Profile_doc_url_tag, p->doc_url);
}

static bool write_tables(pb_ostream_t *os, const struct pprof_profile *p)
{
	size_t i;

	for (i = 0; i < p->n_mappings; i++)
		if (!pp_enc_mapping(os, &p->mappings[i]))
			return false;
	for (i = 0; i < p->n_locations; i++)
		if (!pp_enc_location(os, &p->locations[i]))
			return false;
	for (i = 0; i < p->n_functions; i++)
		if (!pp_enc_function(os, &p->functions[i]))
			return false;
	if (!p->n_strings && !pp_enc_string(os, "", 0))
		return false; /* string_table[0] must exist and be "" */
	for (i = 0; i < p->n_strings; i++) {
		const char *s = p->strings[i] ? p->strings[i] : "";

		if (!pp_enc_string(os, s, strlen(s)))
			return false;
	}
	return true;
}

/* Encodes raw into memory, then gzips it in parts on several threads. */
static int write_profile_parallel(const struct pprof_profile *p,
				  const struct pprof_builder_opts *opts, pprof_write_fn write,
				  void *ctx)
{
	struct pprof_builder_opts raw_opts = *opts;
	struct pprof_buf raw = { 0 };
	int level = opts->gzip_level == 0 ? 6 : opts->gzip_level > 9 ? 9 : opts->gzip_level;
	int err;

	raw_opts.gzip_level = -1;
	raw_opts.threads = 0;
	err = pprof_write_profile(p, &raw_opts, pprof_buf_write, &raw);
	if (!err)
		err = pp_gzip_parallel(raw.data, raw.len, level, opts->threads, write, ctx);
	free(raw.data);
	return err;
}

int pprof_write_profile(const struct pprof_profile *p, const struct pprof_builder_opts *opts,
			pprof_write_fn write, void *ctx)
{
	struct pp_out *o;
	bool ok = true;
	size_t i;
	int err;

	if (opts && opts->threads > 1 && opts->gzip_level >= 0)
		return write_profile_parallel(p, opts, write, ctx);
	o = malloc(sizeof(*o));
	if (!o)
		return -ENOMEM;
	err = pp_out__init(o, opts ? opts->gzip_level : 0, write, ctx);
	if (err)
		goto out_free;
	ok = write_header(&o->os, p);
	for (i = 0; ok && i < p->n_samples; i++) {
		const struct pprof_sample *s = &p->samples[i];

		ok = pp_enc_sample(&o->os, s->location_ids, s->n_locations, s->values,
				   p->n_sample_type, s->labels, s->n_labels);
	}
	ok = ok && write_tables(&o->os, p);
	err = ok ? pp_out__finish(o) : (o->err ? o->err : -EIO);
	pp_out__release(o);
out_free:
	free(o);
	return err;
}
