/* SPDX-License-Identifier: MIT */
/*
 * tests/lib/upload-peer.h — a scripted HTTPS peer for the uploader's unit tests: real mbedtls
 * server (port/tls) with a client certificate required, real HTTP framing (port/http), on
 * loopback, in a thread. It answers each request with the next status of a script (then 200),
 * and records what it received. The real collector is exercised by tests/integration/transport-*;
 * this peer exists to produce statuses (429, 503, 400) and closes on demand.
 */
#ifndef EDGEPROF_TESTS_UPLOAD_PEER_H
#define EDGEPROF_TESTS_UPLOAD_PEER_H

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "port/clock.h"
#include "port/http.h"
#include "port/net.h"
#include "port/tls.h"

#define PEER_MAX_REQ 256

struct peer_req {
	char target[1024];
	char key[128];
	size_t body_len;
	unsigned conn;		/* connection number it arrived on */
	bool resumed;		/* that connection resumed a TLS session */
	char cn[64];
};

struct peer {
	struct tls_config *cfg;
	int lfd;
	char port[16];
	pthread_t th;
	pthread_mutex_t lock;
	volatile bool stop;
	int script[64];		/* statuses to answer, in order; then 200 */
	unsigned retry_after;	/* with a 503: Retry-After (0: none) */
	unsigned n_script, next_script;
	bool close_after_each;	/* answer Connection: close */
	struct peer_req reqs[PEER_MAX_REQ];
	unsigned n_reqs, n_conns, n_handshake_fail;
};

static char peer_dir[64];

static inline char *peer_path(const char *name)
{
	static char bufs[8][256];
	static int i;
	char *b = bufs[i++ % 8];

	snprintf(b, 256, "%s/%s", peer_dir, name);
	return b;
}

static inline void peer_make_cert(enum tls_cert_kind kind, const char *cn, const char *issuer,
				  const char *name, const char *dns, int64_t nb, int64_t na)
{
	struct tls_cert_req req = {
		.kind = kind, .cn = cn, .not_before = nb, .not_after = na,
		.dns_name = kind == TLS_CERT_SERVER ? dns : NULL,
		.ip = kind == TLS_CERT_SERVER && !strcmp(dns, "localhost") ? "127.0.0.1" : NULL,
	};
	char crt[256], key[256], icrt[256], ikey[256], err[256] = "";

	snprintf(crt, sizeof(crt), "%s/%s.crt", peer_dir, name);
	snprintf(key, sizeof(key), "%s/%s.key", peer_dir, name);
	snprintf(icrt, sizeof(icrt), "%s/%s.crt", peer_dir, issuer ? issuer : "");
	snprintf(ikey, sizeof(ikey), "%s/%s.key", peer_dir, issuer ? issuer : "");
	if (tls_cert_make(&req, issuer ? icrt : NULL, issuer ? ikey : NULL, crt, key, err,
			  sizeof(err))) {
		fprintf(stderr, "tls_cert_make %s: %s\n", name, err);
		abort();
	}
}

/* ca, server (localhost + 127.0.0.1), dev-1, expired, otherca, otherserver, wrongname. */
static inline int peer_make_certs(void **state)
{
	int64_t now = (int64_t)time(NULL);

	snprintf(peer_dir, sizeof(peer_dir), "/tmp/edgeprof-upload-test.XXXXXX");
	if (!mkdtemp(peer_dir))
		return -1;
	peer_make_cert(TLS_CERT_CA, "test CA", NULL, "ca", NULL, 0, 0);
	peer_make_cert(TLS_CERT_SERVER, "localhost", "ca", "server", "localhost", 0, 0);
	peer_make_cert(TLS_CERT_SERVER, "elsewhere", "ca", "wrongname", "elsewhere.example", 0, 0);
	peer_make_cert(TLS_CERT_CLIENT, "dev-1", "ca", "dev-1", NULL, 0, 0);
	peer_make_cert(TLS_CERT_CLIENT, "old", "ca", "expired", NULL, now - 30 * 86400,
		       now - 86400);
	peer_make_cert(TLS_CERT_CA, "other CA", NULL, "otherca", NULL, 0, 0);
	return 0;
}

static inline int peer_remove_certs(void **state)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", peer_dir);
	return system(cmd) ? -1 : 0;
}

static ssize_t peer_rd(void *ctx, void *buf, size_t len)
{
	return tls_conn__read(ctx, buf, len);
}

static int peer_wr(void *ctx, const void *buf, size_t len)
{
	return tls_conn__write(ctx, buf, len);
}

static void peer_serve(struct peer *p, int fd)
{
	static struct http_stream s;	/* one connection at a time */
	struct tls_conn *c = tls_conn__new(p->cfg, fd, NULL);
	unsigned conn;
	bool resumed;
	char cn[64] = "";

	tls_conn__set_deadline(c, port_clock_mono_ns() + 5 * NSEC_PER_SEC);
	pthread_mutex_lock(&p->lock);
	conn = ++p->n_conns;
	pthread_mutex_unlock(&p->lock);
	if (tls_conn__handshake(c)) {
		pthread_mutex_lock(&p->lock);
		p->n_handshake_fail++;
		pthread_mutex_unlock(&p->lock);
		goto out;
	}
	resumed = tls_conn__resumed(c);
	tls_conn__peer_cn(c, cn, sizeof(cn));
	http_stream__init(&s, peer_rd, peer_wr, c);
	while (!p->stop) {
		struct http_message m;
		const char *key;
		char extra[40];
		int status = 200;
		bool keep;

		memset(&m, 0, sizeof(m));
		tls_conn__set_deadline(c, port_clock_mono_ns() + 5 * NSEC_PER_SEC);
		if (http_read_request(&s, &m, 16 << 20)) {
			http_message__reset(&m);
			break;
		}
		key = http_header(&m, "X-Edgeprof-Key");
		pthread_mutex_lock(&p->lock);
		if (p->next_script < p->n_script)
			status = p->script[p->next_script++];
		if (p->n_reqs < PEER_MAX_REQ) {
			struct peer_req *r = &p->reqs[p->n_reqs++];

			snprintf(r->target, sizeof(r->target), "%s%s%s", m.path,
				 m.query[0] ? "?" : "", m.query);
			snprintf(r->key, sizeof(r->key), "%s", key ? key : "");
			snprintf(r->cn, sizeof(r->cn), "%s", cn);
			r->body_len = m.body_len;
			r->conn = conn;
			r->resumed = resumed;
		}
		keep = m.keep_alive && !p->close_after_each;
		if (status == 503 && p->retry_after)
			snprintf(extra, sizeof(extra), "Retry-After: %u\r\n", p->retry_after);
		else
			extra[0] = '\0';
		pthread_mutex_unlock(&p->lock);
		http_write_response(&s, status, "application/json", extra[0] ? extra : NULL, "{}", 2,
				    keep);
		http_message__reset(&m);
		if (!keep)
			break;
	}
	tls_conn__close(c);
out:
	tls_conn__free(c);
	close(fd);
}

static void *peer_thread(void *arg)
{
	struct peer *p = arg;

	while (!p->stop) {
		int fd;

		if (net_wait(p->lfd, POLLIN, port_clock_mono_ns() + 50 * NSEC_PER_MSEC))
			continue;
		fd = net_accept(p->lfd, NULL, 0);
		if (fd >= 0)
			peer_serve(p, fd);
	}
	return NULL;
}

/* Starts a peer with server certificate cert ("server", "wrongname") of CA ca, on port
 * (NULL = any free one). */
static inline struct peer *peer_start_on(const char *ca, const char *cert, const char *port)
{
	struct peer *p = calloc(1, sizeof(*p));
	char err[256], crt[256], key[256], cacrt[256];

	snprintf(cacrt, sizeof(cacrt), "%s/%s.crt", peer_dir, ca);
	snprintf(crt, sizeof(crt), "%s/%s.crt", peer_dir, cert);
	snprintf(key, sizeof(key), "%s/%s.key", peer_dir, cert);
	p->cfg = tls_config__new_server(cacrt, crt, key, err, sizeof(err));
	if (!p->cfg) {
		fprintf(stderr, "peer: %s\n", err);
		abort();
	}
	pthread_mutex_init(&p->lock, NULL);
	snprintf(key, sizeof(key), "127.0.0.1:%s", port ? port : "0");
	p->lfd = net_listen(key, 16, err, sizeof(err));
	if (p->lfd < 0) {
		fprintf(stderr, "peer: %s\n", err);
		abort();
	}
	snprintf(p->port, sizeof(p->port), "%d", net_local_port(p->lfd));
	pthread_create(&p->th, NULL, peer_thread, p);
	return p;
}

static inline struct peer *peer_start(const char *ca, const char *cert)
{
	return peer_start_on(ca, cert, NULL);
}

static inline void peer_stop(struct peer *p)
{
	if (!p)
		return;
	p->stop = true;
	pthread_join(p->th, NULL);
	close(p->lfd);
	tls_config__free(p->cfg);
	p->cfg = NULL;
}

/* After peer_stop(): what it recorded stays readable until this. */
static inline void peer_free(struct peer *p)
{
	free(p);
}

static inline void peer_script(struct peer *p, const int *statuses, unsigned n)
{
	pthread_mutex_lock(&p->lock);
	memcpy(p->script, statuses, n * sizeof(int));
	p->n_script = n;
	p->next_script = 0;
	pthread_mutex_unlock(&p->lock);
}

/* A port on loopback that nobody listens on (bound, then closed). */
static inline void peer_dead_port(char *port, size_t len)
{
	char err[128];
	int fd = net_listen("127.0.0.1:0", 1, err, sizeof(err));

	snprintf(port, len, "%d", net_local_port(fd));
	close(fd);
}

#endif /* EDGEPROF_TESTS_UPLOAD_PEER_H */
