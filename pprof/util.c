// SPDX-License-Identifier: MIT
/* pprof/util.c — hash index, growable arrays, string interning, profile free, write sinks. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pprof/internal.h"

int pp_htab__grow(struct pp_htab *t, size_t more)
{
	size_t cap = t->cap ? t->cap : 16, i;
	struct pp_htab_slot *e;

	while ((t->n + more) * 2 > cap)
		cap *= 2;
	if (cap == t->cap)
		return 0;
	if (cap > UINT32_MAX)
		return -ENOMEM;
	e = calloc(cap, sizeof(*e));
	if (!e)
		return -ENOMEM;
	/* Rehash: the stored hashes make this a pure index shuffle. */
	for (i = 0; i < t->cap; i++) {
		size_t pos;

		if (!t->e[i].slot)
			continue;
		pos = t->e[i].hash & (cap - 1);
		while (e[pos].slot)
			pos = (pos + 1) & (cap - 1);
		e[pos] = t->e[i];
	}
	free(t->e);
	t->e = e;
	t->cap = cap;
	return 0;
}

void pp_htab__free(struct pp_htab *t)
{
	free(t->e);
	memset(t, 0, sizeof(*t));
}

int pp_grow_slow(void *arr, size_t *cap, size_t len, size_t n, size_t sz)
{
	void **p = arr;
	size_t c = *cap ? *cap : 8;
	void *q;

	if (len + n <= *cap && *p)
		return 0;
	while (c < len + n) {
		if (c > SIZE_MAX / 2 / sz)
			return -ENOMEM;
		c *= 2;
	}
	q = realloc(*p, c * sz);
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = c;
	return 0;
}

int64_t pp_strtab__intern(struct pp_strtab *st, const char *s, size_t len)
{
	uint32_t h = (uint32_t)pp_hash_bytes(s, len);
	size_t pos;
	int err;

	err = pp_htab__reserve(&st->ht, 1);
	if (err)
		return err;
	for (pos = pp_htab__pos(&st->ht, h); st->ht.e[pos].slot; pos = (pos + 1) & (st->ht.cap - 1)) {
		uint32_t i = st->ht.e[pos].slot - 1;

		if (st->ht.e[pos].hash == h && st->len[i] == len &&
		    !memcmp(st->data + st->off[i], s, len))
			return i;
	}
	if (st->max && st->n >= st->max)
		return -ENOSPC;
	if (len >= UINT32_MAX || st->data_len + len + 1 > UINT32_MAX)
		return -ENOMEM;
	if (pp_grow(&st->data, &st->data_cap, st->data_len, len + 1, 1) ||
	    pp_grow(&st->off, &st->cap, st->n, 1, sizeof(*st->off)))
		return -ENOMEM;
	/* off and len share one capacity: grow len to the same size. */
	{
		uint32_t *l = realloc(st->len, st->cap * sizeof(*st->len));

		if (!l)
			return -ENOMEM;
		st->len = l;
	}
	memcpy(st->data + st->data_len, s, len);
	st->data[st->data_len + len] = '\0';
	st->off[st->n] = st->data_len;
	st->len[st->n] = len;
	st->data_len += len + 1;
	pp_htab__set(&st->ht, pos, h, st->n);
	return st->n++;
}

void pp_strtab__free(struct pp_strtab *st)
{
	free(st->data);
	free(st->off);
	free(st->len);
	pp_htab__free(&st->ht);
	memset(st, 0, sizeof(*st));
}

void pp_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static void profile__free_elements(struct pprof_profile *p)
{
	size_t i;

	for (i = 0; i < p->n_samples; i++) {
		free(p->samples[i].location_ids);
		free(p->samples[i].values);
		free(p->samples[i].labels);
	}
	for (i = 0; i < p->n_locations; i++)
		free(p->locations[i].lines);
	for (i = 0; i < p->n_strings; i++)
		free(p->strings[i]);
}

void pprof_profile__free(struct pprof_profile *p)
{
	if (!p)
		return;
	if (p->blocks) {
		free(p->blocks->strdata);
		free(p->blocks->ids);
		free(p->blocks->values);
		free(p->blocks->labels);
		free(p->blocks->lines);
		free(p->blocks);
	} else {
		profile__free_elements(p);
	}
	free(p->sample_type);
	free(p->samples);
	free(p->mappings);
	free(p->locations);
	free(p->functions);
	free(p->strings);
	free(p->comments);
	free(p);
}

void pprof_profile__weigh(struct pprof_profile *p, uint64_t weight_milli)
{
	int64_t w = (int64_t)weight_milli;

	for (size_t i = 0; i < p->n_samples; i++) {
		for (size_t j = 0; j < p->n_sample_type; j++) {
			int64_t v = p->samples[i].values[j];

			p->samples[i].values[j] = v / 1000 * w + v % 1000 * w / 1000;
		}
	}
}

bool pprof_is_gzip(const void *data, size_t len)
{
	const unsigned char *d = data;

	return len >= 2 && d[0] == 0x1f && d[1] == 0x8b;
}

int pprof_buf_write(void *ctx, const void *buf, size_t len)
{
	struct pprof_buf *b = ctx;

	if (b->max && (b->len + len > b->max || b->len + len < b->len))
		return -EFBIG;
	if (pp_grow(&b->data, &b->cap, b->len, len, 1))
		return -ENOMEM;
	memcpy(b->data + b->len, buf, len);
	b->len += len;
	return 0;
}

int pprof_file_write(void *ctx, const void *buf, size_t len)
{
	FILE *f = ctx;

	if (len && fwrite(buf, 1, len, f) != len)
		return errno ? -errno : -EIO;
	return 0;
}
