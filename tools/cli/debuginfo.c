// SPDX-License-Identifier: MIT
/*
 * tools/cli/debuginfo.c — `edgeprof debuginfo upload FILE...` and `edgeprof debuginfo ls`:
 * hand a collector the unstripped twins of the stripped binaries that run on devices, so it
 * names their functions in every profile it exports. The build-id is read from the file itself.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "elf/elf.h"
#include "port/file.h"
#include "tools/cli/cli.h"
#include "tools/cli/client.h"

#define DEBUGINFO_MAX_FILE (1024u << 20)

static void debuginfo_help(FILE *out)
{
	fprintf(out,
		"usage: edgeprof debuginfo upload FILE...\n"
		"       edgeprof debuginfo ls\n"
		"connection: --collector https://HOST:PORT --tls-ca F --tls-cert F --tls-key F\n"
		"            (or EDGEPROF_COLLECTOR, EDGEPROF_TLS_CA, _CERT, _KEY; http:// with\n"
		"            --token / EDGEPROF_TOKEN for a plain-HTTP listener). The certificate\n"
		"            is an operator's (edgeprof certs operator): a device's may not read.\n"
		"\n"
		"upload  sends each unstripped ELF file under its GNU build-id; profiles from the\n"
		"        stripped binary with that build-id are then symbolized by the collector.\n"
		"ls      lists the build-ids the collector holds debug files for.\n");
}

static int upload_one(const struct cli_conn *c, const char *path)
{
	struct http_message m = { 0 };
	char id[ELF_BUILD_ID_HEX], target[128];
	void *data;
	size_t len;
	int ret = elf__build_id(path, id, sizeof(id));

	if (ret) {
		fprintf(stderr, "edgeprof debuginfo: %s: %s\n", path,
			ret == -ENOENT ? "no GNU build-id note (link with --build-id)"
				       : ret == -EINVAL ? "not an ELF file" : strerror(-ret));
		return CLI_FAIL;
	}
	ret = port_file_read_all(path, DEBUGINFO_MAX_FILE, &data, &len);
	if (ret) {
		fprintf(stderr, "edgeprof debuginfo: %s: %s\n", path, strerror(-ret));
		return CLI_FAIL;
	}
	snprintf(target, sizeof(target), "/api/0/debuginfo/%s", id);
	ret = cli_request(c, "POST", target, "application/octet-stream", data, len, &m);
	free(data);
	if (ret)
		return CLI_FAIL;
	ret = m.status == 200 ? CLI_OK : cli_answer_error(c, &m);
	if (ret == CLI_OK)
		printf("%s  %s (%zu bytes)\n", id, path, len);
	http_message__reset(&m);
	return ret;
}

static int list(const struct cli_conn *c)
{
	struct http_message m = { 0 };
	int ret = cli_request(c, "GET", "/api/0/debuginfo", NULL, NULL, 0, &m);

	if (ret)
		return CLI_FAIL;
	if (m.status != 200) {
		ret = cli_answer_error(c, &m);
	} else {
		fwrite(m.body, 1, m.body_len, stdout);
		putchar('\n');
		ret = CLI_OK;
	}
	http_message__reset(&m);
	return ret;
}

static int debuginfo_run(int argc, char **argv)
{
	static const struct option opts[] = {
		CLI_CONN_OPTIONS,
		{ NULL, 0, NULL, 0 },
	};
	struct cli_conn c = { .cmd = "debuginfo" };
	int opt, ret = CLI_OK;

	if (cli_wants_help(argc, argv)) {
		debuginfo_help(stdout);
		return CLI_OK;
	}
	cli_conn_from_env(&c);
	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (!cli_conn_option(&c, opt, optarg))
			return CLI_USAGE;
	}
	if (optind >= argc)
		return cli_usage_error("debuginfo", "upload FILE... or ls?");
	if (!c.collector)
		return cli_usage_error("debuginfo", "which collector? --collector https://HOST:PORT "
				       "or EDGEPROF_COLLECTOR");
	if (!strcmp(argv[optind], "ls"))
		return optind + 1 == argc ? list(&c)
					  : cli_usage_error("debuginfo", "ls takes no arguments");
	if (strcmp(argv[optind], "upload") || optind + 1 == argc)
		return cli_usage_error("debuginfo", "upload FILE... or ls?");
	for (int i = optind + 1; i < argc; i++)
		if (upload_one(&c, argv[i]) != CLI_OK)
			ret = CLI_FAIL;
	return ret;
}

CLI_COMMAND(debuginfo, "upload unstripped binaries so a collector can name their functions",
	    debuginfo_run, debuginfo_help);
