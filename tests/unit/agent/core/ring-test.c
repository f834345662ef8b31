// SPDX-License-Identifier: MIT
/* Unit tests of agent/core/ring.c: real threads, a real forked producer killed mid-record. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "agent/core/ring.h"

struct seen {
	uint64_t n, bad;
	uint64_t last_seq[8];
	bool ordered;
};

/* Records carry frames[i] = seq * 1000 + i, and tid = producer index: checkable content. */
static int check_rec(void *ctx, const struct ring_rec *rec)
{
	struct seen *s = ctx;
	uint64_t seq = rec->time_ns;

	for (unsigned int i = 0; i < rec->n_frames; i++)
		if (rec->frames[i] != seq * 1000 + i)
			s->bad++;
	if (rec->weight_ns != seq + rec->n_frames || rec->tid >= 8)
		s->bad++;
	else if (s->last_seq[rec->tid] && seq <= s->last_seq[rec->tid])
		s->ordered = false;
	else
		s->last_seq[rec->tid] = seq;
	s->n++;
	return 0;
}

static int put(struct ring *r, uint32_t tid, uint64_t seq, unsigned int n)
{
	struct ring_rec h = {.time_ns = seq, .weight_ns = seq + n, .pid = 1, .tid = tid};
	uint64_t frames[64];

	for (unsigned int i = 0; i < n; i++)
		frames[i] = seq * 1000 + i;
	return ring__write(r, &h, frames, n);
}

static void roundtrip_across_many_wraps(void **state)
{
	struct seen s = {.ordered = true};
	struct ring *r;

	assert_int_equal(ring__create(NULL, 4096, "svc", 99, &r), 0);
	for (uint64_t seq = 1; seq <= 20000; seq++) {
		assert_int_equal(put(r, 0, seq, (unsigned int)(seq % 40)), 0);
		if (seq % 7 == 0)
			assert_true(ring__drain(r, 100, 0, check_rec, &s) > 0);
	}
	ring__drain(r, 1000, 0, check_rec, &s);
	assert_int_equal(s.n, 20000);
	assert_int_equal(s.bad, 0);
	assert_true(s.ordered);
	assert_true(ring__is_empty(r));
	assert_string_equal(ring__shared(r)->service, "svc");
	ring__free(r);
}

struct split {
	struct ring *r;
	struct agent_sample s[2];
	uint8_t blob[2][16];
	uint64_t last_frame[2]; /* the record is gone after the drain: copies */
	unsigned int n;
};

static int take_sample(void *ctx, const struct ring_rec *rec)
{
	struct split *sp = ctx;

	ring__rec_to_sample(sp->r, rec, &sp->s[sp->n]);
	if (sp->s[sp->n].snapshot)
		memcpy(sp->blob[sp->n], sp->s[sp->n].snapshot, sp->s[sp->n].snapshot_len);
	if (sp->s[sp->n].n_user)
		sp->last_frame[sp->n] = sp->s[sp->n].frames[sp->s[sp->n].n_user - 1];
	sp->n++;
	return 0;
}

/* A record with a snapshot after its frames comes out as frames and snapshot; one whose
 * descriptor does not add up (a producer's garbage) comes out with neither. */
static void snapshot_records_split(void **state)
{
	struct split sp = {0};
	struct ring_rec *rec;
	const char text[] = "0123456789";

	(void)state;
	assert_int_equal(ring__create(NULL, 4096, "svc", 99, &sp.r), 0);
	for (int bad = 0; bad < 2; bad++) {
		rec = ring__try_reserve(sp.r, 3 + RING_SNAP_WORDS(sizeof(text)));
		assert_non_null(rec);
		rec->flags = SAMPLE_F_SNAPSHOT;
		rec->frames[0] = 0x100;
		rec->frames[1] = 0x200;
		rec->frames[2] = 0x300;
		memcpy(&rec->frames[3], text, sizeof(text));
		rec->n_frames = (uint16_t)(3 + RING_SNAP_WORDS(sizeof(text)));
		rec->frames[rec->n_frames - 1] = RING_SNAP_DESC(3 + bad, sizeof(text));
		ring__commit(sp.r, rec);
	}
	assert_int_equal(ring__drain(sp.r, 10, 0, take_sample, &sp), 2);
	assert_int_equal(sp.s[0].n_user, 3);
	assert_int_equal(sp.last_frame[0], 0x300);
	assert_int_equal(sp.s[0].snapshot_len, sizeof(text));
	assert_string_equal((const char *)sp.blob[0], text);
	assert_true(sp.s[0].flags & SAMPLE_F_SNAPSHOT);
	assert_int_equal(sp.s[1].n_user, 0);
	assert_null(sp.s[1].snapshot);
	assert_false(sp.s[1].flags & SAMPLE_F_SNAPSHOT);
	ring__free(sp.r);
}

static void overflow_is_counted_exactly(void **state)
{
	struct seen s = {.ordered = true};
	struct ring_stats st;
	unsigned int ok = 0, full = 0;
	struct ring *r;

	assert_int_equal(ring__create(NULL, 4096, "svc", 99, &r), 0);
	for (uint64_t seq = 1; seq <= 500; seq++) {
		if (put(r, 0, seq, 10) == 0)
			ok++;
		else
			full++;
	}
	assert_int_equal(ok, 4096 / (8 + sizeof(struct ring_rec) + 80));
	ring__stats(r, &st);
	assert_int_equal(st.dropped_full, full);
	assert_int_equal(st.written, ok);
	assert_int_equal(ring__drain(r, 1000, 0, check_rec, &s), ok);
	assert_int_equal(s.bad, 0);
	assert_int_equal(put(r, 0, 1000, 10), 0); /* room again */
	ring__free(r);
}

struct producer {
	struct ring *r;
	uint32_t idx;
	unsigned int count, ok;
};

static void *producer_main(void *arg)
{
	struct producer *p = arg;

	for (unsigned int i = 1; i <= p->count; i++) {
		if (put(p->r, p->idx, i, i % 30 + 1) == 0)
			p->ok++;
		if (i % 64 == 0)
			sched_yield();
	}
	return NULL;
}

static void concurrent_producers_one_consumer(void **state)
{
	struct seen s = {.ordered = true};
	struct producer p[4];
	pthread_t t[4];
	struct ring_stats st;
	struct ring *r;
	uint64_t ok = 0;
	bool running = true, joined[4] = {false};

	assert_int_equal(ring__create(NULL, 16384, "svc", 99, &r), 0);
	for (int i = 0; i < 4; i++) {
		p[i] = (struct producer){.r = r, .idx = (uint32_t)i, .count = 50000};
		assert_int_equal(pthread_create(&t[i], NULL, producer_main, &p[i]), 0);
	}
	while (running) {
		running = false;
		for (int i = 0; i < 4; i++) {
			if (!joined[i])
				joined[i] = pthread_tryjoin_np(t[i], NULL) == 0;
			running |= !joined[i];
		}
		ring__drain(r, 256, 0, check_rec, &s);
	}
	while (ring__drain(r, 256, 0, check_rec, &s) > 0)
		;
	for (int i = 0; i < 4; i++)
		ok += p[i].ok;
	ring__stats(r, &st);
	assert_int_equal(s.bad, 0);
	assert_true(s.ordered);
	assert_int_equal(s.n, ok);
	assert_int_equal(st.written, ok);
	assert_int_equal(st.consumed, ok);
	assert_int_equal(st.dropped_full + ok, 4 * 50000);
	assert_int_equal(st.torn, 0);
	print_message("concurrent: %llu delivered, %llu dropped (full)\n", (unsigned long long)ok,
		      (unsigned long long)st.dropped_full);
	ring__free(r);
}

static void producer_killed_mid_record(void **state)
{
	char path[] = "/tmp/edgeprof-ring-test.XXXXXX";
	struct seen s = {.ordered = true};
	struct ring_stats st;
	struct ring *prod, *cons;
	int fd = mkstemp(path), status;
	pid_t pid;

	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(ring__create(path, 8192, "svc", 99, &prod), 0);
	assert_int_equal(put(prod, 1, 1, 5), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct ring_rec *rec = ring__reserve(prod, 20);

		rec->time_ns = 77;
		rec->n_frames = 20;
		for (int i = 0; i < 10; i++)
			rec->frames[i] = 0xdeadbeef; /* half-written, never committed */
		raise(SIGKILL);
		_exit(1);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	for (uint64_t seq = 2; seq <= 11; seq++)
		assert_int_equal(put(prod, 1, seq, 5), 0);

	assert_int_equal(ring__open(path, &cons), 0);
	ring__set_stall_timeout(cons, 1000);
	/* the record before the torn one comes out; then the consumer waits for the torn one */
	assert_int_equal(ring__drain(cons, 100, 5000, check_rec, &s), 1);
	assert_int_equal(ring__drain(cons, 100, 5500, check_rec, &s), 0);
	/* after the stall timeout it is skipped, and everything behind it is intact */
	assert_int_equal(ring__drain(cons, 100, 6000, check_rec, &s), 10);
	assert_int_equal(s.bad, 0);
	assert_true(s.ordered);
	ring__stats(cons, &st);
	assert_int_equal(st.torn, 1);
	assert_true(ring__is_empty(cons));
	/* the ring is usable afterwards, across the wrap */
	for (uint64_t seq = 12; seq < 400; seq++) {
		assert_int_equal(put(prod, 1, seq, 7), 0);
		assert_int_equal(ring__drain(cons, 100, 7000, check_rec, &s), 1);
	}
	assert_int_equal(s.bad, 0);
	ring__free(cons);
	ring__free(prod);
	unlink(path);
}

static void producer_dead_before_header(void **state)
{
	struct seen s = {.ordered = true};
	struct ring_stats st;
	struct ring *r;

	assert_int_equal(ring__create(NULL, 4096, "svc", 99, &r), 0);
	ring__set_stall_timeout(r, 100);
	/* a producer that won the CAS and died before storing the header */
	__atomic_fetch_add(&ring__shared(r)->head, 64, __ATOMIC_RELAXED);
	assert_int_equal(put(r, 2, 5, 3), 0);
	assert_int_equal(ring__drain(r, 10, 0, check_rec, &s), 0);
	assert_int_equal(ring__drain(r, 10, 99, check_rec, &s), 0);
	/* length unknown: everything up to head is skipped, nothing parsed as garbage */
	assert_int_equal(ring__drain(r, 10, 100, check_rec, &s), 0);
	ring__stats(r, &st);
	assert_int_equal(st.torn, 1);
	assert_true(st.torn_bytes >= 64);
	assert_true(ring__is_empty(r));
	assert_int_equal(put(r, 2, 6, 3), 0);
	assert_int_equal(ring__drain(r, 10, 200, check_rec, &s), 1);
	assert_int_equal(s.bad, 0);
	ring__free(r);
}

static void open_rejects_non_rings(void **state)
{
	char path[] = "/tmp/edgeprof-ring-test.XXXXXX";
	int fd = mkstemp(path);
	struct ring *r;

	assert_true(fd >= 0);
	assert_int_equal(write(fd, "hello", 5), 5);
	close(fd);
	assert_int_equal(ring__open(path, &r), -EINVAL);
	assert_null(r);
	unlink(path);
}

static void label_sets_are_interned(void **state)
{
	struct ring *r;
	size_t len;
	const char *b;
	char blob[64];
	uint32_t a, c;

	assert_int_equal(ring__create(NULL, 4096, "svc", 99, &r), 0);
	a = ring__labels_intern(r, "k\0v", 4);
	c = ring__labels_intern(r, "k\0w", 4);
	assert_int_equal(a, 1);
	assert_int_equal(c, 2);
	assert_int_equal(ring__labels_intern(r, "k\0v", 4), 1);
	b = ring__labels_get(r, c, &len);
	assert_non_null(b);
	assert_int_equal(len, 4);
	assert_memory_equal(b, "k\0w", 4);
	assert_null(ring__labels_get(r, 0, &len));
	assert_null(ring__labels_get(r, 99, &len));
	for (int i = 2; i < RING_LABEL_SETS; i++) {
		int n = snprintf(blob, sizeof(blob), "k%c%d", 0, i);

		assert_int_equal(ring__labels_intern(r, blob, (size_t)n + 1), i + 1);
	}
	assert_int_equal(ring__labels_intern(r, "x\0y", 4), 0);
	assert_int_equal(ring__shared(r)->labels_dropped, 1);
	ring__free(r);
}

static void producer_liveness_survives_pid_reuse(void **state)
{
	char path[] = "/tmp/edgeprof-ring-test.XXXXXX";
	int fd = mkstemp(path), status;
	struct ring *r, *cons;
	pid_t pid;

	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(ring__create(path, 4096, "svc", 99, &r), 0);
	assert_true(ring__shared(r)->proc_start != 0);
	assert_true(ring__producer_alive(r));
	/* same pid, another start time: a reused pid is not our producer */
	ring__shared(r)->proc_start++;
	assert_false(ring__producer_alive(r));
	ring__free(r);
	/* a producer that exited */
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(ring__create(path, 4096, "svc", 99, &r) ? 1 : 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_int_equal(ring__open(path, &cons), 0);
	assert_int_equal(ring__shared(cons)->pid, (uint32_t)pid);
	assert_false(ring__producer_alive(cons));
	ring__free(cons);
	unlink(path);
}

/* At exit a ring goes when no agent needs it: no sample written, or an agent has it mapped. */
static void release_keeps_only_unread_samples(void **state)
{
	char dir[] = "/tmp/ring-test-XXXXXX", path[64];
	struct ring *r;
	struct ring_rec h = {.pid = 1};
	uint64_t f = 1;

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/1.ring", dir);
	assert_int_equal(ring__create(path, 4096, "t", 99, &r), 0);
	assert_true(ring__release(r, path)); /* nothing written: nothing to keep */
	assert_int_equal(access(path, F_OK), -1);
	ring__free(r);

	assert_int_equal(ring__create(path, 4096, "t", 99, &r), 0);
	assert_int_equal(ring__write(r, &h, &f, 1), 0);
	assert_false(ring__release(r, path)); /* samples, no agent yet: kept for one */
	assert_int_equal(access(path, F_OK), 0);
	ring__shared(r)->paused = 1; /* an agent has it mapped */
	assert_true(ring__release(r, path));
	ring__free(r);
	rmdir(dir);
}

/* The registry keeps at most N rings of exited producers, the newest; live ones are kept. */
static void registry_trim_keeps_newest_dead(void **state)
{
	char dir[] = "/tmp/ring-test-XXXXXX", path[96];
	/* pids beyond any pid_max: kill() says ESRCH */
	static const long dead[] = {2100000001, 2100000002, 2100000003, 2100000004};

	assert_non_null(mkdtemp(dir));
	for (int i = 0; i < 4; i++) {
		struct timeval tv[2] = {{1000 + i, 0}, {1000 + i, 0}};
		FILE *fp;

		snprintf(path, sizeof(path), "%s/%ld.ring", dir, dead[i]);
		fp = fopen(path, "w");
		assert_non_null(fp);
		fclose(fp);
		assert_int_equal(utimes(path, tv), 0);
	}
	snprintf(path, sizeof(path), "%s/%d.ring", dir, (int)getpid());
	fclose(fopen(path, "w"));
	assert_int_equal(ring__registry_trim(dir, 4), 0); /* under the bound: nothing */
	assert_int_equal(ring__registry_trim(dir, 2), 2);
	for (int i = 0; i < 4; i++) {
		snprintf(path, sizeof(path), "%s/%ld.ring", dir, dead[i]);
		assert_int_equal(access(path, F_OK) == 0, i >= 2); /* the oldest went */
		unlink(path);
	}
	snprintf(path, sizeof(path), "%s/%d.ring", dir, (int)getpid());
	assert_int_equal(access(path, F_OK), 0); /* alive: never touched */
	unlink(path);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(roundtrip_across_many_wraps),
	    cmocka_unit_test(overflow_is_counted_exactly),
	    cmocka_unit_test(concurrent_producers_one_consumer),
	    cmocka_unit_test(producer_killed_mid_record),
	    cmocka_unit_test(producer_dead_before_header),
	    cmocka_unit_test(open_rejects_non_rings),
	    cmocka_unit_test(label_sets_are_interned),
	    cmocka_unit_test(snapshot_records_split),
	    cmocka_unit_test(release_keeps_only_unread_samples),
	    cmocka_unit_test(registry_trim_keeps_newest_dead),
	    cmocka_unit_test(producer_liveness_survives_pid_reuse),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
