// SPDX-License-Identifier: MIT
/*
 * tests/drivers/render-bench.c — data and in-process timings for tests/bench/render-bench.sh.
 *
 *   render-bench fill RING DEVICES PROFILES END_S
 *       writes a new ring with DEVICES devices x PROFILES realistic cpu profiles each, one per
 *       device every 10 s, the last at END_S (unix seconds): service "gateway", devices
 *       gw-000.., labels region/version/env. A profile is 10 s at 100 Hz: 1,000 samples drawn
 *       (skewed, as real programs are) from 3,000 call paths of a 400-function program, so one
 *       profile has a few hundred distinct stacks and an hour of them a few thousand.
 *       Prints "records=N stored_bytes=B".
 *   render-bench merge RING FROM_S TO_S RUNS raw|rollup json|flamebearer [SELECTOR]
 *       times store__merge + render of [FROM_S, TO_S] RUNS times, on the store's rollups (bucket
 *       $BUCKET s, default 60: the ones in the ring; none are built) or raw records only, with
 *       no merge limit.
 *       Prints "seconds=S1,S2,... profiles=N records_read=R bytes=B".
 *   render-bench export RING DEVICE FROM_S TO_S DIR
 *       writes the raw payloads of DEVICE in the range as DIR/<seq>.pb.gz (for go tool pprof).
 *   render-bench frames N OUT
 *       writes one gzip cpu profile whose flame graph has about N frames (the UI benchmark).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "port/clock.h"
#include "store/store-int.h" /* the ring backend's counters (store__stats) */
#include "store/api/render.h"

#define FUNCS 400
#define PATHS 3000
#define MAX_DEPTH 40

static uint64_t xorshift(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

/* A program's call paths: random walks down a call graph where each function calls 4 others. */
struct program {
	int depth[PATHS];
	int frame[PATHS][MAX_DEPTH]; /* leaf first */
};

static void program_init(struct program *pg)
{
	uint64_t x = 0x5eed;

	for (int k = 0; k < PATHS; k++) {
		int d = 5 + (int)(xorshift(&x) % 26), fn = 0;

		pg->depth[k] = d;
		for (int i = d - 1; i >= 0; i--) {
			pg->frame[k][i] = fn;
			fn = (int)((fn * 4 + 1 + xorshift(&x) % 4) % FUNCS);
		}
	}
}

static int profile_build(const struct program *pg, uint64_t seed, struct pprof_buf *buf)
{
	struct pprof_builder *b = pprof_builder__new(NULL, pprof_buf_write, buf);
	uint64_t locs[FUNCS], stack[MAX_DEPTH], x = seed * 0x9e3779b97f4a7c15ull + 7, map;
	static int count[PATHS];
	int err = 0;

	if (!b)
		return -ENOMEM;
	pprof_builder__add_sample_type(b, "samples", "count");
	pprof_builder__add_sample_type(b, "cpu", "nanoseconds");
	pprof_builder__set_period(b, "cpu", "nanoseconds", 10000000);
	map = pprof_builder__mapping(b, &(struct pprof_mapping_desc){
		.memory_start = 0x400000, .memory_limit = 0x800000, .filename = "/usr/bin/gw",
		.build_id = "0123456789abcdef", .has_functions = true });
	for (int f = 0; f < FUNCS; f++) {
		char name[40];
		uint64_t fn;

		snprintf(name, sizeof(name), "gw_module%02d_func_%03d", f % 37, f);
		fn = pprof_builder__function(b, name, name, "gw.c", f * 10);
		locs[f] = pprof_builder__location(b, map, 0x400000 + f * 64,
						  &(struct pprof_line_desc){ fn, f * 10 + 3 }, 1);
	}
	memset(count, 0, sizeof(count));
	for (int s = 0; s < 1000; s++) { /* skewed: a cube pushes most samples to low paths */
		double u = (double)(xorshift(&x) % 1000000) / 1e6;

		count[(int)(u * u * u * PATHS)]++;
	}
	for (int k = 0; k < PATHS && !err; k++) {
		int64_t v[2] = { count[k], count[k] * 10000000ll };

		if (!count[k])
			continue;
		for (int i = 0; i < pg->depth[k]; i++)
			stack[i] = locs[pg->frame[k][i]];
		err = pprof_builder__add_sample(b, stack, pg->depth[k], v, NULL, 0);
	}
	if (!err)
		err = pprof_builder__finish(b);
	pprof_builder__free(b);
	return err;
}

static const char *const regions[] = { "eu-west", "eu-central", "us-east", "ap-south" };
static const char *const versions[] = { "1.4.0", "1.4.1", "1.5.0" };

static int bench_fill(const char *path, int devices, int profiles, uint64_t end_s)
{
	/* the ring directly, synced once at the end (the store would wait for each record) */
	struct ringfile_opts o = { .size = 2048ull << 20, .fsync_ms = 10000, .create = true,
				   .quiet = true };
	struct program *pg = malloc(sizeof(*pg));
	uint64_t stored = 0;
	char err[256];
	struct ringfile *rf;

	unlink(path);
	rf = ringfile__open(path, &o, err, sizeof(err));
	if (!rf || !pg) {
		fprintf(stderr, "render-bench: %s\n", err);
		return 1;
	}
	program_init(pg);
	for (int i = 0; i < profiles; i++) {
		for (int d = 0; d < devices; d++) {
			struct pprof_buf buf = { 0 };
			char dev[16];
			struct record_label l[3] = { { "region", regions[d % 4] },
						     { "version", versions[d % 3] },
						     { "env", d % 10 ? "prod" : "staging" } };
			struct record_meta m = { .service = "gateway", .type = "cpu",
						 .device = dev, .labels = l, .n_labels = 3,
						 .value = 10000000000ll };
			snprintf(dev, sizeof(dev), "gw-%03d", d);
			m.time_ns = (end_s - (uint64_t)(profiles - 1 - i) * 10) * 1000000000ull +
				    (uint64_t)d * 1000000ull;
			if (profile_build(pg, (uint64_t)d * 100000 + i, &buf) ||
			    ringfile__append_async(rf, &m, buf.data, buf.len, NULL)) {
				fprintf(stderr, "render-bench: storing %d/%d failed\n", d, i);
				return 1;
			}
			stored += buf.len;
			free(buf.data);
		}
	}
	printf("records=%d stored_bytes=%" PRIu64 "\n", devices * profiles, stored);
	ringfile__free(rf);
	free(pg);
	return 0;
}

static int bench_merge(const char *path, uint64_t from_s, uint64_t to_s, int runs, bool raw,
		       const char *format, const char *selector)
{
	struct store_opts o = { .path = path, .index_entries = 1 << 20, .max_merge = 1 << 20,
				.quiet = true };
	struct store_query q = { .from_ns = from_s * 1000000000ull,
				 .to_ns = to_s * 1000000000ull - 1, .raw_only = raw };
	struct store_stats st0, st1;
	enum render_format fmt;
	char err[256];
	size_t len = 0, n = 0;
	struct store *s;

	/* rollups are planned with the collector's bucket (env BUCKET); none are built here */
	o.rollup.bucket_s = getenv("BUCKET") ? (unsigned)atoi(getenv("BUCKET")) : 60;
	o.rollup.grace_s = 86400 * 365 * 50; /* the thread never finds a closed bucket */
	if (selector && selector__parse(selector, 0, (struct selector **)&q.sel, err,
					sizeof(err))) {
		fprintf(stderr, "render-bench: %s\n", err);
		return 1;
	}
	s = store__open(&o, err, sizeof(err));
	if (!s || render_format_parse(format, &fmt)) {
		fprintf(stderr, "render-bench: %s\n", s ? "bad format" : err);
		return 1;
	}
	store__stats(s, &st0);
	printf("seconds=");
	for (int r = 0; r < runs; r++) {
		uint64_t t0 = port_clock_mono_ns();
		struct pprof_profile *p = NULL;
		char *out = NULL;

		if (store__merge(s, &q, &p, &n, NULL, err, sizeof(err)) ||
		    render_profile(p, fmt, n, 0, &out, &len, err, sizeof(err))) {
			fprintf(stderr, "render-bench: %s\n", err);
			return 1;
		}
		printf("%s%.3f", r ? "," : "", (port_clock_mono_ns() - t0) / 1e9);
		fflush(stdout);
		pprof_profile__free(p);
		free(out);
	}
	store__stats(s, &st1);
	printf(" profiles=%zu rollups_read=%" PRIu64 " bytes=%zu\n", n,
	       (st1.rollups_read - st0.rollups_read) / (uint64_t)runs, len);
	store__free(s);
	selector__free((struct selector *)q.sel);
	return 0;
}

struct seqs {
	const char *device;
	uint64_t v[100000];
	size_t n;
};

static int export_pick(void *ctx, const struct store_entry *v)
{
	struct seqs *x = ctx;

	if (!strcmp(v->device, x->device) && x->n < sizeof(x->v) / sizeof(x->v[0]))
		x->v[x->n++] = v->seq;
	return 0;
}

static int bench_export(const char *path, const char *device, uint64_t from_s, uint64_t to_s,
			const char *dir)
{
	struct store_opts o = { .path = path, .index_entries = 1 << 20, .quiet = true };
	struct store_query q = { .from_ns = from_s * 1000000000ull,
				 .to_ns = to_s * 1000000000ull - 1 };
	struct seqs *x = calloc(1, sizeof(*x));
	char err[256], out[512];
	struct store *s = store__open(&o, err, sizeof(err));

	if (!s || !x || store__list(s, &q, export_pick, (x->device = device, x)) < 0) {
		fprintf(stderr, "render-bench: %s\n", err);
		return 1;
	}
	for (size_t i = 0; i < x->n; i++) {
		struct record_meta m;
		void *payload;
		size_t len;
		FILE *f;

		snprintf(out, sizeof(out), "%s/%06" PRIu64 ".pb.gz", dir, x->v[i]);
		if (store__get(s, x->v[i], &m, &payload, &len) || !(f = fopen(out, "w")) ||
		    fwrite(payload, 1, len, f) != len || fclose(f)) {
			fprintf(stderr, "render-bench: exporting %s failed\n", out);
			return 1;
		}
		free(payload);
	}
	printf("profiles=%zu\n", x->n);
	store__free(s);
	free(x);
	return 0;
}

/* One profile of n random call paths (5..30 deep) through a 2,000-function program. */
static int bench_frames(int n, const char *out)
{
	struct pprof_buf buf = { 0 };
	struct pprof_builder *b = pprof_builder__new(NULL, pprof_buf_write, &buf);
	uint64_t locs[2000], stack[MAX_DEPTH], x = 42;
	int err = 0;
	FILE *f;

	if (!b)
		return 1;
	pprof_builder__add_sample_type(b, "cpu", "nanoseconds");
	for (int i = 0; i < 2000; i++) {
		char name[48];
		uint64_t fn;

		snprintf(name, sizeof(name), "pkg%02d::Type%03d::method_%04d", i % 50, i % 300, i);
		fn = pprof_builder__function(b, name, name, "src/app.c", i);
		locs[i] = pprof_builder__location(b, 0, 0x1000 + i * 16,
						  &(struct pprof_line_desc){ fn, i + 1 }, 1);
	}
	for (int k = 0; k < n && !err; k++) {
		int d = 5 + (int)(xorshift(&x) % 26), fn = 0;
		int64_t v = (int64_t)(1 + xorshift(&x) % 1000) * 10000000;

		for (int i = d - 1; i >= 0; i--) {
			stack[i] = locs[fn];
			fn = (int)((fn * 7 + 1 + xorshift(&x) % 7) % 2000);
		}
		err = pprof_builder__add_sample(b, stack, d, &v, NULL, 0);
	}
	if (!err)
		err = pprof_builder__finish(b);
	pprof_builder__free(b);
	f = err ? NULL : fopen(out, "w");
	if (!f || fwrite(buf.data, 1, buf.len, f) != buf.len || fclose(f)) {
		fprintf(stderr, "render-bench: writing %s failed\n", out);
		return 1;
	}
	free(buf.data);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 6 && !strcmp(argv[1], "fill"))
		return bench_fill(argv[2], atoi(argv[3]), atoi(argv[4]),
				  strtoull(argv[5], NULL, 10));
	if ((argc == 8 || argc == 9) && !strcmp(argv[1], "merge"))
		return bench_merge(argv[2], strtoull(argv[3], NULL, 10),
				   strtoull(argv[4], NULL, 10), atoi(argv[5]),
				   !strcmp(argv[6], "raw"), argv[7], argc == 9 ? argv[8] : NULL);
	if (argc == 7 && !strcmp(argv[1], "export"))
		return bench_export(argv[2], argv[3], strtoull(argv[4], NULL, 10),
				    strtoull(argv[5], NULL, 10), argv[6]);
	if (argc == 4 && !strcmp(argv[1], "frames"))
		return bench_frames(atoi(argv[2]), argv[3]);
	fprintf(stderr, "usage: render-bench fill RING DEVICES PROFILES END_S |\n"
		"  merge RING FROM_S TO_S RUNS raw|rollup json|flamebearer [SELECTOR] |\n"
		"  export RING DEVICE FROM_S TO_S DIR | frames N OUT\n");
	return 2;
}
