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

static int load(void *ctx, size_t i, struct pprof_profile **p, char *err, size_t errlen)
{
	size_t bad = *(size_t *)ctx;

	if (i == bad) {
		snprintf(err, errlen, "input %zu is broken", i);
		return -EINVAL;
	}
	return pprof_read(inputs[i].data, inputs[i].len, NULL, p, err, errlen);
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
	};
	return cmocka_run_group_tests_name("pprof/merge-parallel", tests, setup, teardown);
}
