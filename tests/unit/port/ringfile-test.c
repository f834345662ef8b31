// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "port/clock.h"
#include "port/crc32c.h"
#include "port/ringfile.h"

struct fixture {
	char dir[64];
	char path[96];
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	strcpy(f->dir, "/tmp/edgeprof-ringfile-test.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->path, sizeof(f->path), "%s/ring", f->dir);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
	assert_int_equal(system(cmd), 0);
	free(f);
	return 0;
}

static struct ringfile *open_ring(const char *path, uint64_t size, unsigned fsync_ms)
{
	struct ringfile_opts o = { .size = size, .fsync_ms = fsync_ms, .create = true,
				   .quiet = true };
	char err[256] = "";
	struct ringfile *rf = ringfile__open(path, &o, err, sizeof(err));

	if (!rf)
		fail_msg("open: %s", err);
	return rf;
}

/* Payload i: deterministic bytes of a length that varies with i. */
static size_t payload_of(uint64_t i, uint8_t *buf, size_t max)
{
	size_t len = 100 + (i * 7919) % (max - 100);

	for (size_t k = 0; k < len; k++)
		buf[k] = (uint8_t)(i * 31 + k * 7);
	return len;
}

static uint64_t append_n(struct ringfile *rf, uint64_t i, size_t max)
{
	uint8_t buf[8192];
	char key[32], dev[32];
	struct record_label labels[] = { { "zone", "b" }, { "arch", "arm64" } };
	struct record_meta m = { .time_ns = 1000 + i, .service = "svc", .type = "cpu",
				 .device = dev, .key = key, .labels = labels, .n_labels = 2 };
	size_t len = payload_of(i, buf, max);
	uint64_t seq = 0;

	snprintf(key, sizeof(key), "key-%" PRIu64, i);
	snprintf(dev, sizeof(dev), "dev-%" PRIu64, i % 5);
	assert_int_equal(ringfile__append(rf, &m, buf, len, &seq), 0);
	return seq;
}

/* Checks that seq holds payload i with the metadata append_n wrote. */
static void check_record(struct ringfile *rf, uint64_t seq, uint64_t i, size_t max)
{
	uint8_t want[8192];
	size_t want_len = payload_of(i, want, max), len = 0;
	struct record_meta m;
	void *p = NULL;
	char key[32];

	assert_int_equal(ringfile__read(rf, seq, &m, &p, &len), 0);
	assert_int_equal(len, want_len);
	assert_memory_equal(p, want, len);
	snprintf(key, sizeof(key), "key-%" PRIu64, i);
	assert_string_equal(m.key, key);
	assert_string_equal(m.service, "svc");
	assert_string_equal(m.type, "cpu");
	assert_int_equal(m.time_ns, 1000 + i);
	assert_int_equal(m.n_labels, 2);
	assert_string_equal(m.labels[0].key, "arch"); /* sorted on write */
	assert_string_equal(m.labels[0].value, "arm64");
	assert_string_equal(m.labels[1].key, "zone");
	free(p);
}

static void crc32c_check_value(void **state)
{
	assert_int_equal(crc32c(0, "123456789", 9), 0xe3069283);
	assert_int_equal(crc32c(crc32c(0, "1234", 4), "56789", 5), 0xe3069283);
	assert_int_equal(crc32c(0, "", 0), 0);
}

static void append_read_reopen(void **state)
{
	struct fixture *f = *state;
	struct ringfile *rf = open_ring(f->path, 256 * 1024, 0);
	struct ringfile_stats st;
	uint64_t seqs[20];

	for (int i = 0; i < 20; i++)
		seqs[i] = append_n(rf, i, 4000);
	assert_int_equal(seqs[0], 1);
	assert_int_equal(seqs[19], 20);
	for (int i = 0; i < 20; i++)
		check_record(rf, seqs[i], i, 4000);
	assert_int_equal(ringfile__durable_seq(rf), 20);
	ringfile__free(rf);

	rf = open_ring(f->path, 0, 0);
	ringfile__stats(rf, &st);
	assert_int_equal(st.records, 20);
	assert_int_equal(st.corrupt, 0);
	assert_int_equal(st.first_seq, 1);
	assert_int_equal(st.oldest_time_ns, 1000);
	for (int i = 0; i < 20; i++)
		check_record(rf, seqs[i], i, 4000);
	assert_int_equal(append_n(rf, 20, 4000), 21);
	assert_int_equal(ringfile__read(rf, 99, &(struct record_meta){ 0 }, &(void *){ NULL },
					NULL), -ENOENT);
	ringfile__free(rf);
}

/* The profile total rides in the metadata so timelines need no payload decode, across reopen. */
static void value_survives_reopen(void **state)
{
	struct fixture *f = *state;
	struct ringfile *rf = open_ring(f->path, 64 * 1024, 0);
	struct record_meta m = { .time_ns = 5, .service = "svc", .type = "cpu", .value = 123456789 };
	struct record_meta got;
	void *payload;
	size_t len;
	uint64_t seq;

	assert_int_equal(ringfile__append(rf, &m, "x", 1, &seq), 0);
	ringfile__free(rf);
	rf = open_ring(f->path, 0, 0);
	assert_int_equal(ringfile__read(rf, seq, &got, &payload, &len), 0);
	assert_int_equal(got.value, 123456789);
	assert_string_equal(got.service, "svc");
	free(payload);
	ringfile__free(rf);
}

/*
 * A duty weight rides after the value, only when there is one: a record without is the same
 * size as before weights (old records read back weight 0), one with reads it back, reopened.
 */
static void weight_survives_reopen(void **state)
{
	struct fixture *f = *state;
	struct ringfile *rf = open_ring(f->path, 64 * 1024, 0);
	struct record_meta m = { .time_ns = 5, .service = "svc", .type = "cpu", .value = 7 };
	struct record_meta got;
	uint64_t seq[3];
	void *payload;
	size_t len, plain = ringfile__record_size(&m, 1);

	m.weight_milli = 1000; /* weight 1: no weight, nothing stored */
	assert_int_equal(ringfile__record_size(&m, 1), plain);
	assert_int_equal(ringfile__append(rf, &m, "x", 1, &seq[0]), 0);
	m.weight_milli = 20161;
	assert_int_equal(ringfile__append(rf, &m, "x", 1, &seq[1]), 0);
	m.weight_milli = 0;
	assert_int_equal(ringfile__append(rf, &m, "x", 1, &seq[2]), 0);
	ringfile__free(rf);
	rf = open_ring(f->path, 0, 0);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(ringfile__read(rf, seq[i], &got, &payload, &len), 0);
		assert_int_equal(got.weight_milli, i == 1 ? 20161 : 0);
		assert_int_equal(got.value, 7);
		assert_memory_equal(payload, "x", 1);
		free(payload);
	}
	ringfile__free(rf);
}

static void bad_input(void **state)
{
	struct fixture *f = *state;
	struct ringfile *rf = open_ring(f->path, 16 * 1024, 0);
	struct record_label dup[] = { { "a", "1" }, { "a", "2" } };
	struct record_meta m = { .service = "s", .labels = dup, .n_labels = 2 };
	static uint8_t big[32 * 1024];
	struct ringfile_opts o = { .size = 1000, .create = true };
	char err[256] = "", p2[128];
	uint64_t seq;

	assert_int_equal(ringfile__append(rf, &m, "x", 1, &seq), -EINVAL);
	m.n_labels = 0;
	assert_int_equal(ringfile__append(rf, &m, big, sizeof(big), &seq), -EFBIG);
	assert_int_equal(ringfile__append(rf, &m, "x", 1, &seq), 0);
	ringfile__free(rf);
	snprintf(p2, sizeof(p2), "%s/small", f->dir);
	assert_null(ringfile__open(p2, &o, err, sizeof(err)));
	assert_non_null(strstr(err, "below the minimum"));
	o.create = false;
	snprintf(p2, sizeof(p2), "%s/missing", f->dir);
	assert_null(ringfile__open(p2, &o, err, sizeof(err)));
	assert_int_equal(errno, ENOENT);
	/* a file that is not a ring (wrong --ring path) is never overwritten */
	snprintf(p2, sizeof(p2), "%s/notes.txt", f->dir);
	{
		FILE *fp = fopen(p2, "w");

		for (int i = 0; i < 4000; i++)
			fprintf(fp, "line %d of somebody's notes\n", i);
		fclose(fp);
	}
	o.size = 0;
	assert_null(ringfile__open(p2, &o, err, sizeof(err)));
	assert_int_equal(errno, EBADF);
	assert_non_null(strstr(err, "not a ring file"));
	/* waiting for a seq that was never appended is an error, not a hang */
	rf = open_ring(f->path, 0, 0);
	assert_int_equal(ringfile__wait_durable(rf, 1000), -EINVAL);
	ringfile__free(rf);
}

/* Writes 5x the ring size: the newest records are served, the oldest are gone, counts match. */
static void wraparound(void **state)
{
	struct fixture *f = *state;
	struct ringfile *rf = open_ring(f->path, 64 * 1024, 0);
	struct ringfile_stats st, st2;
	uint64_t bytes = 0, n = 0, first;

	while (bytes < 5 * 64 * 1024) {
		uint8_t buf[8192];

		bytes += payload_of(n, buf, 3000);
		assert_int_equal(append_n(rf, n, 3000), n + 1);
		n++;
	}
	ringfile__stats(rf, &st);
	assert_true(st.records > 5 && st.records < n);
	assert_int_equal(st.records + st.overwritten, n);
	assert_int_equal(st.last_seq, n);
	assert_true(st.used <= st.capacity);
	assert_true(st.bytes <= st.capacity);
	first = st.first_seq;
	assert_int_equal(first, n - st.records + 1);
	for (uint64_t s = first; s <= n; s++)
		check_record(rf, s, s - 1, 3000);
	assert_int_equal(ringfile__read(rf, first - 1, &(struct record_meta){ 0 },
					&(void *){ NULL }, NULL), -ENOENT);
	assert_int_equal(ringfile__read(rf, 1, &(struct record_meta){ 0 }, &(void *){ NULL },
					NULL), -ENOENT);
	ringfile__free(rf);

	/* the scan finds exactly the same live set: stale records of older laps are ignored */
	rf = open_ring(f->path, 0, 0);
	ringfile__stats(rf, &st2);
	assert_int_equal(st2.records, st.records);
	assert_int_equal(st2.first_seq, first);
	assert_int_equal(st2.last_seq, n);
	assert_int_equal(st2.corrupt, 0);
	for (uint64_t s = first; s <= n; s++)
		check_record(rf, s, s - 1, 3000);
	ringfile__free(rf);
}

static int count_cb(void *ctx, uint64_t seq, const struct record_meta *m, const void *p,
		    size_t len)
{
	uint64_t *last = ctx;

	assert_true(seq > *last);
	assert_non_null(p);
	*last = seq;
	return 0;
}

static void foreach_order(void **state)
{
	struct fixture *f = *state;
	struct ringfile *rf = open_ring(f->path, 32 * 1024, 0);
	uint64_t last = 0;

	for (int i = 0; i < 40; i++)
		append_n(rf, i, 2000);
	assert_int_equal(ringfile__foreach(rf, 0, true, count_cb, &last), 0);
	assert_int_equal(last, 40);
	ringfile__free(rf);
}

static void flip_byte(const char *path, off_t off)
{
	int fd = open(path, O_RDWR);
	uint8_t b;

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, &b, 1, off), 1);
	b ^= 0x5a;
	assert_int_equal(pwrite(fd, &b, 1, off), 1);
	close(fd);
}

/* Offset of record seq, found the slow way (scan for the magic and the seq field). */
static off_t find_record(const char *path, uint64_t seq)
{
	int fd = open(path, O_RDONLY);
	struct stat st;
	uint8_t *m;
	off_t off = -1;

	assert_true(fd >= 0);
	fstat(fd, &st);
	m = malloc(st.st_size);
	assert_int_equal(pread(fd, m, st.st_size, 0), st.st_size);
	for (off_t o = RINGFILE_HDR_SIZE; o + 56 <= st.st_size; o += 8) {
		uint64_t s;

		memcpy(&s, m + o + 16, 8);
		if (!memcmp(m + o, "EPRC", 4) && s == seq) {
			off = o;
			break;
		}
	}
	free(m);
	close(fd);
	return off;
}

static void corrupt_record_is_skipped(void **state)
{
	struct fixture *f = *state;
	struct ringfile *rf = open_ring(f->path, 128 * 1024, 0);
	struct ringfile_stats st;
	off_t off;

	for (int i = 0; i < 10; i++)
		append_n(rf, i, 2000);
	ringfile__free(rf);
	off = find_record(f->path, 5);
	assert_true(off > 0);
	flip_byte(f->path, off + 200); /* in its payload */
	off = find_record(f->path, 7);
	flip_byte(f->path, off + 8); /* its length field */

	rf = open_ring(f->path, 0, 0);
	ringfile__stats(rf, &st);
	assert_int_equal(st.corrupt, 2);
	assert_int_equal(st.records, 8);
	for (int i = 0; i < 10; i++) {
		if (i == 4 || i == 6)
			assert_int_equal(ringfile__read(rf, i + 1, &(struct record_meta){ 0 },
							&(void *){ NULL }, NULL), -ENOENT);
		else
			check_record(rf, i + 1, i, 2000);
	}
	/* a record corrupted after open is caught by the CRC on read: -EIO, never garbage */
	off = find_record(f->path, 9);
	flip_byte(f->path, off + 100);
	assert_int_equal(ringfile__read(rf, 9, &(struct record_meta){ 0 }, &(void *){ NULL },
					NULL), -EIO);
	assert_int_equal(append_n(rf, 10, 2000), 11);
	ringfile__free(rf);
}

static void torn_tail(void **state)
{
	struct fixture *f = *state;
	struct ringfile *rf = open_ring(f->path, 128 * 1024, 0);
	struct ringfile_stats st;
	off_t off;
	int fd;

	for (int i = 0; i < 5; i++)
		append_n(rf, i, 2000);
	ringfile__free(rf);
	/* simulate a crash in the middle of writing record 5: its second half is zeros */
	off = find_record(f->path, 5);
	fd = open(f->path, O_RDWR);
	{
		uint8_t z[1000] = { 0 };

		assert_int_equal(pwrite(fd, z, sizeof(z), off + 120), sizeof(z));
	}
	close(fd);
	rf = open_ring(f->path, 0, 0);
	ringfile__stats(rf, &st);
	assert_int_equal(st.records, 4);
	assert_int_equal(st.corrupt, 1);
	assert_int_equal(ringfile__read(rf, 5, &(struct record_meta){ 0 }, &(void *){ NULL }, NULL),
			 -ENOENT);
	/* the torn seq is not reused for another profile */
	assert_int_equal(append_n(rf, 5, 2000), 6);
	check_record(rf, 6, 5, 2000);
	ringfile__free(rf);
	rf = open_ring(f->path, 0, 0);
	check_record(rf, 4, 3, 2000);
	check_record(rf, 6, 5, 2000);
	ringfile__free(rf);
}

static uint8_t *read_file(const char *path, size_t *len)
{
	struct stat st;
	uint8_t *b;
	int fd = open(path, O_RDONLY);

	assert_true(fd >= 0);
	fstat(fd, &st);
	b = malloc(st.st_size);
	assert_int_equal(pread(fd, b, st.st_size, 0), st.st_size);
	close(fd);
	*len = st.st_size;
	return b;
}

static void write_file(const char *path, const uint8_t *b, size_t len)
{
	int fd = open(path, O_WRONLY);

	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, b, len, 0), (ssize_t)len);
	close(fd);
}

/*
 * Power loss in the middle of a write, on a ring that has wrapped: only a prefix of the new
 * record (and of its skip marker) reached the disk, at 150 random cut points. After reopening,
 * every record that was live before is served intact unless the new record's region covered
 * it (those were being evicted), the new record is served only if complete, and nothing served
 * differs from what was written.
 */
static void torn_write_at_random_points(void **state)
{
	struct fixture *f = *state;
	struct ringfile *rf = open_ring(f->path, 48 * 1024, 0);
	uint8_t *before, *after;
	size_t blen, alen;
	uint64_t last = 0, first_before;
	struct ringfile_stats st;

	for (int i = 0; i < 60; i++)
		last = append_n(rf, i, 4000);
	ringfile__stats(rf, &st);
	first_before = st.first_seq;
	assert_true(st.overwritten > 0);
	ringfile__free(rf);
	before = read_file(f->path, &blen);
	srand(7);
	for (int trial = 0; trial < 150; trial++) {
		size_t lo = blen, hi = 0, cut;
		uint64_t first, first_full;

		write_file(f->path, before, blen);
		rf = open_ring(f->path, 0, 0);
		append_n(rf, 60 + trial % 5, 4000); /* sizes vary with i */
		first_full = ringfile__first_seq(rf);
		ringfile__free(rf);
		after = read_file(f->path, &alen);
		assert_int_equal(alen, blen);
		for (size_t k = 0; k < alen; k++)
			if (after[k] != before[k]) {
				lo = k < lo ? k : lo;
				hi = k + 1;
			}
		assert_true(hi > lo);
		/* keep a random prefix of the changed bytes, the rest as it was */
		cut = lo + (size_t)rand() % (hi - lo + 1);
		memcpy(after + cut, before + cut, alen - cut);
		write_file(f->path, after, alen);
		free(after);

		rf = open_ring(f->path, 0, 0);
		ringfile__stats(rf, &st);
		first = st.first_seq;
		assert_true(first >= first_before);
		assert_true(first <= last + 1);
		assert_true(first <= first_full); /* no more than the whole write would evict */
		for (uint64_t s = first; s <= last; s++)
			check_record(rf, s, s - 1, 4000);
		if (st.last_seq == last + 1 && st.records == last - first + 2)
			check_record(rf, last + 1, 60 + trial % 5, 4000);
		else
			assert_int_equal(ringfile__read(rf, last + 1, &(struct record_meta){ 0 },
							&(void *){ NULL }, NULL), -ENOENT);
		/* and the ring goes on from there */
		check_record(rf, append_n(rf, 99, 4000), 99, 4000);
		ringfile__free(rf);
	}
	free(before);
}

/*
 * Issue 41: kill -9 in the middle of the write of a record, after each of 360 appends to a
 * 64 KiB ring that wraps every dozen records. What the page cache keeps is everything the
 * append wrote before the record (end-of-lap skip marker, the header's watermark) and a prefix
 * of the record that ends on a page boundary (where the kernel checks for a fatal signal).
 * After reopening, every record from the oldest live one on is served intact. Before the
 * eviction was declared ahead, the oldest could survive in the end of the lap (the skip
 * marker lands in the gap before it) while the record's prefix at the start of the next lap
 * had destroyed the next-oldest: a hole above the oldest live record.
 */
#define TORN_I(seq) (((seq) - 1) * 1009) /* sizes that jump about: gaps before the oldest */

static void torn_write_keeps_declared_records(void **state)
{
	struct fixture *f = *state;
	struct ringfile *rf = open_ring(f->path, 64 * 1024, 0);
	struct ringfile_stats st;

	for (uint64_t s = 1; s <= 40; s++)
		append_n(rf, TORN_I(s), 8000);
	ringfile__free(rf);
	for (uint64_t i = 41; i <= 400; i++) {
		uint8_t *before, *after, *img;
		size_t blen, alen;
		uint64_t seq, first_before, total;
		off_t off;

		before = read_file(f->path, &blen);
		rf = open_ring(f->path, 0, 0);
		first_before = ringfile__first_seq(rf);
		seq = append_n(rf, TORN_I(i), 8000);
		assert_int_equal(seq, i);
		ringfile__free(rf);
		after = read_file(f->path, &alen);
		off = find_record(f->path, seq);
		assert_true(off > 0);
		total = after[off + 8] | after[off + 9] << 8 | after[off + 10] << 16;
		img = malloc(alen);
		for (uint64_t cut = off; cut < off + total; cut = (cut / 4096 + 1) * 4096) {
			memcpy(img, after, alen);
			memcpy(img + cut, before + cut, off + total - cut);
			write_file(f->path, img, alen);
			rf = open_ring(f->path, 0, 0);
			ringfile__stats(rf, &st);
			assert_true(st.first_seq >= first_before);
			for (uint64_t s = st.first_seq; s < seq; s++)
				check_record(rf, s, TORN_I(s), 8000);
			ringfile__free(rf);
		}
		write_file(f->path, after, alen); /* the append completed: go on from there */
		free(img);
		free(before);
		free(after);
	}
}

static void zeroed_header_recovers(void **state)
{
	struct fixture *f = *state;
	struct ringfile *rf = open_ring(f->path, 128 * 1024, 0);
	struct ringfile_stats st;
	uint8_t z[RINGFILE_HDR_SIZE] = { 0 };
	int fd;

	for (int i = 0; i < 10; i++)
		append_n(rf, i, 2000);
	ringfile__free(rf);
	fd = open(f->path, O_RDWR);
	assert_int_equal(pwrite(fd, z, sizeof(z), 0), sizeof(z));
	close(fd);
	rf = open_ring(f->path, 128 * 1024, 0);
	ringfile__stats(rf, &st);
	assert_true(st.header_repaired);
	assert_false(st.reinitialised);
	assert_int_equal(st.records, 10);
	for (int i = 0; i < 10; i++)
		check_record(rf, i + 1, i, 2000);
	ringfile__free(rf);
	/* the header was rewritten: the next open is clean */
	rf = open_ring(f->path, 0, 0);
	ringfile__stats(rf, &st);
	assert_false(st.header_repaired);
	assert_int_equal(st.records, 10);
	ringfile__free(rf);
}

static void zeroed_file_reinitialises(void **state)
{
	struct fixture *f = *state;
	struct ringfile_stats st;
	struct ringfile *rf;
	int fd = open(f->path, O_RDWR | O_CREAT, 0600);

	assert_int_equal(ftruncate(fd, 64 * 1024), 0);
	close(fd);
	rf = open_ring(f->path, 0, 0);
	ringfile__stats(rf, &st);
	assert_true(st.reinitialised);
	assert_int_equal(st.records, 0);
	assert_int_equal(append_n(rf, 0, 2000), 1);
	ringfile__free(rf);
}

static void truncated_file(void **state)
{
	struct fixture *f = *state;
	struct ringfile *rf = open_ring(f->path, 128 * 1024, 0);
	struct ringfile_stats st;
	struct stat sb;
	off_t cut;

	for (int i = 0; i < 20; i++)
		append_n(rf, i, 2000);
	ringfile__free(rf);
	cut = find_record(f->path, 15) + 300; /* in the middle of record 15 */
	assert_int_equal(truncate(f->path, cut), 0);
	rf = open_ring(f->path, 0, 0);
	assert_int_equal(stat(f->path, &sb), 0);
	assert_int_equal(sb.st_size, 128 * 1024);
	ringfile__stats(rf, &st);
	assert_int_equal(st.records, 14);
	assert_int_equal(st.last_seq >= 14, 1);
	for (int i = 0; i < 14; i++)
		check_record(rf, i + 1, i, 2000);
	assert_true(append_n(rf, 20, 2000) > 14);
	ringfile__free(rf);

	/* truncated past the header's fields: the header still holds, the ring starts empty */
	assert_int_equal(truncate(f->path, 100), 0);
	rf = open_ring(f->path, 128 * 1024, 0);
	ringfile__stats(rf, &st);
	assert_false(st.reinitialised);
	assert_int_equal(st.records, 0);
	assert_int_equal(append_n(rf, 0, 2000), 1);
	ringfile__free(rf);
	/* truncated inside the header: reinitialised */
	assert_int_equal(truncate(f->path, 20), 0);
	rf = open_ring(f->path, 128 * 1024, 0);
	ringfile__stats(rf, &st);
	assert_true(st.reinitialised);
	assert_int_equal(st.records, 0);
	ringfile__free(rf);
}

static void spool_consume(void **state)
{
	struct fixture *f = *state;
	struct ringfile *rf = open_ring(f->path, 16 * 1024, 0);
	struct ringfile_stats st;
	uint64_t seq, last = 0;

	assert_true(ringfile__is_empty(rf));
	for (int i = 0; i < 5; i++)
		append_n(rf, i, 1000);
	assert_int_equal(ringfile__peek_oldest(rf, &seq), 0);
	assert_int_equal(seq, 1);
	assert_int_equal(ringfile__consume(rf, 2, true), 0);
	assert_int_equal(ringfile__peek_oldest(rf, &seq), 0);
	assert_int_equal(seq, 3);
	ringfile__free(rf);

	rf = open_ring(f->path, 0, 0);
	assert_int_equal(ringfile__peek_oldest(rf, &seq), 0);
	assert_int_equal(seq, 3);
	check_record(rf, 3, 2, 1000);
	assert_int_equal(ringfile__consume(rf, 5, true), 0);
	assert_true(ringfile__is_empty(rf));
	ringfile__stats(rf, &st);
	assert_int_equal(st.consumed_seq, 5);
	ringfile__free(rf);

	rf = open_ring(f->path, 0, 0);
	assert_true(ringfile__is_empty(rf));
	/* fill the spool past its size: the oldest unconsumed are dropped and counted */
	for (int i = 10; i < 60; i++)
		last = append_n(rf, i, 1000);
	ringfile__stats(rf, &st);
	assert_true(st.overwritten > 0);
	assert_int_equal(ringfile__peek_oldest(rf, &seq), 0);
	assert_int_equal(seq, st.first_seq);
	check_record(rf, last, 59, 1000);
	ringfile__free(rf);
}

static void group_commit(void **state)
{
	struct fixture *f = *state;
	struct ringfile *rf = open_ring(f->path, 64 * 1024, 200);
	uint64_t seq = 0;

	for (int i = 0; i < 5; i++)
		seq = append_n(rf, i, 1000);
	assert_true(ringfile__sync_due_ns(rf) != 0);
	assert_int_equal(ringfile__wait_durable(rf, seq), 0);
	assert_true(ringfile__durable_seq(rf) >= seq);
	assert_int_equal(ringfile__sync_due_ns(rf), 0);
	seq = append_n(rf, 5, 1000);
	assert_int_equal(ringfile__sync(rf), 0);
	assert_int_equal(ringfile__durable_seq(rf), seq);
	ringfile__free(rf);
}

/* ---- appends written outside the lock --------------------------------------------------- */

static void begin_n(struct ringfile *rf, uint64_t i, size_t max, uint8_t *buf,
		    struct ringfile_append *ap, char *key)
{
	static const struct record_label labels[] = { { "zone", "b" }, { "arch", "arm64" } };
	struct record_meta m = { .time_ns = 1000 + i, .service = "svc", .type = "cpu",
				 .device = "dev", .key = key, .labels = labels, .n_labels = 2 };
	size_t len = payload_of(i, buf, max);

	snprintf(key, 32, "key-%" PRIu64, i);
	assert_int_equal(ringfile__append_begin(rf, &m, buf, len, ap), 0);
}

struct bg_read {
	struct ringfile *rf;
	uint64_t seq;
	int ret;
	atomic_bool done;
};

static void *bg_read(void *arg)
{
	struct bg_read *r = arg;
	struct record_meta m;
	void *p = NULL;

	r->ret = ringfile__read(r->rf, r->seq, &m, &p, NULL);
	free(p);
	atomic_store(&r->done, true);
	return NULL;
}

/*
 * A sync covers only the prefix of fully written records; a record reserved but not yet
 * written is neither durable nor readable (a reader waits for it), whatever finishes after it.
 */
static void finish_out_of_order(void **state)
{
	struct fixture *f = *state;
	struct ringfile *rf = open_ring(f->path, 256 * 1024, 0);
	uint8_t b1[4096], b2[4096];
	char k1[32], k2[32];
	struct ringfile_append a1, a2;
	struct bg_read r = { .rf = rf };
	pthread_t th;
	uint64_t first = append_n(rf, 0, 4096);

	begin_n(rf, 1, 4096, b1, &a1, k1);
	begin_n(rf, 2, 4096, b2, &a2, k2);
	assert_int_equal(a1.seq, first + 1);
	assert_int_equal(a2.seq, first + 2);
	assert_int_equal(ringfile__append_finish(rf, &a2), 0);
	assert_int_equal(ringfile__sync(rf), 0);
	assert_int_equal(ringfile__durable_seq(rf), first); /* a1 still pending */
	r.seq = a1.seq;
	assert_int_equal(pthread_create(&th, NULL, bg_read, &r), 0);
	usleep(50 * 1000);
	assert_false(atomic_load(&r.done));
	assert_int_equal(ringfile__append_finish(rf, &a1), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(r.ret, 0);
	assert_int_equal(ringfile__wait_durable(rf, a2.seq), 0);
	assert_int_equal(ringfile__durable_seq(rf), a2.seq);
	check_record(rf, a1.seq, 1, 4096);
	check_record(rf, a2.seq, 2, 4096);
	ringfile__free(rf);
}

struct bg_append {
	struct ringfile *rf;
	uint64_t from, n, last;
	atomic_bool done;
};

static void *bg_append(void *arg)
{
	struct bg_append *a = arg;

	for (uint64_t i = a->from; i < a->from + a->n; i++)
		a->last = append_n(a->rf, i, 4096);
	atomic_store(&a->done, true);
	return NULL;
}

/* A wrapping append never overwrites a record that is still being written: it waits. */
static void wrap_waits_for_pending_write(void **state)
{
	struct fixture *f = *state;
	/* group commit far away: appends do not wait for durability, only for space */
	struct ringfile *rf = open_ring(f->path, RINGFILE_MIN_SIZE, 100000);
	struct bg_append a = { .rf = rf, .from = 10, .n = 20 };
	uint8_t buf[4096];
	char key[32];
	struct ringfile_append ap;
	pthread_t th;

	begin_n(rf, 1, 4096, buf, &ap, key);
	assert_int_equal(pthread_create(&th, NULL, bg_append, &a), 0);
	usleep(100 * 1000);
	assert_false(atomic_load(&a.done)); /* 20 records of ~2 KiB cannot fit in 16 KiB */
	assert_int_equal(ringfile__append_finish(rf, &ap), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_true(atomic_load(&a.done));
	check_record(rf, a.last, a.from + a.n - 1, 4096);
	ringfile__free(rf);
	rf = open_ring(f->path, 0, 0);
	check_record(rf, a.last, a.from + a.n - 1, 4096);
	ringfile__free(rf);
}

/* Writers in parallel, with wraparound: every seq is durable when acknowledged and reads back. */
static void parallel_writers(void **state)
{
	struct fixture *f = *state;
	struct ringfile *rf = open_ring(f->path, 256 * 1024, 0);
	struct bg_append a[6];
	pthread_t th[6];
	struct ringfile_stats st;

	for (int t = 0; t < 6; t++) {
		a[t] = (struct bg_append){ .rf = rf, .from = (uint64_t)t * 1000, .n = 150 };
		assert_int_equal(pthread_create(&th[t], NULL, bg_append, &a[t]), 0);
	}
	for (int t = 0; t < 6; t++)
		assert_int_equal(pthread_join(th[t], NULL), 0);
	ringfile__stats(rf, &st);
	assert_int_equal(st.last_seq, 900);
	assert_int_equal(st.durable_seq, 900);
	assert_true(st.overwritten > 0);
	ringfile__free(rf);
	rf = open_ring(f->path, 0, 0);
	ringfile__stats(rf, &st);
	assert_int_equal(st.corrupt, 0);
	assert_int_equal(st.last_seq, 900);
	/*
	 * Each writer's last record, unless the others wrapped over it since (a writer that
	 * finished early); the newest record of all is always there.
	 */
	for (int t = 0; t < 6; t++) {
		struct record_meta m;
		void *p = NULL;
		size_t len;

		if (a[t].last >= st.first_seq) {
			check_record(rf, a[t].last, a[t].from + a[t].n - 1, 4096);
			continue;
		}
		assert_int_equal(ringfile__read(rf, a[t].last, &m, &p, &len), -ENOENT);
		free(p);
	}
	ringfile__free(rf);
}

/*
 * A payload in two parts (append_begin_pre: the collector's spool writes the id, then the
 * upload as received) is one record: read back whole, the CRC over both, across a reopen;
 * split anywhere, or with nothing after the first part.
 */
static void payload_in_two_parts(void **state)
{
	static const size_t splits[] = { 8, 1, 99, 0 };
	struct fixture *f = *state;
	struct ringfile *rf = open_ring(f->path, 256 * 1024, 0);
	uint8_t buf[4096];
	char key[32];
	uint64_t seqs[5];

	for (uint64_t i = 0; i < 5; i++) {
		static const struct record_label labels[] = { { "zone", "b" }, { "arch", "arm64" } };
		struct record_meta m = { .time_ns = 1000 + i, .service = "svc", .type = "cpu",
					 .device = "dev", .key = key, .labels = labels,
					 .n_labels = 2 };
		size_t len = payload_of(i, buf, sizeof(buf));
		size_t pre = i < 4 ? splits[i] : len;	/* the last: all of it in pre */
		struct ringfile_append ap;

		snprintf(key, sizeof(key), "key-%" PRIu64, i);
		assert_int_equal(ringfile__append_begin_pre(rf, &m, buf, pre, buf + pre, len - pre,
							    &ap), 0);
		assert_int_equal(ringfile__append_finish(rf, &ap), 0);
		assert_int_equal(ringfile__wait_durable(rf, ap.seq), 0);
		seqs[i] = ap.seq;
	}
	for (uint64_t i = 0; i < 5; i++)
		check_record(rf, seqs[i], i, sizeof(buf));
	ringfile__free(rf);
	rf = open_ring(f->path, 0, 0);
	for (uint64_t i = 0; i < 5; i++)
		check_record(rf, seqs[i], i, sizeof(buf));
	ringfile__free(rf);
}

struct bg_durable {
	struct ringfile *rf;
	uint64_t from;
	int bad;
};

static void *bg_durable(void *arg)
{
	struct bg_durable *d = arg;

	for (uint64_t i = d->from; i < d->from + 150; i++) {
		uint64_t seq = append_n(d->rf, i, 512);

		if (ringfile__wait_durable(d->rf, seq) || ringfile__durable_seq(d->rf) < seq)
			d->bad++;
	}
	return NULL;
}

/*
 * Uploads waiting for group commits in parallel: those that find a sync running sleep until it
 * ends and return without the lock when it covered them; every wait returns with its record
 * durable, and no waiter is left asleep (the test would hang).
 */
static void waiters_of_running_syncs(void **state)
{
	struct fixture *f = *state;
	struct ringfile *rf = open_ring(f->path, 4 << 20, 1);
	struct bg_durable d[8];
	pthread_t th[8];
	struct ringfile_stats st;

	for (int t = 0; t < 8; t++) {
		d[t] = (struct bg_durable){ .rf = rf, .from = 1000 * (uint64_t)t };
		assert_int_equal(pthread_create(&th[t], NULL, bg_durable, &d[t]), 0);
	}
	for (int t = 0; t < 8; t++) {
		assert_int_equal(pthread_join(th[t], NULL), 0);
		assert_int_equal(d[t].bad, 0);
	}
	ringfile__stats(rf, &st);
	assert_int_equal(st.last_seq, 8 * 150);
	assert_int_equal(ringfile__durable_seq(rf), 8 * 150);
	ringfile__free(rf);
}

struct bg_many {
	struct ringfile *rf;
	uint64_t from;
	int bad;
	uint64_t max_wait_ns;
};

/* Appends, waiting for every other record only: a wait then covers records not waited for. */
static void *bg_many(void *arg)
{
	struct bg_many *d = arg;

	for (uint64_t i = d->from; i < d->from + 60; i++) {
		uint64_t seq = append_n(d->rf, i, 600), t0 = port_clock_mono_ns(), dt;

		if (i % 2)
			continue;
		if (ringfile__wait_durable(d->rf, seq) || ringfile__durable_seq(d->rf) < seq)
			d->bad++;
		dt = port_clock_mono_ns() - t0;
		if (dt > d->max_wait_ns)
			d->max_wait_ns = dt;
	}
	return NULL;
}

/*
 * Many waiters of group commits, most coming in while a sync runs: each is woken by the end of
 * the sync that covers it, in turn, and one of the next sync's leads it. A wakeup lost on the way
 * would leave a waiter asleep until the next sync's end, or for ever when no record comes after
 * it: every wait is bounded here (a sync of this small file takes milliseconds).
 */
static void many_waiters_of_group_commits(void **state)
{
	struct fixture *f = *state;
	struct ringfile *rf = open_ring(f->path, 8 << 20, 2);
	struct bg_many d[32];
	pthread_t th[32];

	for (int t = 0; t < 32; t++) {
		d[t] = (struct bg_many){ .rf = rf, .from = 1000 * (uint64_t)t };
		assert_int_equal(pthread_create(&th[t], NULL, bg_many, &d[t]), 0);
	}
	for (int t = 0; t < 32; t++) {
		assert_int_equal(pthread_join(th[t], NULL), 0);
		assert_int_equal(d[t].bad, 0);
		assert_true(d[t].max_wait_ns < 5 * NSEC_PER_SEC);
	}
	assert_int_equal(ringfile__sync(rf), 0);
	assert_int_equal(ringfile__durable_seq(rf), 32 * 60);
	ringfile__free(rf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(crc32c_check_value),
		cmocka_unit_test_setup_teardown(append_read_reopen, setup, teardown),
		cmocka_unit_test_setup_teardown(value_survives_reopen, setup, teardown),
		cmocka_unit_test_setup_teardown(weight_survives_reopen, setup, teardown),
		cmocka_unit_test_setup_teardown(bad_input, setup, teardown),
		cmocka_unit_test_setup_teardown(wraparound, setup, teardown),
		cmocka_unit_test_setup_teardown(foreach_order, setup, teardown),
		cmocka_unit_test_setup_teardown(corrupt_record_is_skipped, setup, teardown),
		cmocka_unit_test_setup_teardown(torn_tail, setup, teardown),
		cmocka_unit_test_setup_teardown(torn_write_at_random_points, setup, teardown),
		cmocka_unit_test_setup_teardown(torn_write_keeps_declared_records, setup, teardown),
		cmocka_unit_test_setup_teardown(zeroed_header_recovers, setup, teardown),
		cmocka_unit_test_setup_teardown(zeroed_file_reinitialises, setup, teardown),
		cmocka_unit_test_setup_teardown(truncated_file, setup, teardown),
		cmocka_unit_test_setup_teardown(spool_consume, setup, teardown),
		cmocka_unit_test_setup_teardown(group_commit, setup, teardown),
		cmocka_unit_test_setup_teardown(waiters_of_running_syncs, setup, teardown),
		cmocka_unit_test_setup_teardown(many_waiters_of_group_commits, setup, teardown),
		cmocka_unit_test_setup_teardown(payload_in_two_parts, setup, teardown),
		cmocka_unit_test_setup_teardown(finish_out_of_order, setup, teardown),
		cmocka_unit_test_setup_teardown(wrap_waits_for_pending_write, setup, teardown),
		cmocka_unit_test_setup_teardown(parallel_writers, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
