// SPDX-License-Identifier: MIT
/* agent/core/pyline.c — see pyline.h. */
#include <errno.h>

#include "agent/core/pyline.h"

#define PYLINE_MAX (1 << 30) /* a line past this is not a source file's */

/* An unsigned varint at *at: 0, or -ERANGE (the table ends) / -EILSEQ (an entry's byte). */
static int varint(const uint8_t *t, size_t len, size_t *at, uint64_t *out)
{
	uint64_t v = 0;
	unsigned int shift = 0;
	uint8_t b;

	do {
		if (*at >= len)
			return -ERANGE;
		if (shift > 30) /* 36 bits: more than any line or column */
			return -EILSEQ;
		b = t[(*at)++];
		if (b & 0x80)
			return -EILSEQ;
		v |= (uint64_t)(b & 63) << shift;
		shift += 6;
	} while (b & 64);
	*out = v;
	return 0;
}

static int svarint(const uint8_t *t, size_t len, size_t *at, int64_t *out)
{
	uint64_t v;
	int err = varint(t, len, at, &v);

	if (!err)
		*out = v & 1 ? -(int64_t)(v >> 1) : (int64_t)(v >> 1);
	return err;
}

/* n raw bytes of an entry (columns): 0, -ERANGE or -EILSEQ. */
static int skip(const uint8_t *t, size_t len, size_t *at, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++) {
		if (*at >= len)
			return -ERANGE;
		if (t[(*at)++] & 0x80)
			return -EILSEQ;
	}
	return 0;
}

/* The rest of the entry whose form is code, after its first byte: its line delta. */
static int entry_delta(const uint8_t *t, size_t len, size_t *at, unsigned int code, int64_t *delta)
{
	uint64_t unused;
	int err = 0;

	*delta = 0;
	if (code == 15) /* no location */
		return 0;
	if (code <= 9) /* short: the column in one byte, the line unchanged */
		return skip(t, len, at, 1);
	if (code <= 12) { /* one line: delta 0-2, start and end column */
		*delta = code - 10;
		return skip(t, len, at, 2);
	}
	err = svarint(t, len, at, delta);
	for (int i = 0; code == 14 && !err && i < 3; i++) /* long: end line, columns */
		err = varint(t, len, at, &unused);
	return err;
}

int pyline__decode(const uint8_t *table, size_t len, int32_t first, uint32_t unit, int32_t *line)
{
	int64_t cur = first, delta;
	uint64_t end = 0;
	size_t at = 0;
	int err;

	*line = first;
	while (at < len) {
		uint8_t b = table[at++];
		unsigned int code = b >> 3 & 15;

		if (!(b & 0x80))
			return -EILSEQ;
		err = entry_delta(table, len, &at, code, &delta);
		if (err)
			return err;
		cur += delta;
		if (cur < 0 || cur > PYLINE_MAX)
			return -EILSEQ;
		end += (b & 7) + 1;
		if (unit < end) {
			if (code == 15)
				return -ENOENT;
			*line = (int32_t)cur;
			return 0;
		}
	}
	return -ERANGE;
}
