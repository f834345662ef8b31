// SPDX-License-Identifier: MIT
/*
 * tools/cli/diff.c — `edgeprof diff BASE NEW -o diff.svg`: a differential flame graph. Boxes are
 * NEW's stacks (width = NEW's value); colour is the change of each frame's share of its
 * profile's total (normalised, so a longer or busier NEW does not paint everything red).
 */
#include <getopt.h>
#include <string.h>

#include "tools/cli/cli.h"
#include "pprof/view/units.h"

static void diff_help(FILE *out)
{
	fprintf(out,
		"usage: edgeprof diff BASE NEW -o OUT.svg [-i TYPE] [--title T] [--width PX]\n"
		"\n"
		"Differential flame graph: the frames of NEW, sized by NEW's values, coloured by\n"
		"how each frame's share of the total changed from BASE to NEW: red grew, blue\n"
		"shrank, white unchanged; the deeper the colour, the larger the change. Shares\n"
		"are normalised to each profile's total. Hover shows both values and the change.\n"
		"Stacks only in BASE have no width in NEW and are not drawn; swap the arguments\n"
		"to see what disappeared.\n"
		"\n"
		"  -o, --output OUT       the SVG file ('-' = stdout; required)\n"
		"  -i, --sample-index X   sample type name or index (default: the profile's)\n"
		"      --title T          title (default: \"TYPE: BASE -> NEW\")\n"
		"      --width PX, --min-width PX, --max-frames N   as for flame\n"
		"  -h, --help             this text\n");
}

/* BASE's value in subtrees that NEW lacks: the highest nodes with no NEW value. */
static int64_t gone_value(const struct ftree *t)
{
	int64_t gone = 0;
	size_t i;

	for (i = 1; i < t->n; i++)
		if (!t->nodes[i].total[1] &&
		    (t->nodes[i].parent == 0 || t->nodes[t->nodes[i].parent].total[1]))
			gone += t->nodes[i].total[0];
	return gone;
}

static int diff_run(int argc, char **argv)
{
	struct pprof_profile *base = NULL, *cur = NULL;
	struct ftree *t = NULL;
	struct flame_args a;
	char title[512], sub[256], b[48], n[48];
	int64_t gone;
	int vb, vn, ret;
	FILE *out;

	if (cli_wants_help(argc, argv)) {
		diff_help(stdout);
		return CLI_OK;
	}
	ret = cli_flame_parse(argc, argv, "diff", &a);
	if (ret)
		return ret;
	if (argc - optind != 2)
		return cli_usage_error("diff", "wants BASE and NEW, got %d profiles",
				       argc - optind);
	ret = CLI_FAIL;
	if (cli_load_one(argv[optind], &base) || cli_load_one(argv[optind + 1], &cur))
		goto out;
	t = ftree__new(0);
	if (!t)
		goto out;
	vb = cli_profile_tree(base, a.spec, t, 0, "diff");
	if (vb < 0)
		goto out;
	vn = cli_profile_tree(cur, a.spec, t, 1, "diff");
	if (vn < 0)
		goto out;
	if (strcmp(pprof_str(base, base->sample_type[vb].type),
		   pprof_str(cur, cur->sample_type[vn].type)) ||
	    strcmp(pprof_str(base, base->sample_type[vb].unit),
		   pprof_str(cur, cur->sample_type[vn].unit))) {
		fprintf(stderr, "edgeprof diff: BASE measures %s/%s, NEW %s/%s: not comparable\n",
			pprof_str(base, base->sample_type[vb].type),
			pprof_str(base, base->sample_type[vb].unit),
			pprof_str(cur, cur->sample_type[vn].type),
			pprof_str(cur, cur->sample_type[vn].unit));
		goto out;
	}
	a.fo.unit = pprof_str(cur, cur->sample_type[vn].unit);
	a.fo.diff = true;
	snprintf(title, sizeof(title), "%s: %s -> %s", pprof_str(cur, cur->sample_type[vn].type),
		 argv[optind], argv[optind + 1]);
	a.fo.title = a.title ? a.title : title;
	units__format(b, sizeof(b), t->nodes[0].total[0],
		      units__auto(a.fo.unit, t->nodes[0].total[0]));
	units__format(n, sizeof(n), t->nodes[0].total[1],
		      units__auto(a.fo.unit, t->nodes[0].total[1]));
	gone = gone_value(t);
	snprintf(sub, sizeof(sub),
		 "base total %s, new total %s; red grew, blue shrank (share of total); "
		 "%.2f%% of base is in stacks NEW lacks (not drawn)",
		 b, n, t->nodes[0].total[0] ? 100.0 * gone / t->nodes[0].total[0] : 0.0);
	a.fo.subtitle = sub;
	out = cli_open_output(a.out);
	if (out && !cli_flame_write(t, &a, out))
		ret = CLI_OK;
out:
	ftree__free(t);
	pprof_profile__free(base);
	pprof_profile__free(cur);
	return ret;
}

CLI_COMMAND(diff, "differential flame graph of two profiles (red grew, blue shrank)", diff_run,
	    diff_help);
