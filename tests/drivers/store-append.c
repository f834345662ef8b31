// SPDX-License-Identifier: MIT
/*
 * tests/drivers/store-append.c — drives the ring file for the crash, corruption and
 * wraparound tests and the benchmark.
 *
 *   store-append append PATH SIZE FSYNC_MS COUNT START
 *       appends COUNT records (record i = START, START+1, ...; payload derived from i, 100 to
 *       8 KiB), and after each one is durable prints "ack SEQ HASH I FIRST" (flushed).
 *   store-append verify PATH
 *       opens the ring, reads every live record back, checks each payload against the one
 *       record i must have, prints "rec SEQ HASH I" per record, then
 *       "stats first=F last=L records=N corrupt=C overwritten=O stale=S repaired=R"; exits 1
 *       when a served record is not byte-identical to what was written (a torn record served).
 *   store-append bench PATH SIZE FSYNC_MS COUNT LEN
 *       appends COUNT records of LEN bytes; prints "bytes=B seconds=S" (record bytes/s).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "port/clock.h"
#include "port/crc32c.h"
#include "port/ringfile.h"

static uint64_t fnv64(const void *p, size_t n)
{
	const unsigned char *b = p;
	uint64_t h = 0xcbf29ce484222325ull;

	while (n--)
		h = (h ^ *b++) * 0x100000001b3ull;
	return h;
}

/* Record i's payload: its length and bytes follow from i alone. */
static size_t payload_of(uint64_t i, unsigned char *buf, size_t maxlen)
{
	uint64_t x = i * 0x9e3779b97f4a7c15ull + 1;
	size_t len = 100 + (size_t)(x >> 7) % (maxlen - 100);

	for (size_t k = 0; k < len; k++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		buf[k] = (unsigned char)x;
	}
	return len;
}

static struct ringfile *open_ring(const char *path, uint64_t size, unsigned fsync_ms)
{
	struct ringfile_opts o = { .size = size, .fsync_ms = fsync_ms, .create = size != 0 };
	char err[256];
	struct ringfile *rf = ringfile__open(path, &o, err, sizeof(err));

	if (!rf)
		fprintf(stderr, "store-append: %s\n", err);
	return rf;
}

static int cmd_append(char **argv)
{
	uint64_t size = strtoull(argv[3], NULL, 0), count = strtoull(argv[5], NULL, 0);
	uint64_t start = strtoull(argv[6], NULL, 0);
	unsigned fsync_ms = strtoul(argv[4], NULL, 0);
	size_t maxlen = 8192;
	struct ringfile *rf = open_ring(argv[2], size, fsync_ms);
	unsigned char *buf = malloc(maxlen);
	struct record_label l[] = { { "driver", "store-append" } };

	if (!rf || !buf || maxlen <= 100)
		return 2;
	for (uint64_t i = start; i < start + count; i++) {
		char key[32];
		struct record_meta m = { .time_ns = port_clock_real_ns(), .service = "crash",
					 .type = "cpu", .device = "drv", .key = key,
					 .labels = l, .n_labels = 1 };
		size_t len = payload_of(i, buf, maxlen);
		uint64_t seq;
		int err;

		snprintf(key, sizeof(key), "i-%" PRIu64, i);
		err = ringfile__append_async(rf, &m, buf, len, &seq);
		if (!err)
			err = ringfile__wait_durable(rf, seq);
		if (err) {
			fprintf(stderr, "store-append: append %" PRIu64 ": %s\n", i,
				strerror(-err));
			return 1;
		}
		printf("ack %" PRIu64 " %016" PRIx64 " %" PRIu64 " %" PRIu64 "\n", seq,
		       fnv64(buf, len), i, ringfile__first_seq(rf));
		fflush(stdout);
	}
	ringfile__free(rf);
	free(buf);
	return 0;
}

struct verify_ctx {
	unsigned char *buf;
	int bad;
};

static int verify_cb(void *ctx, uint64_t seq, const struct record_meta *m, const void *payload,
		     size_t len)
{
	struct verify_ctx *v = ctx;
	uint64_t i;
	size_t want;

	if (sscanf(m->key, "i-%" SCNu64, &i) != 1) {
		printf("BAD %" PRIu64 " key '%s'\n", seq, m->key);
		v->bad = 1;
		return 0;
	}
	want = payload_of(i, v->buf, 8192);
	if (want != len || memcmp(v->buf, payload, len) || strcmp(m->service, "crash") ||
	    m->n_labels != 1 || strcmp(m->labels[0].value, "store-append")) {
		printf("BAD %" PRIu64 " i=%" PRIu64 " len %zu want %zu\n", seq, i, len, want);
		v->bad = 1;
	}
	printf("rec %" PRIu64 " %016" PRIx64 " %" PRIu64 "\n", seq, fnv64(payload, len), i);
	return 0;
}

static int cmd_verify(char **argv)
{
	struct ringfile *rf = open_ring(argv[2], 0, 0);
	struct verify_ctx v = { .buf = malloc(65536) };
	struct ringfile_stats st;
	int err;

	if (!rf || !v.buf)
		return 2;
	err = ringfile__foreach(rf, 0, true, verify_cb, &v);
	ringfile__stats(rf, &st);
	printf("stats first=%" PRIu64 " last=%" PRIu64 " records=%" PRIu64 " corrupt=%" PRIu64
	       " overwritten=%" PRIu64 " stale=%" PRIu64 " repaired=%d reinit=%d\n",
	       st.first_seq, st.last_seq, st.records, st.corrupt, st.overwritten, st.stale,
	       st.header_repaired, st.reinitialised);
	ringfile__free(rf);
	free(v.buf);
	return err || v.bad;
}

static int cmd_bench(char **argv)
{
	uint64_t size = strtoull(argv[3], NULL, 0), count = strtoull(argv[5], NULL, 0);
	size_t len = strtoul(argv[6], NULL, 0);
	struct ringfile *rf = open_ring(argv[2], size, strtoul(argv[4], NULL, 0));
	unsigned char *buf = malloc(len);
	struct record_meta m = { .service = "bench", .type = "cpu", .device = "d" };
	uint64_t t0, seq = 0;
	double secs;

	if (!rf || !buf)
		return 2;
	for (size_t k = 0; k < len; k++)
		buf[k] = (unsigned char)(k * 131 + 7);
	t0 = port_clock_mono_ns();
	for (uint64_t i = 0; i < count; i++) {
		int err = ringfile__append(rf, &m, buf, len, &seq);

		if (err) {
			fprintf(stderr, "store-append: %s\n", strerror(-err));
			return 1;
		}
	}
	ringfile__sync(rf);
	secs = (port_clock_mono_ns() - t0) / 1e9;
	printf("bytes=%" PRIu64 " seconds=%.6f\n", (uint64_t)(count * len), secs);
	ringfile__free(rf);
	free(buf);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 7 && !strcmp(argv[1], "append"))
		return cmd_append(argv);
	if (argc == 3 && !strcmp(argv[1], "verify"))
		return cmd_verify(argv);
	if (argc == 7 && !strcmp(argv[1], "bench"))
		return cmd_bench(argv);
	fprintf(stderr, "usage: store-append append PATH SIZE FSYNC_MS COUNT START\n"
			"       store-append verify PATH\n"
			"       store-append bench PATH SIZE FSYNC_MS COUNT LEN\n");
	return 2;
}
