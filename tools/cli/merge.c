// SPDX-License-Identifier: MIT
/* tools/cli/merge.c — `edgeprof merge -o OUT FILE...`: pprof's merge, written gzipped. */
#include <getopt.h>

#include "tools/cli/cli.h"

static void merge_help(FILE *out)
{
	fprintf(out,
		"usage: edgeprof merge -o OUT FILE...\n"
		"\n"
		"Merges profiles as `pprof -proto a b ...` does: sample types shared by all\n"
		"inputs, identical stacks with identical labels summed, mappings, locations and\n"
		"functions unified. OUT is written gzipped and atomically ('-' = stdout).\n"
		"\n"
		"  -o, --output OUT   where to write the merged profile (required)\n"
		"  -h, --help         this text\n");
}

static int merge_run(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"output", required_argument, NULL, 'o'},
	    {NULL, 0, NULL, 0},
	};
	struct pprof_profile *p;
	const char *out = NULL;
	int c, ret;

	if (cli_wants_help(argc, argv)) {
		merge_help(stdout);
		return CLI_OK;
	}
	while ((c = getopt_long(argc, argv, "o:", opts, NULL)) != -1) {
		if (c != 'o')
			return CLI_USAGE;
		out = optarg;
	}
	if (!out)
		return cli_usage_error("merge", "-o OUT is required");
	if (optind >= argc)
		return cli_usage_error("merge", "no profile given");
	if (cli_load(argv + optind, (size_t)(argc - optind), &p))
		return CLI_FAIL;
	ret = cli_write_profile(p, out);
	pprof_profile__free(p);
	return ret ? CLI_FAIL : CLI_OK;
}

CLI_COMMAND(merge, "merge profiles into one (like pprof -proto)", merge_run, merge_help);
