// SPDX-License-Identifier: MIT
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "store/ring/index.h"

static int add(struct index *ix, uint64_t seq, const char *svc, const char *key,
	       const char *region, uint64_t *existing)
{
	struct record_label l[] = { { "region", region }, { "env", "prod" } };
	struct record_meta m = { .time_ns = seq * 10, .service = svc, .type = "cpu",
				 .device = "gw", .key = key, .labels = l, .n_labels = 2 };

	return index__add(ix, seq, &m, 100 + seq, existing);
}

static void add_get_dedupe(void **state)
{
	struct index *ix = index__new(100);
	struct store_entry v;
	struct index_stats st;
	uint64_t ex = 0, seq;

	assert_int_equal(add(ix, 1, "a", "k1", "eu", NULL), 0);
	assert_int_equal(add(ix, 2, "b", "k2", "us", NULL), 0);
	assert_int_equal(add(ix, 3, "a", "", "eu", NULL), 0);
	assert_int_equal(add(ix, 4, "a", "", "eu", NULL), 0); /* empty keys never collide */
	assert_int_equal(add(ix, 5, "a", "k1", "eu", &ex), -EEXIST);
	assert_int_equal(ex, 1);
	assert_int_equal(add(ix, 4, "a", "k9", "eu", NULL), -EINVAL); /* seqs must increase */
	assert_int_equal(index__find_key(ix, "k2", &seq), 0);
	assert_int_equal(seq, 2);
	assert_int_equal(index__find_key(ix, "nope", &seq), -ENOENT);
	assert_int_equal(index__get(ix, 2, &v), 0);
	assert_string_equal(v.service, "b");
	assert_string_equal(v.type, "cpu");
	assert_string_equal(v.device, "gw");
	assert_int_equal(v.n_labels, 2);
	assert_string_equal(v.labels[0].key, "env"); /* sorted */
	assert_string_equal(v.labels[1].value, "us");
	assert_int_equal(v.time_ns, 20);
	assert_int_equal(v.size, 102);
	assert_int_equal(index__get(ix, 5, &v), -ENOENT);
	index__stats(ix, &st);
	assert_int_equal(st.entries, 4);
	assert_int_equal(st.labelsets, 2); /* {env=prod,region=eu} shared by three entries */
	index__free(ix);
}

static int collect(void *ctx, const struct store_entry *v)
{
	uint64_t *out = ctx;

	out[++out[0]] = v->seq;
	return 0;
}

static int collect_svc(void *ctx, const char *s)
{
	strcat(ctx, s);
	strcat(ctx, ",");
	return 0;
}

static void evict_and_bound(void **state)
{
	struct index *ix = index__new(1024);
	struct index_stats st;
	uint64_t got[2000] = { 0 }, seq;
	char svcs[64] = "";
	char key[32];

	for (uint64_t s = 1; s <= 1500; s++) {
		snprintf(key, sizeof(key), "key-%" PRIu64, s);
		assert_int_equal(add(ix, s, s % 2 ? "odd" : "even", key, "eu", NULL), 0);
	}
	index__stats(ix, &st);
	assert_int_equal(st.entries, 1024);
	assert_int_equal(st.dropped, 1500 - 1024);
	assert_int_equal(index__find_key(ix, "key-1", &seq), -ENOENT); /* dropped with its entry */
	assert_int_equal(index__find_key(ix, "key-477", &seq), 0);
	assert_int_equal(seq, 477);
	index__evict_before(ix, 1400);
	index__stats(ix, &st);
	assert_int_equal(st.entries, 101);
	assert_int_equal(st.evicted, 1400 - 477);
	for (uint64_t s = 1400; s <= 1500; s++) {
		snprintf(key, sizeof(key), "key-%" PRIu64, s);
		assert_int_equal(index__find_key(ix, key, &seq), 0);
		assert_int_equal(seq, s);
	}
	assert_int_equal(index__find_key(ix, "key-1399", &seq), -ENOENT);
	/* time range 14100..14200 ns = seqs 1410..1420, newest first */
	assert_int_equal(index__foreach(ix, 14100, 14200, true, collect, got), 0);
	assert_int_equal(got[0], 11);
	assert_int_equal(got[1], 1420);
	assert_int_equal(got[11], 1410);
	assert_int_equal(index__foreach_service(ix, collect_svc, svcs), 0);
	assert_string_equal(svcs, "even,odd,");
	index__evict_before(ix, UINT64_MAX);
	index__stats(ix, &st);
	assert_int_equal(st.entries, 0);
	assert_int_equal(st.strings, 0); /* interned strings are released with their entries */
	assert_int_equal(st.labelsets, 0);
	index__free(ix);
}

/* Many keys with removal in between: the probing table keeps finding every live key. */
static void key_table_churn(void **state)
{
	struct index *ix = index__new(5000);
	char key[32];
	uint64_t seq;

	for (uint64_t s = 1; s <= 50000; s++) {
		snprintf(key, sizeof(key), "k%" PRIu64, s * 2654435761u);
		assert_int_equal(add(ix, s, "svc", key, s % 3 ? "eu" : "us", NULL), 0);
		if (s % 7 == 0)
			index__evict_before(ix, s - 3000);
	}
	for (uint64_t s = 1; s <= 50000; s++) {
		int want = s > 50000 - 3000 ? 0 : -ENOENT;
		struct store_entry v;

		snprintf(key, sizeof(key), "k%" PRIu64, s * 2654435761u);
		if (index__get(ix, s, &v) == 0)
			want = 0;
		assert_int_equal(index__find_key(ix, key, &seq), want);
		if (!want)
			assert_int_equal(seq, s);
	}
	index__free(ix);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(add_get_dedupe),
		cmocka_unit_test(evict_and_bound),
		cmocka_unit_test(key_table_churn),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
