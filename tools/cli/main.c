// SPDX-License-Identifier: MIT
/*
 * tools/cli/main.c — `edgeprof COMMAND ...`: finds the command in the cli_commands section
 * (see cli.h) and runs it.
 */
#include <stdlib.h>
#include <string.h>

#include "tools/cli/cli.h"

extern const struct cli_command __start_cli_commands[];
extern const struct cli_command __stop_cli_commands[];

const struct cli_command *cli_command_find(const char *name)
{
	const struct cli_command *c;

	for (c = __start_cli_commands; c < __stop_cli_commands; c++)
		if (!strcmp(c->name, name))
			return c;
	return NULL;
}

static int by_name(const void *a, const void *b)
{
	const struct cli_command *const *x = a, *const *y = b;

	return strcmp((*x)->name, (*y)->name);
}

/* The section holds the commands in link order; users read them sorted. */
static void usage(FILE *out)
{
	size_t n = (size_t)(__stop_cli_commands - __start_cli_commands), i;
	const struct cli_command *sorted[64];

	if (n > sizeof(sorted) / sizeof(sorted[0]))
		n = sizeof(sorted) / sizeof(sorted[0]);
	for (i = 0; i < n; i++)
		sorted[i] = &__start_cli_commands[i];
	qsort(sorted, n, sizeof(sorted[0]), by_name);

	fprintf(
	    out,
	    "usage: edgeprof COMMAND [OPTIONS] [ARGS]\n\n"
	    "Reads pprof profiles (gzip or raw, from any producer) or folded text ('a;b;c 12'\n"
	    "lines, as flamegraph.pl's stackcollapse scripts write) and prints or draws them.\n\n"
	    "Commands:\n");
	for (i = 0; i < n; i++)
		fprintf(out, "  %-8s %s\n", sorted[i]->name, sorted[i]->summary);
	fprintf(out, "\n'edgeprof COMMAND --help' or 'edgeprof help COMMAND' describes one.\n"
		     "Exit status: 0 ok, 1 failure, 2 usage error.\n");
}

static void help_help(FILE *out)
{
	fprintf(out,
		"usage: edgeprof help [COMMAND]\n\nDescribes COMMAND, or lists the commands.\n");
}

static int help_run(int argc, char **argv)
{
	const struct cli_command *c;

	if (cli_wants_help(argc, argv)) {
		help_help(stdout);
		return CLI_OK;
	}
	if (argc < 2) {
		usage(stdout);
		return CLI_OK;
	}
	c = cli_command_find(argv[1]);
	if (!c)
		return cli_usage_error("help", "no command '%s'", argv[1]);
	c->help(stdout);
	return CLI_OK;
}

CLI_COMMAND(help, "describe a command", help_run, help_help);

int main(int argc, char **argv)
{
	const struct cli_command *c;
	char name[64];
	int ret;

	if (argc < 2) {
		usage(stderr);
		return CLI_USAGE;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		usage(stdout);
		return CLI_OK;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("edgeprof %s\n", EDGEPROF_VERSION);
		return CLI_OK;
	}
	c = cli_command_find(argv[1]);
	if (!c) {
		fprintf(stderr, "edgeprof: no command '%s'\n", argv[1]);
		usage(stderr);
		return CLI_USAGE;
	}
	/* getopt's own messages ("unrecognized option") then name "edgeprof CMD" */
	snprintf(name, sizeof(name), "edgeprof %s", c->name);
	argv[1] = name;
	ret = c->run(argc - 1, argv + 1);
	if (ret == CLI_USAGE && !cli_usage_hinted)
		fprintf(stderr, "Try 'edgeprof %s --help'.\n", c->name);
	return ret;
}
