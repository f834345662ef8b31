// SPDX-License-Identifier: MIT
#include <stdio.h>
#include <string.h>

#include "port/text.h"

size_t utf8_seq_len(const unsigned char *s, size_t n)
{
	unsigned char c = s[0];
	size_t len;
	unsigned lo = 0x80, hi = 0xbf; /* the second byte's range (RFC 3629 table) */

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		len = 2;
	else if (c >= 0xe0 && c <= 0xef)
		len = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		len = 4;
	else
		return 0;
	if (c == 0xe0)
		lo = 0xa0; /* overlong */
	else if (c == 0xed)
		hi = 0x9f; /* surrogates */
	else if (c == 0xf0)
		lo = 0x90; /* overlong */
	else if (c == 0xf4)
		hi = 0x8f; /* beyond U+10FFFF */
	if (n < len || s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < len; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	return len;
}

void json_str_write(const char *s, void (*put)(void *ctx, const char *p, size_t n), void *ctx)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n = strlen(s);

	put(ctx, "\"", 1);
	while (n) {
		size_t run = 0, len;

		/* the longest run of bytes that need nothing */
		while (run < n && p[run] >= 0x20 && p[run] < 0x7f && p[run] != '"' && p[run] != '\\')
			run++;
		if (run) {
			put(ctx, (const char *)p, run);
			p += run;
			n -= run;
			continue;
		}
		len = utf8_seq_len(p, n);
		if (*p == '"' || *p == '\\') {
			char esc[2] = { '\\', (char)*p };

			put(ctx, esc, 2);
		} else if (*p < 0x20 || *p == 0x7f) {
			char esc[8];

			snprintf(esc, sizeof(esc), "\\u%04x", *p);
			put(ctx, esc, 6);
		} else if (len) {
			put(ctx, (const char *)p, len);
		} else {
			put(ctx, "\xef\xbf\xbd", 3); /* U+FFFD for one bad byte */
			len = 1;
		}
		p += len ? len : 1;
		n -= len ? len : 1;
	}
	put(ctx, "\"", 1);
}

void log_escape(const char *in, char *out, size_t outlen)
{
	const unsigned char *p = (const unsigned char *)in;
	size_t n = strlen(in), o = 0;

	while (n && o + 5 < outlen) {
		size_t len = utf8_seq_len(p, n);

		if (*p == '\\') {
			out[o++] = '\\';
			out[o++] = '\\';
		} else if (!len || *p < 0x20 || *p == 0x7f) {
			snprintf(out + o, 5, "\\x%02x", *p);
			o += 4;
			len = 1;
		} else {
			if (o + len + 1 > outlen)
				break;
			memcpy(out + o, p, len);
			o += len;
		}
		len = len ? len : 1;
		p += len;
		n -= len;
	}
	out[o] = '\0';
}
