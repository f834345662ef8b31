// SPDX-License-Identifier: MIT
/* tools/cli/flamegraph.c — `edgeprof flame -o out.svg FILE...`: interactive SVG flame graph. */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cli/cli.h"
#include "pprof/view/flame.h"
#include "pprof/view/units.h"

static void flame_help(FILE *out)
{
	fprintf(out,
		"usage: edgeprof flame -o OUT.svg [-i TYPE] [--title T] [--width PX] FILE...\n"
		"\n"
		"Draws a self-contained interactive SVG flame graph (several files are merged\n"
		"first). Width is value; hover shows name, value and percent; click zooms\n"
		"(Reset Zoom or Escape returns); Search (or Ctrl-F) highlights a regex and\n"
		"prints the share it covers. Colour is by Go package, C++ namespace or binary.\n"
		"Frames narrower than --min-width pixels are merged into '[N small frames]'.\n"
		"\n"
		"  -o, --output OUT       the SVG file ('-' = stdout; required)\n"
		"  -i, --sample-index X   sample type name or index (default: the profile's)\n"
		"      --title T          title (default: the sample type)\n"
		"      --width PX         image width (default 1200)\n"
		"      --min-width PX     merge frames narrower than this (default 0.1)\n"
		"      --max-frames N     draw at most N boxes (default 50000): the minimum width\n"
		"                         doubles until the graph fits\n"
		"  -h, --help             this text\n");
}

int cli_flame_parse(int argc, char **argv, const char *cmd, struct flame_args *a)
{
	static const struct option opts[] = {
	    {"output", required_argument, NULL, 'o'},
	    {"sample-index", required_argument, NULL, 'i'},
	    {"sample_index", required_argument, NULL, 'i'}, /* pprof spelling */
	    {"title", required_argument, NULL, 't'},
	    {"width", required_argument, NULL, 'w'},
	    {"min-width", required_argument, NULL, 'm'},
	    {"max-frames", required_argument, NULL, 'x'},
	    {NULL, 0, NULL, 0},
	};
	char *end;
	double v;
	int c;

	memset(a, 0, sizeof(*a));
	while ((c = getopt_long(argc, argv, "o:i:", opts, NULL)) != -1) {
		switch (c) {
		case 'o':
			a->out = optarg;
			break;
		case 'i':
			a->spec = optarg;
			break;
		case 't':
			a->title = optarg;
			break;
		case 'w':
		case 'm':
		case 'x':
			v = strtod(optarg, &end);
			if (*end || !(v > 0) || v > 1e9)
				return cli_usage_error(cmd, "a positive number, not '%s'", optarg);
			if (c == 'w')
				a->fo.width = (unsigned)v;
			else if (c == 'm')
				a->fo.min_width = v;
			else
				a->fo.max_rects = (size_t)v;
			break;
		default:
			return CLI_USAGE;
		}
	}
	if (!a->out)
		return cli_usage_error(cmd, "-o OUT.svg is required");
	return CLI_OK;
}

/*
 * How many samples were taken: the sum of the "samples" (or first "count") value, not the
 * number of sample records, which after a merge is the number of distinct stacks. Writes
 * nothing when the profile counts no samples (a heap profile, say).
 */
static void flame_count(const struct pprof_profile *p, char *buf, size_t size)
{
	size_t i, vi = p->n_sample_type;
	int64_t n = 0;

	for (i = 0; i < p->n_sample_type; i++) {
		if (strcmp(pprof_str(p, p->sample_type[i].unit), "count"))
			continue;
		if (vi == p->n_sample_type ||
		    !strcmp(pprof_str(p, p->sample_type[i].type), "samples"))
			vi = i;
	}
	buf[0] = '\0';
	if (vi == p->n_sample_type)
		return;
	for (i = 0; i < p->n_samples; i++)
		n += p->samples[i].values[vi];
	snprintf(buf, size, " in %lld %s", (long long)n, pprof_str(p, p->sample_type[vi].type));
}

static int flame_run(int argc, char **argv)
{
	struct pprof_profile *p = NULL;
	struct ftree *t = NULL;
	struct flame_args a;
	char sub[256], tot[48], count[64];
	int vi, ret = CLI_FAIL;
	FILE *out;

	if (cli_wants_help(argc, argv)) {
		flame_help(stdout);
		return CLI_OK;
	}
	ret = cli_flame_parse(argc, argv, "flame", &a);
	if (ret)
		return ret;
	if (optind >= argc)
		return cli_usage_error("flame", "no profile given");
	ret = CLI_FAIL;
	if (cli_load(argv + optind, (size_t)(argc - optind), &p))
		return CLI_FAIL;
	t = ftree__new(0);
	if (!t)
		goto out;
	vi = cli_profile_tree(p, a.spec, t, 0, "flame");
	if (vi < 0)
		goto out;
	a.fo.unit = pprof_str(p, p->sample_type[vi].unit);
	a.fo.title = a.title ? a.title : pprof_str(p, p->sample_type[vi].type);
	units__format(tot, sizeof(tot), t->nodes[0].total[0],
		      units__auto(a.fo.unit, t->nodes[0].total[0]));
	flame_count(p, count, sizeof(count));
	snprintf(sub, sizeof(sub), "%s: total %s%s%s", a.fo.title, tot, count,
		 argc - optind > 1 ? " (merged)" : "");
	a.fo.subtitle = sub;
	out = cli_open_output(a.out);
	if (!out)
		goto out;
	ret = cli_flame_write(t, &a, out) ? CLI_FAIL : CLI_OK;
out:
	ftree__free(t);
	pprof_profile__free(p);
	return ret;
}

int cli_flame_write(const struct ftree *t, const struct flame_args *a, FILE *out)
{
	struct flame_result res = {0};
	int ret = flame__svg(t, &a->fo, out, &res);

	if (!ret && res.elided)
		fprintf(stderr,
			"edgeprof: %s: %zu subtrees not drawn: deeper than --max-frames allows\n",
			a->out, res.elided);
	else if (!ret && a->fo.min_width && res.min_width > a->fo.min_width)
		fprintf(stderr,
			"edgeprof: %s: frames under %.2f px merged to stay under --max-frames\n",
			a->out, res.min_width);

	if (ret)
		fprintf(stderr, "edgeprof: %s: drawing failed: %s\n", a->out, strerror(-ret));
	return cli_close_output(out, a->out) ? -EIO : ret;
}

CLI_COMMAND(flame, "interactive SVG flame graph", flame_run, flame_help);
