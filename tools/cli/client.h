/* SPDX-License-Identifier: MIT */
/*
 * tools/cli/client.h — the CLI's connection to a collector: mutual TLS (https://) or the
 * plain-HTTP listener with a token (http://), one request per connection.
 *
 * Settings come from flags or the environment, so an engineer sets them once:
 *   --collector URL   EDGEPROF_COLLECTOR  (https://HOST:PORT or http://HOST:PORT)
 *   --tls-ca F        EDGEPROF_TLS_CA
 *   --tls-cert F      EDGEPROF_TLS_CERT
 *   --tls-key F       EDGEPROF_TLS_KEY
 *   --token T         EDGEPROF_TOKEN      (plain-HTTP listener only)
 */
#ifndef EDGEPROF_TOOLS_CLIENT_H
#define EDGEPROF_TOOLS_CLIENT_H

#include <stdbool.h>
#include <stddef.h>

#include "port/http.h"

#define CLI_CLIENT_TIMEOUT_S  120
#define CLI_CLIENT_MAX_ANSWER (512u << 20)

struct cli_conn {
	const char *cmd; /* for messages: "edgeprof CMD: ..." */
	const char *collector, *ca, *cert, *key, *token;
};

/* Fills the connection settings from the environment (flags override them afterwards). */
void cli_conn_from_env(struct cli_conn *c);

/* The connection flags, for a command's getopt_long table (their values are 'c' 'A' 'C' 'K' 'T'). */
#define CLI_CONN_OPTIONS                                         \
	{ "collector", required_argument, NULL, 'c' },           \
	{ "tls-ca", required_argument, NULL, 'A' },              \
	{ "tls-cert", required_argument, NULL, 'C' },            \
	{ "tls-key", required_argument, NULL, 'K' },             \
	{ "token", required_argument, NULL, 'T' }

/* Takes getopt's opt/arg when it is a connection flag: true when it was one. */
bool cli_conn_option(struct cli_conn *c, int opt, const char *arg);

/*
 * Sends one request (body may be NULL) and reads the answer into m (free with
 * http_message__reset). 0, or -errno with the reason printed.
 */
int cli_request(const struct cli_conn *c, const char *method, const char *target,
		const char *content_type, const void *body, size_t len, struct http_message *m);

/* Prints "edgeprof CMD: collector answered N: body" and returns CLI_FAIL. */
int cli_answer_error(const struct cli_conn *c, const struct http_message *m);

/* Appends "?name=value" or "&name=value" (URL-encoded) to t when value is set: 0 or -ENAMETOOLONG. */
int cli_add_param(char *t, size_t len, const char *name, const char *value);

#endif /* EDGEPROF_TOOLS_CLIENT_H */
