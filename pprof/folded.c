// SPDX-License-Identifier: MIT
/*
 * pprof/folded.c — folded stacks read into a profile (pprof/folded.h): parsed line by line into
 * the builder (raw protobuf into memory), then decoded by pprof_read(), so what comes out is
 * validated and shaped exactly like any profile read from pprof.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pprof/folded.h"

#define SNIFF_BYTES 4096

static bool is_text_byte(unsigned char c)
{
	return c >= 0x20 || c == '\t' || c == '\n' || c == '\r';
}

/* Whether line [s, e) ends in whitespace + digits, with something before it. */
static bool ends_in_count(const char *s, const char *e)
{
	const char *d = e;

	while (d > s && (d[-1] == '\r' || d[-1] == ' '))
		d--;
	e = d;
	while (d > s && d[-1] >= '0' && d[-1] <= '9')
		d--;
	return d < e && d > s + 1 && (d[-1] == ' ' || d[-1] == '\t');
}

bool pprof_is_folded(const void *data, size_t len)
{
	const char *s = data, *nl;
	size_t n = len < SNIFF_BYTES ? len : SNIFF_BYTES;

	if (!len || pprof_is_gzip(data, len))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!is_text_byte((unsigned char)s[i]))
			return false;
	while (n && (*s == '#' || *s == '\n' || *s == '\r')) { /* comments, empty lines */
		nl = memchr(s, '\n', n);
		if (!nl)
			return false;
		n -= (size_t)(nl + 1 - s);
		s = nl + 1;
	}
	nl = memchr(s, '\n', n);
	return ends_in_count(s, nl ? nl : s + n);
}

struct folded {
	struct pprof_builder *b;
	uint64_t *locs;		/* one line's location ids, leaf first */
	size_t max_depth;
	char *name;		/* one frame's name, NUL-terminated */
	size_t name_cap;
	char *err;
	size_t errlen;
};

/* The location of a frame name (the builder deduplicates: one per distinct name). */
static uint64_t frame_location(struct folded *f, const char *s, size_t n)
{
	struct pprof_line_desc line = { 0 };

	if (n + 1 > f->name_cap) {
		char *nn = realloc(f->name, n + 1);

		if (!nn)
			return 0;
		f->name = nn;
		f->name_cap = n + 1;
	}
	memcpy(f->name, s, n);
	f->name[n] = '\0';
	line.function_id = pprof_builder__function(f->b, n ? f->name : "[unknown]", NULL, NULL, 0);
	return line.function_id ? pprof_builder__location(f->b, 0, 0, &line, 1) : 0;
}

/* One "a;b;c COUNT" line [s, e) into a sample. 0, -EINVAL (err set), -ENOMEM, -EFBIG. */
static int folded_line(struct folded *f, size_t lineno, const char *s, const char *e)
{
	const char *sp = e, *p;
	size_t depth = 0;
	int64_t value = 0;

	while (sp > s && sp[-1] >= '0' && sp[-1] <= '9')
		sp--;
	if (sp == e || sp == s || (sp[-1] != ' ' && sp[-1] != '\t') || e - sp > 18) {
		snprintf(f->err, f->errlen, "line %zu: expected 'frame;frame;... COUNT'", lineno);
		return -EINVAL;
	}
	for (p = sp; p < e; p++)
		value = value * 10 + (*p - '0');
	for (e = sp - 1; e > s && (e[-1] == ' ' || e[-1] == '\t'); e--)
		;
	/* frames are root first in the text, leaf first in pprof: from the back */
	for (p = e;;) {
		const char *start = p;

		while (start > s && start[-1] != ';')
			start--;
		if (depth == f->max_depth) {
			snprintf(f->err, f->errlen, "line %zu: more than %zu frames", lineno,
				 f->max_depth);
			return -EFBIG;
		}
		f->locs[depth] = frame_location(f, start, (size_t)(p - start));
		if (!f->locs[depth++])
			return -ENOMEM;
		if (start == s)
			break;
		p = start - 1; /* the frame before ends at this ';' */
	}
	return pprof_builder__add_sample(f->b, f->locs, depth, &value, NULL, 0);
}

static int folded_lines(struct folded *f, const char *s, size_t len, size_t max_samples)
{
	const char *end = s + len, *nl, *e;
	size_t lineno = 0, samples = 0;
	int ret;

	for (; s < end; s = nl + 1) {
		nl = memchr(s, '\n', (size_t)(end - s));
		if (!nl)
			nl = end;
		lineno++;
		for (e = nl; e > s && (e[-1] == '\r' || e[-1] == ' '); e--)
			;
		if (e == s || *s == '#')
			continue;
		for (const char *c = s; c < e; c++)
			if (!is_text_byte((unsigned char)*c)) {
				snprintf(f->err, f->errlen, "line %zu: a control byte: not folded text",
					 lineno);
				return -EINVAL;
			}
		if (++samples > max_samples) {
			snprintf(f->err, f->errlen, "more than %zu lines", max_samples);
			return -EFBIG;
		}
		ret = folded_line(f, lineno, s, e);
		if (ret)
			return ret;
	}
	if (!samples) {
		snprintf(f->err, f->errlen, "no stacks: expected 'frame;frame;... COUNT' lines");
		return -EINVAL;
	}
	return 0;
}

int pprof_read_folded(const void *data, size_t len, const struct pprof_read_limits *limits,
		      struct pprof_profile **out, char *err, size_t errlen)
{
	struct pprof_read_limits lim = limits ? *limits : (struct pprof_read_limits){ 0 };
	struct pprof_builder_opts bo = { .gzip_level = -1 };
	struct pprof_buf buf = { 0 };
	struct folded f = { .err = err, .errlen = errlen };
	int ret = -ENOMEM;

	*out = NULL;
	err[0] = '\0';
	if (len > (lim.max_input ? lim.max_input : 64u << 20)) {
		snprintf(err, errlen, "input is %zu bytes, limit %zu", len, lim.max_input);
		return -EFBIG;
	}
	f.max_depth = lim.max_stack_depth ? lim.max_stack_depth : 4096;
	/* the raw protobuf is at most a few times the text: bound it as a decoded profile */
	buf.max = lim.max_decoded ? lim.max_decoded : 256u << 20;
	f.locs = malloc(f.max_depth * sizeof(*f.locs));
	f.b = pprof_builder__new(&bo, pprof_buf_write, &buf);
	if (!f.locs || !f.b)
		goto out_free;
	ret = pprof_builder__add_sample_type(f.b, "samples", "count");
	if (!ret)
		ret = folded_lines(&f, data, len, lim.max_samples ? lim.max_samples : 10000000);
	if (!ret)
		ret = pprof_builder__finish(f.b);
	if (!ret)
		ret = pprof_read(buf.data, buf.len, &lim, out, err, errlen);
	else if (!err[0])
		snprintf(err, errlen, "%s", ret == -ENOMEM ? "out of memory" : "too large");
out_free:
	pprof_builder__free(f.b);
	free(f.locs);
	free(f.name);
	free(buf.data);
	if (ret == -ENOMEM && !err[0])
		snprintf(err, errlen, "out of memory");
	return ret;
}

int pprof_read_any(const void *data, size_t len, const struct pprof_read_limits *limits,
		   struct pprof_profile **out, char *err, size_t errlen)
{
	const unsigned char *c = data;
	size_t n = len < SNIFF_BYTES ? len : SNIFF_BYTES, i;
	int ret;

	if (pprof_is_folded(data, len))
		return pprof_read_folded(data, len, limits, out, err, errlen);
	ret = pprof_read(data, len, limits, out, err, errlen);
	for (i = 0; ret == -EINVAL && i < n && is_text_byte(c[i]); i++)
		;
	if (ret == -EINVAL && i == n) { /* text: say what folded text lacks, not a byte offset */
		char ferr[200];

		if (pprof_read_folded(data, len, limits, out, ferr, sizeof(ferr)) == -EINVAL)
			snprintf(err, errlen, "neither pprof nor folded text: %s", ferr);
		else /* (only a first line was unlike folded text) */
			ret = *out ? 0 : -EINVAL;
	}
	return ret;
}
