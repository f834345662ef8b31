// SPDX-License-Identifier: MIT
/*
 * tools/cli/query.c — `edgeprof query` and `edgeprof ls`: pull a merged fleet profile, or the
 * list of stored profiles, from a collector over mutual TLS (or plain HTTP with a token).
 *
 * Connection settings come from flags or the environment, so an engineer sets them once:
 *   --collector URL   EDGEPROF_COLLECTOR  (https://HOST:PORT or http://HOST:PORT)
 *   --tls-ca F        EDGEPROF_TLS_CA
 *   --tls-cert F      EDGEPROF_TLS_CERT
 *   --tls-key F       EDGEPROF_TLS_KEY
 *   --token T         EDGEPROF_TOKEN      (plain-HTTP listener only)
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "port/clock.h"
#include "port/file.h"
#include "port/http.h"
#include "port/net.h"
#include "port/tls.h"
#include "tools/cli/cli.h"
#include "tools/cli/client.h"


struct query_args {
	struct cli_conn conn;
	const char *selector, *from, *to, *type, *out, *limit;
	bool json;
};

/* GET target; 0 with the answer in m, or -errno (printed). */
static int client_get(const struct query_args *a, const char *target, struct http_message *m)
{
	return cli_request(&a->conn, "GET", target, NULL, NULL, 0, m);
}

static int answer_error(const struct query_args *a, const struct http_message *m)
{
	return cli_answer_error(&a->conn, m);
}

static int build_target(const struct query_args *a, const char *path, char *t, size_t len)
{
	snprintf(t, len, "%s", path);
	if (cli_add_param(t, len, "query", a->selector) || cli_add_param(t, len, "from", a->from) ||
	    cli_add_param(t, len, "to", a->to) || cli_add_param(t, len, "type", a->type) ||
	    cli_add_param(t, len, "limit", a->limit)) {
		fprintf(stderr, "edgeprof %s: selector too long\n", a->conn.cmd);
		return -ENAMETOOLONG;
	}
	return 0;
}

static int query_merge(const struct query_args *a)
{
	struct http_message *m = calloc(1, sizeof(*m));
	char target[12000];
	int ret = CLI_FAIL;

	if (!m || build_target(a, "/api/0/profiles/merge", target, sizeof(target)) ||
	    client_get(a, target, m))
		goto out;
	if (m->status == 204) {
		fprintf(stderr, "edgeprof query: no profiles match %s between %s and %s\n",
			a->selector ? a->selector : "{}", a->from, a->to ? a->to : "now");
		goto out;
	}
	if (m->status != 200) {
		ret = answer_error(a, m);
		goto out;
	}
	if (!strcmp(a->out, "-")) {
		ret = port_write_full(STDOUT_FILENO, m->body, m->body_len) ? CLI_FAIL : CLI_OK;
	} else {
		int err = port_file_write_atomic(a->out, m->body, m->body_len, 0644);

		if (err)
			fprintf(stderr, "edgeprof query: %s: %s\n", a->out, strerror(-err));
		else
			fprintf(stderr, "wrote %s (%zu bytes, %s profiles merged)\n", a->out,
				m->body_len, http_header(m, "x-edgeprof-profiles") ?: "?");
		ret = err ? CLI_FAIL : CLI_OK;
	}
out:
	if (m)
		http_message__reset(m);
	free(m);
	return ret;
}

/* The string value of "key":"..." inside [p, end), unescaped minimally into out. */
static void json_get(const char *p, const char *end, const char *key, char *out, size_t len)
{
	char pat[64];
	const char *v;
	size_t n = 0;

	snprintf(pat, sizeof(pat), "\"%s\":", key);
	out[0] = '\0';
	v = memmem(p, (size_t)(end - p), pat, strlen(pat));
	if (!v)
		return;
	v += strlen(pat);
	if (*v != '"') { /* a number or an array: copy as is */
		while (v < end && *v != ',' && *v != '}' && n + 1 < len)
			out[n++] = *v++;
		out[n] = '\0';
		return;
	}
	for (v++; v < end && *v != '"' && n + 1 < len; v++) {
		if (*v == '\\' && v + 1 < end)
			v++;
		out[n++] = *v;
	}
	out[n] = '\0';
}

/* The labels array as k=v,k=v. */
static void json_labels(const char *p, const char *end, char *out, size_t len)
{
	const char *l = memmem(p, (size_t)(end - p), "\"labels\":[", 10);
	const char *close = l ? memchr(l, ']', (size_t)(end - l)) : NULL;
	size_t n = 0;

	out[0] = '\0';
	for (const char *q = l; q && q < close;) {
		char k[256], v[256];
		const char *obj_end = memchr(q + 1, '}', (size_t)(close - q));

		q = memmem(q + 1, (size_t)(close - q - 1), "{\"key\"", 6);
		if (!q || !obj_end)
			break;
		obj_end = memchr(q, '}', (size_t)(close - q));
		json_get(q, obj_end, "key", k, sizeof(k));
		json_get(q, obj_end, "value", v, sizeof(v));
		n += (size_t)snprintf(out + n, n < len ? len - n : 0, "%s%s=%s", n ? "," : "", k,
				      v);
		if (n >= len)
			break;
		q = obj_end;
	}
}

static int query_ls(const struct query_args *a)
{
	struct http_message *m = calloc(1, sizeof(*m));
	char target[12000];
	int ret = CLI_FAIL;
	const char *p, *end;

	if (!m || build_target(a, "/api/0/profiles", target, sizeof(target)) ||
	    client_get(a, target, m))
		goto out;
	if (m->status != 200) {
		ret = answer_error(a, m);
		goto out;
	}
	ret = CLI_OK;
	if (a->json) {
		fwrite(m->body, 1, m->body_len, stdout);
		goto out;
	}
	printf("%-10s %-24s %-20s %-8s %-16s %8s  %s\n", "ID", "TIME", "SERVICE", "TYPE",
	       "DEVICE", "BYTES", "LABELS");
	p = (const char *)m->body;
	end = p + m->body_len;
	while ((p = memmem(p, (size_t)(end - p), "{\"id\":", 6))) {
		const char *next = memmem(p + 1, (size_t)(end - p - 1), "{\"id\":", 6);
		char id[32], time[40], service[256], type[32], device[256], size[32], labels[1024];

		if (!next)
			next = end;
		json_get(p, next, "id", id, sizeof(id));
		json_get(p, next, "created_at", time, sizeof(time));
		json_get(p, next, "service", service, sizeof(service));
		json_get(p, next, "type", type, sizeof(type));
		json_get(p, next, "device", device, sizeof(device));
		json_get(p, next, "size", size, sizeof(size));
		json_labels(p, next, labels, sizeof(labels));
		printf("%-10s %-24s %-20s %-8s %-16s %8s  %s\n", id, time, service, type, device,
		       size, labels);
		p = next;
	}
out:
	if (m)
		http_message__reset(m);
	free(m);
	return ret;
}

static void query_help(FILE *out)
{
	fprintf(out,
		"usage: edgeprof query [SELECTOR] [--from T] [--to T] [--type T] [-o OUT.pb.gz]\n"
		"       edgeprof ls [SELECTOR] [--from T] [--to T] [--type T] [--limit N]\n"
		"                   [--json]\n"
		"connection: --collector https://HOST:PORT --tls-ca F --tls-cert F --tls-key F\n"
		"            (or EDGEPROF_COLLECTOR, EDGEPROF_TLS_CA, _CERT, _KEY; http:// with\n"
		"            --token / EDGEPROF_TOKEN for a plain-HTTP listener). The certificate\n"
		"            is an operator's (edgeprof certs operator): a device's may not read.\n"
		"\n"
		"query  merges every stored profile that matches into one pprof (default OUT\n"
		"       profile.pb.gz, '-' = stdout): open it with go tool pprof or edgeprof top.\n"
		"ls     lists the stored profiles that match, newest first.\n"
		"\n"
		"SELECTOR  service{label=\"v\", other!=\"x\", re=~\"eu-.*\", nre!~\"t.*\"};\n"
		"          the label device is the device's certificate CN. Default: everything.\n"
		"T         2006-01-02T15:04:05, unix seconds, or now-1h / now-15m / now-7d.\n"
		"          Default: --from now-1h --to now.\n");
}

static int query_parse(int argc, char **argv, struct query_args *a)
{
	static const struct option opts[] = {
		CLI_CONN_OPTIONS,
		{ "from", required_argument, NULL, 'f' },
		{ "to", required_argument, NULL, 't' },
		{ "type", required_argument, NULL, 'y' },
		{ "limit", required_argument, NULL, 'n' },
		{ "output", required_argument, NULL, 'o' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	cli_conn_from_env(&a->conn);
	a->from = "now-1h";
	a->out = "profile.pb.gz";
	while ((c = getopt_long(argc, argv, "o:", opts, NULL)) != -1) {
		if (cli_conn_option(&a->conn, c, optarg))
			continue;
		switch (c) {
		case 'f': a->from = optarg; break;
		case 't': a->to = optarg; break;
		case 'y': a->type = optarg; break;
		case 'n': a->limit = optarg; break;
		case 'o': a->out = optarg; break;
		case 'j': a->json = true; break;
		default: return CLI_USAGE;
		}
	}
	if (optind < argc)
		a->selector = argv[optind++];
	if (optind < argc)
		return cli_usage_error(a->conn.cmd, "one selector at most (quote it)");
	if (!a->conn.collector)
		return cli_usage_error(a->conn.cmd, "which collector? --collector https://HOST:PORT "
				       "or EDGEPROF_COLLECTOR");
	return CLI_OK;
}

static int query_run(int argc, char **argv)
{
	struct query_args a = { .conn.cmd = "query" };
	int ret;

	if (cli_wants_help(argc, argv)) {
		query_help(stdout);
		return CLI_OK;
	}
	ret = query_parse(argc, argv, &a);
	return ret ? ret : query_merge(&a);
}

static int ls_run(int argc, char **argv)
{
	struct query_args a = { .conn.cmd = "ls" };
	int ret;

	if (cli_wants_help(argc, argv)) {
		query_help(stdout);
		return CLI_OK;
	}
	ret = query_parse(argc, argv, &a);
	return ret ? ret : query_ls(&a);
}

CLI_COMMAND(query, "pull a merged profile from a collector (selector, time range)", query_run,
	    query_help);
CLI_COMMAND(ls, "list the profiles a collector stores", ls_run, query_help);
