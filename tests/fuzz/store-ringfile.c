// SPDX-License-Identifier: MIT
/*
 * tests/fuzz/store-ringfile.c — any file content handed to ringfile__open(): it must open or
 * refuse cleanly, serve only records that validate, and keep working (append, reread, reopen).
 * The input is laid over a valid ring (so that fuzzing starts from real records): the first
 * 8 bytes of the input pick where, the rest is written there.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "port/ringfile.h"

#define RING_SIZE (32 * 1024)

static char path[64];
static unsigned char base[RING_SIZE];

static int read_cb(void *ctx, uint64_t seq, const struct record_meta *m, const void *p,
		   size_t len)
{
	size_t *n = ctx;

	/* touch every byte the ring hands out */
	*n += strlen(m->service) + strlen(m->type) + strlen(m->device) + strlen(m->key) + len;
	for (size_t i = 0; i < m->n_labels; i++)
		*n += strlen(m->labels[i].key) + strlen(m->labels[i].value);
	return 0;
}

static void remove_ring(void)
{
	unlink(path);
}

static void make_base(void)
{
	struct ringfile_opts o = { .size = RING_SIZE, .create = true, .quiet = true };
	struct record_label l[] = { { "k", "v" }, { "a", "b" } };
	struct record_meta m = { .service = "s", .type = "cpu", .device = "d", .key = "key",
				 .labels = l, .n_labels = 2 };
	char err[128];
	struct ringfile *rf;
	unsigned char payload[700];
	FILE *f;

	/* tmpfs when there is one: fdatasync is then free and the fuzzer runs 10x faster */
	snprintf(path, sizeof(path), "%s/edgeprof-fuzz-ring.%d",
		 access("/dev/shm", W_OK) ? "/tmp" : "/dev/shm", getpid());
	unlink(path);
	atexit(remove_ring);
	rf = ringfile__open(path, &o, err, sizeof(err));
	if (!rf)
		abort();
	memset(payload, 0xab, sizeof(payload));
	for (int i = 0; i < 70; i++) /* wraps about once */
		if (ringfile__append(rf, &m, payload, 300 + i * 5, NULL))
			abort();
	ringfile__consume(rf, 40, false);
	ringfile__free(rf);
	f = fopen(path, "rb");
	if (!f || fread(base, 1, RING_SIZE, f) != RING_SIZE)
		abort();
	fclose(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ringfile_opts o = { .size = RING_SIZE, .create = true, .quiet = true };
	struct record_meta m = { .service = "after", .key = "x" };
	struct ringfile *rf;
	char err[256];
	size_t n = 0, off = 0;
	uint64_t seq, at;
	FILE *f;

	if (!path[0])
		make_base();
	if (size >= 8) {
		memcpy(&at, data, 8);
		off = at % RING_SIZE;
		data += 8;
		size -= 8;
	}
	f = fopen(path, "wb");
	fwrite(base, 1, RING_SIZE, f);
	fseek(f, off, SEEK_SET);
	fwrite(data, 1, size < RING_SIZE - off ? size : RING_SIZE - off, f);
	if (size > 8 && data[0] == 0x7f) /* sometimes a truncated file */
		ftruncate(fileno(f), data[1] * 128);
	fclose(f);

	rf = ringfile__open(path, &o, err, sizeof(err));
	if (!rf)
		return 0;
	ringfile__foreach(rf, 0, true, read_cb, &n);
	if (ringfile__append(rf, &m, "payload", 7, &seq) == 0) {
		struct record_meta rm;
		void *p;
		size_t len;

		if (ringfile__read(rf, seq, &rm, &p, &len) || len != 7 || memcmp(p, "payload", 7))
			abort(); /* what was just appended must read back */
		free(p);
	}
	ringfile__peek_oldest(rf, &seq);
	ringfile__free(rf);
	rf = ringfile__open(path, &o, err, sizeof(err));
	if (!rf)
		abort(); /* a ring we wrote must reopen */
	ringfile__foreach(rf, 0, true, read_cb, &n);
	ringfile__free(rf);
	return 0;
}
