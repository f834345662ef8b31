// SPDX-License-Identifier: MIT
/*
 * agent/transport/spool.c on a real ring file in a temporary directory: order and exactly-once across
 * reopen, oldest dropped when full with the count carried to the next upload (also across a
 * restart), a record corrupted on flash is skipped and never served, a kill -9 in the middle
 * of pushes loses nothing that push() had returned for, clock-less items keep their flag.
 */
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "agent/transport/spool.h"
#include "port/clock.h"
#include "port/rand.h"

static char dir[64], path[128];

static int setup(void **state)
{
	snprintf(dir, sizeof(dir), "/tmp/edgeprof-spool-test.XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	snprintf(path, sizeof(path), "%s/spool", dir);
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) ? -1 : 0;
}

static int fresh(void **state)
{
	unlink(path);
	return 0;
}

static struct spool *open_spool(uint64_t size)
{
	char err[256] = "";
	struct spool *s = spool__open(path, size, err, sizeof(err));

	if (!s)
		fail_msg("spool__open: %s", err);
	return s;
}

/* Item i: key "k<i>", payload of len bytes derived from i. */
static int push(struct spool *s, unsigned i, size_t len)
{
	static const struct upload_label l[] = { { "region", "eu" } };
	unsigned char *buf = malloc(len);
	char key[32];
	struct transport_item it = {
		.service = "svc", .type = "cpu", .labels = l, .n_labels = 1, .key = key,
		.time_ns = 1700000000ULL * NSEC_PER_SEC + i, .data = buf, .len = len,
	};
	int ret;

	for (size_t j = 0; j < len; j++)
		buf[j] = (unsigned char)(i * 31 + j);
	snprintf(key, sizeof(key), "k%u", i);
	ret = spool__push(s, &it);
	free(buf);
	return ret;
}

/* Peeks, checks it is item i intact, returns dropped_before; acks when ack. */
static uint64_t expect(struct spool *s, unsigned i, size_t len, bool ack)
{
	struct spool_entry e;
	char key[32];
	uint64_t dropped;

	assert_int_equal(spool__peek(s, &e), 0);
	snprintf(key, sizeof(key), "k%u", i);
	assert_string_equal(e.item.key, key);
	assert_string_equal(e.item.service, "svc");
	assert_string_equal(e.item.type, "cpu");
	assert_int_equal(e.item.n_labels, 1);	/* private labels hidden */
	assert_string_equal(e.item.labels[0].key, "region");
	assert_int_equal(e.item.len, len);
	for (size_t j = 0; j < len; j++)
		assert_int_equal(((unsigned char *)e.item.data)[j], (unsigned char)(i * 31 + j));
	assert_false(e.item.clock_unset);
	dropped = e.dropped_before;
	if (ack)
		assert_int_equal(spool__ack(s, &e), 0);
	spool_entry__release(&e);
	return dropped;
}

static void order_and_exactly_once_across_reopen(void **state)
{
	struct spool *s = open_spool(64 * 1024);
	struct spool_entry e;

	assert_true(spool__is_empty(s));
	assert_int_equal(spool__peek(s, &e), -ENOENT);
	for (unsigned i = 0; i < 5; i++)
		assert_int_equal(push(s, i, 500), 0);
	assert_false(spool__is_empty(s));
	assert_int_equal(expect(s, 0, 500, true), 0);
	assert_int_equal(expect(s, 1, 500, false), 0);	/* not acked: comes again */
	spool__free(s);

	s = open_spool(0);
	assert_int_equal(expect(s, 1, 500, true), 0);
	assert_int_equal(expect(s, 2, 500, true), 0);
	spool__free(s);
	s = open_spool(0);
	assert_int_equal(push(s, 5, 100), 0);		/* behind the waiting ones */
	assert_int_equal(expect(s, 3, 500, true), 0);
	assert_int_equal(expect(s, 4, 500, true), 0);
	assert_int_equal(expect(s, 5, 100, true), 0);
	assert_true(spool__is_empty(s));
	spool__free(s);
	s = open_spool(0);
	assert_true(spool__is_empty(s));
	spool__free(s);
}

static void full_drops_oldest_and_reports_it(void **state)
{
	struct spool *s = open_spool(16 * 1024);
	struct spool_stats st;
	struct spool_entry e;
	unsigned first;
	uint64_t dropped;

	for (unsigned i = 0; i < 40; i++)
		assert_int_equal(push(s, i, 2000), 0);
	spool__stats(s, &st);
	assert_true(st.pending > 0 && st.pending < 40);
	first = 40 - (unsigned)st.pending;
	assert_int_equal(spool__peek(s, &e), 0);
	assert_int_equal(e.dropped_before, first);
	spool_entry__release(&e);
	spool__free(s);

	/* the count is derived from flash: a restart does not forget it */
	s = open_spool(0);
	dropped = expect(s, first, 2000, true);
	assert_int_equal(dropped, first);
	assert_int_equal(expect(s, first + 1, 2000, true), 0);	/* reported once */
	spool__stats(s, &st);
	assert_int_equal(st.evicted, first);
	for (unsigned i = first + 2; i < 40; i++)
		expect(s, i, 2000, true);
	assert_true(spool__is_empty(s));	/* the newest were kept */
	/* too big for the whole ring */
	assert_int_equal(push(s, 99, 20000), -EFBIG);
	spool__free(s);
}

static void drops_while_partly_drained_are_counted_once(void **state)
{
	struct spool *s = open_spool(16 * 1024);
	unsigned i, total = 0;

	for (i = 0; i < 3; i++)
		assert_int_equal(push(s, i, 3000), 0);
	assert_int_equal(expect(s, 0, 3000, true), 0);
	for (; i < 30; i++)
		assert_int_equal(push(s, i, 3000), 0);
	for (;;) {
		struct spool_entry e;

		if (spool__peek(s, &e))
			break;
		total += (unsigned)e.dropped_before;
		assert_int_equal(spool__ack(s, &e), 0);
		spool_entry__release(&e);
		total++;
	}
	/* every item is either delivered or reported dropped, exactly once */
	assert_int_equal(total + 1, 30);
	spool__free(s);
}

/* Finds the offset of the last record magic "EPRC" in the file. */
static off_t last_record(const unsigned char *b, size_t len)
{
	off_t off = -1;

	for (size_t i = 512; i + 4 <= len; i += 8)
		if (!memcmp(b + i, "EPRC", 4))
			off = (off_t)i;
	return off;
}

static void record_rotten_on_flash_is_never_served(void **state)
{
	struct spool *s = open_spool(64 * 1024);
	struct spool_stats st;
	struct spool_entry e;
	unsigned char *b;
	struct stat sb;
	off_t off;
	int fd;

	for (unsigned i = 0; i < 4; i++)
		assert_int_equal(push(s, i, 800), 0);
	spool__free(s);
	/* flip a payload byte of the newest record, as a torn or worn-out page would */
	fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &sb), 0);
	b = malloc((size_t)sb.st_size);
	assert_int_equal(pread(fd, b, (size_t)sb.st_size, 0), sb.st_size);
	off = last_record(b, (size_t)sb.st_size);
	assert_true(off > 0);
	b[off + 200] ^= 0x55;
	assert_int_equal(pwrite(fd, b + off + 200, 1, off + 200), 1);
	close(fd);
	free(b);

	s = open_spool(0);
	for (unsigned i = 0; i < 3; i++)
		expect(s, i, 800, true);
	assert_int_equal(spool__peek(s, &e), -ENOENT);
	spool__stats(s, &st);
	assert_true(st.corrupt >= 1);
	/* and the spool keeps working */
	assert_int_equal(push(s, 10, 800), 0);
	expect(s, 10, 800, true);
	spool__free(s);
}

/*
 * A child pushes as fast as it can and reports each push that returned; kill -9 at a random
 * moment; the reopened spool holds every reported item, in order, intact.
 */
static void kill9_loses_nothing_reported(void **state)
{
	for (int trial = 0; trial < 20; trial++) {
		int pfd[2];
		pid_t pid;
		unsigned reported = 0, got;
		struct spool *s;
		FILE *f;

		unlink(path);
		assert_int_equal(pipe(pfd), 0);
		pid = fork();
		if (!pid) {
			struct spool *cs = open_spool(4 << 20);

			close(pfd[0]);
			/* 3000 x ~830 B fit in 4 MiB: whatever a trial writes, nothing is evicted */
			for (unsigned i = 0; i < 3000; i++) {
				if (push(cs, i, 700))
					_exit(1);
				if (write(pfd[1], &i, sizeof(i)) != sizeof(i))
					_exit(1);
			}
			_exit(0);
		}
		close(pfd[1]);
		port_sleep_ns(5 * NSEC_PER_MSEC + port_rand_below(40 * NSEC_PER_MSEC));
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		f = fdopen(pfd[0], "r");
		while (fread(&got, sizeof(got), 1, f) == 1)
			reported = got + 1;
		fclose(f);

		s = open_spool(0);
		for (got = 0;; got++) {
			struct spool_entry e;

			if (spool__peek(s, &e))
				break;
			assert_int_equal(e.dropped_before, 0);
			spool_entry__release(&e);
			expect(s, got, 700, true);
		}
		assert_true(got >= reported);	/* one more may have landed before the kill */
		assert_true(got <= reported + 1);
		spool__free(s);
	}
}

/* Power lost right after the file was created: an empty file is a new spool, not an error. */
static void empty_file_is_a_new_spool(void **state)
{
	struct spool_stats st;
	struct spool *s;
	int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600);

	assert_true(fd >= 0);
	close(fd);
	s = open_spool(0);
	spool__stats(s, &st);
	assert_int_equal(st.capacity + 512, (uint64_t)CONFIG_SPOOL_KB * 1024);
	assert_int_equal(push(s, 1, 100), 0);
	expect(s, 1, 100, true);
	spool__free(s);
}

static void clock_unset_round_trip(void **state)
{
	struct spool *s = open_spool(64 * 1024);
	struct transport_item it = {
		.service = "svc", .type = "cpu", .key = "k", .time_ns = 12345,
		.clock_unset = true, .data = "x", .len = 1,
	};
	struct spool_entry e;

	assert_int_equal(spool__push(s, &it), 0);
	assert_int_equal(spool__peek(s, &e), 0);
	assert_true(e.item.clock_unset);
	assert_int_equal(e.item.time_ns, 12345);
	assert_true(e.this_boot);
	assert_int_equal(e.item.n_labels, 0);
	spool_entry__release(&e);
	spool__free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(order_and_exactly_once_across_reopen, fresh),
		cmocka_unit_test_setup(full_drops_oldest_and_reports_it, fresh),
		cmocka_unit_test_setup(drops_while_partly_drained_are_counted_once, fresh),
		cmocka_unit_test_setup(record_rotten_on_flash_is_never_served, fresh),
		cmocka_unit_test_setup(kill9_loses_nothing_reported, fresh),
		cmocka_unit_test_setup(empty_file_is_a_new_spool, fresh),
		cmocka_unit_test_setup(clock_unset_round_trip, fresh),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
