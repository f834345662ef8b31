// SPDX-License-Identifier: MIT
/*
 * agent/daemon/pull.c — pull mode (agent/daemon/pull.h) over port/net, port/tls and port/http
 * like the collector. The accept thread holds new connections without a thread until their
 * first byte (the ClientHello) arrives, at most CONFIG_PULL_PENDING for CONFIG_PULL_HANDSHAKE_MS
 * each (the oldest closed for a new one), then hands each to a thread of its own, at most
 * CONFIG_PULL_CONNS at once: idle sockets cost a slot in a poll set, not the operators' turn.
 * No thread touches the agent's samplers: a request posts what it needs and the main loop
 * answers, one request at a time (the others wait their turn within their deadline).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/daemon/pull.h"
#include "port/clock.h"
#include "port/http.h"
#include "port/log.h"
#include "port/net.h"
#include "port/tls.h"

#define PULL_DEFAULT_SECONDS 30		/* as Go's net/http/pprof */
#define PULL_IO_MS 10000		/* request head, answer */
#define PULL_TURN_S 60			/* a request's wait for the main loop's turn */
#define PULL_MAKE_SLACK_S 15		/* the main loop's time to make a profile beyond N */
#define PULL_STACK_SIZE (256u * 1024)	/* mbedtls' handshake (only touched pages count) */

struct pull_server {
	struct pull_opts o;
	struct tls_config *tls;
	int lfd, port;
	int stop_pipe[2];
	pthread_t th;
	bool started;

	pthread_mutex_t lock;		/* everything below */
	pthread_cond_t cond;
	bool stopping;
	unsigned conns;			/* connection threads running */
	bool busy;			/* a request has the main loop's turn */
	enum pull_kind want;		/* the request waiting for the main loop */
	unsigned seconds;
	bool taken, answered;
	int status;
	void *data;
	size_t len;
	struct pull_stats st;
};

/* One connection, served by a thread of its own. */
struct pull_conn {
	struct pull_server *srv;
	int fd;
	char peer[64];
	struct tls_conn *tc;
	struct http_stream stream;
	struct http_message msg;
};

static ssize_t pull_read(void *ctx, void *buf, size_t len)
{
	struct pull_conn *c = ctx;

	return tls_conn__read(c->tc, buf, len);
}

static int pull_write(void *ctx, const void *buf, size_t len)
{
	struct pull_conn *c = ctx;

	return tls_conn__write(c->tc, buf, len);
}

static void count(struct pull_server *p, uint64_t *counter)
{
	pthread_mutex_lock(&p->lock);
	(*counter)++;
	pthread_mutex_unlock(&p->lock);
}

static void answer(struct pull_conn *c, int status, const char *ctype, const char *extra,
		   const void *body, size_t len)
{
	tls_conn__set_deadline(c->tc, port_clock_mono_ns() + PULL_IO_MS * NSEC_PER_MSEC);
	if (status != 200)
		count(c->srv, &c->srv->st.errors);
	http_write_response(&c->stream, status, ctype, extra, body, len, false);
}

static void answer_text(struct pull_conn *c, int status, const char *text)
{
	answer(c, status, "text/plain; charset=utf-8", NULL, text, strlen(text));
}

/*
 * Waits for the main loop's turn (another request may hold it), hands kind to it and waits for
 * its profile, the deadline, or shutdown.
 */
static void wait_profile(struct pull_conn *c, enum pull_kind kind, unsigned seconds)
{
	struct pull_server *p = c->srv;
	struct timespec ts;
	int status;
	void *data;
	size_t len;
	bool turn;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += PULL_TURN_S;
	pthread_mutex_lock(&p->lock);
	while (p->busy && !p->stopping)
		if (pthread_cond_timedwait(&p->cond, &p->lock, &ts) == ETIMEDOUT)
			break;
	turn = !p->busy && !p->stopping;
	if (!turn) {
		pthread_mutex_unlock(&p->lock);
		return answer_text(c, 503, "the agent is stopping or busy with other requests\n");
	}
	p->busy = true;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += seconds + PULL_MAKE_SLACK_S;
	p->want = kind;
	p->seconds = seconds;
	p->taken = p->answered = false;
	while (!p->answered && !p->stopping)
		if (pthread_cond_timedwait(&p->cond, &p->lock, &ts) == ETIMEDOUT)
			break;
	status = p->answered ? p->status : 503;
	data = p->data;
	len = p->len;
	p->data = NULL;
	p->want = PULL_NONE;
	p->busy = false;
	pthread_cond_broadcast(&p->cond); /* the next request's turn */
	pthread_mutex_unlock(&p->lock);
	if (status == 200) {
		count(p, &p->st.profiles);
		answer(c, 200, "application/octet-stream",
		       "Content-Disposition: attachment; filename=\"profile\"\r\n", data, len);
	} else if (data) {
		answer(c, status, "text/plain; charset=utf-8", NULL, data, len);
	} else {
		answer_text(c, 503, "the agent is stopping or did not make the profile in time\n");
	}
	free(data);
}

static void serve_index(struct pull_conn *c)
{
	static const char page[] =
		"<html><head><title>/debug/pprof/</title></head><body>\n"
		"/debug/pprof/ (edgeprof-agent)<br>\n<p>Profiles:</p>\n<ul>\n"
		"<li><a href=\"profile?seconds=30\">profile</a>: CPU profile of the whole device "
		"(the agent's samplers) for ?seconds=N</li>\n"
		"<li><a href=\"heap\">heap</a>: allocations of the programs that record their heap "
		"(EDGEPROF_PROFILES=heap)</li>\n</ul>\n</body></html>\n";

	answer(c, 200, "text/html; charset=utf-8", NULL, page, sizeof(page) - 1);
}

static void serve_profile(struct pull_conn *c)
{
	char v[32], msg[160];
	unsigned long seconds = PULL_DEFAULT_SECONDS;
	int n = http_query_get(c->msg.query, "seconds", v, sizeof(v));
	char *end;

	if (n >= 0) {
		seconds = strtoul(v, &end, 10);
		if (!n || *end || v[0] == '-' || seconds < 1 || seconds > CONFIG_PULL_MAX_SECONDS) {
			snprintf(msg, sizeof(msg), "seconds=%s: expected 1..%d (CONFIG_PULL_MAX_SECONDS)\n",
				 v, CONFIG_PULL_MAX_SECONDS);
			answer_text(c, 400, msg);
			return;
		}
	}
	wait_profile(c, PULL_CPU, (unsigned)seconds);
}

static void serve_request(struct pull_conn *c, bool operator, const char *cn)
{
	struct pull_server *p = c->srv;
	const char *path = c->msg.path;
	char msg[400];

	count(p, &p->st.requests);
	if (!operator) {
		count(p, &p->st.refused_role);
		snprintf(msg, sizeof(msg),
			 "%s is not an operator certificate: pull mode needs one (edgeprof certs "
			 "operator DIR NAME)\n", cn);
		answer_text(c, 403, msg);
		return;
	}
	if (strcmp(c->msg.method, "GET")) {
		answer_text(c, 405, "only GET\n");
		return;
	}
	if (!strcmp(path, "/debug/pprof/") || !strcmp(path, "/debug/pprof"))
		serve_index(c);
	else if (!strcmp(path, "/debug/pprof/profile"))
		serve_profile(c);
	else if (!strcmp(path, "/debug/pprof/heap"))
		wait_profile(c, PULL_HEAP, 0);
	else
		answer_text(c, 404, "not here: /debug/pprof/profile?seconds=N, /debug/pprof/heap\n");
}

/*
 * One connection: handshake (the certificate verified) within CONFIG_PULL_HANDSHAKE_MS, one
 * request head, one answer; on its own thread, which ends with it.
 */
static void *serve_conn(void *arg)
{
	struct pull_conn *c = arg;
	struct pull_server *p = c->srv;
	char cn[256] = "";
	int ret;

	c->tc = tls_conn__new(p->tls, c->fd, NULL);
	if (!c->tc)
		goto out;
	tls_conn__set_deadline(c->tc, port_clock_mono_ns() +
				      (uint64_t)CONFIG_PULL_HANDSHAKE_MS * NSEC_PER_MSEC);
	tls_conn__set_cancel_fd(c->tc, p->stop_pipe[0]);
	ret = tls_conn__handshake(c->tc);
	if (ret) {
		count(p, &p->st.refused_tls);
		pr_warn("pull: refused %s: %s", c->peer, tls_conn__error(c->tc));
		goto out_free;
	}
	tls_conn__set_deadline(c->tc, port_clock_mono_ns() + PULL_IO_MS * NSEC_PER_MSEC);
	tls_conn__peer_cn(c->tc, cn, sizeof(cn));
	http_stream__init(&c->stream, pull_read, pull_write, c);
	ret = http_read_request_head(&c->stream, &c->msg);
	if (!ret) {
		pr_info("pull: %s (%s) GET %s", c->peer, cn, c->msg.path);
		serve_request(c, tls_conn__peer_has_ou(c->tc, "operator"), cn);
	} else if (ret != -ENODATA) {
		answer_text(c, ret == -EMSGSIZE ? 431 : ret == -ETIMEDOUT ? 408 : 400,
			    "bad request\n");
	}
	tls_conn__close(c->tc);
	http_message__reset(&c->msg);
out_free:
	tls_conn__free(c->tc);
out:
	close(c->fd);
	free(c);
	pthread_mutex_lock(&p->lock);
	p->conns--;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

/* A thread for fd, when there is room (CONFIG_PULL_CONNS); else it is closed. */
static void conn_start(struct pull_server *p, int fd, const char *peer)
{
	struct pull_conn *c = calloc(1, sizeof(*c));
	pthread_attr_t attr;
	pthread_t th;
	bool room;

	pthread_mutex_lock(&p->lock);
	room = c && p->conns < CONFIG_PULL_CONNS;
	p->conns += room;
	pthread_mutex_unlock(&p->lock);
	if (!room) {
		count(p, &p->st.refused_busy);
		free(c);
		close(fd);
		return;
	}
	c->srv = p;
	c->fd = fd;
	snprintf(c->peer, sizeof(c->peer), "%s", peer);
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, PULL_STACK_SIZE);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&th, &attr, serve_conn, c)) {
		pthread_mutex_lock(&p->lock);
		p->conns--;
		pthread_mutex_unlock(&p->lock);
		close(fd);
		free(c);
	}
	pthread_attr_destroy(&attr);
}

/* Connections accepted, waiting for their first byte (accept thread only). */
struct pending {
	int fd;
	uint64_t since;
	char peer[64];
};

/* Closes those waiting longer than CONFIG_PULL_HANDSHAKE_MS; the poll timeout for the next. */
static int pending_expire(struct pull_server *p, struct pending *w, size_t *n)
{
	uint64_t now = port_clock_mono_ns(), max = (uint64_t)CONFIG_PULL_HANDSHAKE_MS * NSEC_PER_MSEC;
	int timeout = -1;

	for (size_t i = 0; i < *n;) {
		if (now - w[i].since >= max) {
			count(p, &p->st.refused_tls);
			close(w[i].fd);
			w[i] = w[--*n];
			continue;
		}
		if (timeout < 0 || (uint64_t)timeout > (w[i].since + max - now) / NSEC_PER_MSEC)
			timeout = (int)((w[i].since + max - now) / NSEC_PER_MSEC) + 1;
		i++;
	}
	return timeout;
}

/* A new connection waits for its first byte; the oldest waiting makes room when full. */
static void pending_add(struct pull_server *p, struct pending *w, size_t *n, int fd,
			const char *peer)
{
	if (*n == CONFIG_PULL_PENDING) {
		size_t old = 0;

		for (size_t i = 1; i < *n; i++)
			if (w[i].since < w[old].since)
				old = i;
		count(p, &p->st.refused_tls);
		close(w[old].fd);
		w[old] = w[--*n];
	}
	w[*n].fd = fd;
	w[*n].since = port_clock_mono_ns();
	snprintf(w[*n].peer, sizeof(w[*n].peer), "%s", peer);
	(*n)++;
}

static void *pull_thread(void *arg)
{
	struct pull_server *p = arg;
	struct pending w[CONFIG_PULL_PENDING];
	struct pollfd pfd[2 + CONFIG_PULL_PENDING];
	size_t n = 0;

	for (;;) {
		int timeout = pending_expire(p, w, &n);
		char peer[64];
		int fd;

		pfd[0] = (struct pollfd){ .fd = p->lfd, .events = POLLIN };
		pfd[1] = (struct pollfd){ .fd = p->stop_pipe[0], .events = POLLIN };
		for (size_t i = 0; i < n; i++)
			pfd[2 + i] = (struct pollfd){ .fd = w[i].fd, .events = POLLIN };
		if (poll(pfd, 2 + n, timeout) < 0 && errno != EINTR)
			break;
		if (pfd[1].revents)
			break;
		/* from the end: a started one is replaced by the last, already looked at */
		for (size_t i = n; i-- > 0;) {
			if (!pfd[2 + i].revents)
				continue;
			conn_start(p, w[i].fd, w[i].peer);
			w[i] = w[--n];
		}
		if (!(pfd[0].revents & POLLIN))
			continue;
		fd = net_accept(p->lfd, peer, sizeof(peer));
		if (fd < 0)
			continue;
		count(p, &p->st.conns);
		pending_add(p, w, &n, fd, peer);
	}
	for (size_t i = 0; i < n; i++)
		close(w[i].fd);
	return NULL;
}

struct pull_server *pull__new(const struct pull_opts *o, char *err, size_t errlen)
{
	struct pull_server *p = calloc(1, sizeof(*p));
	pthread_condattr_t ca;
	pthread_attr_t attr;
	int ret;

	if (!p) {
		snprintf(err, errlen, "no memory");
		return NULL;
	}
	p->o = *o;
	p->lfd = -1;
	p->stop_pipe[0] = p->stop_pipe[1] = -1;
	pthread_mutex_init(&p->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&p->cond, &ca);
	pthread_condattr_destroy(&ca);
	if (!o->ca_file || !o->cert_file || !o->key_file) {
		snprintf(err, errlen, "--pull-listen needs --tls-ca, --tls-cert and --tls-key (the "
			 "device's certificate, made with edgeprof certs device DIR ID --server-ip IP)");
		goto out_free;
	}
	p->tls = tls_config__new_server(o->ca_file, o->cert_file, o->key_file, err, errlen);
	if (!p->tls)
		goto out_free;
	p->lfd = net_listen(o->listen, 16, err, errlen);
	if (p->lfd < 0)
		goto out_free;
	p->port = net_local_port(p->lfd);
	if (pipe2(p->stop_pipe, O_CLOEXEC)) {
		snprintf(err, errlen, "pipe: %s", strerror(errno));
		goto out_free;
	}
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, PULL_STACK_SIZE);
	ret = pthread_create(&p->th, &attr, pull_thread, p);
	pthread_attr_destroy(&attr);
	if (ret) {
		snprintf(err, errlen, "cannot start the pull thread");
		goto out_free;
	}
	p->started = true;
	return p;
out_free:
	pull__free(p);
	return NULL;
}

void pull__free(struct pull_server *p)
{
	if (!p)
		return;
	if (p->started) {
		pthread_mutex_lock(&p->lock);
		p->stopping = true;
		pthread_cond_broadcast(&p->cond);
		pthread_mutex_unlock(&p->lock);
		if (write(p->stop_pipe[1], "x", 1) < 0)
			pr_warn("pull: cannot wake the server thread: %s", strerror(errno));
		pthread_join(p->th, NULL);
		/* the connections' threads see the stop pipe too (their TLS cancel fd) */
		pthread_mutex_lock(&p->lock);
		while (p->conns)
			pthread_cond_wait(&p->cond, &p->lock);
		pthread_mutex_unlock(&p->lock);
	}
	if (p->stop_pipe[0] >= 0) {
		close(p->stop_pipe[0]);
		close(p->stop_pipe[1]);
	}
	if (p->lfd >= 0)
		close(p->lfd);
	tls_config__free(p->tls);
	free(p->data);
	pthread_cond_destroy(&p->cond);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

int pull__port(const struct pull_server *p)
{
	return p ? p->port : -1;
}

enum pull_kind pull__pending(struct pull_server *p, unsigned *seconds)
{
	enum pull_kind k = PULL_NONE;

	if (!p)
		return k;
	pthread_mutex_lock(&p->lock);
	if (p->want != PULL_NONE && !p->taken) {
		p->taken = true;
		k = p->want;
		*seconds = p->seconds;
	}
	pthread_mutex_unlock(&p->lock);
	return k;
}

void pull__answer(struct pull_server *p, int status, const void *data, size_t len)
{
	void *copy = len ? malloc(len) : NULL;

	if (!p)
		return;
	if (copy)
		memcpy(copy, data, len);
	pthread_mutex_lock(&p->lock);
	if (p->want != PULL_NONE && p->taken && !p->answered) {
		p->answered = true;
		p->status = copy || !len ? status : 503;
		p->data = copy;
		p->len = copy ? len : 0;
		copy = NULL;
		pthread_cond_broadcast(&p->cond);
	}
	pthread_mutex_unlock(&p->lock);
	free(copy);
}

void pull__stats(struct pull_server *p, struct pull_stats *st)
{
	pthread_mutex_lock(&p->lock);
	*st = p->st;
	pthread_mutex_unlock(&p->lock);
}
