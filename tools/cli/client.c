// SPDX-License-Identifier: MIT
/* tools/cli/client.c — one request to a collector over mutual TLS or plain HTTP. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "port/clock.h"
#include "port/net.h"
#include "port/tls.h"
#include "tools/cli/cli.h"
#include "tools/cli/client.h"

bool cli_conn_option(struct cli_conn *c, int opt, const char *arg)
{
	switch (opt) {
	case 'c': c->collector = arg; return true;
	case 'A': c->ca = arg; return true;
	case 'C': c->cert = arg; return true;
	case 'K': c->key = arg; return true;
	case 'T': c->token = arg; return true;
	default: return false;
	}
}

void cli_conn_from_env(struct cli_conn *c)
{
	c->collector = getenv("EDGEPROF_COLLECTOR");
	c->ca = getenv("EDGEPROF_TLS_CA");
	c->cert = getenv("EDGEPROF_TLS_CERT");
	c->key = getenv("EDGEPROF_TLS_KEY");
	c->token = getenv("EDGEPROF_TOKEN");
}

struct client {
	struct tls_config *tls;
	struct tls_conn *tc;
	int fd;
	uint64_t deadline;
	char host[256], port[16];
	struct http_stream s;
};

static ssize_t cl_read(void *ctx, void *buf, size_t len)
{
	struct client *c = ctx;

	return c->tc ? tls_conn__read(c->tc, buf, len) : net_read(c->fd, buf, len, c->deadline);
}

static int cl_write(void *ctx, const void *buf, size_t len)
{
	struct client *c = ctx;

	return c->tc ? tls_conn__write(c->tc, buf, len) : net_write(c->fd, buf, len, c->deadline);
}

static int client_open(struct client *c, const struct cli_conn *a)
{
	char err[512], hp[300];
	bool https = !strncmp(a->collector, "https://", 8);

	memset(c, 0, sizeof(*c));
	c->fd = -1;
	if (!https && strncmp(a->collector, "http://", 7)) {
		fprintf(stderr, "edgeprof %s: --collector %s: expected https://HOST:PORT\n", a->cmd,
			a->collector);
		return -EINVAL;
	}
	snprintf(hp, sizeof(hp), "%s", a->collector + (https ? 8 : 7));
	hp[strcspn(hp, "/")] = '\0';
	if (net_split_hostport(hp, c->host, sizeof(c->host), c->port, sizeof(c->port))) {
		fprintf(stderr, "edgeprof %s: --collector %s: expected https://HOST:PORT\n", a->cmd,
			a->collector);
		return -EINVAL;
	}
	if (https) {
		if (!a->ca || !a->cert || !a->key) {
			fprintf(stderr, "edgeprof %s: mutual TLS needs --tls-ca, --tls-cert and "
				"--tls-key (or EDGEPROF_TLS_CA, _CERT, _KEY); make them with: "
				"edgeprof certs init pki && edgeprof certs device pki NAME\n", a->cmd);
			return -EINVAL;
		}
		c->tls = tls_config__new_client(a->ca, a->cert, a->key, err, sizeof(err));
		if (!c->tls) {
			fprintf(stderr, "edgeprof %s: %s\n", a->cmd, err);
			return -EINVAL;
		}
	}
	c->deadline = port_clock_mono_ns() + CLI_CLIENT_TIMEOUT_S * NSEC_PER_SEC;
	c->fd = net_connect(c->host, c->port, c->deadline, err, sizeof(err));
	if (c->fd < 0) {
		fprintf(stderr, "edgeprof %s: %s (is edgeprof-collector running there? check "
			"--collector or EDGEPROF_COLLECTOR)\n", a->cmd, err);
		return c->fd;
	}
	if (https) {
		int ret;

		c->tc = tls_conn__new(c->tls, c->fd, c->host);
		if (!c->tc)
			return -ENOMEM;
		tls_conn__set_deadline(c->tc, c->deadline);
		ret = tls_conn__handshake(c->tc);
		if (ret) {
			fprintf(stderr, "edgeprof %s: %s:%s: %s\n", a->cmd, c->host, c->port,
				tls_conn__error(c->tc));
			return ret;
		}
	}
	http_stream__init(&c->s, cl_read, cl_write, c);
	return 0;
}

static void client_close(struct client *c)
{
	if (c->tc)
		tls_conn__close(c->tc);
	tls_conn__free(c->tc);
	if (c->fd >= 0)
		close(c->fd);
	tls_config__free(c->tls);
}

int cli_add_param(char *t, size_t len, const char *name, const char *value)
{
	char enc[8192];
	size_t n = strlen(t);

	if (!value || !*value)
		return 0;
	if (http_url_encode(value, enc, sizeof(enc)) < 0 ||
	    (size_t)snprintf(t + n, len - n, "%s%s=%s", strchr(t, '?') ? "&" : "?", name, enc) >=
		    len - n)
		return -ENAMETOOLONG;
	return 0;
}


int cli_request(const struct cli_conn *a, const char *method, const char *target,
		const char *content_type, const void *body, size_t len, struct http_message *m)
{
	struct client c;
	char extra[600] = "";
	size_t n = 0;
	int ret = client_open(&c, a);

	if (!ret) {
		if (a->token && !c.tc)
			n += (size_t)snprintf(extra + n, sizeof(extra) - n,
					      "Authorization: Bearer %s\r\n", a->token);
		if (content_type && n < sizeof(extra))
			snprintf(extra + n, sizeof(extra) - n, "Content-Type: %s\r\n",
				 content_type);
		ret = http_write_request(&c.s, method, c.host, target, extra[0] ? extra : NULL,
					 body, len);
		if (!ret)
			ret = http_read_response(&c.s, m, CLI_CLIENT_MAX_ANSWER);
		if (ret)
			fprintf(stderr, "edgeprof %s: %s:%s: %s\n", a->cmd, c.host, c.port,
				strerror(-ret));
	}
	client_close(&c);
	return ret;
}

int cli_answer_error(const struct cli_conn *a, const struct http_message *m)
{
	fprintf(stderr, "edgeprof %s: collector answered %d: %.*s\n", a->cmd, m->status,
		(int)(m->body_len > 1000 ? 1000 : m->body_len), m->body ? (char *)m->body : "");
	return CLI_FAIL;
}
