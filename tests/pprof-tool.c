// SPDX-License-Identifier: MIT
/*
 * tests/pprof-tool.c — a small driver of pprof/ for the oracle test and the benchmark (not
 * installed; the real CLI is tools/cli's `edgeprof`).
 *
 *   pprof-tool flat FILE...            merge, print "<flat> <cum> <function>" per function like
 *                                      pprof -top (default sample type), sorted by name
 *   pprof-tool merge -o OUT FILE...    read + merge, write gzip pprof
 *   pprof-tool dump FILE               canonical text of a profile (for round-trip comparison)
 *   pprof-tool rewrite IN OUT          read then write again (pprof_write_profile)
 *   pprof-tool build OUT               a profile using every builder feature
 *   pprof-tool encode OUT SAMPLES STACKS DEPTH   builder benchmark
 *   pprof-tool check FILE              read; print the error and exit 1 if invalid
 *   pprof-tool vary IN OUT SEED        a variant of IN for benchmarks: values scaled by 1..4,
 *                                      ~1/8 of the samples dropped, time shifted
 *   pprof-tool fleet DIR VERSIONS PER SAMPLES POOL...
 *                                      a fleet's profiles for the benchmarks: DIR/fw<v>-<i>.pb.gz,
 *                                      PER for each of VERSIONS firmware versions, SAMPLES
 *                                      samples each, stacks drawn from the real profiles POOL
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

#include "pprof/pprof.h"
#include "port/file.h"
#include "port/hash.h"

static struct pprof_profile *load(const char *path)
{
	struct pprof_profile *p;
	char err[256];
	void *data;
	size_t len;
	int ret;

	ret = port_file_read_all(path, 64 << 20, &data, &len);
	if (ret) {
		fprintf(stderr, "%s: %s\n", path, strerror(-ret));
		exit(1);
	}
	ret = pprof_read(data, len, NULL, &p, err, sizeof(err));
	free(data);
	if (ret) {
		fprintf(stderr, "%s: %s\n", path, err);
		exit(1);
	}
	return p;
}

static int load_nth(void *ctx, size_t i, const struct pprof_budget *b, struct pprof_profile **p,
		    char *err, size_t errlen)
{
	(void)b; /* no budget: a file on the desktop */
	char **files = ctx;
	void *data;
	size_t len;
	int ret = port_file_read_all(files[i], 64 << 20, &data, &len);

	*p = NULL;
	if (ret) {
		snprintf(err, errlen, "%s", strerror(-ret));
		return ret;
	}
	ret = pprof_read(data, len, NULL, p, err, errlen);
	free(data);
	return ret;
}

/* The library's merge: inputs decode in parallel (one worker per CPU), merge in order. */
static struct pprof_profile *load_merged(char **files, int n)
{
	struct pprof_merger *m = pprof_merger__new();
	struct pprof_profile *out;
	size_t failed;
	char err[256] = "";

	if (pprof_merger__add_all(m, (size_t)n, 0, load_nth, files, &failed, err, sizeof(err))) {
		fprintf(stderr, "%s: %s\n", failed < (size_t)n ? files[failed] : "merge", err);
		exit(1);
	}
	if (pprof_merger__finish(m, &out, err, sizeof(err))) {
		fprintf(stderr, "merge: %s\n", err);
		exit(1);
	}
	pprof_merger__free(m);
	return out;
}

static int write_file_opts(const struct pprof_profile *p, const char *path,
			   const struct pprof_builder_opts *opts)
{
	FILE *f = fopen(path, "wb");
	int ret;

	if (!f)
		return -errno;
	ret = pprof_write_profile(p, opts, pprof_file_write, f);
	if (fclose(f) && !ret)
		ret = -errno;
	return ret;
}

static int write_file_level(const struct pprof_profile *p, const char *path, int level)
{
	struct pprof_builder_opts opts = { .gzip_level = level };

	return write_file_opts(p, path, &opts);
}

static int write_file(const struct pprof_profile *p, const char *path)
{
	return write_file_level(p, path, 0);
}

/* As `edgeprof merge` writes: gzip level 6, deflated in parts on every CPU. */
static int write_file_parallel(const struct pprof_profile *p, const char *path)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	struct pprof_builder_opts opts = { .threads = cpus > 1 ? (unsigned)cpus : 1 };

	return write_file_opts(p, path, &opts);
}

struct flat {
	const char *name;
	int64_t flat, cum;
	size_t seen; /* last sample (+1) that counted this function's cum */
};

static int flat_cmp(const void *a, const void *b)
{
	return strcmp(((const struct flat *)a)->name, ((const struct flat *)b)->name);
}

static size_t value_index(const struct pprof_profile *p)
{
	size_t i;

	if (p->default_sample_type)
		for (i = 0; i < p->n_sample_type; i++)
			if (!strcmp(pprof_str(p, p->sample_type[i].type),
				    pprof_str(p, p->default_sample_type)))
				return i;
	return p->n_sample_type ? p->n_sample_type - 1 : 0;
}

/*
 * pprof -top at function granularity: flat goes to the innermost function of the leaf
 * location; cum to every function of the stack, once per sample.
 */
static void flat_sample(const struct pprof_profile *p, struct flat *fl, size_t i, size_t vi)
{
	const struct pprof_sample *s = &p->samples[i];
	int64_t v = s->values[vi];
	size_t j, k;

	for (j = 0; j < s->n_locations; j++) {
		const struct pprof_location *l = &p->locations[s->location_ids[j] - 1];

		for (k = 0; k < l->n_lines; k++) {
			struct flat *f;

			if (!l->lines[k].function_id)
				continue;
			f = &fl[l->lines[k].function_id - 1];
			if (j == 0 && k == 0)
				f->flat += v;
			if (f->seen != i + 1) {
				f->seen = i + 1;
				f->cum += v;
			}
		}
	}
}

static int cmd_flat(char **files, int n)
{
	struct pprof_profile *p = load_merged(files, n);
	struct flat *fl = calloc(p->n_functions + 1, sizeof(*fl));
	size_t vi = value_index(p), i;

	for (i = 0; i < p->n_functions; i++)
		fl[i].name = pprof_str(p, p->functions[i].name);
	for (i = 0; p->n_sample_type && i < p->n_samples; i++)
		flat_sample(p, fl, i, vi);
	/*
	 * Functions with the same name (other file or start line) print as one row; their cum
	 * may then count a sample twice, as pprof's does for such nodes.
	 */
	qsort(fl, p->n_functions, sizeof(*fl), flat_cmp);
	for (i = 0; i < p->n_functions; i++) {
		int64_t v = fl[i].flat, c = fl[i].cum;

		while (i + 1 < p->n_functions && !strcmp(fl[i].name, fl[i + 1].name)) {
			v += fl[++i].flat;
			c += fl[i].cum;
		}
		if (v || c)
			printf("%" PRId64 " %" PRId64 " %s\n", v, c, fl[i].name);
	}
	free(fl);
	pprof_profile__free(p);
	return 0;
}

static void dump(const struct pprof_profile *p)
{
	size_t i, j, k;

	for (i = 0; i < p->n_sample_type; i++)
		printf("type %s/%s\n", pprof_str(p, p->sample_type[i].type),
		       pprof_str(p, p->sample_type[i].unit));
	printf("period %s/%s %" PRId64 "\n", pprof_str(p, p->period_type.type),
	       pprof_str(p, p->period_type.unit), p->period);
	printf("time %" PRId64 " duration %" PRId64 " drop '%s' keep '%s' default '%s' doc '%s'\n",
	       p->time_nanos, p->duration_nanos, pprof_str(p, p->drop_frames),
	       pprof_str(p, p->keep_frames), pprof_str(p, p->default_sample_type),
	       pprof_str(p, p->doc_url));
	for (i = 0; i < p->n_comments; i++)
		printf("comment %s\n", pprof_str(p, p->comments[i]));
	for (i = 0; i < p->n_mappings; i++) {
		const struct pprof_mapping *m = &p->mappings[i];

		printf("mapping %" PRIu64 " %#" PRIx64 "-%#" PRIx64 " +%#" PRIx64 " %s %s %d%d%d%d\n",
		       m->id, m->memory_start, m->memory_limit, m->file_offset,
		       pprof_str(p, m->filename), pprof_str(p, m->build_id), m->has_functions,
		       m->has_filenames, m->has_line_numbers, m->has_inline_frames);
	}
	for (i = 0; i < p->n_samples; i++) {
		const struct pprof_sample *s = &p->samples[i];

		printf("sample");
		for (j = 0; j < p->n_sample_type; j++)
			printf(" %" PRId64, s->values[j]);
		for (j = 0; j < s->n_labels; j++) {
			const struct pprof_label *l = &s->labels[j];

			if (l->str)
				printf(" [%s=%s]", pprof_str(p, l->key), pprof_str(p, l->str));
			else
				printf(" [%s=%" PRId64 "%s]", pprof_str(p, l->key), l->num,
				       pprof_str(p, l->num_unit));
		}
		printf("\n");
		for (j = 0; j < s->n_locations; j++) {
			const struct pprof_location *l = &p->locations[s->location_ids[j] - 1];

			printf("  %#" PRIx64 " m%" PRIu64 "%s", l->address, l->mapping_id,
			       l->is_folded ? " folded" : "");
			for (k = 0; k < l->n_lines; k++) {
				const struct pprof_function *f =
					l->lines[k].function_id ?
						&p->functions[l->lines[k].function_id - 1] : NULL;

				printf(" %s(%s %s:%" PRId64 ")@%" PRId64 ":%" PRId64,
				       f ? pprof_str(p, f->name) : "?",
				       f ? pprof_str(p, f->system_name) : "",
				       f ? pprof_str(p, f->filename) : "",
				       f ? f->start_line : 0, l->lines[k].line, l->lines[k].column);
			}
			printf("\n");
		}
	}
}

static int cmd_build(const char *path)
{
	FILE *f = fopen(path, "wb");
	struct pprof_builder *b = pprof_builder__new(NULL, pprof_file_write, f);
	struct pprof_mapping_desc md = { 0x400000, 0x500000, 0x1000, "/usr/bin/app",
					 "0123456789abcdef0123456789abcdef01234567", true, true,
					 true };
	struct pprof_mapping_desc lib = { 0x7f0000000000, 0x7f0000100000, 0, "/lib/libc.so.6",
					  NULL, false, false, false };
	struct pprof_label_desc labels[] = {
		{ "thread", "worker-1", 0, NULL }, { "bytes", NULL, 4096, "bytes" },
	};
	uint64_t m1, m2, fmain, fwork, finl, l1, l2, l3, stack[3];
	int64_t v[2];
	int i, ret = 0;

	if (!f || !b)
		return 1;
	pprof_builder__add_sample_type(b, "samples", "count");
	pprof_builder__add_sample_type(b, "cpu", "nanoseconds");
	pprof_builder__set_period(b, "cpu", "nanoseconds", 10000000);
	pprof_builder__set_time(b, 1700000000000000000LL, 10000000000LL);
	pprof_builder__add_comment(b, "edgeprof test profile");
	pprof_builder__add_comment(b, "dropped: 3 samples");
	pprof_builder__set_drop_frames(b, "edgeprof_sigprof.*");
	pprof_builder__set_default_sample_type(b, "cpu");
	m1 = pprof_builder__mapping(b, &md);
	m2 = pprof_builder__mapping(b, &lib);
	fmain = pprof_builder__function(b, "main", "main", "app.c", 10);
	fwork = pprof_builder__function(b, "work", "_Z4workv", "work.c", 20);
	finl = pprof_builder__function(b, "inlined_helper", NULL, "work.c", 5);
	l1 = pprof_builder__location(b, m1, 0x401000,
				     (struct pprof_line_desc[]){ { fmain, 12 } }, 1);
	l2 = pprof_builder__location(b, m1, 0x402000,
				     (struct pprof_line_desc[]){ { finl, 6 }, { fwork, 22 } }, 2);
	l3 = pprof_builder__location(b, m2, 0x7f0000001234, NULL, 0);
	for (i = 0; i < 100; i++) {
		stack[0] = i % 2 ? l3 : l2;
		stack[1] = i % 2 ? l2 : l1;
		stack[2] = l1;
		v[0] = 1;
		v[1] = 10000000;
		ret |= pprof_builder__add_sample(b, stack, i % 2 ? 3 : 2, v, labels, i % 3 ? 2 : 0);
	}
	ret |= pprof_builder__finish(b);
	pprof_builder__free(b);
	ret |= fclose(f);
	return ret ? 1 : 0;
}

static int cmd_encode(const char *path, long n_samples, long n_stacks, long depth)
{
	/* PPROF_GZIP_LEVEL: -1 (raw) .. 9; unset = the builder's default (6). */
	struct pprof_builder_opts opts = {
		.gzip_level = getenv("PPROF_GZIP_LEVEL") ? atoi(getenv("PPROF_GZIP_LEVEL")) : 0,
	};
	FILE *f = fopen(path, "wb");
	struct pprof_builder *b = pprof_builder__new(&opts, pprof_file_write, f);
	uint64_t *stacks = malloc(n_stacks * depth * sizeof(*stacks));
	struct timespec t0, t1;
	uint64_t m, fn[256], seed = 42;
	long i, j;
	int ret = 0;

	if (!f || !b || !stacks)
		return 1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	pprof_builder__add_sample_type(b, "samples", "count");
	pprof_builder__add_sample_type(b, "cpu", "nanoseconds");
	pprof_builder__set_period(b, "cpu", "nanoseconds", 52631578);
	m = pprof_builder__mapping(b, &(struct pprof_mapping_desc){ 0x400000, 0x4000000, 0, "/app",
								   "deadbeef", true, true, true });
	for (i = 0; i < 256; i++) {
		char name[32];

		snprintf(name, sizeof(name), "func_%ld", i);
		fn[i] = pprof_builder__function(b, name, name, "app.c", i);
	}
	/* Stacks share their outer frames (like real ones): a tree of random branches. */
	for (i = 0; i < n_stacks; i++) {
		for (j = 0; j < depth; j++) {
			struct pprof_line_desc ln;
			uint64_t pc;

			seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
			pc = j < depth / 2 ? (uint64_t)(0x400000 + j * 64 + (i % 8)) :
					     0x400000 + ((seed >> 33) % 0x3000000);
			ln.function_id = fn[(pc >> 4) % 256];
			ln.line = pc % 1000;
			stacks[i * depth + j] = pprof_builder__location(b, m, pc, &ln, 1);
		}
	}
	for (i = 0; i < n_samples && !ret; i++) {
		int64_t v[2] = { 1, 52631578 };

		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		ret = pprof_builder__add_sample(b, stacks + ((seed >> 33) % n_stacks) * depth,
						depth, v, NULL, 0);
	}
	if (!ret)
		ret = pprof_builder__finish(b);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	pprof_builder__free(b);
	fclose(f);
	free(stacks);
	fprintf(stderr, "encode: %ld samples, %ld stacks x %ld: %.1f ms\n", n_samples, n_stacks,
		depth, (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6);
	return ret ? 1 : 0;
}

static int cmd_vary(const char *in, const char *out, uint64_t seed)
{
	struct pprof_profile *p = load(in);
	size_t i, j, n = 0;
	int ret;

	for (i = 0; i < p->n_samples; i++) {
		uint64_t k;

		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		k = seed >> 60;
		if (k == 0 && p->n_samples > 1)
			continue; /* dropped; the sample arrays live in the profile's blocks */
		p->samples[n] = p->samples[i];
		for (j = 0; j < p->n_sample_type; j++)
			p->samples[n].values[j] *= 1 + (int64_t)(k & 3);
		n++;
	}
	p->n_samples = n;
	p->time_nanos += (int64_t)(seed >> 40);
	ret = write_file_level(p, out, 1); /* gzip.BestSpeed, as Go's runtime/pprof writes */
	pprof_profile__free(p);
	return ret ? 1 : 0;
}

/* ---- fleet: profiles of a simulated fleet from the stacks of real ones -------------------- */

#define FLEET_ROOTS 8	/* each real stack runs under one of 8 firmware tasks */

struct fleet_frame {
	const char *name, *system_name, *filename;
	int64_t line, start_line;
};

struct fleet_stack {
	struct fleet_frame *f;
	size_t n;
};

/* Every sample's stack of every pool profile, leaf first (inlined frames included). */
static size_t fleet_stacks(struct pprof_profile **pool, int n_pool, struct fleet_stack **out)
{
	size_t n = 0, cap = 0;
	struct fleet_stack *st = NULL;

	for (int k = 0; k < n_pool; k++) {
		const struct pprof_profile *p = pool[k];

		for (size_t i = 0; i < p->n_samples; i++) {
			const struct pprof_sample *s = &p->samples[i];
			struct fleet_stack x = { calloc(256, sizeof(*x.f)), 0 };

			for (size_t j = 0; j < s->n_locations && x.n < 256; j++) {
				const struct pprof_location *l = &p->locations[s->location_ids[j] - 1];

				for (size_t m = 0; m < l->n_lines && x.n < 256; m++) {
					const struct pprof_function *f =
						&p->functions[l->lines[m].function_id - 1];

					x.f[x.n++] = (struct fleet_frame){
						pprof_str(p, f->name), pprof_str(p, f->system_name),
						pprof_str(p, f->filename), l->lines[m].line,
						f->start_line };
				}
			}
			if (!x.n) {
				free(x.f);
				continue;
			}
			if (n == cap) {
				cap = cap ? 2 * cap : 256;
				st = realloc(st, cap * sizeof(*st));
			}
			st[n++] = x;
		}
	}
	*out = st;
	return n;
}

/*
 * One profile of firmware version v: its own build-id and addresses (a fleet's versions do not
 * share locations), ~1 in 10 functions renamed in each version (code that changed), SAMPLES
 * draws skewed toward the first stacks (hot paths), rotated per profile.
 */
/*
 * --version-effect FUNC=FACTOR: the newest version's samples whose leaf is FUNC (named as in
 * the pool) drawn FACTOR times as often, each profile's factor off by up to +-10 %
 * (per-device noise: a device uploads its version's profiles in turn).
 */
struct fleet_effect {
	const char *fn;		/* NULL: none */
	double factor;
};

/* How many times a sample is drawn (1, or more under the effect), with seed's next draws. */
static int fleet_draws(const struct fleet_effect *fx, const struct fleet_stack *st, bool newest,
		       double noise, uint64_t *seed)
{
	double extra;
	int n = 1;

	if (!fx->fn || !newest || strcmp(st->f[0].name, fx->fn))
		return 1;
	for (extra = fx->factor * noise - 1; extra >= 1; extra -= 1)
		n++;
	*seed = *seed * 6364136223846793005ULL + 1442695040888963407ULL;
	return n + (extra > 0 && (double)(*seed >> 11) / 9007199254740992.0 < extra);
}

static int fleet_one(const char *path, const struct fleet_stack *st, size_t n, int v, int i,
		     long samples, const struct fleet_effect *fx, bool newest)
{
	struct pprof_builder_opts opts = { .gzip_level = 1 };
	FILE *f = fopen(path, "wb");
	struct pprof_builder *b = pprof_builder__new(&opts, pprof_file_write, f);
	uint64_t seed = (uint64_t)v * 1000003u + (uint64_t)i * 7919u + 1, m, loc[260];
	uint64_t fx_seed = seed ^ 0x5eed;
	double noise = 0.9 + 0.2 * (double)((seed * 0x9e3779b97f4a7c15ull) >> 11) /
			     9007199254740992.0;
	char bid[64], name[300];
	int ret = 0;

	if (!f || !b)
		return 1;
	snprintf(bid, sizeof(bid), "f1ee7000%08x", v);
	pprof_builder__add_sample_type(b, "samples", "count");
	pprof_builder__add_sample_type(b, "cpu", "nanoseconds");
	pprof_builder__set_period(b, "cpu", "nanoseconds", 10000000);
	m = pprof_builder__mapping(b, &(struct pprof_mapping_desc){ 0x400000, 0x8000000, 0,
		"/usr/lib/gw/firmware", bid, true, true, true });
	for (long k = 0; k < samples && !ret; k++) {
		double u;
		size_t idx, root, nl = 0;
		int64_t vals[2] = { 1, 10000000 };

		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		u = (double)(seed >> 11) / 9007199254740992.0;
		idx = ((size_t)((double)(n * FLEET_ROOTS) * u * u) + (size_t)i * 13) %
		      (n * FLEET_ROOTS);
		root = idx % FLEET_ROOTS;
		idx /= FLEET_ROOTS;
		for (size_t j = 0; j < st[idx].n; j++) {
			const struct fleet_frame *fr = &st[idx].f[j];
			uint64_t h = hash_fnv64_str(fr->name);
			struct pprof_line_desc ln;

			snprintf(name, sizeof(name), h % 10 == (uint64_t)v % 10 ? "%s.v%d" : "%s",
				 fr->name, v);
			ln.function_id = pprof_builder__function(b, name, fr->system_name,
								 fr->filename, fr->start_line);
			ln.line = fr->line;
			loc[nl++] = pprof_builder__location(b, m, 0x400000 + (h ^ (uint64_t)fr->line) %
						0x7000000 / 16 * 16 + (uint64_t)v * 0x40, &ln, 1);
		}
		for (int r = 0; r < 2; r++) {
			struct pprof_line_desc ln;

			snprintf(name, sizeof(name), r ? "gw_main" : "gw_task_%zu", root);
			ln.function_id = pprof_builder__function(b, name, name, "gw/main.c", 1);
			ln.line = r ? 40 : 100 + (int64_t)root;
			loc[nl++] = pprof_builder__location(b, m, 0x400100 + (uint64_t)r * 0x80 +
						(r ? 0 : root * 8) + (uint64_t)v * 0x40, &ln, 1);
		}
		for (int d = fleet_draws(fx, &st[idx], newest, noise, &fx_seed); d > 0 && !ret; d--)
			ret = pprof_builder__add_sample(b, loc, nl, vals, NULL, 0);
	}
	ret |= pprof_builder__finish(b);
	pprof_builder__free(b);
	ret |= fclose(f);
	return ret ? 1 : 0;
}

static int fleet_make(const char *dir, int versions, int per, long samples, char **files, int n,
		      const struct fleet_effect *fx);

/*
 * pprof-tool fleet DIR VERSIONS PER SAMPLES [--version-effect FUNC=FACTOR] FILE...: PER
 * profiles of each of VERSIONS firmware versions (DIR/fw<v>-<i>.pb.gz) from FILEs' stacks.
 */
static int cmd_fleet(const char *dir, int versions, int per, long samples, char **files, int n)
{
	struct fleet_effect fx = { 0 };
	char *eq;

	if (n >= 2 && !strcmp(files[0], "--version-effect")) {
		eq = strchr(files[1], '=');
		fx.fn = files[1];
		fx.factor = eq ? strtod(eq + 1, NULL) : 0;
		if (!eq || eq == files[1] || !(fx.factor > 0) || fx.factor > 100) {
			fprintf(stderr, "fleet: --version-effect FUNC=FACTOR (0 < FACTOR <= 100): "
				"'%s'\n", files[1]);
			return 2;
		}
		*eq = '\0';
		files += 2;
		n -= 2;
	}
	return fleet_make(dir, versions, per, samples, files, n, &fx);
}

static int fleet_make(const char *dir, int versions, int per, long samples, char **files, int n,
		      const struct fleet_effect *fx)
{
	struct pprof_profile **pool = calloc((size_t)n, sizeof(*pool));
	struct fleet_stack *st;
	size_t ns;
	int ret = 0;

	for (int k = 0; k < n; k++)
		pool[k] = load(files[k]);
	ns = fleet_stacks(pool, n, &st);
	if (!ns) {
		fprintf(stderr, "fleet: no stacks in the pool\n");
		return 1;
	}
	for (int v = 0; v < versions && !ret; v++) {
		for (int i = 0; i < per && !ret; i++) {
			char path[4096];

			snprintf(path, sizeof(path), "%s/fw%d-%d.pb.gz", dir, v, i);
			ret = fleet_one(path, st, ns, v, i, samples, fx, v == versions - 1);
		}
	}
	fprintf(stderr, "fleet: %zu stacks from %d real profiles, x %d tasks, %d versions\n", ns,
		n, FLEET_ROOTS, versions);
	if (fx->fn)
		fprintf(stderr, "fleet: fw%d (the newest) spends %g times the CPU in %s (+-10 %% a "
			"profile)\n", versions - 1, fx->factor, fx->fn);
	for (size_t i = 0; i < ns; i++)
		free(st[i].f);
	free(st);
	for (int k = 0; k < n; k++)
		pprof_profile__free(pool[k]);
	free(pool);
	return ret;
}

int main(int argc, char **argv)
{
	if (argc >= 3 && !strcmp(argv[1], "flat"))
		return cmd_flat(argv + 2, argc - 2);
	if (argc >= 5 && !strcmp(argv[1], "merge") && !strcmp(argv[2], "-o")) {
		struct pprof_profile *p = load_merged(argv + 4, argc - 4);
		int ret = write_file_parallel(p, argv[3]);

		pprof_profile__free(p);
		return ret ? 1 : 0;
	}
	if (argc == 3 && !strcmp(argv[1], "dump")) {
		struct pprof_profile *p = load(argv[2]);

		dump(p);
		pprof_profile__free(p);
		return 0;
	}
	if (argc == 4 && !strcmp(argv[1], "rewrite")) {
		struct pprof_profile *p = load(argv[2]);
		int ret = write_file(p, argv[3]);

		pprof_profile__free(p);
		return ret ? 1 : 0;
	}
	if (argc == 3 && !strcmp(argv[1], "check")) {
		pprof_profile__free(load(argv[2]));
		return 0;
	}
	if (argc == 3 && !strcmp(argv[1], "build"))
		return cmd_build(argv[2]);
	if (argc >= 7 && !strcmp(argv[1], "fleet"))
		return cmd_fleet(argv[2], atoi(argv[3]), atoi(argv[4]), atol(argv[5]), argv + 6,
				 argc - 6);
	if (argc == 5 && !strcmp(argv[1], "vary"))
		return cmd_vary(argv[2], argv[3], strtoull(argv[4], NULL, 0));
	if (argc == 6 && !strcmp(argv[1], "encode"))
		return cmd_encode(argv[2], atol(argv[3]), atol(argv[4]), atol(argv[5]));
	fprintf(stderr, "usage: see tests/pprof-tool.c\n");
	return 2;
}
