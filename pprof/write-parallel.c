// SPDX-License-Identifier: MIT
/*
 * pprof/write-parallel.c — gzip of a whole profile in parts deflated at once (as pigz does).
 *
 * Writing a merged profile ends every merge, and deflate is most of it: one CPU works while the
 * others wait. Here the protobuf bytes are encoded first, cut into parts of at least
 * PART_MIN bytes, and threads take the parts in turn, each deflated as raw deflate primed with the
 * 32 KiB before it (deflateSetDictionary), so matches still reach across the cut and the output
 * is within a few bytes of one stream. Parts end byte-aligned (Z_SYNC_FLUSH), the last one with
 * Z_FINISH, so their concatenation between one gzip header and trailer (CRC-32 combined from
 * the parts' CRCs) is a single valid deflate stream: any gzip reader decodes it.
 *
 * Memory: the encoded profile plus its compressed copy (deflateBound), one zlib state per part.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "pprof/internal.h"

#define PART_MIN (32 * 1024)
#define PARTS_PER_THREAD 4 /* parts differ in cost (strings deflate slower): threads take turns */
#define MAX_THREADS 16
#define MAX_PARTS (MAX_THREADS * PARTS_PER_THREAD)
#define WINDOW (32 * 1024)

struct part {
	const unsigned char *in, *dict;
	size_t len, dict_len;
	bool last;
	int level, err;
	unsigned char *out;
	size_t out_len;
	uLong crc;
};

/* Deflates one part into its own buffer: p->err = 0 or -errno. */
static void *deflate_part(void *arg)
{
	struct part *p = arg;
	size_t cap = deflateBound(NULL, p->len) + 16; /* + the sync flush's empty block */
	z_stream z = { 0 };
	int ret;

	if (p->len > UINT32_MAX / 2) { /* zlib counts in uInt */
		p->err = -EFBIG;
		return NULL;
	}
	p->crc = crc32(0, p->in, p->len);
	p->out = malloc(cap);
	if (!p->out || deflateInit2(&z, p->level, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
		p->err = -ENOMEM;
		return NULL;
	}
	if (p->dict_len && deflateSetDictionary(&z, p->dict, p->dict_len) != Z_OK)
		p->err = -EIO;
	z.next_in = (unsigned char *)p->in;
	z.avail_in = p->len;
	z.next_out = p->out;
	z.avail_out = cap;
	ret = p->err ? Z_STREAM_ERROR : deflate(&z, p->last ? Z_FINISH : Z_SYNC_FLUSH);
	/* deflateBound() is an upper bound: one call consumes and flushes everything. */
	if (!p->err && (z.avail_in || (p->last ? ret != Z_STREAM_END : ret != Z_OK || !z.avail_out)))
		p->err = -EIO;
	p->out_len = cap - z.avail_out;
	deflateEnd(&z);
	return NULL;
}

static unsigned count_parts(size_t len, unsigned threads)
{
	size_t n = len / PART_MIN, most;

	if (threads > MAX_THREADS)
		threads = MAX_THREADS;
	most = (size_t)threads * PARTS_PER_THREAD;
	return n < 1 ? 1 : n > most ? (unsigned)most : (unsigned)n;
}

struct queue {
	struct part *parts;
	unsigned n;
	atomic_uint next;
};

static void *take_parts(void *arg)
{
	struct queue *q = arg;
	unsigned i;

	while ((i = atomic_fetch_add(&q->next, 1)) < q->n)
		deflate_part(&q->parts[i]);
	return NULL;
}

static void cut_parts(struct part *parts, unsigned n, const unsigned char *data, size_t len,
		      int level)
{
	size_t step = len / n, at = 0;
	unsigned i;

	for (i = 0; i < n; i++) {
		struct part *p = &parts[i];

		p->in = data + at;
		p->len = i == n - 1 ? len - at : step;
		p->dict_len = at < WINDOW ? at : WINDOW;
		p->dict = p->in - p->dict_len;
		p->last = i == n - 1;
		p->level = level;
		at += p->len;
	}
}

/* gzip header (no name, no mtime, as zlib writes it), the parts, CRC-32 and length. */
static int emit(const struct part *parts, unsigned n, size_t len, int level,
		pprof_write_fn write, void *ctx)
{
	unsigned char head[10] = { 0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3 }, tail[8];
	uLong crc = 0;
	unsigned i;
	int err;

	head[8] = level == 9 ? 2 : level == 1 ? 4 : 0; /* XFL, as zlib sets it */
	err = write(ctx, head, sizeof(head));
	for (i = 0; i < n && !err; i++) {
		crc = i ? crc32_combine(crc, parts[i].crc, parts[i].len) : parts[i].crc;
		err = write(ctx, parts[i].out, parts[i].out_len);
	}
	for (i = 0; i < 4; i++) {
		tail[i] = (unsigned char)(crc >> (8 * i));
		tail[4 + i] = (unsigned char)((uint64_t)len >> (8 * i)); /* ISIZE: mod 2^32 */
	}
	return err ? err : write(ctx, tail, sizeof(tail));
}

int pp_gzip_parallel(const unsigned char *data, size_t len, int level, unsigned threads,
		     pprof_write_fn write, void *ctx)
{
	struct part parts[MAX_PARTS] = { 0 };
	pthread_t tids[MAX_THREADS];
	struct queue q = { .parts = parts, .n = count_parts(len, threads) };
	unsigned i, started = 0;
	int err = 0;

	cut_parts(parts, q.n, data, len, level);
	atomic_init(&q.next, 0);
	if (threads > MAX_THREADS)
		threads = MAX_THREADS;
	/* This thread takes parts too, and all of them if no thread can start. */
	for (; started + 1 < threads && started + 1 < q.n; started++)
		if (pthread_create(&tids[started], NULL, take_parts, &q))
			break;
	take_parts(&q);
	for (i = 0; i < started; i++)
		pthread_join(tids[i], NULL);
	for (i = 0; i < q.n && !err; i++)
		err = parts[i].err;
	if (!err)
		err = emit(parts, q.n, len, level, write, ctx);
	for (i = 0; i < q.n; i++)
		free(parts[i].out);
	return err;
}
