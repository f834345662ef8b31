// SPDX-License-Identifier: MIT
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdatomic.h>

#include "pprof/pprof.h"

#define N 40

/* Input i: stacks main->f<i%5> with value i+1, and main->common with value 1. */
static struct pprof_buf inputs[N];

static void make_input(size_t i, struct pprof_buf *buf)
{
	struct pprof_builder *b = pprof_builder__new(NULL, pprof_buf_write, buf);
	char name[16];
	uint64_t fm, ff, fc, lm, lf, lc;

	snprintf(name, sizeof(name), "f%zu", i % 5);
	assert_int_equal(pprof_builder__add_sample_type(b, "cpu", "nanoseconds"), 0);
	fm = pprof_builder__function(b, "main", "main", "", 0);
	ff = pprof_builder__function(b, name, name, "", 0);
	fc = pprof_builder__function(b, "common", "common", "", 0);
	lm = pprof_builder__location(b, 0, 0x10, &(struct pprof_line_desc){ fm, 0 }, 1);
	lf = pprof_builder__location(b, 0, 0x20 + i % 5, &(struct pprof_line_desc){ ff, 0 }, 1);
	lc = pprof_builder__location(b, 0, 0x40, &(struct pprof_line_desc){ fc, 0 }, 1);
	assert_int_equal(pprof_builder__add_sample(b, (uint64_t[]){ lf, lm }, 2,
						   (int64_t[]){ (int64_t)i + 1 }, NULL, 0), 0);
	assert_int_equal(pprof_builder__add_sample(b, (uint64_t[]){ lc, lm }, 2, (int64_t[]){ 1 },
						   NULL, 0), 0);
	assert_int_equal(pprof_builder__finish(b), 0);
	pprof_builder__free(b);
}

static int load(void *ctx, size_t i, const struct pprof_budget *b, struct pprof_profile **p,
		char *err, size_t errlen)
{
	size_t bad = *(size_t *)ctx;

	if (i == bad) {
		snprintf(err, errlen, "input %zu is broken", i);
		return -EINVAL;
	}
	return pprof_read_budget(inputs[i].data, inputs[i].len, b, p, err, errlen);
}

static int64_t value_of(const struct pprof_profile *p, const char *fn)
{
	int64_t v = 0;

	for (size_t s = 0; s < p->n_samples; s++) {
		const struct pprof_location *l = &p->locations[p->samples[s].location_ids[0] - 1];

		if (!strcmp(pprof_str(p, p->functions[l->lines[0].function_id - 1].name), fn))
			v += p->samples[s].values[0];
	}
	return v;
}

static struct pprof_profile *merge(unsigned threads, size_t bad, int *ret, size_t *failed)
{
	struct pprof_merger *m = pprof_merger__new();
	struct pprof_profile *out = NULL;
	char err[256] = "";

	*ret = pprof_merger__add_all(m, N, threads, load, &bad, failed, err, sizeof(err));
	if (!*ret)
		assert_int_equal(pprof_merger__finish(m, &out, err, sizeof(err)), 0);
	else
		assert_non_null(strstr(err, "is broken"));
	pprof_merger__free(m);
	return out;
}

static void parallel_equals_sequential(void **state)
{
	size_t failed;
	int ret;

	for (unsigned threads = 1; threads <= 4; threads++) {
		struct pprof_profile *p = merge(threads, N, &ret, &failed);

		assert_int_equal(ret, 0);
		assert_int_equal(failed, N);
		assert_int_equal(value_of(p, "common"), N);
		for (int f = 0; f < 5; f++) {
			char name[16];
			int64_t want = 0;

			for (int i = f; i < N; i += 5)
				want += i + 1;
			snprintf(name, sizeof(name), "f%d", f);
			assert_int_equal(value_of(p, name), want);
		}
		pprof_profile__free(p);
	}
}

static void failing_input_is_named(void **state)
{
	size_t failed = 0;
	int ret;

	assert_null(merge(3, 17, &ret, &failed));
	assert_int_equal(ret, -EINVAL);
	assert_int_equal(failed, 17);
}

/* A budget as the collector's: bytes taken and given from several threads, under a limit. */
struct test_budget {
	atomic_size_t used, peak;
	size_t limit;
	atomic_int refused;
};

static int tb_take(void *ctx, size_t bytes, char *err, size_t errlen)
{
	struct test_budget *tb = ctx;
	size_t used = atomic_fetch_add(&tb->used, bytes) + bytes, peak = atomic_load(&tb->peak);

	if (used > tb->limit) {
		atomic_fetch_sub(&tb->used, bytes);
		atomic_fetch_add(&tb->refused, 1);
		snprintf(err, errlen, "over the test's %zu bytes", tb->limit);
		return -EFBIG;
	}
	while (used > peak && !atomic_compare_exchange_weak(&tb->peak, &peak, used))
		;
	return 0;
}

static void tb_give(void *ctx, size_t bytes)
{
	struct test_budget *tb = ctx;

	assert_true(atomic_load(&tb->used) >= bytes);
	atomic_fetch_sub(&tb->used, bytes);
}

static struct pprof_profile *merge_budget(unsigned threads, const struct pprof_budget *b,
					  int *ret, char *err, size_t errlen)
{
	struct pprof_merger *m = pprof_merger__new();
	struct pprof_profile *out = NULL;
	size_t bad = N, failed;

	pprof_merger__set_budget(m, b);
	*ret = pprof_merger__add_all(m, N, threads, load, &bad, &failed, err, errlen);
	if (!*ret)
		*ret = pprof_merger__finish(m, &out, err, errlen);
	pprof_merger__free(m);
	return out;
}

/* Under a budget the merge is the same; every byte taken comes back; the merged profile's
 * share stays with it until the caller gives it back. */
static void budget_is_given_back(void **state)
{
	for (unsigned threads = 1; threads <= 4; threads++) {
		struct test_budget tb = { .limit = SIZE_MAX };
		struct pprof_budget b = { .take = tb_take, .give = tb_give, .ctx = &tb };
		char err[256] = "";
		int ret;
		struct pprof_profile *p = merge_budget(threads, &b, &ret, err, sizeof(err));

		assert_int_equal(ret, 0);
		assert_int_equal(value_of(p, "common"), N);
		assert_int_equal(atomic_load(&tb.used), pprof_profile__mem(p));
		assert_true(atomic_load(&tb.peak) > pprof_profile__mem(p));
		pprof_profile__free_budget(p, &b);
		assert_int_equal(atomic_load(&tb.used), 0);
	}
}

/* Over the budget: the merge stops with its refusal, and gives back all it took. */
static void budget_refusal_stops_the_merge(void **state)
{
	for (unsigned threads = 1; threads <= 3; threads++) {
		struct test_budget tb = { .limit = 3000 };
		struct pprof_budget b = { .take = tb_take, .give = tb_give, .ctx = &tb };
		char err[256] = "";
		int ret;

		assert_null(merge_budget(threads, &b, &ret, err, sizeof(err)));
		assert_int_equal(ret, -EFBIG);
		assert_non_null(strstr(err, "over the test's 3000 bytes"));
		assert_true(atomic_load(&tb.refused) > 0);
		assert_int_equal(atomic_load(&tb.used), 0);
	}
}

/*
 * A budget that holds one decoded input beside the merge, not a window of them: decodes ahead
 * that it refuses are decoded again in turn, and the merge completes (serially) with the same
 * result.
 */
static void tight_budget_merges_serially(void **state)
{
	struct test_budget one = { .limit = SIZE_MAX };
	struct pprof_budget b1 = { .take = tb_take, .give = tb_give, .ctx = &one };
	struct pprof_merger *m = pprof_merger__new();
	struct pprof_profile *p;
	size_t adds_peak, finish_need;
	char err[256] = "";

	pprof_merger__set_budget(m, &b1);
	for (size_t i = 0; i < N; i++) { /* one input at a time: the serial merge's peak */
		assert_int_equal(pprof_read_budget(inputs[i].data, inputs[i].len, &b1, &p, err,
						   sizeof(err)), 0);
		assert_int_equal(pprof_merger__add(m, p, err, sizeof(err)), 0);
		pprof_profile__free_budget(p, &b1);
	}
	adds_peak = atomic_load(&one.peak);
	assert_int_equal(pprof_merger__finish(m, &p, err, sizeof(err)), 0);
	/* finish asks for the merged profile too: the limit is the larger of the two peaks */
	finish_need = atomic_load(&one.peak);
	pprof_merger__free(m);
	pprof_profile__free_budget(p, &b1);
	for (unsigned threads = 2; threads <= 4; threads++) {
		struct test_budget tb = { .limit = adds_peak > finish_need ? adds_peak : finish_need };
		struct pprof_budget b = { .take = tb_take, .give = tb_give, .ctx = &tb };
		int ret;

		p = merge_budget(threads, &b, &ret, err, sizeof(err));
		if (ret)
			fail_msg("%u threads, limit %zu: %s", threads, tb.limit, err);
		assert_int_equal(value_of(p, "common"), N);
		printf("%u threads under the serial peak (%zu bytes): %d decodes ahead refused\n",
		       threads, tb.limit, atomic_load(&tb.refused));
		pprof_profile__free_budget(p, &b);
		assert_int_equal(atomic_load(&tb.used), 0);
	}
}

/* Past the deadline: -ETIMEDOUT, said so, nothing kept. */
static void deadline_stops_the_merge(void **state)
{
	struct test_budget tb = { .limit = SIZE_MAX };
	struct pprof_budget b = { .take = tb_take, .give = tb_give, .ctx = &tb, .deadline_ns = 1 };
	char err[256] = "";
	int ret;

	assert_null(merge_budget(2, &b, &ret, err, sizeof(err)));
	assert_int_equal(ret, -ETIMEDOUT);
	assert_non_null(strstr(err, "time is up"));
	assert_int_equal(atomic_load(&tb.used), 0);
}

#ifdef __GLIBC__
/* Bytes malloc hands out: from its arenas and, above the mmap threshold, mapped blocks. */
static size_t heap_bytes(void)
{
	struct mallinfo2 mi = mallinfo2();

	return mi.uordblks + mi.hblkhd;
}

/* One input of many distinct deep stacks: what the heap grows by while it is read and merged
 * stays within what was asked of the budget (the bounds are computed before allocating). */
static void charge_covers_the_heap(void **state)
{
	struct pprof_buf buf = { 0 };
	struct pprof_builder *bl = pprof_builder__new(NULL, pprof_buf_write, &buf);
	struct test_budget tb = { .limit = SIZE_MAX };
	struct pprof_budget b = { .take = tb_take, .give = tb_give, .ctx = &tb };
	struct pprof_merger *m;
	struct pprof_profile *p, *out;
	uint64_t locs[64];
	char err[256] = "";
	size_t heap0, grew;

	assert_int_equal(pprof_builder__add_sample_type(bl, "cpu", "nanoseconds"), 0);
	for (int i = 0; i < 2000; i++) {
		char name[32];
		uint64_t f;

		snprintf(name, sizeof(name), "function_number_%d", i);
		f = pprof_builder__function(bl, name, name, "file.c", 0);
		locs[i % 64] = pprof_builder__location(bl, 0, 0x1000 + (uint64_t)i,
						       &(struct pprof_line_desc){ f, 0 }, 1);
		if (i >= 64)
			assert_int_equal(pprof_builder__add_sample(bl, locs, 64,
								   (int64_t[]){ i }, NULL, 0), 0);
	}
	assert_int_equal(pprof_builder__finish(bl), 0);
	pprof_builder__free(bl);
	/* the reader keeps a bounded scratch between reads (pprof/read-scratch.c): warm it */
	assert_int_equal(pprof_read(buf.data, buf.len, NULL, &p, err, sizeof(err)), 0);
	pprof_profile__free(p);
	heap0 = heap_bytes();
	assert_int_equal(pprof_read_budget(buf.data, buf.len, &b, &p, err, sizeof(err)), 0);
	m = pprof_merger__new();
	pprof_merger__set_budget(m, &b);
	assert_int_equal(pprof_merger__add(m, p, err, sizeof(err)), 0);
	assert_int_equal(pprof_merger__finish(m, &out, err, sizeof(err)), 0);
	grew = heap_bytes() - heap0;
	printf("heap grew %zu bytes, charged %zu (peak %zu)\n", grew, atomic_load(&tb.used),
	       atomic_load(&tb.peak));
	/* + 1 %: malloc's chunk headers, which no count of the arrays sees */
	assert_true(grew <= atomic_load(&tb.used) + atomic_load(&tb.used) / 100);
	pprof_merger__free(m);
	pprof_profile__free_budget(out, &b);
	pprof_profile__free_budget(p, &b);
	assert_int_equal(atomic_load(&tb.used), 0);
	free(buf.data);
}
#endif

static int setup(void **state)
{
	for (size_t i = 0; i < N; i++)
		make_input(i, &inputs[i]);
	return 0;
}

static int teardown(void **state)
{
	for (size_t i = 0; i < N; i++)
		free(inputs[i].data);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(parallel_equals_sequential),
		cmocka_unit_test(failing_input_is_named),
		cmocka_unit_test(budget_is_given_back),
		cmocka_unit_test(budget_refusal_stops_the_merge),
		cmocka_unit_test(deadline_stops_the_merge),
		cmocka_unit_test(tight_budget_merges_serially),
#ifdef __GLIBC__
		cmocka_unit_test(charge_covers_the_heap),
#endif
	};
	return cmocka_run_group_tests_name("pprof/merge-parallel", tests, setup, teardown);
}
