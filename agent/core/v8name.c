// SPDX-License-Identifier: MIT
/* agent/core/v8name.c — see v8name.h. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "agent/core/v8name.h"

#define HEAP_TAG 1ull
#define SCOPE_SLOTS 16		  /* ScopeInfo slots looked through for the name */
#define CONS_DEPTH 4		  /* cons strings followed this deep (names are short) */
#define LINE_SOURCE_MAX (1 << 20) /* a function's line counted in at most this much source */

static struct v8name_layout layouts[V8NAME_LAYOUTS];
static unsigned int n_layouts;
static pthread_mutex_t layouts_lock = PTHREAD_MUTEX_INITIALIZER;

static struct framename_text texts[CONFIG_V8NAME_CACHE];
static struct framename_entry fns[CONFIG_V8NAME_FUNCS];
static struct framename_cache cache = FRAMENAME_CACHE(texts, fns);
static struct v8name_stats stats; /* under cache.lock */

int v8name__layout(const struct v8name_layout *l)
{
	int at = -ENOSPC;

	pthread_mutex_lock(&layouts_lock);
	for (unsigned int i = 0; i < n_layouts && at < 0; i++)
		if (!memcmp(&layouts[i], l, sizeof(*l)))
			at = (int)i;
	if (at < 0 && n_layouts < V8NAME_LAYOUTS) {
		layouts[n_layouts] = *l;
		at = (int)n_layouts++;
	}
	pthread_mutex_unlock(&layouts_lock);
	return at;
}

static int peek_word(uint32_t pid, uint64_t addr, uint64_t *out)
{
	return framename__peek(pid, addr, out, sizeof(*out));
}

/* The instance type of the object tagged points at: 0, or -errno. */
static int type_of(uint32_t pid, const struct v8name_layout *l, uint64_t tagged, uint16_t *type)
{
	uint64_t map;

	if ((tagged & 3) != HEAP_TAG || peek_word(pid, tagged - 1 + l->off_map, &map) ||
	    (map & 3) != HEAP_TAG)
		return -EFAULT;
	return framename__peek(pid, map - 1 + l->off_instance_type, type, sizeof(*type));
}

/*
 * The string tagged points at (of type type) appended to out[*at..len - 1): sequential,
 * cons (depth at most CONS_DEPTH) and thin strings. 0, or -errno (-ENOTSUP: another kind).
 */
static int read_string(uint32_t pid, const struct v8name_layout *l, uint64_t tagged, uint16_t type,
		       char *out, size_t len, size_t *at, int depth)
{
	uint64_t obj = tagged - 1, part;
	uint16_t part_type;
	int32_t n;
	int err;

	if (type >= l->first_nonstring_type || depth > CONS_DEPTH)
		return -ENOTSUP;
	if ((type & l->repr_mask) == l->cons_tag || (type & l->repr_mask) == l->thin_tag) {
		bool cons = (type & l->repr_mask) == l->cons_tag;

		if (peek_word(pid, obj + (cons ? l->cons_first : l->thin_actual), &part) ||
		    type_of(pid, l, part, &part_type))
			return -EFAULT;
		err = read_string(pid, l, part, part_type, out, len, at, depth + 1);
		if (err || !cons)
			return err;
		if (peek_word(pid, obj + l->cons_second, &part) ||
		    type_of(pid, l, part, &part_type))
			return -EFAULT;
		return read_string(pid, l, part, part_type, out, len, at, depth + 1);
	}
	if ((type & l->repr_mask) != l->seq_tag)
		return -ENOTSUP; /* external, sliced: not a function's or a script's name here */
	if (framename__peek(pid, obj + l->string_length, &n, sizeof(n)) || n < 0)
		return -EFAULT;
	if ((type & l->encoding_mask) == l->one_byte_tag) {
		size_t k = (size_t)n < len - 1 - *at ? (size_t)n : len - 1 - *at;

		if (k && framename__peek(pid, obj + l->seq_one_chars, out + *at, k))
			return -EFAULT;
		*at += k;
	} else {
		for (int32_t i = 0; i < n && *at < len - 1; i++) {
			uint16_t c;

			if (framename__peek(pid, obj + l->seq_two_chars + 2 * (uint64_t)i, &c,
					    sizeof(c)))
				return -EFAULT;
			out[(*at)++] = c >= 0x20 && c < 0x7f ? (char)c : '?';
		}
	}
	out[*at] = 0;
	return 0;
}

/* The string at tagged into out (empty on any failure): 0 or -errno. */
static int string_at(uint32_t pid, const struct v8name_layout *l, uint64_t tagged, char *out,
		     size_t len)
{
	uint16_t type;
	size_t at = 0;
	int err;

	out[0] = 0;
	err = type_of(pid, l, tagged, &type);
	if (!err)
		err = read_string(pid, l, tagged, type, out, len, &at, 0);
	if (err)
		out[0] = 0;
	return err;
}

/*
 * The function's name in its ScopeInfo: past the flags, counts and context locals (names and
 * infos: two slots each), the first String (as OTel's heuristic: ScopeInfo's layout has no
 * postmortem symbols, and changes with every V8); after it, the first two Smis in increasing
 * order are the function's start and end positions in its script's source (*start; -1: none).
 */
static int scope_name(uint32_t pid, const struct v8name_layout *l, uint64_t scope, char *out,
		      size_t len, int64_t *start)
{
	uint64_t w[SCOPE_SLOTS];
	uint64_t data =
	    scope - 1 + l->off_map + 8; /* ScopeInfo: a HeapObject, slots after its map */
	unsigned int i;

	if (framename__peek(pid, data, w, sizeof(w)))
		return -EFAULT;
	if (l->scope_ncontext_locals >= SCOPE_SLOTS || (w[l->scope_ncontext_locals] & 1))
		return -EINVAL;
	i = l->scope_first_vars + 2 * (unsigned int)(w[l->scope_ncontext_locals] >> 32);
	for (; i < SCOPE_SLOTS; i++)
		if ((w[i] & 3) == HEAP_TAG && !string_at(pid, l, w[i], out, len))
			break;
	if (i == SCOPE_SLOTS)
		return -ENOENT;
	for (i += 2; i < SCOPE_SLOTS; i++)
		if (!(w[i - 1] & 1) && !(w[i] & 1) && (int32_t)(w[i - 1] >> 32) >= 0 &&
		    (w[i - 1] >> 32) < (w[i] >> 32)) {
			*start = (int64_t)(w[i - 1] >> 32);
			break;
		}
	return 0;
}

/* Newlines in the one-byte source of a script before pos: its line there (from 1), or 0. */
static int64_t line_from_source(uint32_t pid, const struct v8name_layout *l, uint64_t script,
				int64_t pos)
{
	uint64_t src;
	uint16_t type;
	int32_t n;
	char buf[4096];
	int64_t line = 1;

	if (pos > LINE_SOURCE_MAX || peek_word(pid, script - 1 + l->script_source, &src) ||
	    type_of(pid, l, src, &type) || type >= l->first_nonstring_type ||
	    (type & l->repr_mask) != l->seq_tag || (type & l->encoding_mask) != l->one_byte_tag ||
	    framename__peek(pid, src - 1 + l->string_length, &n, sizeof(n)) || n < pos)
		return 0;
	for (int64_t at = 0; at < pos; at += (int64_t)sizeof(buf)) {
		size_t k = pos - at < (int64_t)sizeof(buf) ? (size_t)(pos - at) : sizeof(buf);

		if (framename__peek(pid, src - 1 + l->seq_one_chars + (uint64_t)at, buf, k))
			return 0;
		for (size_t j = 0; j < k; j++)
			line += buf[j] == '\n';
	}
	return line;
}

/*
 * The line of position pos in a script: from its line_ends (a FixedArray of the positions of
 * its newlines, which V8 makes when it first needs a line: a stack trace, an error), searched
 * with a read a step, else from its source. 0: unknown.
 */
static int64_t script_line(uint32_t pid, const struct v8name_layout *l, uint64_t script,
			   int64_t pos)
{
	uint64_t ends, len, at;
	uint16_t type;
	int64_t lo = 0, hi;

	if (pos < 0)
		return 0;
	if (peek_word(pid, script - 1 + l->script_line_ends, &ends) ||
	    type_of(pid, l, ends, &type) || type != l->type_fixed_array ||
	    peek_word(pid, ends - 1 + l->fixed_length, &len) || (len & 1))
		return line_from_source(pid, l, script, pos);
	hi = (int64_t)(len >> 32); /* the first line whose end is at or past pos */
	while (lo < hi) {
		int64_t mid = lo + (hi - lo) / 2;

		if (peek_word(pid, ends - 1 + l->fixed_data + 8 * (uint64_t)mid, &at) || (at & 1))
			return 0;
		if ((int64_t)(at >> 32) < pos)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo + 1;
}

static int read_sfi(uint32_t pid, uint64_t v, struct framename *out)
{
	unsigned int li = (unsigned int)(v >> 54) & 3;
	const struct v8name_layout *l;
	uint64_t sfi = (v & V8FRAME_SFI_MASK) << 3 | HEAP_TAG, nos, script, name;
	uint16_t type = 0;
	int64_t start = -1;
	int err;

	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&layouts_lock);
	l = li < n_layouts ? &layouts[li] : NULL;
	pthread_mutex_unlock(&layouts_lock);
	if (!l) {
		stats.bad_layout++;
		return -EINVAL;
	}
	if (type_of(pid, l, sfi, &type) ||
	    peek_word(pid, sfi - 1 + l->sfi_name_or_scope_info, &nos)) {
		stats.unreadable++;
		return -EFAULT;
	}
	if (type != l->type_sfi) {
		stats.not_sfi++;
		return -EINVAL;
	}
	err = type_of(pid, l, nos, &type);
	if (!err && type == l->type_scope_info)
		err = scope_name(pid, l, nos, out->name, sizeof(out->name), &start);
	else if (!err)
		err = string_at(pid, l, nos, out->name, sizeof(out->name));
	if (err || !out->name[0]) {
		stats.no_name += err != 0;
		snprintf(out->name, sizeof(out->name), "<anonymous>");
	}
	if (peek_word(pid, sfi - 1 + l->sfi_script, &script) || type_of(pid, l, script, &type) ||
	    type != l->type_script || peek_word(pid, script - 1 + l->script_name, &name) ||
	    string_at(pid, l, name, out->file, sizeof(out->file)))
		stats.no_file++;
	else
		out->start_line = script_line(pid, l, script, start);
	stats.lines += out->start_line > 0;
	stats.resolved++;
	return 0;
}

int v8name__resolve(uint32_t pid, uint64_t v, struct framename *out)
{
	return framename__resolve(&cache, pid, v, v, read_sfi, out); /* no position: no lines */
}

void v8name__warm(uint32_t pid, const uint64_t *frames, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++)
		if (v8frame__is(frames[i]))
			framename__pin(&cache, pid, frames[i], frames[i], read_sfi);
}

void v8name__forget(uint32_t pid)
{
	framename__forget(&cache, pid);
}

void v8name__stats(struct v8name_stats *st)
{
	pthread_mutex_lock(&cache.lock);
	*st = stats;
	pthread_mutex_unlock(&cache.lock);
	framename__counters(&cache, &st->names);
}
