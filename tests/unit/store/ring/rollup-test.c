// SPDX-License-Identifier: MIT
/*
 * Rollups (store/ring/rollup.h): a store with 10-second buckets (120-second spans) over profiles of
 * the past, so the compactor rolls them up at once; every merge must give exactly the values
 * of merging the raw records (compared as folded stacks), for whole buckets, partial edges,
 * whole spans, the group of all series, one device, some devices, after a late upload into a
 * rolled-up bucket (from a known and from a new device) and after a restart.
 */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "store/store-int.h" /* the ring backend's counters (store__stats) */
#include "store/api/render.h"

#define SEC 1000000000ull
#define T0 (1700000400ull * SEC) /* a multiple of 120 s: a span starts here */
#define DEVICES 3
#define PER_DEVICE 80 /* one every 3 s: 240 s = 2 spans, 24 buckets */

struct fixture {
	char dir[64];
	char path[96];
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	/* tmpfs when there is one: a put waits for its fdatasync */
	strcpy(f->dir, access("/dev/shm", W_OK) ? "/tmp/edgeprof-rollup-test.XXXXXX"
						: "/dev/shm/edgeprof-rollup-test.XXXXXX");
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

/* A cpu profile: main -> dev<d> -> f<i % 7> with value v, main -> idle with value 1. */
static struct pprof_buf make_profile(int d, int i, int64_t v)
{
	struct pprof_buf buf = { 0 };
	struct pprof_builder *b = pprof_builder__new(NULL, pprof_buf_write, &buf);
	char dev[16], leaf[16];
	uint64_t fm, fd, fl, fi, lm, ld, ll, li;
	int64_t one = 1;

	assert_non_null(b);
	snprintf(dev, sizeof(dev), "dev%d", d);
	snprintf(leaf, sizeof(leaf), "f%d", i % 7);
	assert_int_equal(pprof_builder__add_sample_type(b, "cpu", "nanoseconds"), 0);
	fm = pprof_builder__function(b, "main", "main", "main.c", 1);
	fd = pprof_builder__function(b, dev, dev, "main.c", 10);
	fl = pprof_builder__function(b, leaf, leaf, "main.c", 20);
	fi = pprof_builder__function(b, "idle", "idle", "main.c", 30);
	lm = pprof_builder__location(b, 0, 0x1000, &(struct pprof_line_desc){ fm, 2 }, 1);
	ld = pprof_builder__location(b, 0, 0x2000, &(struct pprof_line_desc){ fd, 11 }, 1);
	ll = pprof_builder__location(b, 0, 0x3000 + i % 7, &(struct pprof_line_desc){ fl, 21 }, 1);
	li = pprof_builder__location(b, 0, 0x4000, &(struct pprof_line_desc){ fi, 31 }, 1);
	assert_int_equal(pprof_builder__add_sample(b, (uint64_t[]){ ll, ld, lm }, 3, &v, NULL, 0),
			 0);
	assert_int_equal(pprof_builder__add_sample(b, (uint64_t[]){ li, lm }, 2, &one, NULL, 0), 0);
	assert_int_equal(pprof_builder__finish(b), 0);
	pprof_builder__free(b);
	return buf;
}

static struct store *open_store(const char *path, bool rollups)
{
	struct store_opts o = { .path = path, .size = 4 << 20, .fsync_ms = 0,
				.index_entries = 4096, .quiet = true,
				.rollup = { .bucket_s = rollups ? 10 : 0, .grace_s = 1,
					    .poll_ms = 20, .max_pending = 7 } };
	char err[256] = "";
	struct store *s = store__open(&o, err, sizeof(err));

	if (!s)
		fail_msg("store__open: %s", err);
	return s;
}

static void put(struct store *s, int d, int i, uint64_t t)
{
	char dev[16];
	struct record_label l[] = { { "region", d % 2 ? "eu" : "us" } };
	struct record_meta m = { .time_ns = t, .service = "gw", .type = "cpu", .device = dev,
				 .labels = l, .n_labels = 1, .value = 100 + i };
	struct pprof_buf b = make_profile(d, i, 100 + i * 3 + d);
	uint64_t seq;
	bool dup;

	snprintf(dev, sizeof(dev), "gw-%d", d);
	assert_int_equal(store__put(s, &m, b.data, b.len, &seq, &dup), 0);
	free(b.data);
}

/*
 * Stores the profiles, then reopens the store with rollups: a compactor running during the fill
 * would see buckets of the past half-filled (its grace is for uploads in time, not backfills).
 */
static struct store *fill(const char *path)
{
	struct store *s = open_store(path, false);

	for (int i = 0; i < PER_DEVICE; i++)
		for (int d = 0; d < DEVICES; d++)
			put(s, d, i, T0 + (uint64_t)i * 3 * SEC + (uint64_t)d * 1000);
	store__free(s);
	return open_store(path, true);
}

/* Waits until the compactor has built n rollups in all (max_pending 7: many passes). */
static void wait_built(struct store *s, uint64_t n)
{
	struct store_stats st;

	for (int tries = 0; tries < 1000; tries++) {
		store__stats(s, &st);
		if (st.rollups_built >= n)
			break;
		usleep(10000);
	}
	if (st.rollups_built != n)
		fail_msg("%" PRIu64 " rollups built, %" PRIu64 " dropped; %" PRIu64 " expected",
			 st.rollups_built, st.rollups_dropped, n);
	assert_int_equal(st.rollups_dropped, 0);
}

/* The merge of [from, to] (selector text or NULL) as folded stacks, raw or planned. */
static char *folded(struct store *s, const char *text, uint64_t from, uint64_t to, bool raw,
		    size_t *n)
{
	struct selector *sel = NULL;
	struct store_query q = { .from_ns = from, .to_ns = to, .raw_only = raw };
	struct pprof_profile *p = NULL;
	char err[256] = "", *out = NULL;
	size_t len;

	if (text)
		assert_int_equal(selector__parse(text, 0, &sel, err, sizeof(err)), 0);
	q.sel = sel;
	if (store__merge(s, &q, &p, n, NULL, err, sizeof(err)))
		fail_msg("merge: %s", err);
	assert_int_equal(render_profile(p, RENDER_FOLDED, *n, 0, &out, &len, err, sizeof(err)),
			 0);
	pprof_profile__free(p);
	selector__free(sel);
	return out;
}

/* Raw and planned merges agree; returns how many rollups the planned one read. */
static uint64_t check_same(struct store *s, const char *sel, uint64_t from, uint64_t to)
{
	struct store_stats st0, st1;
	size_t n_raw, n_plan;
	char *raw = folded(s, sel, from, to, true, &n_raw), *plan;

	store__stats(s, &st0);
	plan = folded(s, sel, from, to, false, &n_plan);
	store__stats(s, &st1);
	assert_string_equal(plan, raw);
	assert_int_equal(n_plan, n_raw);
	free(raw);
	free(plan);
	return st1.rollups_read - st0.rollups_read;
}

/* Per device and for the group of all three: 24 bucket rollups and 2 span rollups. */
#define ROLLUPS ((DEVICES + 1) * (24 + 2))

static void rollups_equal_raw_merges(void **state)
{
	struct fixture *f = *state;
	struct store *s = fill(f->path);

	wait_built(s, ROLLUPS);
	/* every series selected: the group's rollups. Two whole spans, nothing raw */
	assert_int_equal(check_same(s, NULL, T0, T0 + 240 * SEC - 1), 2);
	assert_int_equal(check_same(s, "gw", T0, T0 + 240 * SEC - 1), 2);
	/* everything (no bounds) */
	assert_int_equal(check_same(s, NULL, 0, 0), 2);
	/* partial edges: raws at both ends, the group's bucket rollups between, no span */
	assert_int_equal(check_same(s, NULL, T0 + 15 * SEC, T0 + 101 * SEC), 8);
	/* the group's first span and three buckets of the next */
	assert_int_equal(check_same(s, "gw{}", T0, T0 + 150 * SEC), 1 + 3);
	/* one device: its own span rollup and three buckets */
	assert_int_equal(check_same(s, "{device=\"gw-1\"}", T0, T0 + 150 * SEC), 1 + 3);
	/* two devices of three, by label: their own rollups, never the group's */
	assert_int_equal(check_same(s, "{region=\"us\"}", T0, T0 + 240 * SEC - 1), 2 * 2);
	assert_int_equal(check_same(s, "{region=\"us\"}", T0 + 10 * SEC, T0 + 40 * SEC - 1),
			 3 * 2);
	store__free(s);
}

static int count_cb(void *ctx, const struct store_entry *v)
{
	(void)v;
	++*(int *)ctx;
	return 0;
}

static void rollups_are_not_listed(void **state)
{
	struct fixture *f = *state;
	struct store *s = fill(f->path);
	struct store_query q = { 0 };
	int n = 0;

	wait_built(s, ROLLUPS);
	assert_int_equal(store__list(s, &q, count_cb, &n), DEVICES * PER_DEVICE);
	assert_int_equal(n, DEVICES * PER_DEVICE);
	store__free(s);
}

/* A late upload into rolled-up buckets: those rollups are stale, the values still raw's. */
static void late_upload_falls_back_to_raws(void **state)
{
	struct fixture *f = *state;
	struct store *s = fill(f->path);
	struct store_stats st;

	wait_built(s, ROLLUPS);
	put(s, 1, 1000, T0 + 12 * SEC);
	check_same(s, NULL, T0, T0 + 240 * SEC - 1);
	check_same(s, NULL, T0 + 10 * SEC, T0 + 20 * SEC - 1);
	store__stats(s, &st);
	/*
	 * The group's span and bucket cover one raw less than selected: not planned. gw-1's
	 * bucket rollup is read stale in both merges (its span is not planned: the other
	 * buckets are read through the group's).
	 */
	assert_int_equal(st.rollups_stale, 2);
	store__free(s);
}

/*
 * A new device uploads into a rolled-up bucket: the group's rollups of that bucket and span
 * cover one raw less than a whole-service selection, so they are not planned (nothing stale);
 * a selection of every series but the new one is exactly what they cover.
 */
static void group_rollups_cover_exactly_their_raws(void **state)
{
	struct fixture *f = *state;
	struct store *s = fill(f->path);
	struct store_stats st;

	wait_built(s, ROLLUPS);
	put(s, 7, 0, T0 + 12 * SEC);
	/* 11 buckets through the group; bucket 1 through each old series' rollup + gw-7's raw */
	assert_int_equal(check_same(s, NULL, T0, T0 + 120 * SEC - 1), 11 + DEVICES);
	assert_int_equal(check_same(s, "{device!=\"gw-7\"}", T0, T0 + 120 * SEC - 1), 1);
	/* gw-1's own span rollup and gw-7's raw */
	assert_int_equal(check_same(s, "{device=~\"gw-[17]\"}", T0, T0 + 120 * SEC - 1), 1);
	store__stats(s, &st);
	assert_int_equal(st.rollups_stale, 0);
	store__free(s);
}

/* Rollups are records of the ring: found again after a restart, not built twice. */
static void rollups_survive_restart(void **state)
{
	struct fixture *f = *state;
	struct store *s = fill(f->path);
	struct store_stats st;

	wait_built(s, ROLLUPS);
	store__free(s);
	s = open_store(f->path, true);
	usleep(200000); /* passes of the new compactor: nothing left to build */
	store__stats(s, &st);
	assert_int_equal(st.rollups_built, 0);
	assert_int_equal(check_same(s, NULL, T0, T0 + 240 * SEC - 1), 2);
	store__free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(rollups_equal_raw_merges, setup, teardown),
		cmocka_unit_test_setup_teardown(rollups_are_not_listed, setup, teardown),
		cmocka_unit_test_setup_teardown(late_upload_falls_back_to_raws, setup, teardown),
		cmocka_unit_test_setup_teardown(group_rollups_cover_exactly_their_raws, setup,
						teardown),
		cmocka_unit_test_setup_teardown(rollups_survive_restart, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
