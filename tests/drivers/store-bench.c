// SPDX-License-Identifier: MIT
/*
 * tests/drivers/store-bench.c — measurements for tests/bench/store-bench.sh.
 *
 *   store-bench index N
 *       indexes N profiles with fleet-like metadata (N devices up to 10,000, 4 services,
 *       24 label sets, a unique idempotency key each) and prints
 *       "entries=N rss_bytes=B per_entry=P index_mem=M seconds=S"
 *       (RSS growth measured from /proc/self/statm around the build).
 *   store-bench merge DIR N
 *       stores N realistic cpu profiles (300 functions, 2,000 samples each, gzip) in a ring
 *       under DIR, then times one store__merge of all of them and prints
 *       "profiles=N merge_seconds=S samples=K stored_bytes=B".
 *   store-bench open PATH
 *       times a collector start on an existing ring (scan + CRC check + index rebuild):
 *       "records=N ring_bytes=B open_seconds=S rss_bytes=R per_record=P" (RSS growth of the
 *       whole store: ring slot table + index).
 *   store-bench fill PATH SIZE N LEN
 *       appends N records of LEN bytes with fleet-like metadata (as `index`) to a new ring.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "port/clock.h"
#include "store/ring/index.h"
#include "store/store-int.h" /* the ring backend's counters (store__stats) */

static uint64_t rss_bytes(void)
{
	unsigned long size, rss = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (f) {
		if (fscanf(f, "%lu %lu", &size, &rss) != 2)
			rss = 0;
		fclose(f);
	}
	return (uint64_t)rss * sysconf(_SC_PAGESIZE);
}

static const char *const svcs[] = { "gateway", "modem-mgr", "sensor-hub", "updater" };
static const char *const regions[] = { "eu-west", "eu-central", "us-east", "ap-south" };
static const char *const versions[] = { "1.4.0", "1.4.1", "1.5.0" };
static const char *const envs[] = { "prod", "staging" };

struct fleet_meta {
	char key[48], dev[24];
	struct record_label l[3];
	struct record_meta m;
};

/* Profile i of a fleet of 10,000 devices: 4 services, 24 label sets, a unique key. */
static const struct record_meta *fleet_meta(struct fleet_meta *f, size_t i)
{
	f->l[0] = (struct record_label){ "region", regions[i % 4] };
	f->l[1] = (struct record_label){ "version", versions[(i / 7) % 3] };
	f->l[2] = (struct record_label){ "env", envs[(i / 3) % 2] };
	f->m = (struct record_meta){ .time_ns = 1700000000000000000ull + i * 1000000000ull,
				     .service = svcs[i % 4], .type = "cpu", .device = f->dev,
				     .key = f->key, .labels = f->l, .n_labels = 3 };
	snprintf(f->dev, sizeof(f->dev), "gw-%05zu", i % 10000);
	snprintf(f->key, sizeof(f->key), "%s/%" PRIu64 "/%zu", f->dev, f->m.time_ns, i);
	return &f->m;
}

static int bench_fill(const char *path, uint64_t size, size_t n, size_t len)
{
	struct ringfile_opts o = { .size = size, .fsync_ms = 10000, .create = true, .quiet = true };
	unsigned char *buf = calloc(1, len + 1);
	struct fleet_meta f;
	char err[256];
	struct ringfile *rf;

	unlink(path);
	rf = ringfile__open(path, &o, err, sizeof(err));
	if (!rf || !buf) {
		fprintf(stderr, "store-bench: %s\n", err);
		return 1;
	}
	for (size_t i = 0; i < n; i++)
		if (ringfile__append_async(rf, fleet_meta(&f, i), buf, len, NULL)) {
			fprintf(stderr, "store-bench: append %zu failed\n", i);
			return 1;
		}
	ringfile__free(rf);
	free(buf);
	return 0;
}

static int bench_index(size_t n)
{
	struct index *ix = index__new(n);
	struct index_stats st;
	uint64_t r0 = rss_bytes(), r1, t0 = port_clock_mono_ns();
	struct fleet_meta f;

	if (!ix)
		return 1;
	for (size_t i = 0; i < n; i++) {
		if (index__add(ix, i + 1, fleet_meta(&f, i), 20000, NULL)) {
			fprintf(stderr, "store-bench: index__add %zu failed\n", i);
			return 1;
		}
	}
	r1 = rss_bytes();
	index__stats(ix, &st);
	printf("entries=%zu rss_bytes=%" PRIu64 " per_entry=%.1f index_mem=%zu seconds=%.3f\n",
	       st.entries, r1 - r0, (double)(r1 - r0) / n, st.mem_bytes,
	       (port_clock_mono_ns() - t0) / 1e9);
	index__free(ix);
	return 0;
}

/* A cpu profile of a 300-function program: 2,000 samples over stacks 4 to 24 deep. */
static int make_profile(uint64_t seed, struct pprof_buf *buf)
{
	struct pprof_builder *b = pprof_builder__new(NULL, pprof_buf_write, buf);
	uint64_t locs[300], stack[24], x = seed * 0x9e3779b97f4a7c15ull + 1;
	uint64_t map;
	int err = 0;

	if (!b)
		return -ENOMEM;
	pprof_builder__add_sample_type(b, "samples", "count");
	pprof_builder__add_sample_type(b, "cpu", "nanoseconds");
	pprof_builder__set_period(b, "cpu", "nanoseconds", 10000000);
	map = pprof_builder__mapping(b, &(struct pprof_mapping_desc){
		.memory_start = 0x400000, .memory_limit = 0x800000, .filename = "/usr/bin/gw",
		.build_id = "0123456789abcdef", .has_functions = true });
	for (int f = 0; f < 300; f++) {
		char name[32];
		uint64_t fn;

		snprintf(name, sizeof(name), "gw_func_%03d", f);
		fn = pprof_builder__function(b, name, name, "gw.c", f * 10);
		locs[f] = pprof_builder__location(b, map, 0x400000 + f * 64,
						  &(struct pprof_line_desc){ fn, f * 10 + 3 }, 1);
	}
	for (int s = 0; s < 2000 && !err; s++) {
		int depth = 4;
		int64_t v[2] = { 1, 10000000 };

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		depth += x % 21;
		for (int d = 0; d < depth; d++)
			stack[d] = locs[(x >> (d + 3)) % (d < 3 ? 300 : 40)];
		v[0] = 1 + (x >> 40) % 5;
		v[1] = v[0] * 10000000;
		err = pprof_builder__add_sample(b, stack, depth, v, NULL, 0);
	}
	if (!err)
		err = pprof_builder__finish(b);
	pprof_builder__free(b);
	return err;
}

static int bench_merge(const char *dir, size_t n)
{
	char path[512], err[256];
	struct store_opts o = { .path = path, .size = 256ull << 20, .fsync_ms = 0,
				.index_entries = n + 16, .max_merge = n + 16, .quiet = true };
	struct store_query q = { 0 };
	struct pprof_profile *p = NULL;
	struct store *s;
	uint64_t stored = 0, t0;
	size_t merged = 0;

	snprintf(path, sizeof(path), "%s/bench-merge.ring", dir);
	unlink(path);
	s = store__open(&o, err, sizeof(err));
	if (!s) {
		fprintf(stderr, "store-bench: %s\n", err);
		return 1;
	}
	for (size_t i = 0; i < n; i++) {
		struct pprof_buf buf = { 0 };
		struct record_meta m = { .time_ns = i, .service = "gateway", .type = "cpu",
					 .device = "gw" };
		uint64_t seq;
		bool dup;

		if (make_profile(i % 50, &buf) ||
		    store__put(s, &m, buf.data, buf.len, &seq, &dup)) {
			fprintf(stderr, "store-bench: storing profile %zu failed\n", i);
			return 1;
		}
		stored += buf.len;
		free(buf.data);
	}
	t0 = port_clock_mono_ns();
	if (store__merge(s, &q, &p, &merged, NULL, err, sizeof(err))) {
		fprintf(stderr, "store-bench: merge: %s\n", err);
		return 1;
	}
	printf("profiles=%zu merge_seconds=%.3f samples=%zu stored_bytes=%" PRIu64 "\n", merged,
	       (port_clock_mono_ns() - t0) / 1e9, p->n_samples, stored);
	pprof_profile__free(p);
	store__free(s);
	unlink(path);
	return 0;
}

static int bench_open(const char *path)
{
	struct store_opts o = { .path = path, .index_entries = 2000000, .quiet = true };
	struct store_stats st;
	char err[256];
	uint64_t r0 = rss_bytes(), t0 = port_clock_mono_ns(), r1;
	struct store *s = store__open(&o, err, sizeof(err));
	double secs = (port_clock_mono_ns() - t0) / 1e9;

	r1 = rss_bytes();
	if (!s) {
		fprintf(stderr, "store-bench: %s\n", err);
		return 1;
	}
	store__stats(s, &st);
	printf("records=%" PRIu64 " ring_bytes=%" PRIu64 " open_seconds=%.3f rss_bytes=%" PRIu64
	       " per_record=%.1f\n", st.ring.records, st.ring.capacity, secs, r1 - r0,
	       st.ring.records ? (double)(r1 - r0) / st.ring.records : 0.0);
	store__free(s);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 6 && !strcmp(argv[1], "fill"))
		return bench_fill(argv[2], strtoull(argv[3], NULL, 0), strtoul(argv[4], NULL, 0),
				  strtoul(argv[5], NULL, 0));
	if (argc == 3 && !strcmp(argv[1], "open"))
		return bench_open(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "index"))
		return bench_index(strtoul(argv[2], NULL, 0));
	if (argc == 4 && !strcmp(argv[1], "merge"))
		return bench_merge(argv[2], strtoul(argv[3], NULL, 0));
	fprintf(stderr, "usage: store-bench index N | merge DIR N | open PATH |"
			" fill PATH SIZE N LEN\n");
	return 2;
}
