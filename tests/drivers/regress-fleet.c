// SPDX-License-Identifier: MIT
/*
 * tests/drivers/regress-fleet.c — a simulated staged roll-out for the regression detection's
 * integration test and benchmark (tests/integration/regress-fleet.test.sh,
 * tests/bench/regressions-bench.sh).
 *
 *   regress-fleet fill RING [options]
 *       stores a fleet's cpu profiles into the ring RING (created, --ring-mb) through the store
 *       front, as the collector would have stored them: service "fw", device dev-NNNN (the
 *       device field), label version=1.4 (base) or 1.5 (the candidate: --cand-frac of the
 *       devices, picked at random). Each device runs 40 functions under 5 tasks with a fleet-
 *       wide weight each (crc32_update at 3 % of the CPU), every weight times a log-normal
 *       device factor exp(N(0, --noise)) (workload, hardware revision), then --profiles
 *       profiles of --samples samples drawn from those weights (sampling noise).
 *         --devices N (200)  --cand-frac F (0.1)  --noise S (0.1)  --samples N (2000)
 *         --profiles N (1)  --seed N (1)  --ring-mb N (64)
 *         --effect FUNC=FACTOR   candidate devices spend FACTOR times the CPU in FUNC
 *         --new FUNC=SHARE       candidate devices run FUNC (a new leaf) at SHARE of the CPU
 *         --time-s T         the first profile's time (unix seconds; default now - 60)
 *         --spacing-s S (1)  between a device's profiles
 *         --weight W         a device's odd profiles (2nd, 4th, ...) carry the duty weight W,
 *                            stored as the collector stores a duty-cycled upload
 *         --cand-delay-s S (0)  the candidate devices' profiles S seconds later (the roll-out
 *                            began later: the newest version is the one first seen last)
 *   RING may be a ClickHouse URL instead (http://HOST:PORT/DATABASE): the same fleet stored in
 *       ClickHouse (the database created), compared by ClickHouse's sums by device; with
 *       REGRESS_FLEET_CLUSTER=NAME in the environment, as the collector's --ch-cluster NAME.
 *   regress-fleet compare RING BASE_SEL CAND_SEL [--all] [--shares FILE] [--bootstrap N]
 *                         [--per-profile] [--raw] [--from-s T] [--to-s T] [--chains]
 *                         [--query-mem BYTES]
 *       the comparison in-process (store/api/regress-store.c, pprof/view/regress.c, as the
 *       handler runs it) on a ring no collector holds: one line per finding (all: per test)
 *       "verdict metric function base_pct cand_pct delta_pct p_value p_adjusted u", then
 *       "devices_base=N devices_cand=N tests=N seconds=S"; --shares writes every per-device
 *       share "function metric side device share" for the scipy reference; --per-profile
 *       reads the profiles one by one through the store front even where the backend sums
 *       by device (the path before it did: the benchmark's peer); --raw: ClickHouse sums
 *       raw rows only, not the rollups (--rollup-seconds 0: the path before samples_1d,
 *       the benchmark's peer of the daily rollup); --from-s/--to-s: a time
 *       range (unix seconds); --chains: under each finding its caller chains that moved
 *       most, "  stack CALLER>CALLER base_pct cand_pct"; --query-mem: each side read under a
 *       memory budget of BYTES, as the collector's --query-mem (its refusal is an error), the
 *       peak held printed on stderr ("query_mem_peak=N"), every byte given back checked.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "port/clock.h"
#include "pprof/pprof.h"
#include "store/api/regress-store.h"
#include "store/query/selector.h"

#define NFUNC 40
#define NTASK 5
#define MAXF (NFUNC + 1)

struct fleet {
	unsigned devices, samples, profiles;
	double cand_frac, noise;
	uint64_t seed, time_ns, spacing_s, cand_delay_s;
	uint32_t weight_milli;	/* --weight: a device's odd profiles' duty weight (0: none) */
	size_t ring_mb;
	const char *effect_fn, *new_fn;
	double effect, new_share;
	uint64_t rng;
};

static uint64_t rnd(struct fleet *f)
{
	f->rng ^= f->rng << 13;
	f->rng ^= f->rng >> 7;
	f->rng ^= f->rng << 17;
	return f->rng;
}

static double uniform(struct fleet *f)
{
	return ((double)(rnd(f) >> 11) + 0.5) / 9007199254740992.0;
}

static double gauss(struct fleet *f)
{
	return sqrt(-2 * log(uniform(f))) * cos(2 * M_PI * uniform(f));
}

static const char *const tasks[NTASK] = { "net_task", "sensor_task", "storage_task",
					  "ui_task", "ota_task" };
static char names[MAXF][40];

/* Fleet-wide weights: a Zipf-like spread, crc32_update (function 7) at 3 %. */
static void fleet_weights(double *w)
{
	double sum = 0;

	for (int i = 0; i < NFUNC; i++) {
		w[i] = 1.0 / (i + 2);
		snprintf(names[i], sizeof(names[i]), "fw_fn_%02d", i);
		if (i != 7)
			sum += w[i];
	}
	snprintf(names[7], sizeof(names[7]), "crc32_update");
	for (int i = 0; i < NFUNC; i++)
		w[i] = i == 7 ? 0.03 : w[i] / sum * 0.97;
}

/* One device's weights: the fleet's times its device factors, the candidate's effects. */
static void device_weights(struct fleet *f, const double *fw, bool cand, double *w, int *nf)
{
	double sum = 0;

	*nf = NFUNC;
	for (int i = 0; i < NFUNC; i++) {
		w[i] = fw[i] * exp(f->noise * gauss(f));
		if (cand && f->effect_fn && !strcmp(names[i], f->effect_fn))
			w[i] *= f->effect;
		sum += w[i];
	}
	if (cand && f->new_fn) { /* SHARE of the total, after the others */
		snprintf(names[NFUNC], sizeof(names[NFUNC]), "%s", f->new_fn);
		w[NFUNC] = sum * f->new_share / (1 - f->new_share) * exp(f->noise * gauss(f));
		(*nf)++;
	}
}

/* A profile of f->samples samples drawn from w[0..nf): leaf fn, under its task, under main. */
static int build_profile(struct fleet *f, const double *w, int nf, struct pprof_buf *out,
			 int64_t *total)
{
	struct pprof_builder *b = pprof_builder__new(NULL, pprof_buf_write, out);
	int64_t count[MAXF] = { 0 };
	double cdf[MAXF], sum = 0;
	uint64_t main_loc, task_loc[NTASK];
	int ret = 0;

	if (!b)
		return -ENOMEM;
	for (int i = 0; i < nf; i++)
		cdf[i] = (sum += w[i]);
	for (unsigned s = 0; s < f->samples; s++) {
		double x = uniform(f) * sum;
		int lo = 0, hi = nf - 1;

		while (lo < hi) {
			int mid = (lo + hi) / 2;

			if (cdf[mid] < x)
				lo = mid + 1;
			else
				hi = mid;
		}
		count[lo]++;
	}
	pprof_builder__add_sample_type(b, "samples", "count");
	pprof_builder__add_sample_type(b, "cpu", "nanoseconds");
	pprof_builder__set_period(b, "cpu", "nanoseconds", 10000000);
	pprof_builder__set_time(b, (int64_t)f->time_ns, 10 * (int64_t)NSEC_PER_SEC);
	main_loc = pprof_builder__location(b, 0, 0x1000, &(struct pprof_line_desc){
		pprof_builder__function(b, "main", NULL, "main.c", 1), 1 }, 1);
	for (int t = 0; t < NTASK; t++)
		task_loc[t] = pprof_builder__location(b, 0, 0x2000 + (uint64_t)t * 16,
			&(struct pprof_line_desc){ pprof_builder__function(b, tasks[t], NULL,
									   "tasks.c", 1), 1 }, 1);
	*total = 0;
	for (int i = 0; !ret && i < nf; i++) {
		uint64_t st[3];
		int64_t v[2] = { count[i], count[i] * 10000000 };

		if (!count[i])
			continue;
		st[0] = pprof_builder__location(b, 0, 0x10000 + (uint64_t)i * 64,
			&(struct pprof_line_desc){ pprof_builder__function(b, names[i], NULL,
									   "fw.c", 1), 1 }, 1);
		st[1] = task_loc[i % NTASK];
		st[2] = main_loc;
		*total += v[1];
		ret = pprof_builder__add_sample(b, st, 3, v, NULL, 0);
	}
	if (!ret)
		ret = pprof_builder__finish(b);
	pprof_builder__free(b);
	return ret;
}

/*
 * A duty-cycled upload, as the collector's ingest takes it (store/api/api.c): decoded (its
 * samples of a stack merged where the store merges them), its values weighed, the weight in
 * its metadata (the ring keeps the bytes as uploaded and the weight beside them).
 */
static int put_weighed(struct store *s, struct record_meta *m, const struct pprof_buf *out,
		       uint32_t weight_milli)
{
	struct pprof_read_limits lim = { .merge_samples = store__merges_samples(s) };
	struct pprof_profile *p = NULL;
	char err[256];
	uint64_t seq;
	bool dup;
	int ret = pprof_read(out->data, out->len, &lim, &p, err, sizeof(err));

	if (ret)
		return ret;
	pprof_profile__weigh(p, weight_milli);
	m->weight_milli = weight_milli;
	return store__ingest(s, m, out->data, out->len, p, &seq, &dup);
}

static int put_device(struct fleet *f, struct store *s, unsigned d, const double *fw)
{
	bool cand = uniform(f) < f->cand_frac;
	struct record_label label = { .key = "version", .value = cand ? "1.5" : "1.4" };
	double w[MAXF];
	char dev[32];
	int nf;

	snprintf(dev, sizeof(dev), "dev-%04u", d);
	device_weights(f, fw, cand, w, &nf);
	for (unsigned k = 0; k < f->profiles; k++) {
		struct pprof_buf out = { 0 };
		struct record_meta m = { .time_ns = f->time_ns + (k * f->spacing_s +
					 (cand ? f->cand_delay_s : 0)) * NSEC_PER_SEC, .service = "fw",
					 .type = "cpu", .device = dev, .key = "",
					 .labels = &label, .n_labels = 1 };
		uint64_t seq;
		bool dup;
		int ret = build_profile(f, w, nf, &out, &m.value);

		if (!ret && f->weight_milli && k % 2)
			ret = put_weighed(s, &m, &out, f->weight_milli);
		else if (!ret)
			ret = store__put(s, &m, out.data, out.len, &seq, &dup);
		free(out.data);
		if (ret)
			return ret;
	}
	return 0;
}

/* A ring file, or ClickHouse when where is an http:// URL. */
static void store_target(struct store_opts *so, const char *where)
{
	if (!strncmp(where, "http://", 7)) {
		so->backend = STORE_CLICKHOUSE;
		so->clickhouse = where;
		so->ch_batch_ms = 1; /* one put at a time: each waits for its INSERT */
		so->ch_cluster = getenv("REGRESS_FLEET_CLUSTER");
	} else {
		so->path = where;
	}
}

static int parse_pair(const char *arg, const char **name, double *v)
{
	char *eq = strchr(arg, '=');

	if (!eq)
		return -1;
	*eq = '\0';
	*name = arg;
	*v = strtod(eq + 1, NULL);
	return 0;
}

static int fill(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "devices", 1, NULL, 'd' }, { "cand-frac", 1, NULL, 'c' },
		{ "noise", 1, NULL, 'n' }, { "samples", 1, NULL, 's' },
		{ "profiles", 1, NULL, 'p' }, { "seed", 1, NULL, 'S' },
		{ "ring-mb", 1, NULL, 'r' }, { "effect", 1, NULL, 'e' },
		{ "new", 1, NULL, 'N' }, { "time-s", 1, NULL, 't' },
		{ "spacing-s", 1, NULL, 'g' }, { "cand-delay-s", 1, NULL, 'D' },
		{ "weight", 1, NULL, 'w' }, { NULL, 0, NULL, 0 },
	};
	struct fleet f = { .devices = 200, .samples = 2000, .profiles = 1, .cand_frac = 0.1,
			   .noise = 0.1, .seed = 1, .ring_mb = 64, .spacing_s = 1 };
	/* fdatasync per record: one writer waits for no group (on tmpfs it costs nothing) */
	struct store_opts so = { .fsync_ms = 0, .quiet = true };
	double fw[NFUNC];
	struct store *s;
	char err[256];
	int c, ret = 0;

	f.time_ns = port_clock_real_ns() - 60 * NSEC_PER_SEC;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'd': f.devices = (unsigned)atoi(optarg); break;
		case 'c': f.cand_frac = atof(optarg); break;
		case 'n': f.noise = atof(optarg); break;
		case 's': f.samples = (unsigned)atoi(optarg); break;
		case 'p': f.profiles = (unsigned)atoi(optarg); break;
		case 'S': f.seed = strtoull(optarg, NULL, 10); break;
		case 'r': f.ring_mb = (size_t)atoi(optarg); break;
		case 't': f.time_ns = strtoull(optarg, NULL, 10) * NSEC_PER_SEC; break;
		case 'g': f.spacing_s = strtoull(optarg, NULL, 10); break;
		case 'D': f.cand_delay_s = strtoull(optarg, NULL, 10); break;
		case 'w': f.weight_milli = (uint32_t)(atof(optarg) * 1000 + 0.5); break;
		case 'e': if (parse_pair(optarg, &f.effect_fn, &f.effect)) return 2; break;
		case 'N': if (parse_pair(optarg, &f.new_fn, &f.new_share)) return 2; break;
		default: return 2;
		}
	}
	if (optind + 1 != argc)
		return 2;
	f.rng = f.seed * 0x9e3779b97f4a7c15ull + 1;
	store_target(&so, argv[optind]);
	so.size = (uint64_t)f.ring_mb << 20;
	s = store__open(&so, err, sizeof(err));
	if (!s) {
		fprintf(stderr, "regress-fleet: %s\n", err);
		return 1;
	}
	fleet_weights(fw);
	for (unsigned d = 0; !ret && d < f.devices; d++)
		ret = put_device(&f, s, d, fw);
	store__free(s);
	if (ret)
		fprintf(stderr, "regress-fleet: storing: %s\n", strerror(-ret));
	return ret ? 1 : 0;
}

static void on_share(void *ctx, const char *fn, enum regress_metric m, enum regress_side side,
		     size_t dev, double share)
{
	fprintf(ctx, "%s %s %s %zu %.17g\n", fn, regress__metric_name(m),
		side ? "cand" : "base", dev, share);
}

/* --query-mem: what a side holds, charged as the collector's budget charges a query. */
struct qmem {
	size_t limit, held, peak;
};

static int qmem_take(void *ctx, size_t bytes, char *err, size_t errlen)
{
	struct qmem *m = ctx;

	if (bytes > m->limit - m->held) {
		snprintf(err, errlen, "the query needs more than the %zu bytes of --query-mem",
			 m->limit);
		return -E2BIG;
	}
	m->held += bytes;
	if (m->held > m->peak)
		m->peak = m->held;
	return 0;
}

static void qmem_give(void *ctx, size_t bytes)
{
	struct qmem *m = ctx;

	m->held -= bytes;
}

static int side(struct store *s, struct store_query q, const char *text, bool per_profile,
		struct regress *r, enum regress_side sd)
{
	struct regress_side_stats st;
	char err[256];
	int ret = selector__parse(text, 0, (struct selector **)&q.sel, err, sizeof(err));

	if (!ret && per_profile)
		ret = regress_store_side_profiles(s, &q, NULL, r, sd, &st, err, sizeof(err));
	else if (!ret)
		ret = regress_store_side(s, &q, NULL, r, sd, &st, err, sizeof(err));
	selector__free((struct selector *)q.sel);
	if (ret)
		fprintf(stderr, "regress-fleet: %s: %s\n", text, err);
	return ret;
}

/* "  stack CALLER>CALLER... base_pct cand_pct" ("-" for a root; "...>" when cut). */
static void print_chain(const struct regress_chain *c)
{
	printf("  stack %s", c->cut ? "...>" : "");
	for (size_t j = 0; j < c->n_callers; j++)
		printf("%s%s", j ? ">" : "", c->callers[j]);
	printf("%s %.17g %.17g\n", c->n_callers ? "" : "-", c->base_share * 100,
	       c->cand_share * 100);
}

static int compare(int argc, char **argv)
{
	struct store_opts so = { .fsync_ms = 1000, .quiet = true };
	struct store_query q = { .type = "cpu" };
	struct regress_opts ro = { 0 };
	struct qmem qm = { 0 };
	struct pprof_budget qb = { .take = qmem_take, .give = qmem_give, .ctx = &qm };
	bool per_profile = false, with_chains = false;
	const char *shares = NULL;
	struct regress_finding *f = NULL;
	struct regress_stats st;
	struct regress *r;
	struct store *s;
	char err[256];
	bool all = false;
	size_t n = 0;
	uint64_t t0, t1, t2;
	int ret;

	for (int i = 5; i < argc; i++) {
		if (!strcmp(argv[i], "--all"))
			all = true;
		else if (!strcmp(argv[i], "--shares") && i + 1 < argc)
			shares = argv[++i];
		else if (!strcmp(argv[i], "--bootstrap") && i + 1 < argc)
			ro.bootstrap = (unsigned)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--per-profile"))
			per_profile = true;
		else if (!strcmp(argv[i], "--raw"))
			so.ch_no_rollup = true;
		else if (!strcmp(argv[i], "--chains"))
			with_chains = true;
		else if (!strcmp(argv[i], "--from-s") && i + 1 < argc)
			q.from_ns = strtoull(argv[++i], NULL, 10) * NSEC_PER_SEC;
		else if (!strcmp(argv[i], "--to-s") && i + 1 < argc)
			q.to_ns = strtoull(argv[++i], NULL, 10) * NSEC_PER_SEC;
		else if (!strcmp(argv[i], "--query-mem") && i + 1 < argc)
			qm.limit = strtoull(argv[++i], NULL, 10), q.budget = &qb;
		else
			return 2;
	}
	if (argc < 5)
		return 2;
	store_target(&so, argv[2]);
	s = store__open(&so, err, sizeof(err));
	r = regress__new(&ro);
	if (!s || !r) {
		fprintf(stderr, "regress-fleet: %s\n", s ? "out of memory" : err);
		store__free(s);
		regress__free(r);
		return 1;
	}
	t0 = port_clock_mono_ns(); /* the store is open, its index rebuilt: as in the collector */
	ret = side(s, q, argv[3], per_profile, r, REGRESS_BASE);
	if (!ret)
		ret = side(s, q, argv[4], per_profile, r, REGRESS_CAND);
	t1 = port_clock_mono_ns();
	if (!ret)
		ret = regress__run(r, all, &f, &n);
	t2 = port_clock_mono_ns();
	if (q.budget)
		fprintf(stderr, "query_mem_peak=%zu\n", qm.peak);
	if (q.budget && qm.held) {
		fprintf(stderr, "regress-fleet: %zu bytes of the query's budget not given back\n",
			qm.held);
		ret = ret ? ret : -EFAULT;
	}
	regress__stats(r, &st);
	for (size_t i = 0; i < n; i++) {
		printf("%s %s %s %.17g %.17g %.17g %.17g %.17g %.17g\n",
		       regress__verdict_name(f[i].verdict), regress__metric_name(f[i].metric),
		       f[i].function, f[i].base_share * 100, f[i].cand_share * 100,
		       f[i].rel_change * 100, f[i].p_value, f[i].p_adjusted, f[i].u);
		for (size_t k = 0; with_chains && k < f[i].n_chains; k++)
			print_chain(&f[i].chains[k]);
	}
	printf("devices_base=%zu devices_cand=%zu tests=%zu seconds=%.3f stats_seconds=%.3f\n",
	       st.devices[0], st.devices[1], st.tests, (double)(t2 - t0) / 1e9,
	       (double)(t2 - t1) / 1e9);
	if (!ret && shares) {
		FILE *out = fopen(shares, "w");

		if (!out)
			ret = -errno;
		else
			regress__each_share(r, on_share, out), fclose(out);
	}
	free(f);
	regress__free(r);
	store__free(s);
	return ret ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc > 2 && !strcmp(argv[1], "fill"))
		return fill(argc - 1, argv + 1);
	if (argc > 4 && !strcmp(argv[1], "compare"))
		return compare(argc, argv);
	fprintf(stderr, "usage: regress-fleet fill RING [options] | compare RING BASE CAND "
		"[--all] [--shares FILE] [--per-profile] [--from-s T] [--to-s T] [--chains]\n");
	return 2;
}
