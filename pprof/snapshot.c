// SPDX-License-Identifier: MIT
/* pprof/snapshot.c — the stack snapshot blob and its base64 label text; see snapshot.h. */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "pprof/snapshot.h"

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static uint32_t get32(const uint8_t *p)
{
	return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

void snapshot__arm_header(const uint32_t regs[SNAPSHOT_ARM_REGS], uint8_t *out)
{
	out[0] = SNAPSHOT_VERSION;
	out[1] = SNAPSHOT_ARM_REGS;
	out[2] = SNAPSHOT_EM_ARM & 0xff;
	out[3] = SNAPSHOT_EM_ARM >> 8;
	for (unsigned int i = 0; i < SNAPSHOT_ARM_REGS; i++)
		put32(out + 4 + 4 * i, regs[i]);
}

size_t snapshot__text_len(size_t len)
{
	return (len + 2) / 3 * 4;
}

void snapshot__to_text(const uint8_t *blob, size_t len, char *out)
{
	size_t i = 0;

	for (; i + 3 <= len; i += 3, out += 4) {
		uint32_t v = (uint32_t)blob[i] << 16 | (uint32_t)blob[i + 1] << 8 | blob[i + 2];

		out[0] = b64[v >> 18];
		out[1] = b64[(v >> 12) & 63];
		out[2] = b64[(v >> 6) & 63];
		out[3] = b64[v & 63];
	}
	if (i < len) {
		uint32_t v = (uint32_t)blob[i] << 16 | (i + 1 < len ? (uint32_t)blob[i + 1] << 8 : 0);

		out[0] = b64[v >> 18];
		out[1] = b64[(v >> 12) & 63];
		out[2] = i + 1 < len ? b64[(v >> 6) & 63] : '=';
		out[3] = '=';
		out += 4;
	}
	*out = 0;
}

static int b64_value(char c)
{
	const char *p = c ? memchr(b64, c, 64) : NULL;

	return p ? (int)(p - b64) : -1;
}

/* base64 text to bytes: how many, or -EINVAL / -ENOSPC */
static long from_base64(const char *t, size_t len, uint8_t *out, size_t max)
{
	size_t n = 0;

	if (len % 4)
		return -EINVAL;
	for (size_t i = 0; i < len; i += 4) {
		int v[4];
		unsigned int pad = 0;

		for (unsigned int k = 0; k < 4; k++) {
			bool last = i + 4 == len;

			v[k] = b64_value(t[i + k]);
			if (v[k] < 0 && last && k >= 2 && t[i + k] == '=' &&
			    (k == 3 || t[i + 3] == '=')) {
				v[k] = 0;
				pad++;
			} else if (v[k] < 0) {
				return -EINVAL;
			}
		}
		uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 |
			     (uint32_t)v[3];
		if (n + 3 - pad > max)
			return -ENOSPC;
		out[n++] = (uint8_t)(w >> 16);
		if (pad < 2)
			out[n++] = (uint8_t)(w >> 8);
		if (pad < 1)
			out[n++] = (uint8_t)w;
	}
	return (long)n;
}

int snapshot__from_text(const char *text, size_t len, uint8_t *buf, size_t max,
			struct snapshot *s)
{
	long n = from_base64(text, len, buf, max);

	if (n < 0)
		return (int)n;
	if (n < SNAPSHOT_ARM_HDR || buf[0] != SNAPSHOT_VERSION || buf[1] != SNAPSHOT_ARM_REGS ||
	    (buf[2] | buf[3] << 8) != SNAPSHOT_EM_ARM || n - SNAPSHOT_ARM_HDR > SNAPSHOT_MAX_STACK)
		return -EINVAL;
	memset(s, 0, sizeof(*s));
	s->machine = SNAPSHOT_EM_ARM;
	s->n_regs = SNAPSHOT_ARM_REGS;
	for (unsigned int i = 0; i < SNAPSHOT_ARM_REGS; i++)
		s->regs[i] = get32(buf + 4 + 4 * i);
	s->stack = buf + SNAPSHOT_ARM_HDR;
	s->stack_len = (uint32_t)(n - SNAPSHOT_ARM_HDR);
	return 0;
}
