// SPDX-License-Identifier: MIT
/*
 * tools/cli/top.c — `edgeprof top`: flat and cumulative cost per function, computed and printed
 * as `go tool pprof -top` does (internal/graph + internal/report): a frame per line entry (so
 * inlined functions count), cum counted once per sample, flat on the leaf, nodes with
 * cum < nodefraction * total dropped and the graph rebuilt without them, then sorted and cut
 * to -n nodes, all values in one unit chosen from the smallest value shown.
 */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tools/cli/cli.h"
#include "pprof/view/stacks.h"
#include "pprof/view/units.h"
#include "port/hash.h"

struct top_node {
	const char *name;
	int64_t flat, cum;
	size_t stamp; /* last sample that counted cum here, +1 */
	bool kept, inl, noinl;
};

struct top_edge {
	uint32_t from, to; /* node indexes + 1; 0 = empty slot */
	bool inline_only;
};

struct top {
	const struct pprof_profile *p;
	struct stacks *s;
	int vi;
	struct top_node *nodes;
	size_t n, cap;
	uint32_t *index; /* name hash -> node + 1 */
	size_t index_cap;
	struct top_edge *edges;
	size_t n_edges, edges_cap;
	int64_t total;
	struct stacks_unique *unique; /* the samples grouped by stack: each pass walks these */
	size_t n_unique;
};

static int index_grow(struct top *t)
{
	size_t cap = t->index_cap ? t->index_cap * 2 : 1024, i, j;
	uint32_t *ni = calloc(cap, sizeof(*ni));

	if (!ni)
		return -ENOMEM;
	for (i = 0; i < t->n; i++) {
		for (j = hash_fnv64_str(t->nodes[i].name) & (cap - 1); ni[j]; j = (j + 1) & (cap - 1))
			;
		ni[j] = (uint32_t)i + 1;
	}
	free(t->index);
	t->index = ni;
	t->index_cap = cap;
	return 0;
}

/* Node of a name (pprof's NodeInfo at function granularity is the name). -ENOMEM or index. */
static long node_of(struct top *t, const char *name)
{
	struct top_node *nn;
	size_t j;

	for (j = hash_fnv64_str(name) & (t->index_cap - 1); t->index[j]; j = (j + 1) & (t->index_cap - 1))
		if (!strcmp(t->nodes[t->index[j] - 1].name, name))
			return (long)t->index[j] - 1;
	if (t->n == t->cap) {
		nn = realloc(t->nodes, (t->cap ? t->cap * 2 : 256) * sizeof(*nn));
		if (!nn)
			return -ENOMEM;
		t->nodes = nn;
		t->cap = t->cap ? t->cap * 2 : 256;
	}
	t->nodes[t->n] = (struct top_node){.name = name, .kept = true};
	t->index[j] = (uint32_t)++t->n;
	if (t->n * 2 > t->index_cap && index_grow(t))
		return -ENOMEM;
	return (long)t->n - 1;
}

/* pprof's edge.Inline: true while every occurrence of caller->callee was an inlined call. */
static int edge_add(struct top *t, uint32_t from, uint32_t to, bool inl)
{
	struct top_edge *ne;
	size_t cap, i, j;
	uint64_t h;

	if ((t->n_edges + 1) * 2 > t->edges_cap) {
		cap = t->edges_cap ? t->edges_cap * 2 : 1024;
		ne = calloc(cap, sizeof(*ne));
		if (!ne)
			return -ENOMEM;
		for (i = 0; i < t->edges_cap; i++) {
			if (!t->edges[i].from)
				continue;
			h = (t->edges[i].from * 0x9e3779b97f4a7c15ull) ^ t->edges[i].to;
			for (j = h & (cap - 1); ne[j].from; j = (j + 1) & (cap - 1))
				;
			ne[j] = t->edges[i];
		}
		free(t->edges);
		t->edges = ne;
		t->edges_cap = cap;
	}
	from++;
	to++;
	h = (from * 0x9e3779b97f4a7c15ull) ^ to;
	for (j = h & (t->edges_cap - 1); t->edges[j].from; j = (j + 1) & (t->edges_cap - 1)) {
		if (t->edges[j].from == from && t->edges[j].to == to) {
			t->edges[j].inline_only &= inl;
			return 0;
		}
	}
	t->edges[j] = (struct top_edge){.from = from, .to = to, .inline_only = inl};
	t->n_edges++;
	return 0;
}

/*
 * One pass of pprof's newGraph over all samples (grouped by stack: the result depends only on
 * the stack and the summed value), counting only kept nodes: a dropped leaf
 * loses its flat value (pprof's "residual"), as in pprof.
 */
static int build(struct top *t, const struct stack_frame **frames)
{
	size_t i, k, n;
	long nd, parent;
	bool residual;
	int64_t v;
	int ret;

	for (i = 0; i < t->n; i++)
		t->nodes[i].flat = t->nodes[i].cum = 0, t->nodes[i].stamp = 0;
	free(t->edges);
	t->edges = NULL;
	t->n_edges = t->edges_cap = 0;
	for (i = 0; i < t->n_unique; i++) {
		v = t->unique[i].value;
		n = stacks__sample(t->s, t->unique[i].sample, frames, STACKS_MAX_DEPTH);
		parent = -1;
		residual = false;
		for (k = 0; k < n; k++) {
			nd = node_of(t, frames[k]->name);
			if (nd < 0)
				return (int)nd;
			if (!t->nodes[nd].kept) {
				residual = true;
				continue;
			}
			if (t->nodes[nd].stamp != i + 1) {
				t->nodes[nd].stamp = i + 1;
				t->nodes[nd].cum += v;
			}
			if (parent >= 0 && parent != nd) {
				ret =
				    edge_add(t, (uint32_t)parent, (uint32_t)nd, frames[k]->inlined);
				if (ret)
					return ret;
			}
			parent = nd;
			residual = false;
		}
		if (parent >= 0 && !residual)
			t->nodes[parent].flat += v;
	}
	return 0;
}

static void inline_labels(struct top *t)
{
	size_t i;

	for (i = 0; i < t->n; i++)
		t->nodes[i].inl = t->nodes[i].noinl = false;
	for (i = 0; i < t->edges_cap; i++) {
		struct top_edge *e = &t->edges[i];

		if (!e->from)
			continue;
		if (e->inline_only)
			t->nodes[e->to - 1].inl = true;
		else
			t->nodes[e->to - 1].noinl = true;
	}
}

static int64_t abs64(int64_t v)
{
	return v < 0 ? -v : v;
}

static int by_flat(const void *a, const void *b)
{
	const struct top_node *x = *(const struct top_node *const *)a;
	const struct top_node *y = *(const struct top_node *const *)b;
	int c;

	if (abs64(x->flat) != abs64(y->flat))
		return abs64(x->flat) > abs64(y->flat) ? -1 : 1;
	c = strcmp(x->name, y->name);
	if (c)
		return c;
	return abs64(x->cum) > abs64(y->cum) ? -1 : abs64(x->cum) < abs64(y->cum);
}

static int by_cum(const void *a, const void *b)
{
	const struct top_node *x = *(const struct top_node *const *)a;
	const struct top_node *y = *(const struct top_node *const *)b;
	int c;

	if (abs64(x->cum) != abs64(y->cum))
		return abs64(x->cum) > abs64(y->cum) ? -1 : 1;
	c = strcmp(x->name, y->name);
	if (c)
		return c;
	return abs64(x->flat) > abs64(y->flat) ? -1 : abs64(x->flat) < abs64(y->flat);
}

/* Nodes with a value, sorted; returns how many. */
static size_t sorted_nodes(struct top *t, struct top_node **out, bool cum)
{
	size_t i, n = 0;

	for (i = 0; i < t->n; i++)
		if (t->nodes[i].kept && (t->nodes[i].flat || t->nodes[i].cum))
			out[n++] = &t->nodes[i];
	qsort(out, n, sizeof(*out), cum ? by_cum : by_flat);
	return n;
}

/* Go's "Jan 2, 2006 at 3:04pm (MST)" in local time, as pprof prints it. */
static void print_time(int64_t nanos)
{
	static const char *const mon[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
					  "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
	time_t secs = (time_t)(nanos / 1000000000);
	struct tm tm;
	int h;

	localtime_r(&secs, &tm);
	h = tm.tm_hour % 12 ? tm.tm_hour % 12 : 12;
	printf("Time: %s %d, %d at %d:%02d%s (%s)\n", mon[tm.tm_mon], tm.tm_mday, tm.tm_year + 1900,
	       h, tm.tm_min, tm.tm_hour < 12 ? "am" : "pm", tm.tm_zone ? tm.tm_zone : "UTC");
}

/* pprof's ProfileLabels: what the profile is, before the table. */
static void print_labels(const struct top *t, struct units_scale sc)
{
	const struct pprof_profile *p = t->p;
	const char *file = p->n_mappings ? pprof_str(p, p->mappings[0].filename) : "";
	const char *unit = pprof_str(p, p->sample_type[t->vi].unit), *slash = strrchr(file, '/');
	char dur[48], tot[48], pct[16] = "";
	int64_t total_ns;
	size_t i;

	if (*file)
		printf("File: %s\n", slash ? slash + 1 : file);
	if (p->n_mappings && *pprof_str(p, p->mappings[0].build_id))
		printf("Build ID: %s\n", pprof_str(p, p->mappings[0].build_id));
	for (i = 0; i < p->n_comments; i++)
		if (pprof_str(p, p->comments[i])[0] != '#')
			printf("%s\n", pprof_str(p, p->comments[i]));
	printf("Type: %s\n", pprof_str(p, p->sample_type[t->vi].type));
	if (p->time_nanos)
		print_time(p->time_nanos);
	if (!p->duration_nanos)
		return;
	units__format(dur, sizeof(dur), p->duration_nanos,
		      units__auto("nanoseconds", p->duration_nanos));
	units__format(tot, sizeof(tot), t->total, sc);
	/* a time-valued total is also shown as a share of the wall time */
	if (!units__nanos(unit, t->total, &total_ns)) {
		pct[0] = '(';
		units__percent(pct + 1, sizeof(pct) - 2, total_ns, p->duration_nanos);
		strcat(pct, ")");
	}
	printf("Duration: %s, Total samples = %s %s\n", dur, tot, pct);
}

static void top_help(FILE *out)
{
	fprintf(
	    out,
	    "usage: edgeprof top [-n N] [--cum] [--sample-index=NAME] [--nodefraction=F] FILE...\n"
	    "\n"
	    "Flat and cumulative cost per function, as `go tool pprof -top` prints it:\n"
	    "flat (the function itself), flat%%, sum%% (running total), cum (with callees), "
	    "cum%%.\n"
	    "Several files are merged first (as `pprof -proto a b ...`).\n"
	    "\n"
	    "  -n, --nodecount N      print at most N functions (default: all)\n"
	    "      --cum              sort by cumulative value\n"
	    "  -i, --sample-index X   sample type name or index (default: the profile's default,\n"
	    "                         else the last type)\n"
	    "      --nodefraction F   hide functions with cum below F of the total (default "
	    "0.005)\n"
	    "  -h, --help             this text\n");
}

struct top_args {
	long nodecount;
	bool cum;
	const char *sample_index;
	double nodefraction;
};

static int parse(int argc, char **argv, struct top_args *a)
{
	static const struct option opts[] = {
	    {"nodecount", required_argument, NULL, 'n'},
	    {"cum", no_argument, NULL, 'c'},
	    {"sample-index", required_argument, NULL, 'i'},
	    {"sample_index", required_argument, NULL, 'i'}, /* pprof spelling */
	    {"nodefraction", required_argument, NULL, 'f'},
	    {NULL, 0, NULL, 0},
	};
	char *end;
	int c;

	*a = (struct top_args){.nodefraction = 0.005};
	while ((c = getopt_long(argc, argv, "n:i:", opts, NULL)) != -1) {
		switch (c) {
		case 'n':
			a->nodecount = strtol(optarg, &end, 10);
			if (*end || a->nodecount < 0)
				return cli_usage_error("top", "-n wants a count, not '%s'", optarg);
			break;
		case 'c':
			a->cum = true;
			break;
		case 'i':
			a->sample_index = optarg;
			break;
		case 'f':
			a->nodefraction = strtod(optarg, &end);
			if (*end || a->nodefraction < 0 || a->nodefraction > 1)
				return cli_usage_error("top", "--nodefraction wants 0..1, not '%s'",
						       optarg);
			break;
		default:
			return CLI_USAGE;
		}
	}
	if (optind >= argc)
		return cli_usage_error("top", "no profile given");
	return CLI_OK;
}

static void print_table(struct top *t, struct top_node **nodes, size_t n, size_t orig,
			size_t dropped, double nodefraction)
{
	struct units_scale sc;
	int64_t min = 0, flat_sum = 0, m;
	char a[48], b[48], pa[16], pb[16], pc[16];
	const char *inl;
	size_t i;

	/* pprof's selectOutputUnit: the smallest non-zero value decides, with the total */
	for (i = 0; i < n; i++) {
		m = abs64(nodes[i]->flat) ? abs64(nodes[i]->flat) : abs64(nodes[i]->cum);
		if (m > 0 && (!min || m < min))
			min = m;
		flat_sum += nodes[i]->flat;
	}
	sc = units__pick(pprof_str(t->p, t->p->sample_type[t->vi].unit), min, t->total);
	print_labels(t, sc);
	units__percent(pa, sizeof(pa), flat_sum, t->total);
	printf("Showing nodes accounting for %s, %s of %s total\n",
	       units__format(a, sizeof(a), flat_sum, sc), pa + strspn(pa, " "),
	       units__format(b, sizeof(b), t->total, sc));
	if (t->total && dropped)
		printf("Dropped %zu node%s (cum <= %s)\n", dropped, dropped > 1 ? "s" : "",
		       units__format(a, sizeof(a),
				     abs64((int64_t)((double)t->total * nodefraction)), sc));
	if (t->total && n && n < orig)
		printf("Showing top %zu nodes out of %zu\n", n, orig);
	printf("%10s %5s%% %5s%% %10s %5s%%\n", "flat", "flat", "sum", "cum", "cum");
	flat_sum = 0;
	for (i = 0; i < n; i++) {
		flat_sum += nodes[i]->flat;
		inl = nodes[i]->inl ? (nodes[i]->noinl ? " (partial-inline)" : " (inline)") : "";
		printf(
		    "%10s %s %s %10s %s  %s%s\n", units__format(a, sizeof(a), nodes[i]->flat, sc),
		    units__percent(pa, sizeof(pa), nodes[i]->flat, t->total),
		    units__percent(pb, sizeof(pb), flat_sum, t->total),
		    units__format(b, sizeof(b), nodes[i]->cum, sc),
		    units__percent(pc, sizeof(pc), nodes[i]->cum, t->total), nodes[i]->name, inl);
	}
}

/* The report: full graph, drop by nodefraction, rebuild; sort; cut to nodecount, rebuild. */
static int report(struct top *t, const struct top_args *a)
{
	const struct stack_frame **frames = malloc(STACKS_MAX_DEPTH * sizeof(*frames));
	struct top_node **sorted = NULL;
	size_t i, n, orig, dropped = 0;
	int64_t cutoff, sum = 0;
	int ret;

	if (!frames)
		return -ENOMEM;
	for (i = 0; i < t->p->n_samples; i++)
		t->total += abs64(t->p->samples[i].values[t->vi]);
	ret = stacks__unique(t->p, t->vi, &t->unique, &t->n_unique);
	if (!ret)
		ret = build(t, frames);
	if (ret)
		goto out;
	for (i = 0; i < t->n; i++)
		sum += t->nodes[i].flat;
	cutoff = abs64((int64_t)((double)sum * a->nodefraction));
	if (cutoff > 0) {
		for (i = 0; i < t->n; i++) {
			if (!t->nodes[i].flat && !t->nodes[i].cum)
				continue; /* pprof never made a node of it */
			if (abs64(t->nodes[i].cum) < cutoff) {
				t->nodes[i].kept = false;
				dropped++;
			}
		}
		if (dropped && (ret = build(t, frames)))
			goto out;
	}
	sorted = malloc((t->n ? t->n : 1) * sizeof(*sorted));
	if (!sorted) {
		ret = -ENOMEM;
		goto out;
	}
	orig = n = sorted_nodes(t, sorted, a->cum);
	if (a->nodecount > 0 && (size_t)a->nodecount < n) {
		for (i = (size_t)a->nodecount; i < n; i++)
			sorted[i]->kept = false;
		ret = build(t, frames);
		if (ret)
			goto out;
		n = sorted_nodes(t, sorted, a->cum);
	}
	inline_labels(t);
	print_table(t, sorted, n, orig, dropped, a->nodefraction);
out:
	free(sorted);
	free(frames);
	return ret;
}

static int top_run(int argc, char **argv)
{
	struct pprof_profile *p = NULL;
	struct top t = {0};
	struct top_args a;
	char err[256] = "";
	int ret;

	if (cli_wants_help(argc, argv)) {
		top_help(stdout);
		return CLI_OK;
	}
	ret = parse(argc, argv, &a);
	if (ret)
		return ret;
	if (cli_load(argv + optind, (size_t)(argc - optind), &p))
		return CLI_FAIL;
	ret = CLI_FAIL;
	t.p = p;
	t.vi = stacks__sample_index(p, a.sample_index, err, sizeof(err));
	if (t.vi < 0) {
		fprintf(stderr, "edgeprof top: %s\n", err);
		goto out;
	}
	t.s = stacks__new(p, err, sizeof(err));
	if (!t.s) {
		fprintf(stderr, "edgeprof top: %s\n", err);
		goto out;
	}
	if (index_grow(&t) || report(&t, &a)) {
		fprintf(stderr, "edgeprof top: out of memory\n");
		goto out;
	}
	ret = fflush(stdout) ? CLI_FAIL : CLI_OK;
out:
	stacks__free(t.s);
	free(t.nodes);
	free(t.index);
	free(t.edges);
	free(t.unique);
	pprof_profile__free(p);
	return ret;
}

CLI_COMMAND(top, "flat and cumulative cost per function (like pprof -top)", top_run, top_help);
