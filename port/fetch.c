// SPDX-License-Identifier: MIT
/* port/fetch.c — one GET over port/net, port/tls and port/http (port/fetch.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "port/clock.h"
#include "port/fetch.h"
#include "port/net.h"
#include "port/tls.h"

struct fetch_conn {
	int fd;
	struct tls_conn *tc;
	uint64_t deadline;
};

static ssize_t fc_read(void *ctx, void *buf, size_t len)
{
	struct fetch_conn *c = ctx;

	return c->tc ? tls_conn__read(c->tc, buf, len) : net_read(c->fd, buf, len, c->deadline);
}

static int fc_write(void *ctx, const void *buf, size_t len)
{
	struct fetch_conn *c = ctx;

	return c->tc ? tls_conn__write(c->tc, buf, len) : net_write(c->fd, buf, len, c->deadline);
}

int fetch_split_url(const char *url, bool *https, char *host, size_t hostlen, char *port,
		    size_t portlen, char *path, size_t pathlen)
{
	char hp[300];
	const char *rest;
	size_t n;

	*https = !strncmp(url, "https://", 8);
	if (!*https && strncmp(url, "http://", 7))
		return -EINVAL;
	rest = url + (*https ? 8 : 7);
	n = strcspn(rest, "/?");
	if (!n || n >= sizeof(hp))
		return -EINVAL;
	memcpy(hp, rest, n);
	hp[n] = 0;
	if (net_split_hostport(hp, host, hostlen, port, portlen) || !*host)
		return -EINVAL;
	if ((size_t)snprintf(path, pathlen, "%s%s", rest[n] == '/' ? "" : "/", rest + n) >= pathlen)
		return -EINVAL;
	return 0;
}

enum fetch_fail fetch_get(const char *url, struct tls_config *tls, uint64_t deadline_ns,
			  size_t max_body, struct http_message *m, char *err, size_t errlen)
{
	return fetch_get_fd(url, tls, deadline_ns, max_body, m, NULL, NULL, err, errlen);
}

enum fetch_fail fetch_get_fd(const char *url, struct tls_config *tls, uint64_t deadline_ns,
			     size_t max_body, struct http_message *m, fetch_fd_fn on_fd, void *ctx,
			     char *err, size_t errlen)
{
	return fetch_get_peer(url, tls, deadline_ns, max_body, m, on_fd, ctx, NULL, 0, err, errlen);
}

enum fetch_fail fetch_get_peer(const char *url, struct tls_config *tls, uint64_t deadline_ns,
			       size_t max_body, struct http_message *m, fetch_fd_fn on_fd,
			       void *ctx, char *peer_cn, size_t cnlen, char *err, size_t errlen)
{
	struct fetch_conn c = {.fd = -1, .deadline = deadline_ns};
	char host[256], port[16], target[1024];
	struct http_stream *s = NULL;
	enum fetch_fail f = FETCH_OK;
	uint64_t cdl;
	bool https;
	int ret;

	if (peer_cn && cnlen)
		peer_cn[0] = 0;

	if (fetch_split_url(url, &https, host, sizeof(host), port, sizeof(port), target,
			    sizeof(target)) || (https && !tls)) {
		snprintf(err, errlen, "%s: expected http://HOST:PORT/... %s", url,
			 https ? "(https needs the TLS files)" : "or https://");
		return FETCH_BAD_URL;
	}
	/* a host that does not answer (blackholed) costs FETCH_CONNECT_S, not the whole deadline */
	cdl = port_clock_mono_ns() + FETCH_CONNECT_S * NSEC_PER_SEC;
	c.fd = net_connect(host, port, cdl < deadline_ns ? cdl : deadline_ns, err, errlen);
	if (c.fd < 0)
		return FETCH_CONNECT;
	if (on_fd)
		on_fd(ctx, c.fd);
	if (https) {
		c.tc = tls_conn__new(tls, c.fd, host);
		if (c.tc)
			tls_conn__set_deadline(c.tc, deadline_ns);
		ret = c.tc ? tls_conn__handshake(c.tc) : -ENOMEM;
		if (ret) {
			snprintf(err, errlen, "%s:%s: %s", host, port,
				 c.tc ? tls_conn__error(c.tc) : "no memory");
			f = FETCH_TLS;
			goto out;
		}
		if (peer_cn && tls_conn__peer_cn(c.tc, peer_cn, cnlen))
			peer_cn[0] = 0;
	}
	s = malloc(sizeof(*s));
	if (!s) {
		snprintf(err, errlen, "no memory");
		f = FETCH_IO;
		goto out;
	}
	http_stream__init(s, fc_read, fc_write, &c);
	ret = http_write_request(s, "GET", host, target, NULL, NULL, 0);
	if (!ret)
		ret = http_read_response(s, m, max_body);
	if (ret) {
		f = ret == -EFBIG ? FETCH_TOO_BIG : FETCH_IO;
		snprintf(err, errlen, "%s: %s", url,
			 ret == -EFBIG ? "the answer is larger than the body limit" : strerror(-ret));
	} else if (m->status != 200) {
		size_t n = m->body_len > 200 ? 200 : m->body_len;

		while (n && (m->body[n - 1] == '\n' || m->body[n - 1] == '\r'))
			n--; /* a one-line text answer ends with its newline */
		f = FETCH_STATUS;
		snprintf(err, errlen, "%s: answered %d: %.*s", url, m->status, (int)n,
			 m->body ? (char *)m->body : "");
	}
out:
	if (c.tc && f != FETCH_TLS)
		tls_conn__close(c.tc);
	tls_conn__free(c.tc);
	if (on_fd)
		on_fd(ctx, -1);
	close(c.fd);
	free(s);
	return f;
}
