// SPDX-License-Identifier: MIT
/*
 * Real TLS handshakes on loopback between our server and client configs, with certificates made
 * by tls_cert_make() in a temporary directory: acceptance, CN, resumption, and every refusal the
 * collector promises (no certificate, foreign CA, expired, wrong key usage, wrong server name),
 * plus a handshake timeout and HTTP over the TLS connection.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "port/clock.h"
#include "port/http.h"
#include "port/net.h"
#include "port/tls.h"

static char dir[64];
static size_t readahead;	/* the second and third runs of every test: both ends read ahead */

static char *path(const char *name)
{
	static char bufs[8][256];
	static int i;
	char *b = bufs[i++ % 8];

	snprintf(b, 256, "%s/%s", dir, name);
	return b;
}

static void make(enum tls_cert_kind kind, const char *cn, const char *issuer, const char *name,
		 int64_t nb, int64_t na)
{
	struct tls_cert_req req = {
		.kind = kind, .cn = cn, .not_before = nb, .not_after = na,
		.dns_name = kind == TLS_CERT_SERVER ? "localhost" : NULL,
		.ip = kind == TLS_CERT_SERVER ? "127.0.0.1" : NULL,
	};
	char crt[256], key[256], icrt[256], ikey[256], err[256] = "";

	snprintf(crt, sizeof(crt), "%s/%s.crt", dir, name);
	snprintf(key, sizeof(key), "%s/%s.key", dir, name);
	snprintf(icrt, sizeof(icrt), "%s/%s.crt", dir, issuer ? issuer : "");
	snprintf(ikey, sizeof(ikey), "%s/%s.key", dir, issuer ? issuer : "");
	if (tls_cert_make(&req, issuer ? icrt : NULL, issuer ? ikey : NULL, crt, key, err,
			  sizeof(err)))
		fail_msg("tls_cert_make %s: %s", name, err);
}

static int setup_certs(void **state)
{
	int64_t now = (int64_t)time(NULL);

	snprintf(dir, sizeof(dir), "/tmp/edgeprof-tls-test.XXXXXX");
	assert_non_null(mkdtemp(dir));
	make(TLS_CERT_CA, "test CA", NULL, "ca", 0, 0);
	make(TLS_CERT_SERVER, "localhost", "ca", "server", 0, 0);
	make(TLS_CERT_CLIENT, "dev-1", "ca", "dev-1", 0, 0);
	make(TLS_CERT_CLIENT, "old", "ca", "expired", now - 30 * 86400, now - 86400);
	make(TLS_CERT_BAD_USAGE, "bad", "ca", "badusage", 0, 0);
	make(TLS_CERT_CA, "other CA", NULL, "otherca", 0, 0);
	make(TLS_CERT_CLIENT, "intruder", "otherca", "intruder", 0, 0);
	make(TLS_CERT_SERVER, "localhost", "otherca", "otherserver", 0, 0);
	return 0;
}

static int remove_certs(void **state)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd);
}

struct server_side {
	struct tls_config *cfg;
	int lfd;
	int ret;
	bool resumed;
	char cn[64];
	char err[256];
	bool echo_http;
};

static void *server_thread(void *arg)
{
	struct server_side *s = arg;
	struct tls_conn *c;
	int fd;

	if (net_wait(s->lfd, 1 /* POLLIN */, port_clock_mono_ns() + 10 * NSEC_PER_SEC)) {
		s->ret = -ETIMEDOUT;
		return NULL;
	}
	fd = net_accept(s->lfd, NULL, 0);
	c = tls_conn__new(s->cfg, fd, NULL);
	tls_conn__set_deadline(c, port_clock_mono_ns() + 2 * NSEC_PER_SEC);
	s->ret = tls_conn__handshake(c);
	snprintf(s->err, sizeof(s->err), "%s", tls_conn__error(c));
	if (!s->ret) {
		char buf[64];
		ssize_t n;

		s->resumed = tls_conn__resumed(c);
		tls_conn__peer_cn(c, s->cn, sizeof(s->cn));
		n = tls_conn__read(c, buf, sizeof(buf));
		if (n > 0)
			tls_conn__write(c, buf, (size_t)n);
		tls_conn__close(c);
	}
	tls_conn__free(c);
	close(fd);
	return NULL;
}

/* One connection: returns the client's handshake result; the server's lands in *srv. */
static int connect_once(struct tls_config *server_cfg, struct tls_config *client_cfg,
			const char *name, struct server_side *srv, bool *client_resumed)
{
	char err[256];
	pthread_t th;
	struct tls_conn *c;
	int fd, ret, port;

	memset(srv, 0, sizeof(*srv));
	srv->cfg = server_cfg;
	srv->lfd = net_listen("127.0.0.1:0", 4, err, sizeof(err));
	assert_true(srv->lfd >= 0);
	port = net_local_port(srv->lfd);
	assert_int_equal(pthread_create(&th, NULL, server_thread, srv), 0);
	snprintf(err, sizeof(err), "%d", port);
	fd = net_connect("127.0.0.1", err, port_clock_mono_ns() + 5 * NSEC_PER_SEC, err,
			 sizeof(err));
	assert_true(fd >= 0);
	c = tls_conn__new(client_cfg, fd, name);
	assert_non_null(c);
	tls_conn__set_deadline(c, port_clock_mono_ns() + 5 * NSEC_PER_SEC);
	ret = tls_conn__handshake(c);
	if (client_resumed)
		*client_resumed = !ret && tls_conn__resumed(c);
	if (!ret) {
		char buf[8] = "";

		assert_int_equal(tls_conn__write(c, "ping", 4), 0);
		assert_int_equal(tls_conn__read(c, buf, sizeof(buf)), 4);
		assert_memory_equal(buf, "ping", 4);
	} else {
		fprintf(stderr, "client: %s\n", tls_conn__error(c));
	}
	tls_conn__free(c);
	close(fd);
	pthread_join(th, NULL);
	close(srv->lfd);
	if (srv->ret)
		fprintf(stderr, "server: %s\n", srv->err);
	return ret;
}

static struct tls_config *server_cfg(void)
{
	char err[256];
	struct tls_config *cfg = tls_config__new_server(path("ca.crt"), path("server.crt"),
							path("server.key"), err, sizeof(err));

	if (!cfg)
		fail_msg("server config: %s", err);
	tls_config__set_readahead(cfg, readahead);
	return cfg;
}

static struct tls_config *client_cfg(const char *ca, const char *name)
{
	char err[256], crt[256], key[256];
	struct tls_config *cfg;

	snprintf(crt, sizeof(crt), "%s/%s.crt", dir, name ? name : "");
	snprintf(key, sizeof(key), "%s/%s.key", dir, name ? name : "");
	cfg = tls_config__new_client(path(ca), name ? crt : NULL, name ? key : NULL, err,
				     sizeof(err));
	if (!cfg)
		fail_msg("client config: %s", err);
	tls_config__set_readahead(cfg, readahead);
	return cfg;
}

static void device_accepted_with_cn_and_resumes(void **state)
{
	struct tls_config *s = server_cfg(), *c = client_cfg("ca.crt", "dev-1");
	struct server_side srv;
	bool resumed = true;

	assert_int_equal(connect_once(s, c, "127.0.0.1", &srv, &resumed), 0);
	assert_int_equal(srv.ret, 0);
	assert_string_equal(srv.cn, "dev-1");
	assert_false(resumed);
	assert_false(srv.resumed);

	/* The second connection resumes (ticket): both sides agree, the CN is still known. */
	assert_int_equal(connect_once(s, c, "127.0.0.1", &srv, &resumed), 0);
	assert_true(resumed);
	assert_true(srv.resumed);
	assert_string_equal(srv.cn, "dev-1");

	tls_config__forget_session(c);
	assert_int_equal(connect_once(s, c, "localhost", &srv, &resumed), 0);
	assert_false(resumed);
	tls_config__free(c);
	tls_config__free(s);
}

static void refused(const char *ca, const char *client, const char *name, int want_server)
{
	struct tls_config *s = server_cfg(), *c = client_cfg(ca, client);
	struct server_side srv;

	assert_int_not_equal(connect_once(s, c, name, &srv, NULL), 0);
	if (want_server)
		assert_int_equal(srv.ret, want_server);
	tls_config__free(c);
	tls_config__free(s);
}

static void no_client_certificate_refused(void **state)
{
	refused("ca.crt", NULL, "localhost", -EACCES);
}

static void foreign_ca_refused(void **state)
{
	refused("ca.crt", "intruder", "localhost", -EACCES);
}

static void expired_refused(void **state)
{
	refused("ca.crt", "expired", "localhost", -EACCES);
}

static void wrong_key_usage_refused(void **state)
{
	refused("ca.crt", "badusage", "localhost", -EACCES);
}

static void wrong_server_name_refused_by_client(void **state)
{
	struct tls_config *s = server_cfg(), *c = client_cfg("ca.crt", "dev-1");
	struct server_side srv;

	assert_int_equal(connect_once(s, c, "collector.example", &srv, NULL), -EACCES);
	assert_int_equal(connect_once(s, c, "127.0.0.2", &srv, NULL), -EACCES);
	tls_config__free(c);
	tls_config__free(s);
}

static void server_from_other_ca_refused_by_client(void **state)
{
	char err[256];
	struct tls_config *s = tls_config__new_server(path("ca.crt"), path("otherserver.crt"),
						      path("otherserver.key"), err, sizeof(err));
	struct tls_config *c = client_cfg("ca.crt", "dev-1");
	struct server_side srv;

	assert_non_null(s);
	assert_int_equal(connect_once(s, c, "localhost", &srv, NULL), -EACCES);
	tls_config__free(c);
	tls_config__free(s);
}

static void mismatched_key_is_a_config_error(void **state)
{
	char err[256] = "";

	assert_null(tls_config__new_server(path("ca.crt"), path("server.crt"), path("dev-1.key"),
					   err, sizeof(err)));
	assert_non_null(strstr(err, "does not match"));
	assert_null(tls_config__new_server(path("nope.crt"), path("server.crt"),
					   path("server.key"), err, sizeof(err)));
	assert_non_null(strstr(err, "nope.crt"));
}

static void silent_peer_times_out(void **state)
{
	struct tls_config *s = server_cfg();
	char err[64];
	int lfd = net_listen("127.0.0.1:0", 4, err, sizeof(err)), cfd, sfd;
	struct tls_conn *c;
	uint64_t t0;

	snprintf(err, sizeof(err), "%d", net_local_port(lfd));
	cfd = net_connect("127.0.0.1", err, 0, err, sizeof(err));
	assert_int_equal(net_wait(lfd, 1, port_clock_mono_ns() + 5 * NSEC_PER_SEC), 0);
	sfd = net_accept(lfd, NULL, 0);
	c = tls_conn__new(s, sfd, NULL);
	t0 = port_clock_mono_ns();
	tls_conn__set_deadline(c, t0 + 200 * NSEC_PER_MSEC);
	assert_int_equal(tls_conn__handshake(c), -ETIMEDOUT);
	assert_true(port_clock_mono_ns() - t0 >= 150 * NSEC_PER_MSEC);
	tls_conn__free(c);
	close(sfd);
	close(cfd);
	close(lfd);
	tls_config__free(s);
}

static void cancel_fd_aborts_a_handshake(void **state)
{
	struct tls_config *s = server_cfg();
	char err[64];
	int lfd = net_listen("127.0.0.1:0", 4, err, sizeof(err)), cfd, sfd, p[2];
	struct tls_conn *c;

	snprintf(err, sizeof(err), "%d", net_local_port(lfd));
	cfd = net_connect("127.0.0.1", err, 0, err, sizeof(err));
	assert_int_equal(net_wait(lfd, 1, port_clock_mono_ns() + 5 * NSEC_PER_SEC), 0);
	sfd = net_accept(lfd, NULL, 0);
	assert_int_equal(pipe(p), 0);
	assert_int_equal(write(p[1], "x", 1), 1);
	c = tls_conn__new(s, sfd, NULL);
	tls_conn__set_deadline(c, port_clock_mono_ns() + 60 * NSEC_PER_SEC);
	tls_conn__set_cancel_fd(c, p[0]);
	assert_int_equal(tls_conn__handshake(c), -ECANCELED); /* not -ETIMEDOUT a minute later */
	tls_conn__free(c);
	close(p[0]);
	close(p[1]);
	close(sfd);
	close(cfd);
	close(lfd);
	tls_config__free(s);
}

#define BIG (40 * 1024)	/* three records */

struct big_server {
	struct tls_config *cfg;
	int lfd, ret;
	size_t pending_after_first;
};

/*
 * Reads one byte of the client's first record once both of its writes are in the socket (a
 * 1-byte record, then BIG bytes), then the rest, and echoes all back.
 */
static void *big_server_thread(void *arg)
{
	struct big_server *s = arg;
	static unsigned char buf[BIG + 1];
	size_t got = 0;
	struct tls_conn *c;
	int fd;

	s->ret = -1;
	if (net_wait(s->lfd, 1, port_clock_mono_ns() + 10 * NSEC_PER_SEC))
		return NULL;
	fd = net_accept(s->lfd, NULL, 0);
	c = tls_conn__new(s->cfg, fd, NULL);
	tls_conn__set_deadline(c, port_clock_mono_ns() + 5 * NSEC_PER_SEC);
	if (!tls_conn__handshake(c)) {
		usleep(200 * 1000); /* both writes sent */
		if (tls_conn__read(c, buf, 1) == 1) {
			s->pending_after_first = tls_conn__pending(c);
			got = 1;
		}
		while (got && got < sizeof(buf)) {
			ssize_t n = tls_conn__read(c, buf + got, sizeof(buf) - got);

			if (n <= 0)
				break;
			got += (size_t)n;
		}
		if (got == sizeof(buf))
			s->ret = tls_conn__write(c, buf, sizeof(buf));
		tls_conn__close(c);
	}
	tls_conn__free(c);
	close(fd);
	return NULL;
}

/* Records split across and within reads, both ways; what the server holds shows as pending. */
static void records_of_any_size_round_trip(void **state)
{
	static unsigned char out[BIG], in[BIG + 1];
	struct tls_config *sc = server_cfg(), *cc = client_cfg("ca.crt", "dev-1");
	struct big_server srv = { .cfg = sc };
	char err[64];
	struct tls_conn *c;
	size_t got = 0;
	pthread_t th;
	int fd;

	for (size_t i = 0; i < sizeof(out); i++)
		out[i] = (unsigned char)(i * 7 + i / 251);
	srv.lfd = net_listen("127.0.0.1:0", 4, err, sizeof(err));
	assert_true(srv.lfd >= 0);
	snprintf(err, sizeof(err), "%d", net_local_port(srv.lfd));
	assert_int_equal(pthread_create(&th, NULL, big_server_thread, &srv), 0);
	fd = net_connect("127.0.0.1", err, port_clock_mono_ns() + 5 * NSEC_PER_SEC, err,
			 sizeof(err));
	assert_true(fd >= 0);
	c = tls_conn__new(cc, fd, "localhost");
	tls_conn__set_deadline(c, port_clock_mono_ns() + 5 * NSEC_PER_SEC);
	assert_int_equal(tls_conn__handshake(c), 0);
	assert_int_equal(tls_conn__write(c, "x", 1), 0);
	assert_int_equal(tls_conn__write(c, out, sizeof(out)), 0);
	while (got < sizeof(in)) {
		ssize_t n = tls_conn__read(c, in + got, got ? sizeof(in) - got : 3);

		assert_true(n > 0);
		got += (size_t)n;
	}
	assert_int_equal(in[0], 'x');
	assert_memory_equal(in + 1, out, sizeof(out));
	tls_conn__free(c);
	close(fd);
	pthread_join(th, NULL);
	close(srv.lfd);
	assert_int_equal(srv.ret, 0);
	/* read ahead, the second record's start is held: the peer is talking */
	if (readahead)
		assert_true(srv.pending_after_first > 0);
	tls_config__free(cc);
	tls_config__free(sc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(device_accepted_with_cn_and_resumes),
		cmocka_unit_test(no_client_certificate_refused),
		cmocka_unit_test(foreign_ca_refused),
		cmocka_unit_test(expired_refused),
		cmocka_unit_test(wrong_key_usage_refused),
		cmocka_unit_test(wrong_server_name_refused_by_client),
		cmocka_unit_test(server_from_other_ca_refused_by_client),
		cmocka_unit_test(mismatched_key_is_a_config_error),
		cmocka_unit_test(silent_peer_times_out),
		cmocka_unit_test(cancel_fd_aborts_a_handshake),
		cmocka_unit_test(records_of_any_size_round_trip),
	};
	int failed = cmocka_run_group_tests(tests, setup_certs, remove_certs);

	readahead = 8 * 1024; /* the collector's default (COLLECTOR_TLS_READAHEAD_KB) */
	failed += cmocka_run_group_tests(tests, setup_certs, remove_certs);
	readahead = 3; /* less than a record header: every ask split */
	return failed + cmocka_run_group_tests(tests, setup_certs, remove_certs);
}
