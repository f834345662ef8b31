// SPDX-License-Identifier: MIT
/* edgeprof-agent — the device daemon. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "agent/features.h"
#include "port/log.h"

static void usage(FILE *out)
{
	fprintf(out,
		"usage: edgeprof-agent [options]\n"
		"  -V, --version   print version and compiled-in features\n"
		"  -h, --help      this text\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	int c;

	port_log_open("edgeprof-agent", false);
	while ((c = getopt_long(argc, argv, "Vh", opts, NULL)) != -1) {
		switch (c) {
		case 'V':
			features_print(stdout, "edgeprof-agent");
			return 0;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	usage(stderr);
	return 2;
}
