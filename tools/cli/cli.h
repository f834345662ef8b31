/* SPDX-License-Identifier: MIT */
/*
 * tools/cli/cli.h — the `edgeprof` command line: how subcommands plug in, and the helpers they
 * share.
 *
 * A subcommand is one .c file that defines its run/help functions and registers itself with
 *
 *	CLI_COMMAND(top, "flat and cumulative cost per function", top_run, top_help);
 *
 * The macro places a struct cli_command in the "cli_commands" ELF section. The linker provides
 * __start_cli_commands/__stop_cli_commands for any section whose name is a C identifier, and
 * `used, retain` keep the entry (and with it the command's code) through -Wl,--gc-sections and
 * static links, so adding a command means adding a file and, in the area's own Build*.mk,
 *
 *	cli-y      += store/cli_query.o
 *	cli-ldlibs += -lmbedtls -lmbedx509 -lmbedcrypto
 *
 * and editing nothing else (tools/Build.mk links $(cli-y) $(pprof-y) $(port-y) into edgeprof).
 * main.c lists the commands sorted by name. Reusable pieces without CLI I/O: stacks.h (samples
 * as named frames), tree.h (folded-stack tree), flame.h (layout + SVG), units.h (pprof's units);
 * their objects are $(cli-lib-y).
 *
 * Contract for run(argc, argv): argv[0] is the command name, options follow (getopt_long works:
 * optind starts at 1). Return CLI_OK (0), CLI_FAIL (1: the work failed, message printed) or
 * CLI_USAGE (2: bad arguments; print a one-line hint to stderr). help(out) prints the usage text;
 * main.c calls it for `edgeprof help CMD` and `edgeprof CMD --help` is the command's job
 * (cli_wants_help() makes that one line).
 */
#ifndef EDGEPROF_TOOLS_CLI_H
#define EDGEPROF_TOOLS_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "pprof/pprof.h"
#include "pprof/view/flame.h"

enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2 };

struct cli_command {
	const char *name;
	const char *summary;
	int (*run)(int argc, char **argv);
	void (*help)(FILE *out);
};

#define CLI_COMMAND(id, summary_, run_, help_)                                                     \
	static const struct cli_command cli_command_##id                                           \
	    __attribute__((used, retain, section("cli_commands"), aligned(sizeof(void *)))) = {    \
		.name = #id, .summary = (summary_), .run = (run_), .help = (help_)}

/* Finds a registered command by name; NULL when there is none. */
const struct cli_command *cli_command_find(const char *name);

/* True when argv holds -h or --help before a "--": the caller prints help and returns CLI_OK. */
bool cli_wants_help(int argc, char **argv);

/* Prints "edgeprof CMD: msg" to stderr plus "Try 'edgeprof CMD --help'." and returns CLI_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/*
 * Whether cli_usage_error() printed its hint: main.c adds the same line when a command returns
 * CLI_USAGE without it (getopt printed "edgeprof CMD: unrecognized option '--bogus'").
 */
extern bool cli_usage_hinted;

/* Largest profile file the CLI reads (compressed bytes). */
#define CLI_MAX_FILE (256u << 20)

/*
 * Reads and validates one profile file ("-" = stdin). On error prints "edgeprof: FILE: why"
 * and returns -errno.
 */
int cli_load_one(const char *path, struct pprof_profile **out);

/*
 * Reads n files and merges them with pprof's semantics when n > 1 (one file is returned as
 * read). Errors are printed as above; returns 0 or -errno.
 */
int cli_load(char *const *paths, size_t n, struct pprof_profile **out);

/* Writes p gzipped to path ("-" = stdout) atomically; prints errors; returns 0 or -errno. */
int cli_write_profile(const struct pprof_profile *p, const char *path);

/* Opens path for writing ("-" = stdout); prints errors. cli_close_output() reports write errors. */
FILE *cli_open_output(const char *path);
int cli_close_output(FILE *f, const char *path);

/*
 * Adds p's samples (sample type spec, see stacks__sample_index()) to slot of t and sorts t.
 * Prints what went wrong or was cut, prefixed with cmd. Returns the value index or -errno.
 */
int cli_profile_tree(const struct pprof_profile *p, const char *spec, struct ftree *t, int slot,
		     const char *cmd);

/* Options of `flame` and `diff` (flamegraph.c). */
struct flame_args {
	const char *out, *spec, *title;
	struct flame_opts fo;
};
int cli_flame_parse(int argc, char **argv, const char *cmd, struct flame_args *a);
/* Draws t into out (from cli_open_output()) and closes it; prints errors; 0 or -errno. */
int cli_flame_write(const struct ftree *t, const struct flame_args *a, FILE *out);

#endif /* EDGEPROF_TOOLS_CLI_H */
