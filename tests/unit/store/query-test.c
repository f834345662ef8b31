// SPDX-License-Identifier: MIT
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <pthread.h>

#include "store/store-int.h" /* the ring backend's counters (store__stats) */

struct fixture {
	char dir[64];
	char path[96];
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	strcpy(f->dir, "/tmp/edgeprof-query-test.XXXXXX");
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

/* A gzip cpu profile: main -> work with value `work`, main -> idle with value `idle`. */
static struct pprof_buf make_profile(int64_t work, int64_t idle)
{
	struct pprof_buf buf = { 0 };
	struct pprof_builder *b = pprof_builder__new(NULL, pprof_buf_write, &buf);
	uint64_t fm, fw, fi, lm, lw, li;

	assert_non_null(b);
	assert_int_equal(pprof_builder__add_sample_type(b, "cpu", "nanoseconds"), 0);
	fm = pprof_builder__function(b, "main", "main", "main.c", 1);
	fw = pprof_builder__function(b, "work", "work", "main.c", 10);
	fi = pprof_builder__function(b, "idle", "idle", "main.c", 20);
	lm = pprof_builder__location(b, 0, 0x1000, &(struct pprof_line_desc){ fm, 2 }, 1);
	lw = pprof_builder__location(b, 0, 0x2000, &(struct pprof_line_desc){ fw, 11 }, 1);
	li = pprof_builder__location(b, 0, 0x3000, &(struct pprof_line_desc){ fi, 21 }, 1);
	assert_int_equal(pprof_builder__add_sample(b, (uint64_t[]){ lw, lm }, 2, &work, NULL, 0),
			 0);
	assert_int_equal(pprof_builder__add_sample(b, (uint64_t[]){ li, lm }, 2, &idle, NULL, 0),
			 0);
	assert_int_equal(pprof_builder__finish(b), 0);
	pprof_builder__free(b);
	return buf;
}

static struct store *open_store(const char *path, size_t max_merge)
{
	struct store_opts o = { .path = path, .size = 1 << 20, .index_entries = 4096,
				.max_merge = max_merge, .quiet = true };
	char err[256] = "";
	struct store *s = store__open(&o, err, sizeof(err));

	if (!s)
		fail_msg("store__open: %s", err);
	return s;
}

static uint64_t put(struct store *s, const char *svc, const char *region, const char *key,
		    int64_t work, int64_t idle, uint64_t t, bool *dup)
{
	struct record_label l[] = { { "region", region } };
	struct record_meta m = { .time_ns = t, .service = svc, .type = "cpu", .device = "gw-1",
				 .key = key, .labels = l, .n_labels = 1 };
	struct pprof_buf b = make_profile(work, idle);
	uint64_t seq = 0;
	bool d;

	assert_int_equal(store__put(s, &m, b.data, b.len, &seq, dup ? dup : &d), 0);
	free(b.data);
	return seq;
}

/* Total of the sample values whose leaf function is `name`. */
static int64_t leaf_total(const struct pprof_profile *p, const char *name)
{
	int64_t sum = 0;

	for (size_t i = 0; i < p->n_samples; i++) {
		const struct pprof_sample *smp = &p->samples[i];
		const struct pprof_location *loc = &p->locations[smp->location_ids[0] - 1];
		const struct pprof_function *fn = &p->functions[loc->lines[0].function_id - 1];

		if (!strcmp(pprof_str(p, fn->name), name))
			sum += smp->values[0];
	}
	return sum;
}

static struct selector *sel(const char *text)
{
	struct selector *s = NULL;
	char err[128];

	assert_int_equal(selector__parse(text, 0, &s, err, sizeof(err)), 0);
	return s;
}

static void merge_by_selector(void **state)
{
	struct fixture *f = *state;
	struct store *s = open_store(f->path, 100);
	struct selector *eu = sel("api{region=~\"eu-.*\"}");
	struct store_query q = { .sel = eu, .type = "cpu" };
	struct pprof_profile *p = NULL;
	size_t merged = 0, skipped = 9;
	char err[256] = "";

	for (int i = 0; i < 10; i++) {
		char key[16];

		snprintf(key, sizeof(key), "k%d", i);
		put(s, i < 8 ? "api" : "db", i % 2 ? "eu-west" : "us-east", key, 10 + i, 1,
		    1000 + i, NULL);
	}
	/* eu-west api profiles: i = 1, 3, 5, 7 → work 11+13+15+17, idle 4 */
	assert_int_equal(store__merge(s, &q, &p, &merged, &skipped, err, sizeof(err)), 0);
	assert_int_equal(merged, 4);
	assert_int_equal(skipped, 0);
	assert_int_equal(leaf_total(p, "work"), 56);
	assert_int_equal(leaf_total(p, "idle"), 4);
	pprof_profile__free(p);

	/* time range 1003..1005 inclusive: i = 3, 5 */
	q.from_ns = 1003;
	q.to_ns = 1005;
	assert_int_equal(store__merge(s, &q, &p, &merged, NULL, err, sizeof(err)), 0);
	assert_int_equal(merged, 2);
	assert_int_equal(leaf_total(p, "work"), 28);
	pprof_profile__free(p);

	q.type = "heap";
	assert_int_equal(store__merge(s, &q, &p, NULL, NULL, err, sizeof(err)), -ENOENT);
	assert_string_equal(err, "no profiles match");
	assert_null(p);

	/* by ids; a missing id is named */
	assert_int_equal(store__merge_seqs(s, (uint64_t[]){ 1, 2 }, 2, NULL, &p, err, sizeof(err)), 0);
	assert_int_equal(leaf_total(p, "work"), 21);
	pprof_profile__free(p);
	assert_int_equal(store__merge_seqs(s, (uint64_t[]){ 1, 77 }, 2, NULL, &p, err, sizeof(err)),
			 -ENOENT);
	assert_non_null(strstr(err, "profile 77"));
	selector__free(eu);
	store__free(s);
}

static void merge_limit(void **state)
{
	struct fixture *f = *state;
	struct store *s = open_store(f->path, 5);
	struct store_query q = { 0 };
	struct pprof_profile *p = NULL;
	size_t merged = 0;
	char err[256] = "";

	for (int i = 0; i < 8; i++)
		put(s, "api", "eu", "", 1, 0, 100 + i, NULL);
	assert_int_equal(store__merge(s, &q, &p, NULL, NULL, err, sizeof(err)), -E2BIG);
	assert_string_equal(err, "query matches 8 profiles, more than the limit of 5: narrow the "
				 "time range or the selector");
	q.limit = 3; /* the newest three */
	assert_int_equal(store__merge(s, &q, &p, &merged, NULL, err, sizeof(err)), 0);
	assert_int_equal(merged, 3);
	assert_int_equal(leaf_total(p, "work"), 3);
	pprof_profile__free(p);
	store__free(s);
}

static int list_cb(void *ctx, const struct store_entry *v)
{
	uint64_t *out = ctx;

	out[++out[0]] = v->seq;
	return 0;
}

static int svc_cb(void *ctx, const char *svc)
{
	strcat(ctx, svc);
	strcat(ctx, " ");
	return 0;
}

static void idempotency_and_reopen(void **state)
{
	struct fixture *f = *state;
	struct store *s = open_store(f->path, 100);
	struct store_query q = { .newest_first = true };
	struct store_stats st;
	uint64_t got[16] = { 0 };
	char svcs[64] = "";
	bool dup = true;
	uint64_t a, b;

	a = put(s, "api", "eu", "dev1/100/1", 5, 5, 1, &dup);
	assert_false(dup);
	b = put(s, "api", "eu", "dev1/100/1", 5, 5, 1, &dup);
	assert_true(dup);
	assert_int_equal(a, b);
	put(s, "db", "eu", "dev1/100/2", 5, 5, 2, &dup);
	assert_false(dup);
	store__stats(s, &st);
	assert_int_equal(st.puts, 2);
	assert_int_equal(st.duplicates, 1);
	assert_int_equal(st.ring.records, 2);
	store__free(s);

	/* the index is rebuilt from the ring: keys survive a restart */
	s = open_store(f->path, 100);
	b = put(s, "api", "eu", "dev1/100/1", 5, 5, 1, &dup);
	assert_true(dup);
	assert_int_equal(b, a);
	assert_int_equal(store__list(s, &q, list_cb, got), 2);
	assert_int_equal(got[1], 2); /* newest first */
	assert_int_equal(got[2], 1);
	assert_int_equal(store__services(s, svc_cb, svcs), 0);
	assert_string_equal(svcs, "api db ");
	{
		struct record_meta m;
		void *payload;
		size_t len;

		assert_int_equal(store__get(s, a, &m, &payload, &len), 0);
		assert_string_equal(m.key, "dev1/100/1");
		assert_true(pprof_is_gzip(payload, len));
		free(payload);
	}
	store__free(s);
}

/* Past the ring's size, the oldest profiles leave the ring and the index alike. */
static void eviction_follows_ring(void **state)
{
	struct fixture *f = *state;
	struct store_opts o = { .path = f->path, .size = 64 * 1024, .index_entries = 4096,
				.quiet = true };
	struct store_query q = { 0 };
	struct store_stats st;
	uint64_t got[4096] = { 0 };
	char err[256];
	struct store *s = store__open(&o, err, sizeof(err));
	uint64_t last = 0;

	assert_non_null(s);
	for (int i = 0; i < 400; i++)
		last = put(s, "api", "eu", "", 1, 1, i, NULL);
	store__stats(s, &st);
	assert_true(st.ring.overwritten > 0);
	assert_int_equal(st.index.entries, st.ring.records);
	assert_int_equal(store__list(s, &q, list_cb, got), (int)st.ring.records);
	assert_int_equal(got[1], st.ring.first_seq);
	assert_int_equal(got[got[0]], last);
	store__free(s);
}

struct thread_arg {
	struct store *s;
	struct pprof_buf *prof;
	int id, dups;
};

/*
 * Every thread puts the same 100 shared keys (each must be stored exactly once) and 100 keys
 * of its own (all stored).
 */
static void *put_thread(void *p)
{
	struct thread_arg *a = p;

	for (int i = 0; i < 200; i++) {
		char key[16];
		struct record_meta m = { .time_ns = i, .service = "api", .type = "cpu",
					 .key = key };
		uint64_t seq;
		bool dup;

		if (i % 2)
			snprintf(key, sizeof(key), "k%d", i / 2);
		else
			snprintf(key, sizeof(key), "t%d-%d", a->id, i / 2);
		if (store__put(a->s, &m, a->prof->data, a->prof->len, &seq, &dup))
			return (void *)1;
		a->dups += dup;
	}
	return NULL;
}

static void concurrent_puts(void **state)
{
	struct fixture *f = *state;
	struct store_opts o = { .path = f->path, .size = 8 << 20, .index_entries = 4096,
				.quiet = true };
	struct pprof_buf prof = make_profile(3, 1);
	struct thread_arg args[8];
	pthread_t th[8];
	struct store_stats st;
	char err[256];
	struct store *s = store__open(&o, err, sizeof(err));
	int dups = 0;

	assert_non_null(s);
	for (int t = 0; t < 8; t++) {
		args[t] = (struct thread_arg){ .s = s, .prof = &prof, .id = t };
		assert_int_equal(pthread_create(&th[t], NULL, put_thread, &args[t]), 0);
	}
	for (int t = 0; t < 8; t++) {
		void *ret;

		assert_int_equal(pthread_join(th[t], &ret), 0);
		assert_null(ret);
		dups += args[t].dups;
	}
	store__stats(s, &st);
	assert_int_equal(st.ring.records, 900);
	assert_int_equal(st.puts, 900);
	assert_int_equal(dups, 700);
	assert_int_equal(st.ring.durable_seq, st.ring.last_seq);
	print_message("concurrent_puts: %" PRIu64 " appends, %" PRIu64 " fdatasyncs\n",
		      st.ring.appends, st.ring.syncs);
	store__free(s);
	free(prof.data);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(merge_by_selector, setup, teardown),
		cmocka_unit_test_setup_teardown(merge_limit, setup, teardown),
		cmocka_unit_test_setup_teardown(idempotency_and_reopen, setup, teardown),
		cmocka_unit_test_setup_teardown(eviction_follows_ring, setup, teardown),
		cmocka_unit_test_setup_teardown(concurrent_puts, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
