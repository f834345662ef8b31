// SPDX-License-Identifier: MIT
/*
 * tools/cli/certs.c — `edgeprof certs`: a private CA, the collector's server certificate and one
 * client certificate per device, written with mbedtls (no OpenSSL on the build host or device).
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "port/tls.h"
#include "tools/cli/cli.h"

struct certs_args {
	const char *dir, *id;
	const char *server_name, *server_ip;
	int days;
	int64_t not_before, not_after;
	enum tls_cert_kind kind;
	bool force;
	bool server_given; /* device: --server-name/--server-ip, a pull-mode certificate */
};

static void certs_help(FILE *out)
{
	fprintf(out,
		"usage: edgeprof certs init DIR [--server-name NAME] [--server-ip IP] [--days N]\n"
		"                            [--force]\n"
		"       edgeprof certs device DIR ID [--days N] [--server-name NAME] [--server-ip IP]\n"
		"       edgeprof certs operator DIR NAME [--days N]\n"
		"\n"
		"init    makes DIR/ca.crt ca.key (the fleet's private CA) and DIR/server.crt\n"
		"        server.key for the collector, valid for NAME (default localhost) and IP\n"
		"        (default 127.0.0.1). Refuses to replace an existing CA without --force.\n"
		"device  makes DIR/ID.crt ID.key signed by DIR/ca.key, with CN = ID: the\n"
		"        collector labels every profile from this certificate with device=ID.\n"
		"        A device certificate may upload, not read what the fleet stored.\n"
		"        With --server-name or --server-ip it may also serve the agent's pull mode\n"
		"        (--pull-listen) under that name or address to operators.\n"
		"operator makes DIR/NAME.crt NAME.key with CN = NAME and OU = operator: for\n"
		"        people and tools that read (edgeprof query, ls, the web UI over mTLS).\n"
		"\n"
		"Keys are EC P-256, written mode 0600; certificates last --days (default 825).\n"
		"Keep ca.key off the devices: copy only ca.crt, ID.crt and ID.key to device ID.\n");
}

static int certs_path(char *buf, size_t len, const char *dir, const char *name, const char *ext)
{
	int n = snprintf(buf, len, "%s/%s%s", dir, name, ext);

	return (n < 0 || (size_t)n >= len) ? -ENAMETOOLONG : 0;
}

static int certs_make(const struct tls_cert_req *req, const char *dir, const char *name,
		      bool signed_by_ca)
{
	char crt[4096], key[4096], ca_crt[4096], ca_key[4096], err[256] = "";
	int ret;

	if (certs_path(crt, sizeof(crt), dir, name, ".crt") ||
	    certs_path(key, sizeof(key), dir, name, ".key") ||
	    certs_path(ca_crt, sizeof(ca_crt), dir, "ca", ".crt") ||
	    certs_path(ca_key, sizeof(ca_key), dir, "ca", ".key")) {
		fprintf(stderr, "edgeprof certs: path too long\n");
		return CLI_FAIL;
	}
	ret = tls_cert_make(req, signed_by_ca ? ca_crt : NULL, signed_by_ca ? ca_key : NULL, crt,
			    key, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "edgeprof certs: %s: %s\n", crt, err[0] ? err : strerror(-ret));
		return CLI_FAIL;
	}
	printf("wrote %s and %s (CN=%s)\n", crt, key, req->cn);
	return CLI_OK;
}

static int certs_init(const struct certs_args *a)
{
	struct tls_cert_req ca = { .kind = TLS_CERT_CA, .cn = "edgeprof CA", .days = a->days };
	struct tls_cert_req srv = {
		.kind = TLS_CERT_SERVER,
		.cn = a->server_name,
		.dns_name = a->server_name,
		.ip = *a->server_ip ? a->server_ip : NULL,
		.days = a->days,
	};
	char ca_key[4096];

	if (mkdir(a->dir, 0755) && errno != EEXIST) {
		fprintf(stderr, "edgeprof certs: %s: %s\n", a->dir, strerror(errno));
		return CLI_FAIL;
	}
	certs_path(ca_key, sizeof(ca_key), a->dir, "ca", ".key");
	if (!a->force && !access(ca_key, F_OK)) {
		fprintf(stderr,
			"edgeprof certs: %s exists: a new CA would orphan every device certificate "
			"it signed (use --force to replace it)\n", ca_key);
		return CLI_FAIL;
	}
	if (certs_make(&ca, a->dir, "ca", false))
		return CLI_FAIL;
	return certs_make(&srv, a->dir, "server", true);
}

static int certs_device(const struct certs_args *a)
{
	struct tls_cert_req req = {
		.kind = a->kind,
		.cn = a->id,
		.days = a->days,
		.not_before = a->not_before,
		.not_after = a->not_after,
	};

	if (a->kind == TLS_CERT_CLIENT && a->server_given) {
		req.kind = TLS_CERT_DEVICE_PULL;
		req.dns_name = a->server_name;
		req.ip = *a->server_ip ? a->server_ip : NULL;
	}

	if (!*a->id || strchr(a->id, '/') || !strcmp(a->id, "ca") || !strcmp(a->id, "server")) {
		fprintf(stderr, "edgeprof certs: '%s' cannot be a device id\n", a->id);
		return CLI_USAGE;
	}
	return certs_make(&req, a->dir, a->id, true);
}

static int certs_parse(int argc, char **argv, struct certs_args *a)
{
	static const struct option opts[] = {
		{ "server-name", required_argument, NULL, 'n' },
		{ "server-ip", required_argument, NULL, 'i' },
		{ "days", required_argument, NULL, 'd' },
		{ "force", no_argument, NULL, 'f' },
		/* hidden, for tests: an expired certificate, a certificate TLS must refuse */
		{ "not-before", required_argument, NULL, 'B' },
		{ "not-after", required_argument, NULL, 'A' },
		{ "key-usage", required_argument, NULL, 'U' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'n': a->server_name = optarg; a->server_given = true; break;
		case 'i': a->server_ip = optarg; a->server_given = true; break;
		case 'f': a->force = true; break;
		case 'd':
			a->days = atoi(optarg);
			if (a->days <= 0 || a->days > 36500)
				return cli_usage_error("certs", "--days must be 1..36500");
			break;
		case 'B': a->not_before = strtoll(optarg, NULL, 10); break;
		case 'A': a->not_after = strtoll(optarg, NULL, 10); break;
		case 'U':
			if (!strcmp(optarg, "client"))
				a->kind = TLS_CERT_CLIENT;
			else if (!strcmp(optarg, "bad"))
				a->kind = TLS_CERT_BAD_USAGE;
			else
				return cli_usage_error("certs", "--key-usage is client or bad");
			break;
		default:
			return CLI_USAGE;
		}
	}
	return CLI_OK;
}

static int certs_run(int argc, char **argv)
{
	struct certs_args a = {
		.server_name = "localhost",
		.server_ip = "127.0.0.1",
		.kind = TLS_CERT_CLIENT,
	};
	const char *verb;
	int ret;

	if (cli_wants_help(argc, argv)) {
		certs_help(stdout);
		return CLI_OK;
	}
	if (argc < 3)
		return cli_usage_error("certs", "expected 'init DIR', 'device DIR ID' or "
				       "'operator DIR NAME'");
	verb = argv[1];
	optind = 2;
	ret = certs_parse(argc, argv, &a);
	if (ret)
		return ret;
	if (!strcmp(verb, "init") && optind == argc - 1) {
		a.dir = argv[optind];
		return certs_init(&a);
	}
	if ((!strcmp(verb, "device") || !strcmp(verb, "operator")) && optind == argc - 2) {
		a.dir = argv[optind];
		a.id = argv[optind + 1];
		if (!strcmp(verb, "operator"))
			a.kind = TLS_CERT_OPERATOR;
		return certs_device(&a);
	}
	return cli_usage_error("certs", "expected 'init DIR', 'device DIR ID' or "
			       "'operator DIR NAME'");
}

CLI_COMMAND(certs, "make a CA, the collector's certificate and device certificates", certs_run,
	    certs_help);
