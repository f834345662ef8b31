// SPDX-License-Identifier: MIT
/* Unit tests of agent/core/aggregate.c. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "agent/core/aggregate.h"

struct sum {
	uint64_t count, weight;
	size_t entries;
};

static int add_up(void *ctx, const struct agg_entry *e)
{
	struct sum *s = ctx;

	s->count += e->count;
	s->weight += e->weight_ns;
	s->entries++;
	return 0;
}

static struct agent_sample sample(uint32_t tid, const uint64_t *frames, uint16_t n)
{
	return (struct agent_sample){
	    .pid = 7, .tid = tid, .n_user = n, .frames = frames, .weight_ns = 10};
}

static void same_stack_counts_once(void **state)
{
	struct agg_opts o = {.max_entries = 8};
	struct aggregate *a = aggregate__new(&o);
	uint64_t f1[] = {1, 2, 3}, f2[] = {1, 2, 4};
	struct agent_sample s = sample(1, f1, 3);
	struct sum sum = {0};

	assert_non_null(a);
	for (int i = 0; i < 5; i++)
		assert_int_equal(aggregate__add(a, &s), 0);
	s = sample(1, f2, 3);
	assert_int_equal(aggregate__add(a, &s), 0);
	s = sample(2, f1, 3); /* another thread: its own entry */
	assert_int_equal(aggregate__add(a, &s), 0);
	s = sample(1, f1, 2); /* a prefix is another stack */
	assert_int_equal(aggregate__add(a, &s), 0);
	aggregate__foreach(a, add_up, &sum);
	assert_int_equal(sum.entries, 4);
	assert_int_equal(sum.count, 8);
	assert_int_equal(sum.weight, 80);
	aggregate__free(a);
}

static void bounds_drop_and_count(void **state)
{
	struct agg_opts o = {.max_entries = 4, .max_frames = 1000};
	struct aggregate *a = aggregate__new(&o);
	struct agg_stats st;
	uint64_t f[1];

	for (uint64_t i = 0; i < 10; i++) {
		struct agent_sample s = sample(1, f, 1);

		f[0] = i;
		assert_int_equal(aggregate__add(a, &s), i < 4 ? 0 : -ENOSPC);
	}
	f[0] = 2; /* a known stack still counts when the table is full */
	struct agent_sample s = sample(1, f, 1);

	assert_int_equal(aggregate__add(a, &s), 0);
	aggregate__stats(a, &st);
	assert_int_equal(st.entries, 4);
	assert_int_equal(st.dropped_table, 6);
	assert_int_equal(st.samples, 5);
	aggregate__reset(a);
	aggregate__stats(a, &st);
	assert_int_equal(st.entries, 0);
	assert_int_equal(aggregate__add(a, &s), 0);
	aggregate__free(a);

	o = (struct agg_opts){.max_entries = 100, .max_frames = 5};
	a = aggregate__new(&o);
	uint64_t g[3] = {1, 2, 3};

	s = sample(1, g, 3);
	assert_int_equal(aggregate__add(a, &s), 0);
	g[0] = 9;
	assert_int_equal(aggregate__add(a, &s), -ENOSPC); /* 6 frames > pool of 5 */
	aggregate__stats(a, &st);
	assert_int_equal(st.dropped_frames, 1);
	aggregate__free(a);
}

static int check_labels(void *ctx, const struct agg_entry *e)
{
	const struct aggregate *a = ctx;
	const char *k[4], *v[4];
	size_t n = aggregate__labels(a, e->labels, k, v, 4);

	if (e->frames[0] == 1) {
		assert_int_equal(n, 2);
		assert_string_equal(k[0], "fn");
		assert_string_equal(v[0], "a");
		assert_string_equal(k[1], "comm");
		assert_string_equal(v[1], "work");
	} else {
		assert_int_equal(n, 0);
	}
	return 0;
}

static void labels_are_part_of_the_key(void **state)
{
	struct aggregate *a = aggregate__new(NULL);
	uint64_t f[] = {1}, g[] = {2};
	struct agent_sample s = sample(1, f, 1);
	struct sum sum = {0};

	s.n_labels = 1;
	s.labels[0] = (struct sample_label){"fn", "a"};
	s.comm = "work";
	assert_int_equal(aggregate__add(a, &s), 0);
	assert_int_equal(aggregate__add(a, &s), 0);
	s = sample(1, g, 1);
	assert_int_equal(aggregate__add(a, &s), 0);
	aggregate__foreach(a, add_up, &sum);
	assert_int_equal(sum.entries, 2);
	aggregate__foreach(a, check_labels, a);
	aggregate__free(a);
}

struct snaps {
	size_t with, without;
	uint64_t count;
	uint8_t last[8];
};

static int find_snapshots(void *ctx, const struct agg_entry *e)
{
	struct snaps *s = ctx;

	s->count += e->count;
	if (!e->snapshot) {
		s->without++;
		return 0;
	}
	assert_int_equal(e->count, 1);
	assert_int_equal(e->snapshot_len, 5);
	assert_int_equal(e->flags & SAMPLE_F_SNAPSHOT, SAMPLE_F_SNAPSHOT);
	memcpy(s->last, e->snapshot, 5);
	s->with++;
	return 0;
}

/* Samples with a snapshot are entries of their own, never merged, max_snapshots of them; the
 * rest keep their frames without it (counted) and aggregate as any sample. */
static void snapshots_kept_apart_and_bounded(void **state)
{
	struct agg_opts o = {.max_entries = 16, .max_snapshots = 3};
	struct aggregate *a = aggregate__new(&o);
	uint64_t f[] = {1, 2, 3};
	uint8_t blob[5] = {9, 8, 7, 6, 0};
	struct agent_sample s = sample(1, f, 3);
	struct agg_stats st;
	struct snaps got = {0};

	(void)state;
	s.flags = SAMPLE_F_SNAPSHOT;
	s.snapshot = blob;
	s.snapshot_len = 5;
	for (uint8_t i = 0; i < 5; i++) {
		blob[4] = i;
		assert_int_equal(aggregate__add(a, &s), 0);
	}
	aggregate__foreach(a, find_snapshots, &got);
	assert_int_equal(got.with, 3);
	assert_int_equal(got.without, 1); /* the two beyond the bound: one entry, count 2 */
	assert_int_equal(got.count, 5);
	assert_int_equal(got.last[4], 2);
	aggregate__stats(a, &st);
	assert_int_equal(st.snapshots, 3);
	assert_int_equal(st.dropped_snapshots, 2);
	assert_int_equal(st.samples, 5);
	aggregate__free(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(same_stack_counts_once),
	    cmocka_unit_test(bounds_drop_and_count),
	    cmocka_unit_test(labels_are_part_of_the_key),
	    cmocka_unit_test(snapshots_kept_apart_and_bounded),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
