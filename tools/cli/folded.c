// SPDX-License-Identifier: MIT
/* tools/cli/folded.c — `edgeprof folded FILE...`: "root;...;leaf value" lines. */
#include <getopt.h>
#include <inttypes.h>

#include "tools/cli/cli.h"
#include "pprof/view/stacks.h"
#include "pprof/view/tree.h"

static void folded_help(FILE *out)
{
	fprintf(out,
		"usage: edgeprof folded [-i TYPE] [-o OUT] FILE...\n"
		"\n"
		"Prints one line per distinct stack, root first, frames joined by ';', then the\n"
		"value: the input of flamegraph.pl, speedscope and inferno. Several files are\n"
		"merged first. Inlined calls are frames of their own; unsymbolized frames print\n"
		"as 0xADDR (mapping basename); ';' inside a name prints as ':'.\n"
		"\n"
		"  -i, --sample-index X   sample type name or index (default: the profile's)\n"
		"  -o, --output OUT       write there instead of stdout\n"
		"  -h, --help             this text\n");
}

static int folded_run(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"sample-index", required_argument, NULL, 'i'},
	    {"sample_index", required_argument, NULL, 'i'}, /* pprof spelling */
	    {"output", required_argument, NULL, 'o'},
	    {NULL, 0, NULL, 0},
	};
	const char *spec = NULL, *path = "-";
	struct pprof_profile *p = NULL;
	struct ftree *t = NULL;
	int c, ret = CLI_FAIL;
	FILE *out;

	if (cli_wants_help(argc, argv)) {
		folded_help(stdout);
		return CLI_OK;
	}
	while ((c = getopt_long(argc, argv, "i:o:", opts, NULL)) != -1) {
		if (c == 'i')
			spec = optarg;
		else if (c == 'o')
			path = optarg;
		else
			return CLI_USAGE;
	}
	if (optind >= argc)
		return cli_usage_error("folded", "no profile given");
	if (cli_load(argv + optind, (size_t)(argc - optind), &p))
		return CLI_FAIL;
	t = ftree__new(0);
	if (!t || cli_profile_tree(p, spec, t, 0, "folded") < 0)
		goto out;
	out = cli_open_output(path);
	if (!out)
		goto out;
	ftree__folded(t, 0, out);
	if (!cli_close_output(out, path))
		ret = CLI_OK;
out:
	ftree__free(t);
	pprof_profile__free(p);
	return ret;
}

CLI_COMMAND(folded, "one 'a;b;c value' line per stack (for flame graph tools)", folded_run,
	    folded_help);
